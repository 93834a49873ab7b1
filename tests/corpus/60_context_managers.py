import contextlib
import time


class Timer:
    def __init__(self, label):
        self.label = label

    def __enter__(self):
        self.start = time.monotonic()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.elapsed = round(time.monotonic() - self.start, 1)
        print(f"[{self.label}] {self.elapsed}s, error={exc_type.__name__ if exc_type else None}")
        return exc_type is ToolError  # swallow tool errors only


with Timer("weather") as t:
    w = await get_weather(city="Boise")
    print("Boise", w["temp"])
with Timer("bad user"):
    await fetch_user(user_id=0)
    print("not reached")
print("after suppressed error")


@contextlib.asynccontextmanager
async def session(name):
    print(f"open {name}")
    try:
        yield await fetch_user(user_id=19)
    finally:
        print(f"close {name}")


async with session("s1") as user:
    print("in session as", user["name"])
with contextlib.suppress(ToolError):
    await translate(text="x", target_lang="zz")
print("suppress ok")
