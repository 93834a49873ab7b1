import random

cities = ["Bergen", "Turku", "Malmo", "Aarhus", "Tampere", "Uppsala", "Odense"]
picked = random.sample(cities, 3)
print("picked:", picked)
for c in picked:
    w = await get_weather(city=c)
    print(f"  {c}: {w['temp']}C")

rng = random.Random(1234)
shuffled = cities[:]
rng.shuffle(shuffled)
print("shuffled:", shuffled)
print("choice:", rng.choice(cities))
print("randint:", [rng.randint(1, 6) for _ in range(8)])
print("uniform:", round(rng.uniform(0, 1), 6))

uid = random.randint(1, 50)
u = await fetch_user(user_id=uid)
print("random user:", u["id"], u["name"])
print("gauss:", round(random.gauss(0, 1), 6))
print("choices:", random.choices(["a", "b", "c"], weights=[5, 1, 1], k=10))
