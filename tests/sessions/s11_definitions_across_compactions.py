# Definitions, instances and data that a compaction carries: under the
# compacting server every cell from the third folds the earlier ones, and
# tracebacks through the functions still name the cell and line that
# defined them.
import functools
from dataclasses import dataclass, field
from collections import Counter, defaultdict


@dataclass
class Order:
    item: str
    qty: int = 1
    tags: list = field(default_factory=list)

    def total(self, price):
        if price < 0:
            raise ValueError(f"bad price for {self.item}: {price}")
        return self.qty * price


def checked(order, price):
    return order.total(price)
# %% cell
orders = [Order("tea", 2, ["hot"]), Order("cake")]
seen = Counter(o.item for o in orders)
by_item = defaultdict(list)
for o in orders:
    by_item[o.item].append(o.qty)
w = await get_weather(city="Paris")
temps = [w["temp"]]


@functools.lru_cache(maxsize=None)
def square(n):
    return n * n
# %% cell
print(orders, dict(seen), dict(by_item), square(12))
try:
    checked(orders[0], -1)
except ValueError as e:
    import traceback
    print("".join(traceback.format_exception(e)).count("File"))
# %% cell
async def temp_of(city):
    return (await get_weather(city=city))["temp"]
temps.append(await temp_of("Oslo"))
print(temps, orders[1].total(3))
# %% cell
orders.append(Order("pie", 3))
print([o.total(2) for o in orders], sorted(by_item))
# %% cell
print(await temp_of("Rome"), square(5), len(orders))
checked(orders[2], -5)
