import asyncio

symbols = ["NVDA", "AMD", "INTC", "TSM"]
tasks = {s: asyncio.create_task(get_stock_price(symbol=s)) for s in symbols}
weather_task = asyncio.create_task(get_weather(city="Taipei"))

prices = {}
for s, t in tasks.items():
    q = await t
    prices[s] = q["price"]
    print(f"{s:<5} {q['price']:>8.2f} {q['change_pct']:>+6.2f}%")

w = await weather_task
print("Taipei:", w["temp"], w["conditions"])
print("all done:", all(t.done() for t in tasks.values()))

async def convert(symbol, currency):
    rate = await get_exchange_rate(base="USD", quote=currency)
    return symbol, round(prices[symbol] * rate, 2)

conv = [asyncio.create_task(convert(s, "TWD")) for s in symbols]
for c in conv:
    sym, val = await c
    print(f"{sym} in TWD: {val}")
