# Compare Celsius and Fahrenheit readings for a few cities, one call at a time.
cities = ["Berlin", "Tokyo", "Nairobi", "Denver", "Quito"]
rows = []
for city in cities:
    c = await get_weather(city=city, unit="C")
    f = await get_weather(city=city, unit="F")
    rows.append((city, c["temp"], f["temp"], c["conditions"]))
    print(f"{city:<8} {c['temp']:>3}C {f['temp']:>4}F  {c['conditions']}")

print("-" * 30)
for city, tc, tf, cond in rows:
    approx = round(tc * 9 / 5 + 32)
    status = "ok" if approx == tf else f"mismatch ({approx})"
    print(f"check {city}: {status}")
hottest = max(rows, key=lambda r: r[1])
coldest = min(rows, key=lambda r: r[1])
print(f"hottest: {hottest[0]} ({hottest[1]}C)")
print(f"coldest: {coldest[0]} ({coldest[1]}C)")
print("spread:", hottest[1] - coldest[1])
