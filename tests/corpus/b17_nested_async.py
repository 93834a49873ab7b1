import asyncio

async def user_summary(uid):
    async def orders_total():
        orders = await list_orders(user_id=uid)
        return round(sum(o["amount"] for o in orders), 2), len(orders)
    user, (total, n) = await asyncio.gather(fetch_user(user_id=uid), orders_total())
    return f"{user['name']} ({user['tier']}): {n} orders, {total}"

for line in await asyncio.gather(*[user_summary(u) for u in (5, 6)]):
    print(line)
