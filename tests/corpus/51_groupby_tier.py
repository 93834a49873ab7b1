from collections import defaultdict
from itertools import groupby
from operator import itemgetter

users = [await fetch_user(user_id=i) for i in range(20, 30)]
by_tier = defaultdict(list)
for u in users:
    by_tier[u["tier"]].append(u)

for tier in ("free", "pro", "enterprise"):
    members = by_tier[tier]
    names = ", ".join(sorted(u["name"] for u in members))
    print(f"{tier:<10} ({len(members)}): {names}")

rows = sorted(users, key=itemgetter("tier", "id"))
for tier, grp in groupby(rows, key=itemgetter("tier")):
    ids = [u["id"] for u in grp]
    print(tier, "ids", ids)

ent = by_tier["enterprise"]
spend = {}
for u in ent:
    spend[u["name"] + str(u["id"])] = round(sum(o["amount"] for o in await list_orders(user_id=u["id"])), 2)
print("enterprise spend:", dict(sorted(spend.items())))
months = sorted({u["signup"][5:7] for u in users})
print("signup months:", months)
