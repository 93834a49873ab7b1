import asyncio
tasks = [asyncio.create_task(get_stock_price(symbol=s)) for s in ["AMZN", "META", "TSLA"]]
prices = []
for t in tasks:
    q = await t
    prices.append((q["symbol"], q["price"]))
for sym, price in sorted(prices, key=lambda p: p[1]):
    print(f"{sym:5} {price:9.2f}")
