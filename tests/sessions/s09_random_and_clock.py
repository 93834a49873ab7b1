# Values drawn in one cell keep their values; the clock never goes back.
import random, time
r = random.random()
t0 = time.monotonic()
saved = [random.randint(1, 10**9) for _ in range(3)]
w = await get_weather(city="Tokyo")
# %% cell
print(r == r, len(saved), all(isinstance(v, int) for v in saved))
t1 = time.monotonic()
print(t1 >= t0)
copy_of = list(saved)
# %% cell
print(copy_of == saved, time.monotonic() >= t1, w["city"])
