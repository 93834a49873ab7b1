# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
cities = ["Accra", "Bogota", "Hanoi"]
temps = [get_weather(city=c)["temp"] for c in cities]
print(temps)
humid = {c: get_weather(city=c)["humidity"] for c in cities}
print(sorted(humid.items()))
print(sum(t > 15 for t in temps), "above 15")
