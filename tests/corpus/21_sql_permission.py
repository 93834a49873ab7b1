queries = [
    "SELECT id, value FROM sales",
    "select * from users where id = 3",
    "DROP TABLE sales",
    "SELECT count(*) FROM events",
    "delete from logs; drop table logs",
]
ok_rows = 0
for q in queries:
    try:
        result = await run_sql(sql=q)
    except ToolError as e:
        print(f"DENIED  {q!r}: {e}")
        continue
    rows = result["rows"]
    ok_rows += len(rows)
    values = [r[1] for r in rows]
    print(f"OK      {q!r}: {len(rows)} rows, values={values}")
print("total rows:", ok_rows)

def classify(sql):
    return "ddl" if sql.lower().startswith(("drop", "create", "alter")) else "dml"

print({q[:12]: classify(q) for q in queries})
