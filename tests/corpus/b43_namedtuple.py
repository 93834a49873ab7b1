from collections import namedtuple
import asyncio
Quote = namedtuple("Quote", "symbol price change")
raw = await asyncio.gather(*[get_stock_price(symbol=s) for s in ("ORCL", "CRM", "ADBE")])
quotes = [Quote(q["symbol"], q["price"], q["change_pct"]) for q in raw]
for q in sorted(quotes, key=lambda q: q.change):
    print(q)
print(quotes[0]._asdict())
