# A /mnt/data program using the pre-imported modules.
rows = await asyncio.gather(*[get_stock_price(symbol=s) for s in ("ABC", "DEF")])
with open("/mnt/data/quotes.json", "w") as f:
    json.dump(rows, f, sort_keys=True)
with open("/mnt/data/quotes.json") as f:
    back = json.load(f)
print([r["symbol"] for r in back], re.sub(r"[aeiou]", "", "quotes"), datetime.date(2026, 5, 1).weekday())
