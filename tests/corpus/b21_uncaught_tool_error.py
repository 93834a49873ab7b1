w = await get_weather(city="Oslo")
print("first ok", w["temp"])
user = await fetch_user(user_id=0)
print("never printed", user)
