import heapq, bisect
results = await search(query="best laptops", limit=8)
top3 = heapq.nlargest(3, results, key=lambda r: r["score"])
print([r["title"] for r in top3])
scores = sorted(r["score"] for r in results)
for probe in (0.1, 0.3, 0.9):
    print(probe, "rank", bisect.bisect_left(scores, probe))
h = []
for r in results:
    heapq.heappush(h, (r["score"], r["title"]))
print(heapq.heappop(h))
