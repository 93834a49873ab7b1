import statistics
symbols = ["AAPL", "MSFT", "GOOG", "AMZN", "META", "NFLX"]
prices = []
for s in symbols:
    q = await get_stock_price(symbol=s)
    prices.append(q["price"])
print("mean", round(statistics.mean(prices), 3))
print("median", statistics.median(prices))
print("stdev", round(statistics.stdev(prices), 3))
print("quantiles", [round(q, 2) for q in statistics.quantiles(prices, n=4)])
