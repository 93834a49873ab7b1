# Coroutines kept in variables and gathered later: one round of three calls,
# with no `import asyncio` (it is pre-imported, as LibreChat's prompt shows).
paris = get_weather(city="Paris")
acme = get_stock_price(symbol="ACME")
news = search(query="acme news", limit=2)
weather, stock, hits = await asyncio.gather(paris, acme, news)
print(weather["city"], weather["temp"], stock["symbol"], stock["price"], len(hits))
