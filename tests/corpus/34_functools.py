# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
from functools import reduce, lru_cache, partial, wraps
import operator

calls = 0


@lru_cache(maxsize=None)
def temp_of(city):
    global calls
    calls += 1
    return get_weather(city=city)["temp"]


for city in ["Cork", "Galway", "Cork", "Limerick", "Galway", "Cork"]:
    print(city, temp_of(city))
print("tool calls:", calls, temp_of.cache_info())

usd_to = partial(get_exchange_rate, "USD")
for q in ["EUR", "JPY", "INR"]:
    rate = await usd_to(q)
    print(f"USD->{q}: {rate}")
eur = float(usd_to("EUR"))
print("sync-ish partial:", eur)

prices = [get_stock_price(symbol=s)["price"] for s in ("A", "B", "C")]
print("product:", round(reduce(operator.mul, prices), 2))
print("max via reduce:", reduce(lambda a, b: a if a > b else b, prices))


def logged(fn):
    @wraps(fn)
    async def inner(*args):
        print(f"-> {fn.__name__}{args}")
        return await fn(*args)
    return inner


@logged
async def user_name(uid):
    return (await fetch_user(user_id=uid))["name"]

print(await user_name(3), user_name.__name__)
