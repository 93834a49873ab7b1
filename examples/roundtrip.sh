#!/usr/bin/env bash
# A full round trip against a running `baton serve`: start, answer the tool
# call, print the final reply. Needs curl and python3 (for JSON).
#   BATON_URL (default http://127.0.0.1:8080), BATON_KEY (default: baton-data/api_key)
set -euo pipefail
URL=${BATON_URL:-http://127.0.0.1:8080}
KEY=${BATON_KEY:-$(cat baton-data/api_key)}
post() { curl -sS "$URL/exec/programmatic" -H "X-API-Key: $KEY" -H 'Content-Type: application/json' -d "$1"; }

reply=$(post '{
  "code": "import asyncio\ncities = [\"Paris\", \"Oslo\"]\nws = await asyncio.gather(*[get_weather(city=c) for c in cities])\nfor w in ws:\n    print(w[\"city\"], w[\"temp\"])",
  "tools": [{"name": "get_weather", "description": "weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
}')
echo "pause: $reply"
continuation=$(python3 -c '
import json, sys
reply = json.loads(sys.argv[1])
results = [{"call_id": c["id"], "result": {"city": c["input"]["city"], "temp": len(c["input"]["city"]) + 10},
            "is_error": False} for c in reply["tool_calls"]]
print(json.dumps({"continuation_token": reply["continuation_token"], "tool_results": results}))
' "$reply")
echo "final: $(post "$continuation")"
