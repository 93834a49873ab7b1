import asyncio

currencies = ["USD", "EUR", "GBP", "JPY"]
pairs = [(b, q) for b in currencies for q in currencies]
rates = await asyncio.gather(*[get_exchange_rate(base=b, quote=q) for b, q in pairs])
table = {pair: r for pair, r in zip(pairs, rates)}

print("      " + "".join(f"{q:>8}" for q in currencies))
for b in currencies:
    print(f"{b:<6}" + "".join(f"{table[(b, q)]:>8.4f}" for q in currencies))

print("round trips (should be ~1 in reality):")
for b, q in pairs:
    if b < q:
        rt = table[(b, q)] * table[(q, b)]
        print(f"  {b}->{q}->{b}: {rt:.4f}")
best = max(((b, q, table[(b, q)] * table[(q, b)]) for b, q in pairs if b != q), key=lambda t: t[2])
print("best arbitrage loop:", best[0], best[1], round(best[2], 4))
amount = 1000
print(f"{amount} USD is", {q: round(amount * table[("USD", q)], 2) for q in currencies})
