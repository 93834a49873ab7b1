# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
cities = ["Cairo", "Atlantis", "Delhi", "", "Mumbai"]
good, bad = {}, []
for city in cities:
    try:
        w = await get_weather(city=city)
    except ToolError as e:
        bad.append(city)
        print(f"skip {city!r}: {e}")
        continue
    good[city] = w["temp"]
    print(f"{city}: {w['temp']}C")

print("good:", good)
print("bad:", bad)
try:
    w = get_weather(city="atlantis")
    print("unexpected", w)
except Exception as e:
    print("caught generic:", type(e).__name__, str(e))
    print("is Exception subclass:", issubclass(type(e), Exception))
    print("args:", e.args)
