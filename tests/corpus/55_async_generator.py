import asyncio


async def weather_stream(cities):
    for c in cities:
        w = await get_weather(city=c)
        yield c, w["temp"]


async def user_pages(start, size, pages):
    for p in range(pages):
        ids = range(start + p * size, start + (p + 1) * size)
        batch = await asyncio.gather(*[fetch_user(user_id=i) for i in ids])
        yield p, [u["name"] for u in batch]


async def main():
    total = 0
    async for city, temp in weather_stream(["Kobe", "Nara", "Kyoto", "Osaka"]):
        total += temp
        print(f"{city}: {temp}")
    print("sum:", total)
    async for page, names in user_pages(40, 3, 3):
        print(f"page {page}: {names}")
    temps = [t async for _, t in weather_stream(["Sapporo", "Sendai"])]
    print("comprehension:", temps)


asyncio.run(main())
