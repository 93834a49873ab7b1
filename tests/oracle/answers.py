"""Deterministic tool answers for the differential corpus.

`answer(tool, input)` returns `(True, value)` or `(False, error_message)`,
a pure function of its arguments: the CPython oracle calls it, and the Rust
test gives baton exactly the answers the oracle recorded.
"""

import hashlib


def _n(text, mod):
    """A stable small number from text."""
    return int(hashlib.sha256(str(text).encode()).hexdigest()[:8], 16) % mod


def _weather(i):
    city = i.get("city", "")
    if city.lower() in ("atlantis", ""):
        return False, "city not found: %r" % city
    temp = 5 + _n(city, 25)
    if i.get("unit") == "F":
        temp = round(temp * 9 / 5 + 32)
    return True, {"city": city, "temp": temp, "unit": i.get("unit", "C"),
                  "conditions": ["sunny", "cloudy", "rain", "snow"][_n(city + "c", 4)],
                  "humidity": 30 + _n(city + "h", 60)}


def _search(i):
    q = i.get("query", "")
    limit = int(i.get("limit", 3))
    return True, [{"title": "%s result %d" % (q, k), "url": "https://example.com/%s/%d" % (q.replace(" ", "-"), k),
                   "score": round(1.0 / (k + 1) + _n(q + str(k), 100) / 1000, 3)} for k in range(min(limit, 10))]


def _stock(i):
    sym = i.get("symbol", "").upper()
    if not sym.isalpha():
        return False, "unknown symbol %s" % sym
    return True, {"symbol": sym, "price": round(10 + _n(sym, 50000) / 100, 2), "currency": "USD",
                  "change_pct": round((_n(sym + "d", 2000) - 1000) / 100, 2)}


def _user(i):
    uid = int(i.get("user_id") or 0)
    if uid <= 0 or uid >= 100:
        return False, "user %d not found" % uid
    names = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances"]
    return True, {"id": uid, "name": names[uid % len(names)], "email": "user%d@example.com" % uid,
                  "tier": ["free", "pro", "enterprise"][uid % 3], "signup": "2024-%02d-%02d" % (uid % 12 + 1, uid % 28 + 1)}


def _orders(i):
    uid = int(i.get("user_id", 0))
    status = i.get("status")
    orders = [{"order_id": uid * 100 + k, "amount": round(5 + _n("%d-%d" % (uid, k), 20000) / 100, 2),
               "status": ["open", "shipped", "cancelled"][(uid + k) % 3], "date": "2025-%02d-%02d" % (k % 12 + 1, (uid + k) % 28 + 1)}
              for k in range(uid % 5 + 1)]
    if status:
        orders = [o for o in orders if o["status"] == status]
    return True, orders


def _email(i):
    to = i.get("to", "")
    if "@" not in to:
        return False, "invalid address: %s" % to
    return True, {"sent": True, "message_id": "msg-%08x" % _n(to + i.get("subject", ""), 1 << 32)}


def _translate(i):
    text, lang = i.get("text", ""), i.get("target_lang", "")
    if lang not in ("fr", "de", "es", "ja"):
        return False, "unsupported language: %s" % lang
    return True, {"text": "[%s] %s" % (lang, text[::-1]), "lang": lang}


def _rate(i):
    base, quote = i.get("base", ""), i.get("quote", "")
    if base == quote:
        return True, 1.0
    return True, round(0.5 + _n(base + quote, 1500) / 1000, 4)


def _sql(i):
    sql = i.get("sql", "")
    if "drop" in sql.lower():
        return False, "permission denied"
    return True, {"columns": ["id", "value"], "rows": [[k, _n(sql + str(k), 1000)] for k in range(1 + _n(sql, 4))]}


def _flaky(i):
    attempt = int(i.get("attempt", 0))
    if attempt % 2 == 1:
        return False, "transient failure on attempt %d" % attempt
    return True, {"ok": True, "attempt": attempt}


def _forecast(i):
    city = i.get("city")
    if not city:
        return False, "city is required"
    days = int(i.get("days") or 3)
    units = i.get("units", "metric")
    return True, {"city": city, "units": units, "days": [5 + _n(city + str(d), 20) for d in range(days)],
                  "keys": sorted(i)}


def _book(i):
    legs = i.get("legs", [])
    return True, {"booking": "BK%04d" % _n(str(sorted(i.items())), 10000), "legs": len(legs),
                  "cabin": i.get("cabin", "economy"), "keys": sorted(i)}


def _ping(i):
    return True, {"pong": sorted(i)}


_TOOLS = {
    "get_weather": _weather,
    "search": _search,
    "get-stock-price": _stock,
    "fetch_user": _user,
    "list_orders": _orders,
    "send_email": _email,
    "translate": _translate,
    "get exchange rate": _rate,
    "run_sql": _sql,
    "flaky": _flaky,
    "forecast": _forecast,
    "book_trip": _book,
    "ping": _ping,
}


def answer(tool, tool_input):
    handler = _TOOLS.get(tool)
    if handler is None:
        return False, "unknown tool %s" % tool
    return handler(tool_input)
