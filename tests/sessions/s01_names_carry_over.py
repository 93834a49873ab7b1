# Variables, functions, classes and imports of one cell are there in the next.
import statistics
from collections import Counter
total = 40
class Basket:
    def __init__(self):
        self.items = []
    def add(self, item):
        self.items.append(item)
        return len(self.items)
def bump(n):
    return total + n
basket = Basket()
basket.add("apple")
print("cell 1", total, basket.items)
# %% cell
print(bump(2), statistics.mean([1, 2, 3, 4]))
basket.add("pear")
counts = Counter(basket.items + ["apple"])
print(sorted(counts.items()))
# %% cell
total = 100
print(bump(1), basket.add("fig"), type(basket).__name__, Basket.__qualname__)
# %% cell
print(len(basket.items), [x.upper() for x in basket.items])
