w = await get_weather(city="Zürich")
print("Température à Zürich: 20°
print(w)
