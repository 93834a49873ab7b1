log = []


async def safe_user(uid):
    try:
        user = await fetch_user(user_id=uid)
    except ToolError as e:
        log.append(f"miss {uid}")
        return {"id": uid, "name": None, "error": str(e)}
    else:
        log.append(f"hit {uid}")
        return user
    finally:
        log.append(f"done {uid}")


ids = [1, 999, 42, 0, -5, 99, 100]
users = []
for uid in ids:
    users.append(await safe_user(uid))

for u in users:
    if u.get("error"):
        print(f"{u['id']:>4}: ERROR {u['error']}")
    else:
        print(f"{u['id']:>4}: {u['name']} <{u['email']}>")
print("log:")
for entry in log:
    print("  " + entry)
print("found", sum(1 for u in users if not u.get("error")), "of", len(ids))
