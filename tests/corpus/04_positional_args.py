# Positional arguments map onto the schema order of each tool.
w = await get_weather("Reykjavik", "F")
print(w["city"], w["temp"], w["unit"])

hits = await search("best coffee beans", 2)
print([h["title"] for h in hits])

open_orders = await list_orders(8, "open")
shipped = await list_orders(8, "shipped")
print("open:", [o["order_id"] for o in open_orders])
print("shipped:", [o["order_id"] for o in shipped])

r = await get_exchange_rate("EUR", "CHF")
print("EUR/CHF", r)

sent = await send_email("ops@example.com", "Daily digest", "All systems nominal")
print("sent:", sent["sent"], sent["message_id"])

t = await translate("good morning", "de")
print(t["lang"], t["text"])

try:
    await translate("too", "many", "args")
except TypeError as e:
    print("TypeError:", e)
try:
    await get_weather("Rome", city="Milan")
except TypeError as e:
    print("TypeError:", e)
