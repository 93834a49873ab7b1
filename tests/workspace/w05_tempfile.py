import os, tempfile

work = "/mnt/data/tmpwork"
os.makedirs(work)
fd, path = tempfile.mkstemp(suffix=".txt", prefix="scratch_", dir=work)
os.write(fd, b"first line\n")
os.close(fd)
name = os.path.basename(path)
print(name.startswith("scratch_"), name.endswith(".txt"), open(path).read(), end="")
os.remove(path)
with tempfile.NamedTemporaryFile("w+", dir=work, suffix=".csv", delete=True) as f:
    f.write("a,b\n1,2\n")
    f.flush()
    f.seek(0)
    print(f.read().splitlines(), os.path.exists(f.name))
print(os.listdir(work))
with tempfile.TemporaryDirectory(dir=work) as d:
    with open(os.path.join(d, "inner.txt"), "w") as f:
        f.write("inner")
    print(os.listdir(d), os.path.isdir(d))
print(os.listdir(work))
with tempfile.TemporaryFile(dir=work) as f:
    f.write(b"anonymous")
    f.seek(0)
    print(f.read(), os.listdir(work))
with tempfile.NamedTemporaryFile("w", dir=work, suffix=".keep", delete=False) as f:
    f.write("kept")
os.rename(f.name, os.path.join(work, "kept.txt"))
print(sorted(os.listdir(work)), open(os.path.join(work, "kept.txt")).read())
with tempfile.SpooledTemporaryFile(max_size=10, dir=work) as f:
    f.write(b"x" * 50)
    f.seek(0)
    print(len(f.read()))
