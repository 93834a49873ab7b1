import os, shutil

shutil.copytree("/mnt/data/data", "/mnt/data/backup")
shutil.copy("/mnt/data/sales.csv", "/mnt/data/backup/sales_copy.csv")
shutil.copy2("/mnt/data/sales.csv", "/mnt/data/backup/sales_copy2.csv")
a, b = os.stat("/mnt/data/sales.csv"), os.stat("/mnt/data/backup/sales_copy2.csv")
print("copy2 keeps mtime:", a.st_mtime == b.st_mtime, "size:", a.st_size == b.st_size)
for root, dirs, files in os.walk("/mnt/data/backup"):
    dirs.sort()
    print(root, sorted(files))
shutil.move("/mnt/data/backup/raw", "/mnt/data/moved_raw")
print(sorted(os.listdir("/mnt/data/moved_raw")), os.path.exists("/mnt/data/backup/raw"))
shutil.move("/mnt/data/backup/sales_copy.csv", "/mnt/data/moved_raw")
print(sorted(os.listdir("/mnt/data/moved_raw")))
shutil.rmtree("/mnt/data/backup")
print(os.path.exists("/mnt/data/backup"))
usage = shutil.disk_usage("/mnt/data")
print(usage.used <= usage.total, usage.free <= usage.total)
with open("/mnt/data/moved_raw/numbers.txt") as src, open("/mnt/data/numbers_copy.txt", "w") as dst:
    shutil.copyfileobj(src, dst)
print(open("/mnt/data/numbers_copy.txt").read().split())
