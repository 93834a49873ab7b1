from collections import deque
window = deque(maxlen=3)
for i, city in enumerate(["Lyon", "Nice", "Metz", "Caen", "Brest"]):
    w = await get_weather(city=city)
    window.append(w["temp"])
    print(i, city, list(window), round(sum(window) / len(window), 2))
