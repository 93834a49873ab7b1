from collections import Counter
from itertools import groupby
import asyncio
users = await asyncio.gather(*[fetch_user(user_id=i) for i in range(1, 13)])
tiers = Counter(u["tier"] for u in users)
print(tiers.most_common())
users.sort(key=lambda u: u["name"])
for name, group in groupby(users, key=lambda u: u["name"]):
    ids = [u["id"] for u in group]
    print(name, ids)
