# A sync conversion called from async code through asyncio.to_thread and
# loop.run_in_executor, alone and gathered.
import asyncio
import functools


def convert(w, unit="F"):
    t = w["temp"]
    return round(t * 9 / 5 + 32, 1) if unit == "F" else t


w = await get_weather(city="Rome")
f = await asyncio.to_thread(convert, w)
loop = asyncio.get_running_loop()
c = await loop.run_in_executor(None, functools.partial(convert, w, unit="C"))
both = await asyncio.gather(
    asyncio.to_thread(convert, w),
    loop.run_in_executor(None, convert, w, "C"),
)
print(f, c, both)
try:
    await asyncio.to_thread(convert, {})
except KeyError as e:
    print("KeyError:", e)
