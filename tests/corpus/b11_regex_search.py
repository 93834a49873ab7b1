import re
results = await search(query="rust async runtime", limit=5)
pattern = re.compile(r"https://example\.com/([\w-]+)/(\d+)")
for r in results:
    m = pattern.match(r["url"])
    slug, n = m.group(1), int(m.group(2))
    print(f"{n}: {slug.replace('-', ' ').title()} score={r['score']}")
best = max(results, key=lambda r: r["score"])
print("best:", best["title"])
print(re.sub(r"\d", "#", best["url"]))
