# An argument error is raised at the call site, before any pause: the
# traceback shows the user's own line.
first = await get_weather(city="Lima")
print("first", first["temp"])


def plan(cities):
    calls = []
    for city in cities:
        calls.append(get_weather(city=city))
    return calls


calls = plan(["Quito", 3])
