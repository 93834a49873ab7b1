# oracle: runtime
# Results kept as values (calls without await) and used later as mappings:
# unpacked with **, passed to dict(), their keys listed.
ws = [get_weather(city=c) for c in ["Oslo", "Lima"]]
merged = {**ws[0], "n": 1}
print(sorted(merged), merged["n"], merged["city"])
print(dict(ws[1])["city"], len(dict(ws[1])))
print(list(ws[0].keys()) == list(ws[0]), "temp" in ws[0].keys())
def describe(city, temp, **rest):
    return "%s %s (%d more)" % (city, temp, len(rest))
print(describe(**ws[1]))
