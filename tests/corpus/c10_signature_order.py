# Positional arguments bind in the order of a Python signature: required
# parameters first, then optional ones, each in schema order. An optional
# argument given as None is left out; a required one is sent as null.
f = await forecast("Paris")
print(f["city"], f["units"], len(f["days"]), f["keys"])
f = await forecast("Oslo", "imperial", 2)
print(f["city"], f["units"], len(f["days"]), f["keys"])
f = await forecast("Rome", None, None)
print(f["keys"])
w = await get_weather("Bern", None)
print(w["unit"])
try:
    await fetch_user(None)
except ToolError as e:
    print("required None:", e)
try:
    await forecast("a", "b", 3, 4)
except TypeError as e:
    print("TypeError:", e)
