# json, re, datetime and asyncio are bound before the program runs.
payload = json.dumps({"when": datetime.date(2026, 1, 2).isoformat()}, sort_keys=True)
print(payload)
print(re.findall(r"\d+", "order 17 of 42"))
print(datetime.datetime(2026, 3, 4, 5, 6).strftime("%Y-%m-%d %H:%M"))
results = await asyncio.gather(get_weather(city="Accra"), get_weather(city="Lagos"))
print(json.dumps([r["city"] for r in results]))
print(type(asyncio).__name__, asyncio.__name__, json.__name__, re.__name__, datetime.__name__)
