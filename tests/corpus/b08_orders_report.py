import json
from collections import defaultdict
totals = defaultdict(float)
by_status = defaultdict(int)
for uid in [3, 4, 7]:
    orders = await list_orders(user_id=uid)
    for o in orders:
        totals[uid] += o["amount"]
        by_status[o["status"]] += 1
for uid, total in sorted(totals.items()):
    print(f"user {uid}: {total:10.2f}")
print(json.dumps(dict(sorted(by_status.items())), sort_keys=True))
print("grand total", round(sum(totals.values()), 2))
