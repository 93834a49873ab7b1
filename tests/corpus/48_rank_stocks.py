import asyncio

watchlist = ["AAPL", "MSFT", "GOOG", "AMZN", "TSLA", "NVDA", "META", "ORCL", "CRM", "ADBE"]
quotes = await asyncio.gather(*[get_stock_price(symbol=s) for s in watchlist])

ranked = sorted(quotes, key=lambda q: q["change_pct"], reverse=True)
print(f"{'#':>2} {'sym':<5} {'price':>8} {'chg%':>7}")
for rank, q in enumerate(ranked, 1):
    arrow = "▲" if q["change_pct"] > 0 else "▼"
    print(f"{rank:>2} {q['symbol']:<5} {q['price']:>8.2f} {q['change_pct']:>+7.2f} {arrow}")

winners = [q["symbol"] for q in ranked if q["change_pct"] > 0]
losers = [q["symbol"] for q in ranked if q["change_pct"] <= 0]
print("winners:", ", ".join(winners) or "none")
print("losers:", ", ".join(losers) or "none")
budget = 10_000
weights = {q["symbol"]: max(q["change_pct"], 0) for q in quotes}
wsum = sum(weights.values())
print("allocation:")
for sym in sorted(weights, key=lambda s: -weights[s]):
    if weights[sym]:
        dollars = budget * weights[sym] / wsum
        price = next(q["price"] for q in quotes if q["symbol"] == sym)
        print(f"  {sym:<5} ${dollars:>8.2f} -> {int(dollars // price)} shares")
