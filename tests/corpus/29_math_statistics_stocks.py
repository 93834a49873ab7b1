import math
import statistics

symbols = ["AAPL", "GOOG", "AMZN", "META", "NFLX", "UBER", "LYFT"]
quotes = [await get_stock_price(symbol=s) for s in symbols]
prices = [q["price"] for q in quotes]
changes = [q["change_pct"] for q in quotes]

print("prices:", prices)
print(f"mean   {statistics.mean(prices):.3f}")
print(f"median {statistics.median(prices):.3f}")
print(f"stdev  {statistics.stdev(prices):.3f}")
print(f"pstdev {statistics.pstdev(changes):.3f}")
print("geo mean:", round(statistics.geometric_mean(prices), 4))
print("quantiles:", [round(q, 2) for q in statistics.quantiles(prices, n=4)])
log_returns = [math.log(1 + c / 100) for c in changes]
print("log returns:", [round(x, 5) for x in log_returns])
print("sum:", round(math.fsum(log_returns), 6))
print("hypot of top two:", round(math.hypot(*sorted(prices)[-2:]), 3))
print("floor/ceil:", [(math.floor(p), math.ceil(p)) for p in prices[:3]])
print("gcd of ints:", math.gcd(*[int(p) for p in prices]))
print("isclose:", math.isclose(sum(prices) / len(prices), statistics.mean(prices)))
