from typing import Optional, TypedDict, Union, Callable, Any, List, Dict


class WeatherRow(TypedDict):
    city: str
    temp: int


def pick(rows: List[WeatherRow], pred: Callable[[WeatherRow], bool]) -> List[str]:
    return [r["city"] for r in rows if pred(r)]


async def maybe_user(uid: int) -> Optional[Dict[str, Any]]:
    try:
        return await fetch_user(user_id=uid)
    except ToolError:
        return None


def fmt(x: Union[int, float, None]) -> str:
    return "n/a" if x is None else f"{x:.1f}"


rows: List[WeatherRow] = []
for c in ("Cusco", "Arequipa", "Trujillo"):
    w = await get_weather(city=c)
    rows.append(WeatherRow(city=c, temp=w["temp"]))
print(rows)
print("warm:", pick(rows, lambda r: r["temp"] > 12))
for uid in (6, 600):
    u = await maybe_user(uid)
    print(uid, "->", u["name"] if u else None)
print(fmt(None), fmt(3), fmt(2.25))
print(pick.__annotations__["return"])
print(WeatherRow.__required_keys__ == frozenset({"city", "temp"}))
