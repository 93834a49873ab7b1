import os, shutil

def attempt(label, action):
    try:
        action()
        print(label, "ok")
    except OSError as e:
        print(label, type(e).__name__, e.errno, e.strerror)

attempt("open missing", lambda: open("/mnt/data/missing.txt"))
attempt("open dir", lambda: open("/mnt/data/notes"))
attempt("write dir", lambda: open("/mnt/data/notes", "w"))
attempt("mkdir existing", lambda: os.mkdir("/mnt/data/notes"))
attempt("mkdir no parent", lambda: os.mkdir("/mnt/data/a/b"))
attempt("rmdir non-empty", lambda: os.rmdir("/mnt/data/notes"))
attempt("remove dir", lambda: os.remove("/mnt/data/notes"))
attempt("listdir file", lambda: os.listdir("/mnt/data/sales.csv"))
attempt("file as dir", lambda: open("/mnt/data/sales.csv/x"))
attempt("rename into itself", lambda: os.rename("/mnt/data/data", "/mnt/data/data/raw/inner"))
attempt("rename missing", lambda: os.rename("/mnt/data/nothing", "/mnt/data/other"))
attempt("stat missing", lambda: os.stat("/mnt/data/nothing"))
attempt("rmtree missing", lambda: shutil.rmtree("/mnt/data/nothing"))
attempt("copy missing", lambda: shutil.copy("/mnt/data/nothing", "/mnt/data/x"))
attempt("file over dir", lambda: os.rename("/mnt/data/sales.csv", "/mnt/data/notes"))
os.makedirs("/mnt/data/empty")
attempt("dir over empty dir", lambda: os.rename("/mnt/data/data", "/mnt/data/empty"))
print(sorted(os.listdir("/mnt/data")), sorted(os.listdir("/mnt/data/empty")))
attempt("makedirs exists", lambda: os.makedirs("/mnt/data/empty"))
attempt("makedirs exist_ok", lambda: os.makedirs("/mnt/data/empty", exist_ok=True))
attempt("read only write", lambda: open("/mnt/data/sales.csv").write("x"))
