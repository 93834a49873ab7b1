from enum import Enum
from typing import Optional, List, Dict

class Tier(Enum):
    FREE = "free"
    PRO = "pro"
    ENTERPRISE = "enterprise"

async def tier_of(uid: int) -> Optional[Tier]:
    try:
        u = await fetch_user(user_id=uid)
    except Exception:
        return None
    return Tier(u["tier"])

found: Dict[str, List[int]] = {}
for uid in [1, 2, 3, 101]:
    t = await tier_of(uid)
    found.setdefault(t.name if t else "MISSING", []).append(uid)
print(found)
print([t.value for t in Tier])
