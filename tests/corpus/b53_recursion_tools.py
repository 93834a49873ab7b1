def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

async def depth_weather(cities, depth=0):
    if not cities:
        return []
    w = await get_weather(city=cities[0])
    return [(depth, w["temp"])] + await depth_weather(cities[1:], depth + 1)

print(fib(20))
print(await depth_weather(["Cork", "Derry", "Sligo"]))
