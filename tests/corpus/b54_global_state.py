cache = {}
calls = 0

async def get_cached(city):
    global calls
    if city not in cache:
        calls += 1
        cache[city] = await get_weather(city=city)
    return cache[city]

for c in ["Zagreb", "Split", "Zagreb", "Split", "Pula"]:
    w = await get_cached(c)
    print(c, w["temp"])
print("tool calls:", calls)
