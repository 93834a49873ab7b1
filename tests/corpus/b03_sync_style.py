# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
w = get_weather("Madrid")
print(type(w).__name__, w["city"], w["temp"])
price = get_stock_price("MSFT")
print(f"{price['symbol']}: ${price['price']:.2f} ({price['change_pct']:+.2f}%)")
results = search("python asyncio", 2)
for r in results:
    print(r["title"], "->", r["url"])
