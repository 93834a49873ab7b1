from decimal import Decimal, ROUND_HALF_UP
amounts = {"EUR": Decimal("120.50"), "GBP": Decimal("80"), "JPY": Decimal("15000")}
total_usd = Decimal("0")
for cur, amount in amounts.items():
    rate = await get_exchange_rate(base=cur, quote="USD")
    usd = (amount * Decimal(str(rate))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    total_usd += usd
    print(f"{amount} {cur} = {usd} USD (rate {rate})")
print("total", total_usd)
same = await get_exchange_rate("USD", "USD")
print("identity rate", same)
