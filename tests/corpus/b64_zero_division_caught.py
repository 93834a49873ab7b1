orders = await list_orders(user_id=20, status="cancelled")
try:
    avg = sum(o["amount"] for o in orders) / len(orders)
    print("avg", round(avg, 2))
except ZeroDivisionError as e:
    print("no cancelled orders:", e)
print(len(orders))
