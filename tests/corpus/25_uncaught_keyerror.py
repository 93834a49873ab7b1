# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
# A data-processing bug: the program assumes a key that the tool never returns.
import asyncio

users = await asyncio.gather(*[fetch_user(user_id=i) for i in (10, 11, 12)])
for u in users:
    print(u["name"], u["tier"])


def country_of(user):
    return user["country"].upper()


async def main():
    for u in users:
        print("processing", u["id"])
        print(country_of(u))


asyncio.run(main())
