"""The CPython 3.11 oracle, in two modes, with tool answers computed
in-process by `answers.answer`, or taken from a table.

- "native" (the default): the user's source as written, run by CPython's
  own compiler and asyncio, every tool an `async def`-style coroutine
  function whose call is sent when the coroutine is awaited; the calls
  pending when no task can run are one round. No rewrite and none of
  baton's call machinery: this is what CPython does with the program.
  The runtime shim still provides the clock, entropy, captured output, the
  fence, the workspace and the report, so only the call semantics differ.
- "runtime": the program exactly as a baton child runs it (same rewrite,
  same runtime shim), for programs that use baton's extensions (calls
  without `await`), which CPython cannot run.

Reads one JSON object on stdin:
  {"program": <the JSON `baton program` prints>, "seed": "<64 hex>",
   "wall0": float, "step": float, "mode": optional "native" | "runtime",
   "answer_table": optional [{"ok": bool, "value": any, "message": str}...]}
With a table, the n-th call of the run (counting from 0 over all rounds)
gets entry n modulo its length (the differential fuzzer's answers).
Writes one JSON object on stdout:
  {"stdout", "stderr", "error" (null when completed),
   "rounds": [[{"tool", "input" (JSON text), "ok", "payload"}...]...]}

A session: {"cells": [program...], "seeds": ["<64 hex>"...], "wall0",
"step"} runs the programs as cells of one session (one globals dict, one
event loop; native mode) and writes {"cells": [report...]}, one report
(the object above) per cell.

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
import unicodedata
import asyncio

os.environ["TZ"] = "UTC"
time.tzset()

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import answers  # noqa: E402


def _plain(value, depth):
    # Exact types, as src/vm/to_json.rs checks them natively: a tool call
    # (which stands for its value when the program looks at its class) is
    # not plain.
    kind = type(value)
    if depth > 100:
        return False
    if value is None or kind in (str, bool):
        return True
    if kind is int:
        return -(1 << 63) <= value < (1 << 64)
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if kind in (list, tuple):
        return all(_plain(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
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

    def compile(self, compile_fn, source, filename, mode, flags):
        # CPython's compile does not panic: nothing to guard.
        return compile_fn(source, filename, mode, flags, True)

    def name_error(self, name):
        # Mirrors src/workspace.rs `name_problem` (the child asks the Rust one).

        if not name or len(name.encode()) > 1024:
            return (36, "invalid file name %r: it must have 1 to 1024 bytes" % name)
        if any(unicodedata.category(c) == "Cc" or c == "\\" for c in name):
            return (22, "invalid file name %r: control characters and backslashes are not allowed" % name)
        if any(c in "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069" for c in name):
            return (22, "invalid file name %r: bidirectional text control characters are not allowed" % name)
        for part in name.split("/"):
            if len(part.encode()) > 255:
                return (36, "invalid file name %r: a path part is longer than 255 bytes" % name)
            if not part or set(unicodedata.normalize("NFKC", part)) <= {"."}:
                return (22, "invalid file name %r: empty path parts and parts made only of dots "
                            "(`.`, `..`, `．．`) are not allowed" % name)
            if set(unicodedata.normalize("NFKC", part)) & {"/", "\\"}:
                return (22, "invalid file name %r: characters that normalise to a slash or a "
                            "backslash (`／`, `＼`) are not allowed" % name)
        return None

    def dumps(self, value):
        # Mirrors src/vm/to_json.rs: plain values only, else None.
        if not _plain(value, 0):
            return None
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def preview(self, value, cap):
        # src/vm/to_json.rs gives the whole text up to `cap` bytes, else a
        # prefix of at least `cap`; the whole text reads the same to the
        # runtime, which shows only the first 200 characters.
        return self.dumps(value)

    def workspace(self):
        return []

    def produced(self, name, data):
        self.files.append((name, bytes(data)))

    def removed(self, name):
        pass

    def directory(self, name):
        pass

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

    def pause(self, sites, tools, inputs, lines, function, line, locals_):
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


class IdleSelector:
    """A selector with no I/O: when the loop has nothing to run, the calls
    pending in `NativeCalls` are one round; a timer advances the clock."""

    def __init__(self, calls):
        self.calls = calls

    def select(self, timeout=None):
        if timeout is not None and timeout <= 0:
            return []
        if self.calls.pending:
            self.calls.flush()
            return []
        if timeout is None:
            raise RuntimeError("the program awaits something that can never complete")
        time.sleep(timeout)
        return []

    def close(self):
        pass


class NativeCalls:
    """The tools of a native run: each a function that makes a real
    coroutine; awaiting it registers the call; a round is every call
    registered when no task can run."""

    def __init__(self, fake, runtime, program):
        self.fake, self.runtime = fake, runtime
        self.pending = []
        self.made = []
        self.max_input = program["limits"]["max_input_bytes"]

    def flush(self):
        batch, self.pending[:] = list(self.pending), []
        answers = self.fake.pause([0] * len(batch), [b[0] for b in batch], [b[1] for b in batch],
                                  [0] * len(batch), "", 0, "{}")
        for (_, _, future), answer in zip(batch, answers):
            if not future.done():
                future.set_result(answer)

    async def call(self, tool, text):
        future = asyncio.get_running_loop().create_future()
        entry = (tool, text, future)
        self.pending.append(entry)
        try:
            ok, payload = await future
        except BaseException:
            if entry in self.pending:
                self.pending.remove(entry)
            raise
        if ok:
            return json.loads(payload)
        raise self.runtime.ToolError(payload, tool)

    def function(self, tool):
        site = self.runtime.Site(-1, tool, "Deferred", 0, self.max_input)
        calls = self
        python = tool["python"]

        # The coroutine a call makes is one of an `async def` named as the
        # tool (its `__qualname__`, its `cr_code`).
        async def body(text):
            return await calls.call(tool["original"], text)

        if python.isidentifier():
            body.__code__ = body.__code__.replace(co_name=python, co_qualname=python)
        body.__name__ = body.__qualname__ = python

        def make(*args, **kwargs):
            text = site._input(args, kwargs)
            coroutine = body(text)
            # The caller: above `_CoroutineFunction.__call__`.
            calls.made.append((coroutine, sys._getframe(2).f_lineno, python))
            return coroutine

        return self.runtime.describe(_CoroutineFunction(make, body.__code__), tool)

    def never_awaited(self):
        """The runtime's warning for every coroutine never started."""
        import inspect
        for coroutine, line, name in self.made:
            if inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED:
                coroutine.close()
                sys.stderr.write("%s:%d: RuntimeWarning: coroutine '%s' was never awaited (the tool was not called)\n"
                                 % (self.runtime._user_files[-1], line, name))
        self.made = []


