def chunks(seq, n):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]

import asyncio
symbols = ["A", "B", "C", "D", "E"]
prices = {}
for chunk in chunks(symbols, 2):
    quotes = await asyncio.gather(*[get_stock_price(symbol=s) for s in chunk])
    prices.update({q["symbol"]: q["price"] for q in quotes})
    print("batch", chunk)
print(sorted(prices.items()))
