rows = []
for sym in ["AAPL", "TSLA", "AMD"]:
    q = await get_stock_price(symbol=sym)
    rows.append(q)
print(f"{'SYM':<6}|{'PRICE':>10}|{'CHG':>8}")
print("-" * 26)
for q in rows:
    print(f"{q['symbol']:<6}|{q['price']:>10,.2f}|{q['change_pct']:>+7.2f}%")
print("{:^26}".format("end"))
print("%s has %d rows" % ("table", len(rows)))
