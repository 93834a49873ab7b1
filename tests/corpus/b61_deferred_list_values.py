# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
pending = [get_weather(city=c) for c in ["Leeds", "York"]]
print(pending[0]["city"], pending[1]["temp"])
print(str(pending[0]["conditions"]).upper())
import json
print(json.dumps([p["city"] for p in pending]))
