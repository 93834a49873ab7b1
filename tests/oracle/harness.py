"""The CPython 3.11 oracle: runs a program exactly as a baton child would
(same rewrite, same runtime shim, same clock, same entropy stream), with tool
answers computed in-process by `answers.answer`, or taken from a table.

Reads one JSON object on stdin:
  {"program": <the JSON `baton program` prints>, "seed": "<64 hex>",
   "wall0": float, "step": float,
   "answer_table": optional [{"ok": bool, "value": any, "message": str}...]}
With a table, the n-th call of the run (counting from 0 over all rounds)
gets entry n modulo its length (the differential fuzzer's answers).
Writes one JSON object on stdout:
  {"stdout", "stderr", "error" (null when completed),
   "rounds": [[{"tool", "input" (JSON text), "ok", "payload"}...]...]}

The fake `_baton` below mirrors src/vm/host.rs and src/vm/bridge.rs: keep
them in step.
"""

import sys

sys.modules["_datetime"] = None  # the pure-Python datetime reads time.time()

import os
import json
import time
import types
import hashlib

os.environ["TZ"] = "UTC"
time.tzset()

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import answers  # noqa: E402


def _plain(value, depth):
    if depth > 100:
        return False
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, int):
        return -(1 << 63) <= value < (1 << 64)
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


class FakeBaton(types.ModuleType):
    def __init__(self, seed, wall0, step, table=None):
        super().__init__("_baton")
        self.table = table
        self.calls = 0
        self.seed = seed
        self.counter = 0
        self.pool = b""
        self.wall0, self.step = wall0, step
        self.base = (wall0, 1000.0)
        self.reads = 0
        self.slept = 0.0
        self.out = []
        self.err = []
        self.rounds = []
        self.files = []

    def register_exceptions(self, *types_):
        pass

    def write(self, fd, text):
        (self.err if fd == 2 else self.out).append(text)

    def clock(self, kind):
        self.reads += 1
        return self.base[0 if kind == 0 else 1] + self.reads * 1e-6 + self.slept

    def sleep(self, secs):
        self.slept += max(0.0, float(secs))

    def compile(self, compile_fn, source, filename, flags):
        # CPython's compile does not panic: nothing to guard.
        return compile_fn(source, filename, "exec", flags, True)

    def dumps(self, value):
        # Mirrors src/vm/to_json.rs: plain values only, else None.
        if not _plain(value, 0):
            return None
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def workspace(self):
        return []

    def produced(self, name, data):
        self.files.append((name, bytes(data)))

    def entropy(self, n):
        n = min(int(n), 1 << 20)
        while len(self.pool) < n:
            block = hashlib.sha256(self.seed + self.counter.to_bytes(8, "little")).digest()
            self.counter += 1
            self.pool += block
        out, self.pool = self.pool[:n], self.pool[n:]
        return out

    def answer(self, tool, arguments):
        if self.table is None:
            return answers.answer(tool, arguments)
        entry = self.table[self.calls % len(self.table)]
        self.calls += 1
        return (True, entry["value"]) if entry["ok"] else (False, entry["message"])

    def pause(self, sites, tools, inputs, lines, frame):
        log, results = [], []
        for tool, text in zip(tools, inputs):
            ok, value = self.answer(tool, json.loads(text))
            payload = json.dumps(value) if ok else value
            log.append({"tool": tool, "input": text, "ok": ok, "payload": payload})
            results.append((ok, payload))
        self.rounds.append(log)
        k = len(self.rounds)
        seen = lambda start: start + self.reads * 1e-6 + self.slept
        self.base = (max(self.wall0 + self.step * k, seen(self.base[0])),
                     max(1000.0 + self.step * k, seen(self.base[1])))
        self.reads = 0
        self.slept = 0.0
        return results


def main():
    request = json.load(sys.stdin)
    real_stdout = sys.stdout
    fake = FakeBaton(bytes.fromhex(request["seed"]), request["wall0"], request["step"],
                     request.get("answer_table"))
    sys.modules["_baton"] = fake
    import json as _json, re, datetime, math, statistics, random, collections  # noqa: F401
    import itertools, functools, string, textwrap, decimal, fractions, heapq  # noqa: F401
    import bisect, dataclasses, enum, typing, asyncio, base64, hashlib, uuid  # noqa: F401
    import copy, pprint  # noqa: F401
    # Imported lazily by the stdlib (datetime.strptime): import them before
    # the runtime's fence takes the raw posix functions importlib uses.
    import _strptime, calendar, locale, string, textwrap  # noqa: F401
    source = open(os.path.join(ROOT, "stdlib_shims", "baton_runtime.py")).read()
    runtime = types.ModuleType("baton_runtime")
    runtime.__file__ = "<baton_runtime>"
    sys.modules["baton_runtime"] = runtime
    exec(compile(source, "<baton_runtime>", "exec"), runtime.__dict__)
    runtime.install()
    # The zygote's warm-up reads the clock and entropy with fixed values;
    # a child then starts from the execution's own.
    fake.reads, fake.slept = 0, 0.0
    error = runtime.run(json.dumps(request["program"]))
    sys.stdout = real_stdout
    json.dump({
        "stdout": "".join(fake.out),
        "stderr": "".join(fake.err),
        "error": error,
        "rounds": fake.rounds,
    }, real_stdout)


if __name__ == "__main__":
    main()
