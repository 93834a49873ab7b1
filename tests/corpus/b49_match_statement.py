async def describe(uid):
    try:
        u = await fetch_user(user_id=uid)
    except Exception as e:
        return f"error: {e}"
    match u:
        case {"tier": "enterprise", "name": name}:
            return f"{name} is a big customer"
        case {"tier": "pro" | "free" as tier, "name": name}:
            return f"{name} on {tier}"
        case _:
            return "unknown"

for uid in (3, 4, 5, 300):
    print(await describe(uid))
