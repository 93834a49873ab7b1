import statistics

tables = ["orders", "users", "events", "sessions", "payments", "refunds"]
summary = []
for t in tables:
    res = await run_sql(sql=f"SELECT id, value FROM {t} ORDER BY id")
    vals = [v for _, v in res["rows"]]
    stats = {
        "table": t,
        "rows": len(vals),
        "sum": sum(vals),
        "mean": round(statistics.mean(vals), 1),
        "max": max(vals),
    }
    summary.append(stats)

cols = ["table", "rows", "sum", "mean", "max"]
print(" | ".join(f"{c:>8}" for c in cols))
for s in sorted(summary, key=lambda s: (-s["rows"], s["table"])):
    print(" | ".join(f"{s[c]:>8}" for c in cols))
all_rows = sum(s["rows"] for s in summary)
print("total rows:", all_rows)
heavy = [s["table"] for s in summary if s["mean"] > 500]
print("mean > 500:", heavy)
joined = await run_sql(sql="SELECT o.id, u.value FROM orders o JOIN users u ON o.id = u.id")
print("join columns:", joined["columns"], "rows:", joined["rows"])
