import asyncio
import json

weather, hits, quote, user, rate = await asyncio.gather(
    get_weather(city="Sydney"),
    search(query="sydney opera house", limit=2),
    get_stock_price(symbol="QAN"),
    fetch_user(user_id=12),
    get_exchange_rate(base="AUD", quote="USD"),
)
print("weather:", json.dumps(weather, sort_keys=True))
print("top hit:", hits[0]["title"])
print("QAN:", quote["price"])
print("user:", user["name"], user["email"])
print("AUD/USD:", rate)
summary = {
    "city": weather["city"],
    "temp_f": round(weather["temp"] * 9 / 5 + 32, 1),
    "hits": len(hits),
    "price_usd": quote["price"],
    "price_aud": round(quote["price"] / rate, 2),
}
print(json.dumps(summary, sort_keys=True, indent=2))
