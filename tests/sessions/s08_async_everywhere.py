# Top-level await in some cells, asyncio.run in others, tasks and wait.
async def fetch_all(ids):
    users = await asyncio.gather(*[fetch_user(user_id=i) for i in ids])
    return [u["name"] for u in users]
names = asyncio.run(fetch_all([1, 2]))
print(names)
# %% cell
orders = await list_orders(user_id=1)
print(len(orders) >= 0, type(orders).__name__)
async def main():
    return await fetch_all([3])
# %% cell
print(asyncio.run(main()))
# %% cell
done, pending = await asyncio.wait([asyncio.ensure_future(fetch_user(user_id=4)), asyncio.ensure_future(fetch_user(user_id=5))])
print(len(done), len(pending), sorted(t.result()["id"] for t in done))
