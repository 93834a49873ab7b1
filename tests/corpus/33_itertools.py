import itertools

orders = []
for uid in (2, 3, 4):
    orders.extend(await list_orders(user_id=uid))
orders.sort(key=lambda o: o["status"])
for status, group in itertools.groupby(orders, key=lambda o: o["status"]):
    g = list(group)
    print(status, len(g), [o["order_id"] for o in g])

amounts = [o["amount"] for o in sorted(orders, key=lambda o: o["order_id"])]
print("running:", [round(x, 2) for x in itertools.accumulate(amounts)][:5])
pairs = list(itertools.combinations(["USD", "EUR", "GBP"], 2))
for base, quote in pairs:
    r = await get_exchange_rate(base=base, quote=quote)
    print(f"{base}/{quote} = {r}")
print(list(itertools.product("ab", [1, 2])))
print(list(itertools.islice(itertools.cycle("xyz"), 7)))
print(list(itertools.chain([1, 2], (3,), range(4, 6))))
print(list(itertools.zip_longest("abc", [1], fillvalue="-")))
print(list(itertools.permutations([1, 2, 3], 2))[:4])
print(list(itertools.takewhile(lambda x: x < 200, amounts)))
print(list(itertools.starmap(pow, [(2, 3), (3, 2)])))
print(list(itertools.pairwise([1, 4, 9, 16])))
