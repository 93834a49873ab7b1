import heapq
import bisect

symbols = ["XOM", "CVX", "BP", "SHEL", "TTE", "COP", "EOG", "OXY"]
quotes = {}
for s in symbols:
    quotes[s] = (await get_stock_price(symbol=s))["price"]

top3 = heapq.nlargest(3, quotes.items(), key=lambda kv: kv[1])
low2 = heapq.nsmallest(2, quotes, key=quotes.get)
print("top3:", top3)
print("low2:", low2)

heap = []
for s, p in quotes.items():
    heapq.heappush(heap, (-p, s))
order = [heapq.heappop(heap)[1] for _ in range(len(heap))]
print("desc:", order)

breaks = [100, 200, 300, 400]
grades = "EDCBA"
for s in sorted(quotes):
    p = quotes[s]
    print(f"{s:<5} {p:>7.2f} grade {grades[bisect.bisect(breaks, p)]}")
sorted_prices = sorted(quotes.values())
print("index of 250:", bisect.bisect_left(sorted_prices, 250))
bisect.insort(sorted_prices, 250.0)
print("after insort:", sorted_prices)
print(list(heapq.merge([1, 4, 9], [2, 3, 10])))
