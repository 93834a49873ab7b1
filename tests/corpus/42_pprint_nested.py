import pprint

data = {}
for uid in (1, 2):
    u = await fetch_user(user_id=uid)
    o = await list_orders(user_id=uid)
    data[u["name"]] = {"profile": u, "orders": o}
pprint.pprint(data, width=72, sort_dicts=True)
print(pprint.pformat([list(range(12)), {"b": 2, "a": 1}], width=30))
hits = await search(query="pprint", limit=2)
pprint.pprint(hits, compact=True)
pp = pprint.PrettyPrinter(indent=4, depth=2)
pp.pprint({"level1": {"level2": {"level3": "hidden"}}, "list": [1, [2, [3]]]})
print(pprint.saferepr({"z": 1, "a": [1, 2]}))
