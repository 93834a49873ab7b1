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
