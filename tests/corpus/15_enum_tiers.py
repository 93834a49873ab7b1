from enum import Enum, IntEnum, auto


class Tier(Enum):
    FREE = "free"
    PRO = "pro"
    ENTERPRISE = "enterprise"


class Priority(IntEnum):
    LOW = auto()
    MEDIUM = auto()
    HIGH = auto()


PRIORITY = {Tier.FREE: Priority.LOW, Tier.PRO: Priority.MEDIUM, Tier.ENTERPRISE: Priority.HIGH}

queue = []
for uid in range(1, 10):
    user = await fetch_user(user_id=uid)
    tier = Tier(user["tier"])
    queue.append((PRIORITY[tier], uid, user["name"], tier))

queue.sort(key=lambda x: (-x[0], x[1]))
for prio, uid, name, tier in queue:
    print(f"{prio.name:<6} {int(prio)} {name:<9} {tier.value}")
counts = {t.name: sum(1 for q in queue if q[3] is t) for t in Tier}
print(counts)
print([m.name for m in Priority if m >= Priority.MEDIUM])
