import json
user = await fetch_user(user_id=21)
orders = await list_orders(user_id=21)
doc = {"user": user, "orders": orders, "meta": {"count": len(orders), "ok": True, "none": None}}
text = json.dumps(doc, indent=2, sort_keys=True)
print(text)
back = json.loads(text)
print(back == doc, type(back["meta"]["count"]).__name__)
