# Keep asking for more results until the tool stops giving more (it caps at 10).
query = "distributed systems"
limit = 1
pages = []
while True:
    results = await search(query=query, limit=limit)
    pages.append(len(results))
    print(f"limit={limit:>2} got={len(results):>2} last={results[-1]['title']}")
    if len(results) < limit:
        break
    limit += 1
print("rounds:", len(pages))
print("sizes:", pages)

# Then walk user ids until a missing one shows up.
uid = 95
seen = []
while True:
    try:
        u = await fetch_user(user_id=uid)
    except ToolError as e:
        print("stop:", e)
        break
    seen.append(u["name"])
    uid += 1
print("seen:", seen)
