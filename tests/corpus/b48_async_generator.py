async def weather_stream(cities):
    for c in cities:
        w = await get_weather(city=c)
        yield c, w["temp"]

async for city, temp in weather_stream(["Turin", "Genoa"]):
    print(city, temp)
print([t async for _, t in weather_stream(["Bari"])])
