import io, os, tarfile

with tarfile.open("/mnt/data/data.tar.gz", "w:gz") as t:
    t.add("/mnt/data/data", arcname="data")
    t.add("/mnt/data/config.json", arcname="config.json")
    payload = b"added from memory\n"
    info = tarfile.TarInfo("memory/note.txt")
    info.size = len(payload)
    info.mtime = 1700000000
    t.addfile(info, io.BytesIO(payload))
with tarfile.open("/mnt/data/data.tar.gz") as t:
    for member in sorted(t.getmembers(), key=lambda m: m.name):
        print(member.name, member.isdir(), member.size if member.isfile() else "-")
    # CPython before 3.11.4 has no extraction filters.
    t.extractall("/mnt/data/unpacked", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
print(sorted(os.listdir("/mnt/data/unpacked")))
print(open("/mnt/data/unpacked/memory/note.txt").read(), end="")
print(os.path.getmtime("/mnt/data/unpacked/memory/note.txt"))
with tarfile.open("/mnt/data/plain.tar", "w") as t:
    t.add("/mnt/data/notes/readme.md", arcname="readme.md")
print(tarfile.is_tarfile("/mnt/data/plain.tar"), tarfile.open("/mnt/data/plain.tar").getnames())
