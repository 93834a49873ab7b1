#!/usr/bin/env python3
"""What making a small write durable costs on this machine: 100 writes of
3 KB, each followed by `fdatasync`, three ways (appending to a growing
file, as the write-ahead log does; overwriting blocks written and synced
before; `O_DSYNC` writes over such blocks), back to back and 30 ms apart.
Prints the median of each, in µs.

Usage: python3 benches/fsync_cost.py [directory] (standard library only;
the directory defaults to the current one: give the disk baton's data is on).
"""

import os
import statistics
import sys
import time

WRITES = 100
RECORD = b"x" * 3000


def measure(directory, way, gap):
    path = os.path.join(directory, "baton-fsync-cost-" + way)
    flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | (os.O_DSYNC if way == "dsync" else 0)
    fd = os.open(path, flags)
    try:
        if way in ("overwrite", "dsync"):
            os.write(fd, b"\0" * (WRITES * 4096 + 8192))
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
        times = []
        for _ in range(WRITES):
            time.sleep(gap)
            began = time.perf_counter()
            os.write(fd, RECORD)
            if way != "dsync":
                os.fdatasync(fd)
            times.append((time.perf_counter() - began) * 1e6)
        return round(statistics.median(times))
    finally:
        os.close(fd)
        os.unlink(path)


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "."
    print("| gap | append + fdatasync | overwrite + fdatasync | O_DSYNC overwrite |")
    print("|---|---|---|---|")
    for gap in (0.0, 0.03):
        row = [measure(directory, way, gap) for way in ("append", "overwrite", "dsync")]
        print(f"| {gap * 1000:.0f} ms | " + " | ".join(f"{t} µs" for t in row) + " |")


if __name__ == "__main__":
    main()
