import asyncio
uids = list(range(1, 9))
users = await asyncio.gather(*[fetch_user(user_id=u) for u in uids])
by = sorted(users, key=lambda u: (u["tier"], u["name"], -u["id"]))
for u in by:
    print(f"{u['tier']:<10} {u['name']:<9} {u['id']}")
