from datetime import date, datetime, timedelta

today = date(2025, 6, 30)
print("today:", today.isoformat(), today.strftime("%A %d %B %Y"))
orders = []
for uid in (3, 9, 14):
    orders += await list_orders(user_id=uid)

for o in sorted(orders, key=lambda o: (o["date"], o["order_id"])):
    d = datetime.strptime(o["date"], "%Y-%m-%d").date()
    age = (today - d).days
    print(f"{o['order_id']:>5} {d:%d/%m} age={age:>3}d weekday={d.strftime('%a')}")

recent = [o for o in orders if (today - date.fromisoformat(o["date"])) < timedelta(days=90)]
print("recent:", sorted(o["order_id"] for o in recent))
by_month = {}
for o in orders:
    m = o["date"][:7]
    by_month[m] = round(by_month.get(m, 0) + o["amount"], 2)
for m in sorted(by_month):
    print(m, by_month[m])

user = await fetch_user(user_id=9)
signup = date.fromisoformat(user["signup"])
print("signed up", signup, "which was", (today - signup).days, "days before")
now = datetime.now()
print("now year:", now.year, "is 2026:", now.year == 2026)
print("deadline:", (datetime(2025, 12, 31, 17, 0) + timedelta(hours=36)).isoformat())
