from decimal import Decimal, ROUND_HALF_UP, ROUND_DOWN, getcontext

getcontext().prec = 28
amounts = {"USD": Decimal("1250.00"), "EUR": Decimal("980.50"), "GBP": Decimal("432.10"), "JPY": Decimal("150000")}
target = "CHF"
total = Decimal("0")
for cur, amt in sorted(amounts.items()):
    rate = await get_exchange_rate(base=cur, quote=target)
    converted = (amt * Decimal(str(rate))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    total += converted
    print(f"{amt:>12} {cur} x {rate:<7} = {converted:>12} {target}")
print(f"{'total':>12}          = {total:>12} {target}")
print("truncated:", total.quantize(Decimal("1"), rounding=ROUND_DOWN))
print("as tuple:", Decimal("3.14").as_tuple())
print("exact:", Decimal(1) / Decimal(7))
print("float vs decimal:", 0.1 + 0.2, Decimal("0.1") + Decimal("0.2"))
same = await get_exchange_rate(base="CHF", quote="CHF")
print("identity rate:", same, Decimal(str(same)) == 1)
split = (total / 3).quantize(Decimal("0.01"))
print("three-way split:", split, "remainder:", total - split * 3)
