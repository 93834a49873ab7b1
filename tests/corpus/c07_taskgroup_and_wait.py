# TaskGroup and asyncio.wait: the tasks' calls are one round each time.
async with asyncio.TaskGroup() as tg:
    a = tg.create_task(get_weather(city="Quito"))
    b = tg.create_task(get_weather(city="Lima"))
print(a.result()["city"], b.result()["city"])

tasks = [asyncio.create_task(get_stock_price(symbol=s)) for s in ("A", "B", "C")]
done, pending = await asyncio.wait(tasks)
print(len(done), len(pending), sorted(t.result()["symbol"] for t in done))

first = [asyncio.create_task(search(query=q, limit=1)) for q in ("x", "y")]
finished, rest = await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
print(len(finished) + len(rest))
