def describe(w):
    match w:
        case {"conditions": "snow", "temp": t} if t < 10:
            return f"cold and snowy ({t})"
        case {"conditions": "snow"}:
            return "snowy"
        case {"conditions": "rain" | "cloudy" as c, "humidity": h} if h > 70:
            return f"{c}, muggy ({h}%)"
        case {"conditions": "sunny", "temp": t} if t >= 20:
            return "beach day"
        case {"conditions": c}:
            return f"plain {c}"
        case _:
            return "unknown"


for city in ["Galway", "Bilbao", "Porto", "Split", "Bari", "Nice", "Pula", "Zadar"]:
    w = await get_weather(city=city)
    print(f"{city:<7} {describe(w)}")

for uid in (3, 30, 300):
    try:
        result = ("ok", await fetch_user(user_id=uid))
    except ToolError as e:
        result = ("err", str(e))
    match result:
        case ("ok", {"tier": "enterprise", "name": name}):
            print(uid, "VIP", name)
        case ("ok", {"name": name, "tier": tier}):
            print(uid, "regular", name, tier)
        case ("err", msg):
            print(uid, "error:", msg)
