import asyncio
out = []
for fut in asyncio.as_completed([get_weather(city=c) for c in ["Lagos", "Kyiv", "Doha"]]):
    w = await fut
    out.append(f"{w['city']}={w['temp']}")
print(sorted(out))
