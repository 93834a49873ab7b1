import os, zipfile

with zipfile.ZipFile("/mnt/data/bundle.zip", "w", compression=zipfile.ZIP_DEFLATED) as z:
    for root, dirs, files in os.walk("/mnt/data"):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".zip"):
                continue
            path = os.path.join(root, name)
            z.write(path, os.path.relpath(path, "/mnt/data"))
    z.writestr("generated/hello.txt", "hello from the program\n")
with zipfile.ZipFile("/mnt/data/bundle.zip") as z:
    print(sorted(z.namelist()))
    info = z.getinfo("sales.csv")
    print(info.file_size, info.date_time[0] >= 1980, z.testzip())
    z.extractall("/mnt/data/extracted")
for root, dirs, files in os.walk("/mnt/data/extracted"):
    dirs.sort()
    print(os.path.relpath(root, "/mnt/data"), sorted(files))
print(open("/mnt/data/extracted/generated/hello.txt").read(), end="")
print(open("/mnt/data/extracted/sales.csv").read() == open("/mnt/data/sales.csv").read())
shutil_archive = __import__("shutil").make_archive("/mnt/data/notes_archive", "zip", "/mnt/data/notes")
print(os.path.basename(shutil_archive), zipfile.ZipFile(shutil_archive).namelist())
