# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
import time


def backoff(attempt):
    return min(0.5 * 2 ** attempt, 4.0)


async def with_retry(max_attempts=5):
    attempt = 1
    while True:
        try:
            r = await flaky(attempt=attempt)
            print(f"  attempt {attempt}: success")
            return r
        except ToolError as e:
            print(f"  attempt {attempt}: {e}")
            if attempt >= max_attempts:
                raise
            time.sleep(backoff(attempt))
            attempt += 1


start = time.monotonic()
res = await with_retry()
print("result:", res)
print("elapsed >= 1s:", time.monotonic() - start >= 1.0)

# Several independent retries with different starting attempts.
for first in (3, 4, 7):
    n = first
    tries = 0
    while True:
        tries += 1
        try:
            out = flaky(attempt=n)
            break
        except ToolError:
            n += 1
    print(f"start={first} -> ok at {out['attempt']} after {tries} tries")
