class ReportError(Exception):
    pass


async def load(uid):
    try:
        return await fetch_user(user_id=uid)
    except ToolError as e:
        raise ReportError(f"cannot build report for {uid}") from e


async def build(uids):
    names = []
    for uid in uids:
        u = await load(uid)
        names.append(u["name"])
    return names


for batch in ([1, 2, 3], [4, 500, 6], [7]):
    try:
        print("batch ok:", await build(batch))
    except ReportError as e:
        print("batch failed:", e)
        print("  cause:", type(e.__cause__).__name__, "-", e.__cause__)

try:
    try:
        await run_sql(sql="drop table x")
    except ToolError:
        print("logging and re-raising")
        raise
except ToolError as e:
    print("outer caught:", e)
finally:
    print("cleanup ran")
