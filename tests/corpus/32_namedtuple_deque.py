from collections import namedtuple, deque

Quote = namedtuple("Quote", ["symbol", "price", "change"])
window = deque(maxlen=3)
symbols = ["KO", "PEP", "MDLZ", "HSY", "GIS", "K"]
for s in symbols:
    q = await get_stock_price(symbol=s)
    window.append(Quote(q["symbol"], q["price"], q["change_pct"]))
    avg = sum(x.price for x in window) / len(window)
    print(f"{s:<5} window={[x.symbol for x in window]} avg={avg:.2f}")

last = window[-1]
print(last)
print(last._asdict())
print(last._replace(price=0.0))
print("fields:", Quote._fields)
dq = deque(symbols)
dq.rotate(2)
print("rotated:", list(dq))
dq.appendleft("FIRST")
print("popped:", dq.pop(), "left:", dq.popleft())
print(list(dq))
