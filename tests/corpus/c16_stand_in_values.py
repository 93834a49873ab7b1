# oracle: runtime (calls without await, baton's extension; CPython cannot run it)
# Calls kept in lists without await are stand-ins that behave as their results.
import statistics
import pprint
import copy

cities = ["Oslo", "Rome", "Lima"]
ws = [get_weather(city=c) for c in cities]
for w in ws:
    pass
real = [await get_weather(city=c) for c in cities]
print(isinstance(ws[0], dict), isinstance(ws[0], list), ws[0].__class__.__name__)
print(json.dumps(ws, sort_keys=True) == json.dumps(real, sort_keys=True))
print(ws[0] == real[0], ws[1] != real[2], ws[2] == {"city": "nowhere"})
print(sorted(w["temp"] for w in ws) == sorted(w["temp"] for w in real))
print(copy.deepcopy(ws[1]) == real[1], copy.copy(ws[2]) == real[2])
pprint.pprint(ws[0])

quotes = ["EUR", "GBP", "JPY"]
rates = [get_exchange_rate(base="USD", quote=q) for q in quotes]
for r in rates:
    pass
real_rates = [await get_exchange_rate(base="USD", quote=q) for q in quotes]
print(statistics.mean(rates) == statistics.mean(real_rates))
print(statistics.median(rates) == statistics.median(real_rates), max(rates) == max(real_rates))
print(sorted(rates) == sorted(real_rates), sum(rates) == sum(real_rates))
print(round(rates[0] * 100), f"{rates[1]:.3f}" == f"{real_rates[1]:.3f}")
