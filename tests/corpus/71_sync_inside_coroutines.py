# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
import asyncio


# A sync-style call inside a coroutine pauses on the spot, one round per call.
async def sync_style(city):
    w = get_weather(city=city)
    return city, w["temp"]


# The awaited style lets gather batch the calls into one round.
async def async_style(city):
    w = await get_weather(city=city)
    return city, w["temp"]


cities = ["Gent", "Brugge", "Leuven", "Namur"]
a = await asyncio.gather(*[sync_style(c) for c in cities])
b = await asyncio.gather(*[async_style(c) for c in cities])
print("sync style:", a)
print("async style:", b)
print("same answers:", a == b)


def helper(symbol):
    return get_stock_price(symbol=symbol)["price"]


async def mixed(symbol):
    p = helper(symbol)
    q = await get_stock_price(symbol=symbol.lower())
    return symbol, p, q["price"], p == q["price"]

for row in await asyncio.gather(mixed("ABN"), mixed("ING")):
    print(row)
