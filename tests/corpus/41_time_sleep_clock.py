import time

t0 = time.time()
m0 = time.monotonic()
print("epoch start (int):", int(t0))
print("gmtime:", time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)))
time.sleep(1.5)
print("slept ~1.5:", round(time.monotonic() - m0, 3))

timings = []
for city in ("Bern", "Graz", "Linz"):
    start = time.perf_counter()
    w = await get_weather(city=city)
    timings.append(round(time.perf_counter() - start, 2))
    print(city, w["temp"])
print("per-call latency:", timings)
print("total elapsed:", round(time.monotonic() - m0, 2))
print("wall advanced:", round(time.time() - t0, 2))
print("localtime hour:", time.localtime().tm_hour)
print("ns positive:", time.time_ns() > 0)
deadline = time.monotonic() + 2
ticks = 0
while time.monotonic() < deadline:
    time.sleep(0.5)
    ticks += 1
print("ticks:", ticks)
print("ctime:", time.ctime(0))
