import os, stat

path = "/mnt/data/raw.bin"
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o640)
print(os.write(fd, b"hello world"), os.lseek(fd, 0, os.SEEK_CUR))
os.lseek(fd, 6, os.SEEK_SET)
print(os.read(fd, 5), os.read(fd, 5))
os.ftruncate(fd, 5)
print(os.fstat(fd).st_size, stat.S_ISREG(os.fstat(fd).st_mode))
os.close(fd)
print(oct(stat.S_IMODE(os.stat(path).st_mode)))
os.chmod(path, 0o600)
print(oct(stat.S_IMODE(os.stat(path).st_mode)))
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"!!")
os.close(fd)
print(open(path, "rb").read())
try:
    os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
except FileExistsError as e:
    print("exists:", e.errno, e.strerror)
fd = os.open("/mnt/data/unlinked.txt", os.O_RDWR | os.O_CREAT)
os.unlink("/mnt/data/unlinked.txt")
os.write(fd, b"still here")
os.lseek(fd, 0, 0)
print(os.read(fd, 100), os.path.exists("/mnt/data/unlinked.txt"))
os.close(fd)
with os.fdopen(os.open("/mnt/data/fdopen.txt", os.O_WRONLY | os.O_CREAT), "w") as f:
    f.write("via fdopen\n")
print(open("/mnt/data/fdopen.txt").read(), end="")
os.utime("/mnt/data/fdopen.txt", (1600000000, 1600000000))
print(os.stat("/mnt/data/fdopen.txt").st_mtime, os.path.getmtime("/mnt/data/fdopen.txt"))
print(os.access("/mnt/data/fdopen.txt", os.R_OK | os.W_OK), os.access("/mnt/data/none", os.F_OK))
os.truncate("/mnt/data/fdopen.txt", 3)
print(open("/mnt/data/fdopen.txt").read())
with open("/mnt/data/modes.txt", "w") as f:
    f.write("abc")
with open("/mnt/data/modes.txt", "a") as f:
    f.write("def")
with open("/mnt/data/modes.txt", "r+") as f:
    f.seek(1)
    f.write("X")
    f.seek(0)
    print(f.read(), f.tell())
with open("/mnt/data/modes.txt", "rb") as f:
    print(f.read(2), f.tell(), f.seek(-1, 2), f.read())
try:
    open("/mnt/data/modes.txt", "x")
except FileExistsError as e:
    print("x mode:", e.errno)
open("/mnt/data/dropped.txt", "w").write("written without close")
print(open("/mnt/data/dropped.txt").read())
for root, dirs, files in os.walk("/mnt/data"):
    dirs.sort()
    print(root, sorted(files))
