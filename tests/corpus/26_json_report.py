import json

report = {"generated_for": [], "weather": {}, "stocks": []}
for uid in (5, 16):
    u = await fetch_user(user_id=uid)
    report["generated_for"].append({"name": u["name"], "tier": u["tier"]})
for city in ("Vancouver", "Toronto"):
    w = await get_weather(city=city)
    report["weather"][city] = {k: w[k] for k in ("temp", "conditions")}
for s in ("SHOP", "RY"):
    q = await get_stock_price(symbol=s)
    report["stocks"].append([q["symbol"], q["price"]])

text = json.dumps(report, sort_keys=True, indent=2)
print(text)
compact = json.dumps(report, sort_keys=True, separators=(",", ":"))
print("compact length:", len(compact))
back = json.loads(compact)
print("round trip equal:", back == report)
print(json.dumps({"unicode": "café ☕", "nested": [1, [2, [3]]]}, ensure_ascii=False))
print(json.dumps({"unicode": "café"}))
print(json.dumps([1.5, None, True, "x"]))
