# Sync helpers run through a thread pool, as agents call them from async
# code: map, submit, as_completed, errors kept in futures, shutdown.
import asyncio
from concurrent.futures import ThreadPoolExecutor, as_completed


def score(w):
    return round(w["temp"] * 1.8 + 32, 1)


cities = ["Oslo", "Lima", "Cairo"]
weathers = await asyncio.gather(*(get_weather(city=c) for c in cities))
with ThreadPoolExecutor(max_workers=3) as pool:
    scores = list(pool.map(score, weathers))
    futures = {pool.submit(score, w): w["city"] for w in weathers}
    done = sorted((futures[f], f.result()) for f in as_completed(futures))
print(scores)
print(done)
with ThreadPoolExecutor() as pool:
    bad = pool.submit(lambda: 1 / 0)
    print(type(bad.exception()).__name__, bad.done())
    try:
        pool.submit(int, "x").result()
    except ValueError as e:
        print("ValueError:", e)
try:
    pool.submit(print, "late")
except RuntimeError as e:
    print("RuntimeError:", e)
try:
    ThreadPoolExecutor(max_workers=0)
except ValueError as e:
    print("ValueError:", e)
