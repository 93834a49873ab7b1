# A function defined in one cell calls tools when a later cell awaits it.
async def temps(cities):
    found = await asyncio.gather(*(get_weather(city=c) for c in cities))
    return {w["city"]: w["temp"] for w in found}
first = await get_weather(city="Paris")
print("paris", first["temp"], first["conditions"])
# %% cell
t = await temps(["Oslo", "Rome"])
print(sorted(t.items()))
# %% cell
more = await temps(["Lima"])
t.update(more)
print(len(t), max(t, key=t.get))
hits = await search(query="python sessions", limit=2)
print([h["title"] for h in hits])
