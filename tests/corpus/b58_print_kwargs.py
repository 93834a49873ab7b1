import sys
w = await get_weather(city="Kyoto")
print("a", "b", sep="-", end="|\n")
print(w["city"], w["temp"], sep=": ")
print("to stderr", file=sys.stderr)
sys.stdout.write("raw write\n")
print(*range(5))
