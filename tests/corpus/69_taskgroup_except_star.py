import asyncio


async def temp(city):
    return city, (await get_weather(city=city))["temp"]


async with asyncio.TaskGroup() as tg:
    tasks = [tg.create_task(temp(c)) for c in ("Cali", "Quito", "Bogota")]
for t in tasks:
    print("task result:", t.result())

try:
    async with asyncio.TaskGroup() as tg:
        tg.create_task(temp("Medellin"))
        tg.create_task(temp("Atlantis"))
except* ToolError as group:
    print("tool errors:", [str(e) for e in group.exceptions])
except* KeyError:
    print("unexpected KeyError")

try:
    raise ExceptionGroup("batch", [ValueError("a"), ToolError("b")])
except ExceptionGroup as eg:
    vals, rest = eg.split(ValueError)
    print("split:", [str(e) for e in vals.exceptions], [str(e) for e in rest.exceptions])
print("done")
