# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
cities = ["Hobart", "Darwin", "Cairns"]
if (w := await get_weather(city=cities[0]))["temp"] > 10:
    print("warm enough in", w["city"])
temps = [get_weather(city=c)["temp"] for c in cities]
print(any(t > 25 for t in temps), all(t > 0 for t in temps), temps)
