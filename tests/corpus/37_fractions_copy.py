from fractions import Fraction
import copy

orders = await list_orders(user_id=9)
cents = [round(o["amount"] * 100) for o in orders]
total = sum(cents)
shares = [Fraction(c, total) for c in cents]
for o, s in zip(orders, shares):
    print(f"{o['order_id']}: {s} ~ {float(s):.4f}")
print("sum of shares:", sum(shares))
print("limit_denominator:", Fraction(3.14159).limit_denominator(100))
print("arith:", Fraction(1, 3) + Fraction(1, 6), Fraction(5, 4) * 2)

user = await fetch_user(user_id=9)
profile = {"user": user, "orders": orders, "tags": ["vip"]}
shallow = copy.copy(profile)
deep = copy.deepcopy(profile)
shallow["tags"].append("changed")
deep["orders"][0]["amount"] = 0
deep["user"]["name"] = "Renamed"
print("original tags:", profile["tags"])
print("original first amount:", profile["orders"][0]["amount"])
print("original name:", profile["user"]["name"], "deep name:", deep["user"]["name"])
print("same list object:", shallow["tags"] is profile["tags"], deep["tags"] is profile["tags"])
