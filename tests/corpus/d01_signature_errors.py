# Tool signatures bind like a def: wrong keyword, missing, too many, twice.
attempts = [
    lambda: get_weather(town="Oslo"),
    lambda: get_weather(),
    lambda: translate("hello"),
    lambda: send_email(),
    lambda: get_weather("Oslo", "C", "extra"),
    lambda: get_weather("Oslo", city="Bergen"),
    lambda: fetch_user(1, 2),
    lambda: search("q", 3, 4, limit=5),
    lambda: book_trip(legs=[]),
]
for attempt in attempts:
    try:
        attempt()
        print("accepted")
    except TypeError as e:
        print("TypeError:", e)

# Nothing was asked of the client so far; a good call still works.
w = await get_weather("Oslo", unit=None)
print(w["city"], w["unit"])
