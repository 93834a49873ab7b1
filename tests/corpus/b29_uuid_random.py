import random, uuid
ids = [str(uuid.uuid4()) for _ in range(2)]
print(ids)
w = await get_weather(city="Reykjavik")
random.seed(7)
print(random.randint(1, 100), random.choice(["a", "b", "c"]))
rng = random.Random()
sample = rng.sample(range(100), 3)
print(sample)
print(random.random() < 1.0, uuid.uuid4().version)
print(w["temp"])
