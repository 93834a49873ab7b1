import asyncio

w = await asyncio.wait_for(get_weather(city="Lima"), timeout=5)
print("Lima:", w["temp"])


async def slow_thing():
    await asyncio.sleep(10)
    return "finished"


try:
    await asyncio.wait_for(slow_thing(), timeout=1)
except asyncio.TimeoutError:
    print("slow_thing timed out")


async def delayed_quote(sym, delay):
    await asyncio.sleep(delay)
    q = await get_stock_price(symbol=sym)
    return sym, q["price"]


out = await asyncio.gather(delayed_quote("V", 0.3), delayed_quote("MA", 0.1), delayed_quote("AXP", 0.2))
print(sorted(out))
loop = asyncio.get_running_loop()
t0 = loop.time()
await asyncio.sleep(0.5)
print("loop time advanced:", round(loop.time() - t0, 1))
res = await asyncio.shield(fetch_user(user_id=31))
print("shielded:", res["name"])
