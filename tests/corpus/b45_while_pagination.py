page, seen = 0, []
while True:
    results = await search(query=f"page {page}", limit=page + 1)
    seen.extend(r["title"] for r in results)
    if len(results) >= 3:
        break
    page += 1
print(page, len(seen))
print(seen[-3:])
