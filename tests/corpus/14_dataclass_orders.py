from dataclasses import dataclass, field, asdict
import json


@dataclass(order=True)
class Order:
    amount: float
    order_id: int
    status: str = field(compare=False)
    date: str = field(compare=False)


@dataclass
class Customer:
    uid: int
    name: str
    orders: list = field(default_factory=list)

    @property
    def total(self):
        return round(sum(o.amount for o in self.orders), 2)


customers = []
for uid in (2, 6, 9):
    u = await fetch_user(user_id=uid)
    c = Customer(uid=uid, name=u["name"])
    for raw in await list_orders(user_id=uid):
        c.orders.append(Order(**raw))
    customers.append(c)

for c in sorted(customers, key=lambda c: c.total, reverse=True):
    print(f"{c.name:<8} total={c.total:>8.2f} n={len(c.orders)}")
    for o in sorted(c.orders):
        print(f"    {o.order_id} {o.amount:>7.2f} {o.status}")

biggest = max(o for c in customers for o in c.orders)
print("biggest:", json.dumps(asdict(biggest), sort_keys=True))
