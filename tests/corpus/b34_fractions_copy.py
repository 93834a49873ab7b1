from fractions import Fraction
import copy
orders = await list_orders(user_id=9)
shares = [Fraction(1, len(orders))] * len(orders)
print(sum(shares), shares[0])
snapshot = copy.deepcopy(orders)
orders[0]["amount"] = 0
print(snapshot[0]["amount"] != orders[0]["amount"])
print(len(snapshot), [o["status"] for o in snapshot])
