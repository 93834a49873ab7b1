# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
a = await get_weather("Vienna", "F")
b = await search("weather vienna", limit=2)
c = list_orders(8, "shipped")
print(a["unit"], a["temp"], len(b), [o["order_id"] for o in c])
try:
    get_weather("x", "C", "extra")
except TypeError as e:
    print("TypeError:", e)
