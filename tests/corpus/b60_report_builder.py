import asyncio, datetime
from collections import OrderedDict

async def section(uid):
    u, orders = await asyncio.gather(fetch_user(user_id=uid), list_orders(user_id=uid))
    return u, orders

report = OrderedDict()
for uid in (15, 16, 17):
    u, orders = await section(uid)
    report[u["name"]] = (len(orders), round(sum(o["amount"] for o in orders), 2))
stamp = datetime.datetime(2026, 3, 1, 9, 30)
print("Report", stamp.strftime("%Y-%m-%d %H:%M"))
width = max(len(n) for n in report)
for name, (n, total) in report.items():
    print(f"  {name.ljust(width)}  {n:>2} orders  {total:>9.2f}")
