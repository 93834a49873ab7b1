import asyncio

uids = list(range(1, 9))
users = await asyncio.gather(*[fetch_user(user_id=u) for u in uids])
orders = await asyncio.gather(*[list_orders(user_id=u) for u in uids])

rows = []
for user, olist in zip(users, orders):
    total = round(sum(o["amount"] for o in olist), 2)
    live = [o for o in olist if o["status"] != "cancelled"]
    rows.append({"name": user["name"], "tier": user["tier"], "n": len(olist),
                 "total": total, "live": round(sum(o["amount"] for o in live), 2)})

print(f"{'name':<9}{'tier':<11}{'n':>2}{'total':>10}{'live':>10}")
for r in sorted(rows, key=lambda r: (-r["live"], r["name"])):
    print(f"{r['name']:<9}{r['tier']:<11}{r['n']:>2}{r['total']:>10.2f}{r['live']:>10.2f}")
grand = sum(r["total"] for r in rows)
print(f"{'TOTAL':<22}{grand:>10.2f}{sum(r['live'] for r in rows):>10.2f}")
per_tier = {}
for r in rows:
    per_tier.setdefault(r["tier"], []).append(r["total"])
for tier in sorted(per_tier):
    vals = per_tier[tier]
    print(f"{tier}: avg {sum(vals) / len(vals):.2f} over {len(vals)} users")
