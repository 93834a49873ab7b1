import re

hits = await search(query="python asyncio gather", limit=6)
url_re = re.compile(r"https://(?P<host>[\w.]+)/(?P<slug>[\w-]+)/(?P<n>\d+)")
for h in hits:
    m = url_re.match(h["url"])
    print(f"{m['host']} | {m['slug']} | #{m['n']} | score {h['score']}")

numbers = [int(re.search(r"result (\d+)$", h["title"]).group(1)) for h in hits]
print("numbers:", numbers)
words = re.findall(r"[a-z]+", hits[0]["title"])
print("words:", words)
print("substituted:", re.sub(r"\s+", "_", hits[1]["title"]))
parts = re.split(r"[/.:]+", hits[2]["url"])
print("split:", parts)

text = " ".join(h["title"] for h in hits)
counts = {}
for w in re.findall(r"\b\w+\b", text):
    counts[w] = counts.get(w, 0) + 1
print(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
print(bool(re.fullmatch(r"[\d.]+", str(hits[0]["score"]))))
