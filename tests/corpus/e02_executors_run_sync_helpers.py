# Sync helpers called from async code through executors and threads, as
# agents write them: each runs (inline, in order) and gives its value.
import asyncio
import concurrent.futures


def summarize(w):
    return "%s: %d" % (w["city"], w["temp"])


cities = ["Oslo", "Lima", "Rome"]
weathers = await asyncio.gather(*(get_weather(city=c) for c in cities))
with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
    print(list(pool.map(summarize, weathers)))
    futures = [pool.submit(summarize, w) for w in weathers]
    print([f.result() for f in concurrent.futures.as_completed(futures)] and sorted(f.result() for f in futures))
print(await asyncio.to_thread(summarize, weathers[0]))
loop = asyncio.get_running_loop()
print(await loop.run_in_executor(None, summarize, weathers[1]))
print(sum(await asyncio.gather(*(asyncio.to_thread(len, c) for c in cities))))
