import asyncio

async def fetch_all(ids):
    users = await asyncio.gather(*(fetch_user(user_id=i) for i in ids), return_exceptions=True)
    return users

async def main():
    users = await fetch_all([1, 2, 150, 3])
    for u in users:
        if isinstance(u, Exception):
            print("error:", u)
        else:
            print(u["id"], u["name"], u["tier"])
    return len(users)

count = asyncio.run(main())
print("count", count)
