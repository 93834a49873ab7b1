# A coroutine passed to a helper that awaits it.
async def audited(label, coro):
    print("calling", label)
    result = await coro
    print("got", label)
    return result


for sym in ["IBM", "SAP", "ORCL"]:
    quote = await audited(sym, get_stock_price(symbol=sym))
    print(f"{quote['symbol']}: {quote['price']:.2f}")

both = await asyncio.gather(audited("a", get_weather(city="Oslo")), audited("b", get_weather(city="Rome")))
print([w["city"] for w in both])
