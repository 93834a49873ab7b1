from pathlib import Path

root = Path("/mnt/data")
(root / "reports" / "2024" / "q1").mkdir(parents=True, exist_ok=True)
marker = root / "reports" / "done.flag"
marker.touch()
marker.touch(exist_ok=True)
print(marker.exists(), marker.stat().st_size, marker.is_file())
try:
    marker.touch(exist_ok=False)
except FileExistsError as e:
    print("FileExistsError", e.errno)
(root / "reports" / "2024" / "q1" / "data.txt").write_text("q1 data\n")
(root / "reports" / "2024" / "blob.bin").write_bytes(bytes(range(10)))
print(sorted(p.relative_to(root).as_posix() for p in root.rglob("*.txt")))
print(sorted(p.name for p in (root / "reports").iterdir()))
print(sorted(p.name for p in root.glob("reports/*/*")))
readme = root / "notes" / "readme.md"
print(readme.read_text().splitlines()[0], readme.suffix, readme.with_suffix(".txt").name)
readme.unlink()
print((root / "notes").is_dir(), list((root / "notes").iterdir()))
(root / "reports" / "done.flag").rename(root / "reports" / "finished.flag")
(root / "reports" / "2024" / "blob.bin").replace(root / "blob.bin")
print((root / "blob.bin").read_bytes()[:4], (root / "reports" / "done.flag").exists())
(root / "ghost.txt").unlink(missing_ok=True)
(root / "notes").rmdir()
print((root / "notes").exists(), sorted(p.name for p in root.iterdir()))
print(Path.cwd(), Path("relative.txt").resolve())
Path("relative.txt").write_text("relative to the working directory")
print((root / "relative.txt").read_text())
