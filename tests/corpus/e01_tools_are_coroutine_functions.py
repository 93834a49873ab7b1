# A tool is an `async def` to `inspect` and `asyncio`: a generic retry
# decorator takes its async branch, a call is a coroutine (created, then
# closed once awaited), and a result kept in a list unpacks as a mapping.
import asyncio
import functools
import inspect


def retry(times):
    def wrap(fn):
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run(*args, **kwargs):
                for attempt in range(times):
                    try:
                        return await fn(*args, **kwargs)
                    except ToolError as e:
                        print("attempt", attempt + 1, "failed:", e)
                raise RuntimeError("gave up")
            return run

        @functools.wraps(fn)
        def run_sync(*args, **kwargs):
            return fn(*args, **kwargs)
        return run_sync
    return wrap


print(inspect.iscoroutinefunction(get_weather), asyncio.iscoroutinefunction(get_weather))
print(inspect.iscoroutinefunction(print), inspect.isfunction(retry))
weather = retry(3)(get_weather)
print(inspect.iscoroutinefunction(weather), weather.__name__)
c = get_weather(city="Oslo")
print(inspect.iscoroutine(c), inspect.isawaitable(c), c.__qualname__, c.__name__)
print(inspect.getcoroutinestate(c))
w = await c
print(inspect.getcoroutinestate(c), c.cr_frame is None, c.cr_running)
ws = [w, await weather(city="Lima")]
print({**ws[0], "n": 1}["n"], sorted(dict(ws[1])))
later = get_weather(city="Rome")
print(inspect.getcoroutinestate(later))
print((await later)["city"])
try:
    await weather(city="Atlantis")
except RuntimeError as e:
    print(e)
