import asyncio


async def weather_line(city):
    w = await get_weather(city=city)
    return f"{city}: {w['temp']}C and {w['conditions']}"


async def main():
    lines = await asyncio.gather(*(weather_line(c) for c in ["Seoul", "Busan", "Incheon"]))
    for line in lines:
        print(line)
    user = await fetch_user(user_id=21)
    print("hello,", user["name"])
    return len(lines)


count = asyncio.run(main())
print("lines:", count)
