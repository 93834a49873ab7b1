# Validation that fails on purpose: the program ends with an uncaught custom exception.
class BudgetExceeded(Exception):
    def __init__(self, user, total, limit):
        super().__init__(f"{user} spent {total:.2f}, over the limit of {limit}")


LIMIT = 500


async def check(uid):
    user = await fetch_user(user_id=uid)
    orders = await list_orders(user_id=uid)
    total = sum(o["amount"] for o in orders)
    print(f"{user['name']:<8} {total:>8.2f}")
    if total > LIMIT:
        raise BudgetExceeded(user["name"], total, LIMIT)
    return total


for uid in (1, 2, 3, 4, 5):
    await check(uid)
print("all users within budget")
