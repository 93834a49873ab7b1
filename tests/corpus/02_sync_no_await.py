# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
# Tool calls without await return their result directly.
w = get_weather("Oslo")
print("Oslo:", w["temp"], w["unit"], w["conditions"])
w2 = get_weather("Oslo", "F")
print("Oslo in F:", w2["temp"], w2["unit"])

price = get_stock_price("msft")
print(f"{price['symbol']} trades at ${price['price']:.2f} ({price['change_pct']:+.2f}%)")

user = fetch_user(7)
print("user 7 is", user["name"], "tier", user["tier"])
orders = list_orders(user["id"])
print("orders:", len(orders))
for o in orders:
    print(f"  #{o['order_id']} {o['status']:<9} {o['amount']:>8.2f}")

total = sum(o["amount"] for o in orders)
print(f"total: {total:.2f}")
rate = get_exchange_rate("USD", "EUR")
print(f"total in EUR: {total * rate:.2f} (rate {rate})")
