# Errors of tools called by earlier cells' helpers; retry loops; sync use.
async def safe(attempt):
    try:
        return await flaky(attempt=attempt)
    except ToolError as e:
        return {"error": str(e)}
first = await safe(1)
print(first)
# %% cell
results = [await safe(n) for n in range(2, 5)]
print([sorted(r) for r in results])
# %% cell
async def until_ok(start):
    n = start
    while True:
        r = await safe(n)
        if "error" not in r:
            return n
        n += 1
print(await until_ok(3))
