# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
# Deferred calls (collected in containers) used directly as values.
weathers = [get_weather(city=c) for c in ("Turin", "Genoa", "Verona")]
rates = [get_exchange_rate(base="EUR", quote=q) for q in ("USD", "GBP", "EUR")]
results = (search(query="deferred", limit=2), search(query="proxy", limit=4))

print("len:", len(weathers[0]), len(results[0]), len(results[1]))
print("in:", "temp" in weathers[1], "wind" in weathers[1])
print("iter keys:", sorted(k for k in weathers[2]))
print("getattr get:", weathers[0].get("city"), weathers[0].get("wind", "n/a"))
print("format:", f"{rates[0]:.3f}", format(rates[1], ">8"))
print("str/repr:", str(rates[2]), repr(rates[2]))
print("float/int:", float(rates[0]), int(rates[2]))
print("bool:", bool(results[0]), bool(rates[0]))
print("compare:", rates[0] > rates[1], rates[2] == 1.0, rates[1] != 0, rates[0] <= 2)
print("sorted:", sorted(rates), "max:", max(rates), "min:", min(rates))
print("sum:", round(sum(rates), 4), "radd:", round(1 + rates[2], 1))
print("list add:", len(results[0] + results[1]))
print("float math:", [round(float(r) * 100, 2) for r in rates])
print("dict():", sorted(dict(weathers[0]).items())[:2])
print("titles:", [h["title"] for h in results[1]])
import json
print(json.dumps({"w": weathers[0], "rates": rates}, sort_keys=True))
