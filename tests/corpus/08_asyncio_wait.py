import asyncio

async def describe(uid):
    user = await fetch_user(user_id=uid)
    orders = await list_orders(user_id=uid)
    return user["name"], uid, len(orders), round(sum(o["amount"] for o in orders), 2)

tasks = [asyncio.create_task(describe(uid)) for uid in (3, 4, 9, 14)]
done, pending = await asyncio.wait(tasks)
print("done:", len(done), "pending:", len(pending))
rows = sorted(t.result() for t in done)
for name, uid, n, total in rows:
    print(f"{name:<9} (#{uid:>2}) {n} orders, {total:>8.2f}")

first = [asyncio.create_task(get_weather(city=c)) for c in ("Perth", "Hobart")]
done, pending = await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
print("first completed count >= 1:", len(done) >= 1)
rest = await asyncio.gather(*first)
print(sorted(w["city"] for w in rest))
