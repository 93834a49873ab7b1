# A tool call inside a lambda gives a coroutine like any other call.
symbols = ["AAPL", "MSFT", "NVDA"]
quotes = await asyncio.gather(*map(lambda s: get_stock_price(symbol=s), symbols))
for q in sorted(quotes, key=lambda q: q["price"]):
    print(q["symbol"], q["price"])


def fetch(user_id):
    return fetch_user(user_id=user_id)


users = await asyncio.gather(*[fetch(i) for i in (3, 5, 8)])
print([u["name"] for u in users])
