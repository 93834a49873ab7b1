import asyncio
async def slow_weather(city, delay):
    await asyncio.sleep(delay)
    return await get_weather(city=city)

a, b = await asyncio.gather(slow_weather("Nantes", 0.2), slow_weather("Tours", 0.1))
print(a["city"], b["city"])
try:
    r = await asyncio.wait_for(get_weather(city="Rouen"), timeout=5)
    print("in time", r["city"])
except asyncio.TimeoutError:
    print("timeout")
