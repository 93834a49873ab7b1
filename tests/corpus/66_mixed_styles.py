# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
import asyncio

# Sync, awaited, deferred, namespaced and gathered calls in one program.
a = get_weather("Dubai")
b = await get_weather(city="Doha")
c = tools.get_weather(city="Muscat")
batch = [get_weather(city="Riyadh"), get_weather(city="Kuwait")]
d, e = await asyncio.gather(*batch)
print("sync:", a["temp"], "awaited:", b["temp"], "ns:", c["temp"])
print("gathered:", d["city"], e["city"])
print("deferred items:", batch[0]["temp"], batch[1]["conditions"])

pending = []
for s in ("XOM", "CVX"):
    pending.append(get_stock_price(symbol=s))
prices = [p["price"] for p in pending]
print("appended:", prices)

task = asyncio.ensure_future(fetch_user(user_id=44))
info = {"user": fetch_user(user_id=45), "rate": get_exchange_rate(base="AED", quote="USD")}
print("dict values:", info["user"]["name"], info["rate"])
print("task:", (await task)["name"])
await_in_fstring = f"{(await get_weather(city='Manama'))['temp']} degrees"
print(await_in_fstring)
print("sum via radd:", sum([get_exchange_rate(base="AED", quote=q) for q in ("EUR", "GBP")]))
