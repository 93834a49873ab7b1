# Coroutines in a dict: only the ones awaited are called.
jobs = {
    "weather": get_weather(city="Berlin"),
    "stock": get_stock_price(symbol="SAP"),
    "email": send_email(to="team@example.com", subject="never sent"),
}
w = await jobs["weather"]
s = await jobs["stock"]
print(w["city"], s["symbol"])
print(sorted(jobs))
