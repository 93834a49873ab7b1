# ToolError is also bound as ToolExecutionError (the official API's name).
try:
    await get_weather(city="Atlantis")
except ToolExecutionError as e:
    print("caught:", e, ToolExecutionError is ToolError, isinstance(e, Exception))
try:
    await run_sql(sql="DROP TABLE users")
except ToolError as e:
    print("caught again:", e)
