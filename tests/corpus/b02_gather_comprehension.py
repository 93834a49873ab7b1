import asyncio
cities = ["Tokyo", "Delhi", "Berlin", "Quito", "Perth"]
reports = await asyncio.gather(*[get_weather(city=c, unit="F") for c in cities])
for r in sorted(reports, key=lambda r: (-r["temp"], r["city"])):
    print(r["city"], r["temp"], r["unit"])
print(len(reports), "reports in one round")
