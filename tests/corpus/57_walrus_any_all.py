# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
cities = ["Kiev", "Minsk", "Riga", "Vilnius", "Tallinn"]
if (w := await get_weather(city=cities[0]))["temp"] > 10:
    print("first city is mild:", w["city"], w["temp"])
else:
    print("first city is cold:", w["city"], w["temp"])

temps = []
i = 0
while i < len(cities) and (t := get_weather(city=cities[i])["temp"]) < 25:
    temps.append(t)
    i += 1
print("collected until hot:", temps, "stopped at", i)

print("any snow:", any(get_weather(city=c)["conditions"] == "snow" for c in cities))
print("all humid>30:", all(get_weather(city=c)["humidity"] > 30 for c in cities))
hot = [(c, t) for c in cities if (t := get_weather(city=c)["temp"]) > 15]
print("hot:", hot)
if (u := fetch_user(user_id=8)) and u["tier"] != "free":
    print("paying user:", u["name"])
else:
    print("free user:", u["name"])
