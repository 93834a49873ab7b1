queries = ["select * from users", "select count(*) from orders", "DROP TABLE users"]
for q in queries:
    try:
        res = await run_sql(sql=q)
        print(q, "->", len(res["rows"]), "rows")
        for row in res["rows"]:
            print("   ", dict(zip(res["columns"], row)))
    except Exception as e:
        print(q, "-> error:", e)
