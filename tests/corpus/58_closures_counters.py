def make_counter():
    count = 0

    def bump(n=1):
        nonlocal count
        count += n
        return count
    return bump


def make_converter(base):
    cache = {}

    async def convert(amount, quote):
        if quote not in cache:
            cache[quote] = await get_exchange_rate(base=base, quote=quote)
        return round(amount * cache[quote], 2), len(cache)
    return convert


calls = make_counter()
from_usd = make_converter("USD")
from_eur = make_converter("EUR")
for amount, q in [(100, "EUR"), (250, "GBP"), (40, "EUR"), (10, "GBP"), (5, "SEK")]:
    val, n = await from_usd(amount, q)
    calls()
    print(f"USD {amount:>4} -> {q} {val:>8.2f} (cache size {n})")
val, n = await from_eur(100, "USD")
print("EUR 100 -> USD", val, "cache", n)
print("conversions:", calls(0))

adders = [lambda x, k=k: x + k for k in range(3)]
print([f(10) for f in adders])
late = [lambda x: x + k for k in range(3)]
print([f(10) for f in late])