class _CoroutineFunction:
    """A tool as CPython 3.11's `inspect` and `asyncio` see an `async def`
    (its `__code__` is one: `inspect.iscoroutinefunction` is true), whose
    call binds its arguments at once, as the signature of a real one does,
    and makes the coroutine."""

    def __init__(self, make, code):
        self._make = make
        self.__code__ = code
        self.__defaults__ = None
        self.__kwdefaults__ = None
        self.__annotations__ = {}

    def __call__(self, *args, **kwargs):
        return self._make(*args, **kwargs)


def _loop_class(calls):
    """An asyncio loop with no I/O whose idle turns send `calls`' round."""
    import asyncio.base_events

    class Loop(asyncio.base_events.BaseEventLoop):
        def __init__(self):
            super().__init__()
            self._selector = IdleSelector(calls)

        def _process_events(self, event_list):
            pass

        def _write_to_self(self):
            pass

    class Policy(asyncio.DefaultEventLoopPolicy):
        _loop_factory = Loop

    asyncio.set_event_loop_policy(Policy())
    return Loop


def _native_bindings(runtime, calls, program):
    """What a program finds bound: its tools as coroutine functions, the
    `tools` namespace, `ToolError` (no site list: nothing is rewritten)."""
    funcs = {t["python"]: calls.function(t) for t in program["tools"]}
    bound = dict(funcs)
    if "tools" not in funcs:
        bound["tools"] = runtime._Tools(funcs)
    bound["ToolError"] = bound["ToolExecutionError"] = runtime.ToolError
    return bound


