# Each argument is checked against its schema before the call is made.
import json

cases = {
    "int for a string": lambda: get_weather(city=42),
    "None for a required string": lambda: get_weather(city=None),
    "enum miss": lambda: get_weather(city="Oslo", unit="K"),
    "bool for an integer": lambda: fetch_user(True),
    "float for an integer": lambda: fetch_user(2.5),
    "string for an integer": lambda: search("q", limit="3"),
    "nested wrong type": lambda: book_trip(traveler={"name": 7}, legs=[]),
    "nested missing key": lambda: book_trip(traveler={"age": 30}, legs=[]),
    "nested unexpected key": lambda: book_trip(traveler={"name": "Ann", "vip": True}, legs=[]),
    "array item wrong": lambda: book_trip(traveler={"name": "Ann"}, legs=[{"from": "A", "to": "B"}, {"from": "B"}]),
    "array for an object": lambda: book_trip(traveler=["Ann"], legs=[]),
    "enum cabin": lambda: book_trip(traveler={"name": "Ann"}, legs=[], cabin="first"),
    "union miss": lambda: book_trip(traveler={"name": "Ann"}, legs=[], notes=5),
    "bool for a number": lambda: book_trip(traveler={"name": "Ann"}, legs=[], budget=False),
    "string for a boolean": lambda: book_trip(traveler={"name": "Ann"}, legs=[], flexible="yes"),
}
for name, attempt in cases.items():
    try:
        attempt()
        print(name, "-> accepted")
    except (TypeError, ValueError) as e:
        print(name, "->", type(e).__name__, e)

# What the schema allows goes through: ints for numbers, tuples for arrays,
# whole floats for integers, None for optional parameters, anything under
# a schema baton cannot decide (anyOf), and what is not checked (maxLength).
ok = await book_trip(
    traveler={"name": "Ann", "age": 30.0},
    legs=({"from": "OSL", "to": "BGO", "seat": "12A"},),
    cabin="business",
    notes="x" * 150,
    budget=1200,
    flexible=True,
    extras={"anything": [1, "two"]},
)
print(json.dumps(ok, sort_keys=True))
u = await fetch_user(3.0)
print(sorted(u))
n = await book_trip(traveler={"name": "Bo"}, legs=[], notes=None, cabin=None)
print(n["keys"])
