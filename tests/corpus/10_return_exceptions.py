import asyncio

calls = [
    get_weather(city="Atlantis"),
    get_weather(city="Porto"),
    fetch_user(user_id=999),
    fetch_user(user_id=2),
    translate(text="hello", target_lang="xx"),
    send_email(to="nobody", subject="hi"),
    run_sql(sql="DROP TABLE users"),
    flaky(attempt=1),
    flaky(attempt=2),
]
results = await asyncio.gather(*calls, return_exceptions=True)
ok = err = 0
for i, r in enumerate(results):
    if isinstance(r, Exception):
        err += 1
        print(f"{i}: {type(r).__name__}: {r}")
    else:
        ok += 1
        keys = sorted(r) if isinstance(r, dict) else r
        print(f"{i}: ok {keys}")
print(f"ok={ok} errors={err}")
print("all ToolError:", all(isinstance(r, ToolError) for r in results if isinstance(r, Exception)))
