header = "{:<4} {:<10} {:<11} {:>6} {:>10}".format("id", "name", "tier", "orders", "amount")
print(header)
print("=" * len(header))
grand = 0.0
for uid in (11, 12, 13, 14, 15):
    u = await fetch_user(user_id=uid)
    orders = await list_orders(user_id=uid, status="open")
    amount = sum(o["amount"] for o in orders)
    grand += amount
    print("{:<4} {:<10} {:<11} {:>6} {:>10.2f}".format(uid, u["name"], u["tier"], len(orders), amount))
print("-" * len(header))
print("{:<34} {:>10.2f}".format("grand total (open)", grand))
print("%-10s|%5d|%8.3f" % ("percent", 42, 3.14159))
print("{0}{1}{0}".format("ab", "cd"), "{name!r:>10}".format(name="x"))
print(f"{'centered':^20}|")
print(f"{1234.5:>12,.1f}|{0.25:.1%}|{-7:+d}|{255:#x}|{255:#o}")
