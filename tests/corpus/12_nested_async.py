import asyncio


async def user_summary(uid):
    async def load_orders():
        orders = await list_orders(user_id=uid)
        return orders

    async def load_profile():
        return await fetch_user(user_id=uid)

    async def totals(orders):
        def by_status(status):
            return round(sum(o["amount"] for o in orders if o["status"] == status), 2)
        return {s: by_status(s) for s in ("open", "shipped", "cancelled")}

    profile, orders = await asyncio.gather(load_profile(), load_orders())
    t = await totals(orders)
    return profile["name"], t


async def main():
    for uid in (4, 8, 13):
        name, t = await user_summary(uid)
        parts = ", ".join(f"{k}={v:.2f}" for k, v in t.items())
        print(f"{name:<8} {parts}")


await main()
