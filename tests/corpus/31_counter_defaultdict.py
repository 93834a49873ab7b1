from collections import Counter, defaultdict, OrderedDict

cities = ["Lyon", "Nice", "Lille", "Nantes", "Metz", "Brest", "Dijon", "Tours"]
conds = Counter()
for c in cities:
    w = await get_weather(city=c)
    conds[w["conditions"]] += 1
print("conditions:", sorted(conds.items()))
print("most common:", conds.most_common(1)[0][1])

status_totals = defaultdict(float)
status_ids = defaultdict(list)
for uid in range(1, 7):
    for o in await list_orders(user_id=uid):
        status_totals[o["status"]] += o["amount"]
        status_ids[o["status"]].append(o["order_id"])
for s in sorted(status_totals):
    print(f"{s:<10} {status_totals[s]:>9.2f} {status_ids[s]}")

c2 = Counter(o for ids in status_ids.values() for o in [str(i)[0] for i in ids])
print("leading digits:", sorted(c2.items()))
print("total:", sum(c2.values()))
od = OrderedDict(sorted(status_totals.items(), key=lambda kv: kv[1]))
od.move_to_end(next(iter(od)))
print("ordered:", list(od))
