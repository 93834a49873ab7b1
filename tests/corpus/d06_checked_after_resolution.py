# oracle: runtime
# A call used as an argument is checked as the tool will receive it.
user = fetch_user(5)
try:
    get_weather(city=user)
except TypeError as e:
    print("TypeError:", e)
name = fetch_user(6)["name"]
w = get_weather(city=name)
print(w["city"] == name)
