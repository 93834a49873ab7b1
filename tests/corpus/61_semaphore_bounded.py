import asyncio

sem = asyncio.Semaphore(2)
active = 0
peak = 0


async def limited(city):
    global active, peak
    async with sem:
        active += 1
        peak = max(peak, active)
        w = await get_weather(city=city)
        active -= 1
        return city, w["temp"], w["conditions"]


cities = ["Goa", "Pune", "Agra", "Jaipur", "Surat", "Indore", "Bhopal"]
results = await asyncio.gather(*(limited(c) for c in cities))
for city, temp, cond in sorted(results, key=lambda r: r[0]):
    print(f"{city:<7} {temp:>3} {cond}")
print("peak concurrency:", peak)
lock = asyncio.Lock()
counter = {"n": 0}


async def bump(uid):
    u = await fetch_user(user_id=uid)
    async with lock:
        counter["n"] += len(u["name"])


await asyncio.gather(*[bump(i) for i in range(1, 6)])
print("name length sum:", counter["n"])
