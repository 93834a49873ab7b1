import asyncio

queue = asyncio.Queue()
for uid in range(1, 11):
    queue.put_nowait(uid)
results = {}


async def worker(name):
    handled = 0
    while True:
        try:
            uid = queue.get_nowait()
        except asyncio.QueueEmpty:
            return name, handled
        orders = await list_orders(user_id=uid, status="shipped")
        results[uid] = round(sum(o["amount"] for o in orders), 2)
        handled += 1
        queue.task_done()


stats = await asyncio.gather(*[worker(f"w{i}") for i in range(3)])
for name, handled in stats:
    print(name, "handled", handled)
for uid in sorted(results):
    print(f"user {uid:>2}: shipped total {results[uid]:>8.2f}")
print("total handled:", sum(h for _, h in stats))
print("queue empty:", queue.empty())
