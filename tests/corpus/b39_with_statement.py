import contextlib

@contextlib.contextmanager
def section(title):
    print(f"[{title}]")
    try:
        yield
    finally:
        print(f"[/{title}]")

with section("weather"):
    w = await get_weather(city="Prague")
    print(w["conditions"])
with section("stocks"):
    try:
        q = await get_stock_price(symbol="B3RK")
    except Exception as e:
        print("error:", e)
