def make_converter(quote):
    async def convert(amount, base):
        rate = await get_exchange_rate(base=base, quote=quote)
        return round(amount * rate, 2)
    return convert

to_usd = make_converter("USD")
to_eur = make_converter("EUR")
print(await to_usd(100, "CHF"))
print(await to_eur(100, "SEK"))
