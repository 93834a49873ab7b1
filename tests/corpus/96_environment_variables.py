# A program sets, reads and removes environment variables, as CPython lets it
# (the environment is the child's own memory).
import os
os.environ["REPORT_UNIT"] = "celsius"
os.environ.setdefault("REPORT_CITY", "Paris")
w = await get_weather(city=os.environ["REPORT_CITY"])
print(os.environ["REPORT_UNIT"], os.getenv("REPORT_CITY"), w["city"])
del os.environ["REPORT_UNIT"]
print("REPORT_UNIT" in os.environ, os.environ.get("REPORT_UNIT", "-"))
os.unsetenv("REPORT_CITY")
