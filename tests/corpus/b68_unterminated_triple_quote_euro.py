orders = await list_orders(user_id=7, status="open")
total = sum(o["amount"] for o in orders)
report = """Total: %s €.