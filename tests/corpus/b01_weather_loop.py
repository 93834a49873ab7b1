cities = ["Paris", "Oslo", "Lima", "Cairo"]
temps = {}
for city in cities:
    w = await get_weather(city=city)
    temps[city] = w["temp"]
    print(f"{city:<6} {w['temp']:>3}C {w['conditions']}")
warmest = max(temps, key=temps.get)
print("warmest:", warmest, temps[warmest])
print("average:", round(sum(temps.values()) / len(temps), 2))
