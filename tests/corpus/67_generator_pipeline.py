# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
def read_users(ids):
    for uid in ids:
        try:
            yield fetch_user(user_id=uid)
        except ToolError as e:
            print("  (skipped:", e, ")")


def with_orders(users):
    for u in users:
        yield u, list_orders(user_id=u["id"])


def only_big(pairs, threshold):
    for u, orders in pairs:
        big = [o for o in orders if o["amount"] >= threshold]
        if big:
            yield u["name"], u["id"], big


pipeline = only_big(with_orders(read_users([5, 0, 7, 11, 250, 18])), 100)
for name, uid, big in pipeline:
    print(f"{name} (#{uid}): {[(o['order_id'], o['amount']) for o in big]}")

gen = (get_weather(city=c)["humidity"] for c in ["Hue", "Vinh", "Hanoi"])
print("first humidity:", next(gen))
print("rest:", list(gen))
squares = (x * x for x in range(5))
print(sum(squares), sum(squares))
