# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
# Calling tools through the `tools` namespace.
weather = await tools.get_weather(city="Lisbon")
print("Lisbon", weather["temp"], weather["conditions"])

results = await tools.search(query="rust python interpreter", limit=4)
for r in results:
    print(f"{r['score']:.3f} {r['title']}")

quote = tools.get_stock_price(symbol="AAPL")
print("AAPL", quote["price"], quote["currency"])

rate = await tools.get_exchange_rate(base="GBP", quote="JPY")
print("GBP->JPY", rate)

sql = tools.run_sql(sql="select id, value from metrics")
print("columns:", ", ".join(sql["columns"]))
print("rows:", len(sql["rows"]))
for row in sql["rows"]:
    print("  ", row)
