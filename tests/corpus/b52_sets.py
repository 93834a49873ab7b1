import asyncio
a, b = await asyncio.gather(list_orders(user_id=13), list_orders(user_id=14))
sa = {o["status"] for o in a}
sb = {o["status"] for o in b}
print(sorted(sa), sorted(sb))
print(sorted(sa & sb), sorted(sa | sb), sorted(sa ^ sb))
