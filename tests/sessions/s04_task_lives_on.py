# A task made in one cell is awaited in the next.
async def slow(city):
    await asyncio.sleep(0)
    w = await get_weather(city=city)
    return w["humidity"]
task = asyncio.create_task(slow("Madrid"))
await asyncio.sleep(0)
print("task made", task.done())
# %% cell
h = await task
print("humidity", h, task.done())
# %% cell
results = []
for city in ["Kyiv", "Quito"]:
    results.append(await slow(city))
print(results)
