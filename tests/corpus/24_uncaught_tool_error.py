# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
# Ends with an uncaught ToolError raised inside a helper function.
import json


def load_metrics(table):
    res = run_sql(sql=f"select id, value from {table}")
    return [row[1] for row in res["rows"]]


def summarize(tables):
    out = {}
    for t in tables:
        vals = load_metrics(t)
        out[t] = {"n": len(vals), "max": max(vals)}
        print(t, json.dumps(out[t], sort_keys=True))
    return out


summarize(["cpu", "mem", "disk; DROP TABLE audit", "net"])
print("never printed")
