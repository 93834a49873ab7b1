# The workspace looks like a file system from the top.
import os
import pathlib
os.makedirs("/mnt/data", exist_ok=True)
pathlib.Path("/mnt/data").mkdir(parents=True, exist_ok=True)
print(os.path.exists("/mnt/data"), os.path.isdir("/mnt"), os.path.isdir("/"))
print(os.listdir("/mnt"), os.listdir("/"))
os.makedirs("/mnt/data/reports/2026", exist_ok=True)
pathlib.Path("/mnt/data/reports/2026/q1.json").write_text(json.dumps({"ok": True}))
print(sorted(os.listdir("/mnt/data/reports")), os.path.getsize("/mnt/data/reports/2026/q1.json"))
for bad in ["/etc/passwd", "/mnt/other", "/tmp/x"]:
    try:
        open(bad, "w")
    except PermissionError as e:
        print("refused", bad, e.errno)
try:
    os.mkdir("/mnt")
except FileExistsError as e:
    print("exists", e.errno)
for name in ["a\tb.txt", "back\\slash.txt", "．．", "evil\u202egnp.txt"]:
    try:
        open("/mnt/data/" + name, "w")
    except OSError as e:
        print("refused name", repr(name), e.errno)
