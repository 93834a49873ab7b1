import asyncio

queries = ["asyncio tutorial", "rustpython", "tokio runtime", "python gil"]
collected = []
for fut in asyncio.as_completed([search(query=q, limit=3) for q in queries]):
    results = await fut
    best = max(results, key=lambda r: r["score"])
    collected.append((best["score"], best["title"], len(results)))

for score, title, n in sorted(collected, reverse=True):
    print(f"{score:.3f}  {title}  ({n} results)")

urls = sorted(t for _, t, _ in collected)
print("titles:", urls)
print("count:", len(collected))