def _start(runtime, fake, program):
    """The process state every program (or a session's first cell) starts
    from: streams, seed, argv, limits, an empty workspace; its globals."""
    sys.stdout = runtime._Stream(1, "<stdout>")
    sys.stderr = runtime._Stream(2, "<stderr>")
    runtime._reseed()
    sys.argv = ["main.py"] + program["argv"]
    limits = program["limits"]
    runtime._recursion_cap = limits["recursion_cap"]
    runtime._calls_per_round = limits["calls_per_round"]
    runtime._WS.reset(fake.workspace(), limits["workspace_bytes"], limits["workspace_files"])
    g = {"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None}
    g.update(runtime.PRE_IMPORTED)
    return g


def _run_source(runtime, calls, source, filename, g, loop):
    """Compiles `source` with top-level await and runs it in `g` (on `loop`
    when it awaits); the error line, or None."""
    runtime.linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = runtime._real_compile(source, filename, "exec", runtime.PyCF_ALLOW_TOP_LEVEL_AWAIT, True)
        if code.co_flags & runtime.CO_COROUTINE:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(eval(code, g))
        else:
            exec(code, g)
    except SystemExit as e:
        calls.never_awaited()
        return None if e.code in (None, 0) else "SystemExit: %s" % (e.code,)
    except BaseException as e:
        calls.never_awaited()
        runtime._report(e)
        return failure_text(runtime._failure(e))
    calls.never_awaited()
    runtime._WS.finish()
    return None


def run_native(runtime, fake, program):
    """Runs the program's own source under CPython with coroutine tools."""
    import warnings

    warnings.simplefilter("ignore", RuntimeWarning)
    calls = NativeCalls(fake, runtime, program)
    loop_class = _loop_class(calls)
    g = _start(runtime, fake, program)
    g.update(_native_bindings(runtime, calls, program))
    return _run_source(runtime, calls, program["original"], runtime.FILENAME, g, loop_class())


def run_cells(runtime, fake, programs, seeds):
    """A session: each program a cell, run in order in one globals dict on
    one event loop, as `python -m asyncio` would; each cell with its own
    seed, output and rounds, and tools bound again before it as baton binds
    them (`bind_cell`). Returns one report per cell."""
    import warnings

    warnings.simplefilter("ignore", RuntimeWarning)
    calls = NativeCalls(fake, runtime, programs[0])
    loop = _loop_class(calls)()
    g = _start(runtime, fake, programs[0])
    reports = []
    for number, (program, seed) in enumerate(zip(programs, seeds), 1):
        fake.out, fake.err, fake.rounds = [], [], []
        fake.seed, fake.counter, fake.pool = bytes.fromhex(seed), 0, b""
        sys.stdout = runtime._Stream(1, "<stdout>")
        sys.stderr = runtime._Stream(2, "<stderr>")
        runtime._reseed()
        filename = "<cell %d>" % number
        bound = _native_bindings(runtime, calls, program)
        if number == 1:
            runtime._user_files[:] = [filename]
            g.update(bound)
            runtime._injected.clear()
            runtime._injected.update(g)
        else:
            runtime._user_files.append(filename)
            runtime.bind_cell(g, bound)
        error = _run_source(runtime, calls, program["original"], filename, g, loop)
        reports.append({"stdout": "".join(fake.out), "stderr": "".join(fake.err),
                        "error": error, "rounds": fake.rounds})
    return reports


def failure_text(failure):
    """The error line of the runtime's `(kind, line)` failure (None when it
    completed); a kind without a line (memory) stands for itself."""
    if failure is None:
        return None
    kind, line = failure
    return line or kind


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
    import shutil, tempfile, zipfile, tarfile, glob, fnmatch, pathlib, csv, gzip  # noqa: F401
    import concurrent.futures.thread  # noqa: F401
    for name in ("baton_workspace", "baton_contract", "baton_runtime"):
        source = open(os.path.join(ROOT, "stdlib_shims", name + ".py")).read()
        module = types.ModuleType(name)
        module.__file__ = "<%s>" % name
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    runtime = sys.modules["baton_runtime"]
    runtime.install()
    # The zygote's warm-up reads the clock and entropy with fixed values;
    # a child then starts from the execution's own.
    fake.reads, fake.slept = 0, 0.0
    if "cells" in request:
        reports = run_cells(runtime, fake, request["cells"], request["seeds"])
        sys.stdout = real_stdout
        json.dump({"cells": reports}, real_stdout)
        return
    if request.get("mode", "native") == "native":
        error = run_native(runtime, fake, request["program"])
    else:
        error = failure_text(runtime.run(json.dumps(request["program"])))
    sys.stdout = real_stdout
    json.dump({
        "stdout": "".join(fake.out),
        "stderr": "".join(fake.err),
        "error": error,
        "rounds": fake.rounds,
    }, real_stdout)


if __name__ == "__main__":
    main()
