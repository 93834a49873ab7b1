import os, time

with open("/mnt/data/first.txt", "w") as f:
    f.write("1")
with open("/mnt/data/second.txt", "w") as f:
    f.write("2")
first, second = os.path.getmtime("/mnt/data/first.txt"), os.path.getmtime("/mnt/data/second.txt")
print(second >= first, first > 1_000_000_000, abs(first - time.time()) < 3600)
uploaded = os.path.getmtime("/mnt/data/sales.csv")
print(uploaded <= first, time.localtime(uploaded).tm_year >= 2020)
before = os.stat("/mnt/data/first.txt").st_mtime
time.sleep(0.05)  # past the file system's timestamp granularity
with open("/mnt/data/first.txt", "a") as f:
    f.write("more")
print(os.stat("/mnt/data/first.txt").st_mtime >= before)
st = os.stat("/mnt/data/first.txt")
print(st.st_mtime_ns // 1_000_000_000 == int(st.st_mtime), st.st_size, st.st_nlink)
newest = max(os.listdir("/mnt/data"), key=lambda n: (os.path.getmtime(os.path.join("/mnt/data", n)), n))
print(newest)
# copy2 copies times through os.utime(ns=...): they must round-trip exactly,
# whatever the clock's fraction of a second.
import shutil
same = True
for i in range(40):
    path = "/mnt/data/t%d.txt" % i
    with open(path, "w") as f:
        f.write("x")
    time.sleep(0.0007)
    shutil.copy2(path, path + ".copy")
    a, b = os.stat(path), os.stat(path + ".copy")
    same = same and a.st_mtime == b.st_mtime and a.st_mtime_ns == b.st_mtime_ns
    os.remove(path)
    os.remove(path + ".copy")
print("copy2 keeps times exactly:", same)
