# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
cities = ["Lagos", "Accra", "Dakar", "Tunis", "Rabat"]
temps = [get_weather(city=c)["temp"] for c in cities]
print("temps:", temps)
pairs = dict(zip(cities, temps))
print("above 15:", [c for c, t in pairs.items() if t > 15])

to_f = lambda t: round(t * 9 / 5 + 32, 1)
print("fahrenheit:", list(map(to_f, temps)))

symbols = ["IBM", "ORCL", "SAP"]
changes = {s: get_stock_price(symbol=s)["change_pct"] for s in symbols}
print("changes:", changes)
gainers = sorted(filter(lambda s: changes[s] > 0, symbols))
print("gainers:", gainers)

lengths = [len(search(query=q, limit=n)) for q, n in [("a", 1), ("b", 5), ("c", 20)]]
print("result lengths:", lengths)
names = sorted({fetch_user(user_id=i)["name"] for i in (1, 2, 11, 17)})
print("names:", names)
