import asyncio
from operator import itemgetter, attrgetter
from functools import cmp_to_key

orders = []
for uid in (12, 13, 14, 18, 19):
    for o in await list_orders(user_id=uid):
        orders.append(dict(o, uid=uid))

by_status_then_amount = sorted(orders, key=lambda o: (o["status"], -o["amount"]))
for o in by_status_then_amount:
    print(f"{o['status']:<10} {o['amount']:>8.2f} uid={o['uid']}")
print("by date:", [o["order_id"] for o in sorted(orders, key=itemgetter("date", "order_id"))][:6])

rank = {"open": 0, "shipped": 1, "cancelled": 2}


def compare(a, b):
    if rank[a["status"]] != rank[b["status"]]:
        return rank[a["status"]] - rank[b["status"]]
    return (a["amount"] > b["amount"]) - (a["amount"] < b["amount"])


custom = sorted(orders, key=cmp_to_key(compare))
print("custom first/last:", custom[0]["order_id"], custom[-1]["order_id"])
print("stable:", [o["uid"] for o in sorted(orders, key=lambda o: o["status"])])
words = await asyncio.gather(*[translate(text=t, target_lang="de") for t in ("b", "a", "C")])
print(sorted((w["text"] for w in words), key=str.lower))
print(sorted(["b10", "b9", "a100"], key=lambda s: (s[0], int(s[1:]))))
