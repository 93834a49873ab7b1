cities = ["Anchorage", "Juneau", "Fairbanks", "Nome", "Sitka", "Kodiak", "Bethel",
          "Barrow", "Valdez", "Homer", "Seward", "Kenai", "Wasilla", "Palmer", "Ketchikan"]
readings = []
for i, city in enumerate(cities, 1):
    w = await get_weather(city=city, unit="F")
    readings.append(w)
    trend = ""
    if len(readings) > 1:
        diff = w["temp"] - readings[-2]["temp"]
        trend = f"{diff:+d}"
    print(f"round {i:>2}: {city:<10} {w['temp']:>3}F {w['conditions']:<7} {trend}")

print("rounds:", len(readings))
print("max:", max(r["temp"] for r in readings), "min:", min(r["temp"] for r in readings))
snowy = [r["city"] for r in readings if r["conditions"] == "snow"]
print("snowy:", snowy)
