# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
quotes = ["EUR", "GBP", "JPY"]
rates = [get_exchange_rate(base="USD", quote=q) for q in quotes]
print([round(r * 100, 2) for r in rates])
print([round(100 * r, 2) for r in rates])
print(round(rates[0] - 1, 4), round(1 - rates[1], 4), round(rates[2] / 2, 4), round(2 / rates[2], 4))
print(-rates[0] < 0, abs(-rates[0]) == rates[0], round(rates[1], 1))
counts = [len(search(query=q)) for q in ("a", "b")]
prices = [get_stock_price(symbol=s) for s in ("IBM", "HPQ")]
print(counts, [p["price"] // 1 for p in prices])
