for city in ["Oslo", "Atlantis", "Nairobi"]:
    try:
        w = await get_weather(city=city)
        print("ok", w["city"], w["temp"])
    except Exception as e:
        print("failed:", type(e).__name__, str(e))
try:
    await fetch_user(user_id=999)
except ToolError as e:
    print("user lookup failed:", e)
finally:
    print("done with users")
