# Sets of numbers from tool data, printed, joined, popped and combined as
# agents do: CPython's order, not insertion order, before and after pauses.
users = [await fetch_user(user_id=i) for i in (42, 7, 19, 3)]
ids = {u["id"] for u in users}
print(ids, sorted(ids), ", ".join(str(i) for i in ids))
orders = await list_orders(user_id=42)
amounts = {int(o["total"]) if isinstance(o, dict) and "total" in o else len(str(o)) for o in (orders if isinstance(orders, list) else [orders])}
print(amounts | {100, 2000, 64}, {3, 1, 2}, {10, 20, 30, 40, 50})
seen = set()
for n in [100, 7, 33, 64, 8, 1, 65, 1000, -5]:
    seen.add(n)
first = seen.pop()
w = await get_weather(city="Oslo")
print(first, seen, seen & {7, 8, 65, 1000}, seen - {100}, seen ^ {2, 7})
seen.discard(33)
seen.update(range(120, 60, -9))
print(seen, list(seen)[:5], {x % 11 for x in seen}, frozenset({(1, 2), (0, 5), (3, 3)}))
