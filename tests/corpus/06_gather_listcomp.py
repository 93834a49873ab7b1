import asyncio

cities = ["Madrid", "Prague", "Dublin", "Athens", "Warsaw", "Helsinki"]
reports = await asyncio.gather(*[get_weather(city=c) for c in cities])
for r in sorted(reports, key=lambda r: (-r["temp"], r["city"])):
    bar = "#" * r["temp"]
    print(f"{r['city']:<9} {r['temp']:>2} {bar}")

by_cond = {}
for r in reports:
    by_cond.setdefault(r["conditions"], []).append(r["city"])
for cond in sorted(by_cond):
    print(cond, "->", ", ".join(sorted(by_cond[cond])))

humid = [r["city"] for r in reports if r["humidity"] > 60]
print("humid:", humid)
print("mean humidity:", sum(r["humidity"] for r in reports) / len(reports))
