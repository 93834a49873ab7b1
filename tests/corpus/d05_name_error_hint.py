# A misspelt tool is a NameError (its traceback hint is tested over HTTP:
# CPython 3.11's traceback module, the oracle's, does not print one).
w = await get_weather(city="Nairobi")
print(w["city"])
try:
    x = await get_wheather(city="Nairobi")
except NameError as e:
    print("NameError:", e)
tools_seen = sorted(name for name in dir() if name.startswith("get"))
print(tools_seen)
