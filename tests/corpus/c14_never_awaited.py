# A coroutine that is never awaited is never called (CPython warns on stderr).
draft = send_email(to="all@example.com", subject="oops")
w = await get_weather(city="Nairobi")
print(w["city"])
