import pprint
user = await fetch_user(user_id=7)
orders = await list_orders(user_id=7, status="open")
pprint.pprint({"user": user, "open_orders": orders}, width=60, sort_dicts=True)
