#!/usr/bin/env python3
"""baton side by side with a peer: Pydantic Monty 1.4 (`pydantic-monty==1.4.0`)
behind a Python standard-library HTTP server that makes every pause durable
before it answers. One command: `python3 benches/peer.py` (Python 3.11,
standard library only for the driver).

Usage:
    python3 benches/peer.py [--runs 3] [--iterations 200] [--seconds 3]
                            [--baton PATH] [--before PATH] [--echo PATH]
                            [--monty-workers N]
    (the peer server alone: <venv python> benches/peer.py serve-monty --port P --dir D [--workers N])

The script makes the peer's environment itself: a venv at
`target/bench-peer/venv` (from the repository root, found from this file's
path) with `pydantic-monty==1.4.0` pip-installed when it is not already, and
runs the peer server with that venv's python (this same file, subcommand
`serve-monty`). It starts three servers (four with `--before`), each once,
on fresh directories:

- **baton**: `--baton` (default `target/release/baton`) as `baton serve
  --listen 127.0.0.1:PORT --data-dir DIR --api-key bench-key`, defaults
  otherwise (pool of pre-forked children; a paused execution's child stays
  parked in memory and a continuation resumes it hot; its record is
  appended to the write-ahead log and `fdatasync`ed before the answer).
- **baton before** (only with `--before PATH`): a second baton binary, e.g.
  an earlier build, started exactly like baton (its own fresh data directory,
  its own port) and measured as a third system in every measure below,
  beside baton and monty. So "before" and "after" (`--baton`) are measured
  in the same run, under the same machine load, rather than in two runs
  compared afterwards. Without `--before` there is no such system: no
  extra columns, lines or summary entries.
- **monty**: the `serve-monty` server below, a `ThreadingHTTPServer`
  speaking the subset of baton's protocol used here with HTTP/1.1 keep-alive
  (`Content-Length` on every reply, `TCP_NODELAY`), in front of one
  `pydantic_monty.Monty` pool of `--monty-workers` (default: the CPU count)
  `monty` worker subprocesses, all kept warm (`min_processes` =
  `max_processes`). Monty 1.4's API, as used:
  - start (`POST /exec/programmatic {"code", "tools"}`): `pool.checkout()`
    a session, `session.feed_start(code, print_callback=CollectString())`,
    then drive: a `FunctionSnapshot` of a declared tool is recorded as a
    tool call (`input` = its keyword arguments, positional ones bound to the
    tool's `parameters` names) and answered `{'future': ...}`, so the
    call's coroutine stays pending, as a baton tool call's does; once every
    sandbox task is blocked, Monty hands back a `FutureSnapshot` (its
    `pending_call_ids`): that is the pause. Any other external call raises
    `NameError`, an OS call gets `resume_not_handled()`, an undefined name
    `NameError`. The pause is `snapshot.dump()` (bytes of the suspended
    worker) taken while the session is still checked out; the worker then
    goes back to the pool. The bytes, with a small JSON header (the
    pending call ids, the tools, the stdout so far), are written to a new
    file in `--dir` named by a fresh random token (`secrets.token_hex(16)`)
    and `os.fsync`ed **before** the answer (the directory itself was
    fsynced once when created; on ext4 a new file's fsync commits its
    directory entry in the same journal transaction). The same bytes are
    also kept in a dict in memory, as baton keeps recent records.
  - continue (`{"continuation_token", "tool_results"}`): the record from
    memory (from its file if not there, e.g. after a restart), a fresh
    `pool.checkout()`, `session.load_snapshot(bytes,
    print_callback=CollectString())` (re-announces the `FutureSnapshot`),
    `snapshot.resume({call_id: {'return_value': result}})` (an `is_error`
    result: `{'exc_type': 'RuntimeError', 'message': ...}`), drive to the
    next pause or the end as above, make the new pause durable, then
    delete the consumed file (a completion writes nothing, and a consumed
    token is gone: no retry of a continuation, unlike baton, which keeps
    the outcome). A request body is read whole by its `Content-Length`,
    with no size limit (a 1 MiB tool result is one such body), and a pause
    of any size is written whole (the snapshot grows with what the program
    holds: about 19 MiB at the 20th pause of measure 2). So every Monty continuation resumes **from
    the snapshot bytes** into a pooled worker (a cold resume by load, not a
    parked process), which is the design the brief asked for; baton
    resumes its parked child.
  - replies have baton's shapes: `tool_call_required` with
    `execution_id`, `session_id`, `continuation_token`, `tool_calls`
    (`id`, `name`, `input`); `completed` with `stdout` (all rounds'
    output, from the print callbacks), `stderr`, `files`; `error` with
    `error` (`Type: message`) and `stderr` (Monty's traceback).
  Both systems get **the same spelling** of each program (top-level
  `await`): Monty 1.4 runs top-level `await` of an external function when
  the host answers the call with a future, as above.
- **durable echo floor**: `--echo` (default
  `target/release/examples/durable_echo`, from `examples/durable_echo.rs`;
  build it with `cargo build --release --ignore-rust-version --example
  durable_echo`): baton's own HTTP stack answering `POST /echo` after
  appending the body to a file and `fdatasync`ing it. Skipped (and said so)
  when the binary is missing.

Each of `--runs` runs measures, in this order:

1. **Latency**, one request at a time, alternating the systems (baton
   before, when given, baton, monty, and the echo floor) request by
   request (the order rotates each iteration), 30 ms apart
   (`BATON_PEER_GAP_MS`), one keep-alive `http.client` connection per
   system, times taken by the client around request and reply. The 2-call
   program (`city = await get_city()`, `w = await get_weather(city=city)`,
   `print(city, w['t'])`; tools `get_city` and `get_weather` declared with
   JSON-schema `parameters`), answered `"SF"` then `{"t": 1}`; the
   completed `stdout` must be `SF 1\\n` on both. Three warm-up iterations,
   then `--iterations`: start → first pause (median and p99), continue →
   next pause (median), continue → completed (median). The echo floor gets
   one `POST /echo` per iteration whose body is byte for byte baton's
   (`--baton`'s) continue → next pause body of that iteration; its median
   is the "durable echo floor".
2. **A pause appends**: one execution per system, the systems one after
   the other (baton before, when given, baton, monty in odd runs; the
   reverse in even runs), on its keep-alive connection, each request
   30 ms (`BATON_PEER_GAP_MS`) after the previous reply, of

       rows = []
       for i in range(20):
           rows.append(await fetch(i=i))
       print(sum(len(r) for r in rows))

   (tool `fetch`, `parameters` `{"type": "object", "properties": {"i":
   {"type": "integer"}}, "required": ["i"]}`), every call answered with a
   JSON string of 1 MiB (`"x" * (1 << 20)`, so each continue's body is a
   little over 1 MiB: within baton's default `--body-limit` of 4 MiB, and
   the record at 19 MiB within its `--max-record-bytes` of 64 MiB). Pause
   k (k = 1 … 20) is the reply asking for call k, `fetch(i=k-1)`: the
   start produces pause 1, and the continue answering call k-1 (the one
   with `i = k-2`) produces pause k, when the program holds k-1 results
   (k-1 MiB). Each call's `input` must be `{"i": k-1}`, the 21st request
   must complete, and its `stdout` must be `20971520\\n` (20 * 1048576).
   For the continues that produce pauses 2, 11 and 20 (answering calls 1,
   10 and 19, i.e. `i` = 0, 9, 18; the program then holds 1, 10, 19 MiB):
   the client-side time of that request (ms, as in 1), and the bytes the
   server wrote for it: `write_bytes` and `wchar` of `/proc/<pid>/io` read
   right before the request is sent and right after its reply is read.
   For baton (and baton before) `<pid>` is the server process alone
   (`/proc/<pid>/io` counts all its threads, and the write-ahead log and
   large-value files are written by it; its zygote and children are not
   counted). For monty, the sum over the peer server's process tree (the
   server, which writes the snapshot files, and its `monty` workers, live
   at each reading; the server process alone is printed too, see below).
   `wchar` is the bytes passed to write(2), writev(2) and the like, to any
   file, pipe or socket (so for monty also the snapshot and result sent
   to a worker down its pipe, and a worker's dump sent back; send(2) and
   sendmsg(2) on a socket are not counted); `write_bytes` is the bytes of page
   cache the process dirtied (the kernel counts it when a page turns dirty,
   a page at a time, not when writeback reaches the disk, so a delayed
   writeback cannot move it to another window; a page dirtied again before
   writeback counts once, an append to a page already written back counts
   the page again), plus direct I/O. The filesystem's journal, written by
   a kernel thread, counts in neither. Both are reported, in MB (10^6
   bytes; 1 MiB = 1.05 MB).
3. **Throughput**: the 20-round loop (`for i in range(20): w = await
   get_weather(city=str(i)); total += w["temperature"]`, then
   `print(total)`; answered `{"temperature": i}`; the printed total must be
   190) with 1, 8 and 32 concurrent clients for `--seconds` each, the
   systems one after the other (baton before, when given, baton, monty in
   odd runs; the reverse in even runs). Each client is
   a separate process (`multiprocessing`, spawn) with its own keep-alive
   connection, running executions back to back without pause. All clients
   connect and run one warm-up execution, then start together (a barrier)
   and stop sending at `--seconds`; the window lasts until the last one's
   last reply. A **round** is a request that ran the program to its next
   pause or to its end (21 per execution). rounds/s = rounds of all
   clients / window. (After the window, each client drives its execution in
   flight to its end, unmeasured, so no paused executions pile up.)
4. **CPU per round at 32 clients**: machine-wide busy CPU time over the
   32-client window (`/proc/stat`, all CPUs: user + nice + system + irq +
   softirq + steal, i.e. total minus idle minus iowait, jiffies → s),
   minus the CPU time the client processes used in it (each reports its
   own `time.process_time()` delta) and the driver's own, divided by the
   window's rounds. Cross-check, per system: the CPU of the server's
   process tree (the server and every descendant: for baton its zygote
   and execution children, for Monty its `monty` workers), each
   `utime + stime + cutime + cstime` from `/proc/<pid>/stat` (so children
   reaped in the window count too) summed over the tree at the start and
   at the end of the window, divided by rounds. Except for baton's
   children (baton before's likewise, by its own group): baton's zygote ignores `SIGCHLD`, so the kernel reaps the
   execution children and their CPU reaches no `cutime`; baton's side is
   therefore its server process (`utime + stime + cutime + cstime`) plus
   the CPU counter of the control group baton makes for its zygote and
   children (`baton-<server pid>`: `cpuacct.usage` on cgroup v1,
   `cpu.stat` `usage_usec` on v2; it keeps the CPU of removed child groups),
   found from `/proc/<zygote>/cgroup`; the process tree where baton has no
   such group. Neither side counts kernel work done outside the processes
   (e.g. tearing down a child's namespaces in kernel workers, softirq time):
   the machine-wide figure does. Before each run's throughput windows, the
   machine's busy CPU over one idle second is printed too (other load on the
   machine would count in the machine-wide figure).

Then it prints a markdown table per run and one of the medians of the runs
(each number the median of the runs' numbers, each ratio the ratio of those
medians; columns baton | monty | ratio baton/monty, or with `--before`
baton before | baton | monty | baton / monty | baton / before), each followed
by the line "durable echo floor (median) X ms; baton continue → next pause
minus floor: Y ms" (with `--before`, then "; baton before's: Z ms"). The
rows of measure 2 are "1 MiB results: continue → pause 2 / 11 / 20, ms",
"1 MiB results: MB written (write_bytes) for pause 2 / 11 / 20" and "1 MiB
results: MB passed to write (wchar) for pause 2 / 11 / 20", three numbers a
system; their ratio cells are the pause-20 figures' ratio only ("R (pause
20)"). After those lines, one line per system: "<system>: pause 20 / pause
2: time X, bytes Y (wchar Z)", each a ratio to two decimals of that
system's figures (bytes: `write_bytes`), then the line "monty's server
process alone: MB written A / B / C, wchar D / E / F" (pauses 2 / 11 / 20).
Last, a summary from the medians table: under "baton, from the medians:"
(then "baton before, from the medians:", when given) the lines

    start p99 / own median: X
    CPU per round / monty's: X
    rounds/s at 32 clients / monty's: X
    continue → next pause / monty's: X
    continue → completed / monty's: X
    start → first pause / monty's: X

each X a ratio of medians to two decimals: the system's start → first pause
p99 over its own median, then its number over monty's (CPU per round: the
machine-wide figure at 32 clients; latencies: the medians).
Standard library only in the driver; the peer server imports
`pydantic_monty` from its venv.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / "target" / "bench-peer" / "venv"
MONTY_REQUIREMENT = "pydantic-monty==1.4.0"
MONTY_VERSION = "1.4.0"
GAP = float(os.environ.get("BATON_PEER_GAP_MS", "30")) / 1000
API_KEY = "bench-key"

TWO_CALL = "city = await get_city()\nw = await get_weather(city=city)\nprint(city, w['t'])\n"
LOOP = ('total = 0\nfor i in range(20):\n    w = await get_weather(city=str(i))\n'
        '    total += w["temperature"]\nprint(total)\n')
TOOLS = [
    {"name": "get_city", "description": "The user's city.",
     "parameters": {"type": "object", "properties": {}}},
    {"name": "get_weather", "description": "The weather in a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]}},
]
FETCH = ("rows = []\nfor i in range(20):\n    rows.append(await fetch(i=i))\n"
         "print(sum(len(r) for r in rows))\n")
FETCH_TOOLS = [
    {"name": "fetch", "description": "A large result.",
     "parameters": {"type": "object", "properties": {"i": {"type": "integer"}},
                    "required": ["i"]}},
]
BIG_RESULT = "x" * (1 << 20)
APPEND_PAUSES = (2, 11, 20)  # pause k: the reply asking for fetch(i=k-1)
KINDS = ["start → first pause", "continue → next pause", "continue → completed"]
SYSTEMS = ["baton", "monty"]  # with --before: ["before", "baton", "monty"]
LABELS = {"before": "baton before", "baton": "baton", "monty": "monty"}
BATONS = ("baton", "before")  # the systems that are baton binaries
CLIENT_COUNTS = [1, 8, 32]


# ---------------------------------------------------------------------------
# The peer server (runs under the venv's python)
# ---------------------------------------------------------------------------

def python_name(name):
    """A tool's Python name, by baton's first rules (`-` and spaces to `_`,
    anything else outside `[A-Za-z0-9_]` dropped)."""
    out = "".join("_" if c == "-" or c.isspace() else c for c in name)
    out = "".join(c for c in out if c.isascii() and (c.isalnum() or c == "_"))
    return "_" + out if out[:1].isdigit() else out


class MontyPeer:
    """The executions: Monty pool, snapshot directory, records in memory."""

    def __init__(self, pool, directory):
        import pydantic_monty
        self.m = pydantic_monty
        self.pool = pool
        self.directory = directory
        self.memory = {}
        self.in_flight = set()
        self.lock = threading.Lock()

    # -- durability --------------------------------------------------------

    def persist(self, token, record, blob):
        """Writes the pause to `<dir>/<token>` and fsyncs it; then keeps it
        in memory."""
        header = json.dumps(record).encode()
        data = struct.pack(">I", len(header)) + header + blob
        fd = os.open(os.path.join(self.directory, token),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        with self.lock:
            self.memory[token] = (record, blob)

    def load(self, token):
        """The pause of `token`: from memory, else from its file; None if unknown."""
        with self.lock:
            found = self.memory.pop(token, None)
        if found is not None:
            return found
        if not all(c in "0123456789abcdef" for c in token) or len(token) != 32:
            return None
        try:
            with open(os.path.join(self.directory, token), "rb") as f:
                data = f.read()
        except OSError:
            return None
        (length,) = struct.unpack(">I", data[:4])
        return json.loads(data[4:4 + length]), data[4 + length:]

    def forget(self, token):
        try:
            os.unlink(os.path.join(self.directory, token))
        except OSError:
            pass

    # -- running -----------------------------------------------------------

    def drive(self, record, snapshot):
        """Runs from `snapshot` (a session still checked out) to the next pause
        or the end. Returns ("pause", calls, blob) or ("completed", None, None)."""
        m = self.m
        calls = []
        while True:
            if isinstance(snapshot, m.MontyComplete):
                return "completed", None, None
            if isinstance(snapshot, m.FunctionSnapshot):
                if snapshot.is_os_function:
                    snapshot = snapshot.resume_not_handled()
                    continue
                tool = record["tools"].get(snapshot.function_name)
                if tool is None:
                    snapshot = snapshot.resume({
                        "exc_type": "NameError",
                        "message": f"name '{snapshot.function_name}' is not defined"})
                    continue
                original, names = tool
                arguments = dict(zip(names, snapshot.args))
                arguments.update(snapshot.kwargs)
                calls.append({"id": f"call_{snapshot.call_id}", "name": original,
                              "input": arguments, "monty_id": snapshot.call_id})
                # The call's coroutine stays pending: its value comes with the
                # continuation.
                snapshot = snapshot.resume({"future": ...})
                continue
            if isinstance(snapshot, m.FutureSnapshot):
                pending = set(snapshot.pending_call_ids)
                known = {c["monty_id"] for c in calls} | set(record.get("calls", {}).values())
                if not pending <= known:
                    raise RuntimeError(f"pending futures not announced: {pending - known}")
                return "pause", [c for c in calls if c["monty_id"] in pending], snapshot.dump()
            if isinstance(snapshot, m.NameLookupSnapshot):
                snapshot = snapshot.resume()  # NameError in the sandbox
                continue
            raise RuntimeError(f"unexpected snapshot {snapshot!r}")

    def answer(self, record, outcome, stdout):
        """Makes the reply of an outcome, persisting a pause first."""
        kind, calls, blob = outcome
        record["stdout"] += stdout
        base = {"execution_id": record["execution_id"], "session_id": record["session_id"]}
        if kind == "completed":
            return {"status": "completed", **base, "stdout": record["stdout"],
                    "stderr": "", "files": []}
        token = secrets.token_hex(16)
        record["calls"] = {c["id"]: c["monty_id"] for c in calls}
        self.persist(token, record, blob)
        return {"status": "tool_call_required", **base, "continuation_token": token,
                "tool_calls": [{"id": c["id"], "name": c["name"], "input": c["input"]}
                               for c in calls]}

    def failure(self, record, error, stdout):
        record["stdout"] += stdout
        display = getattr(error, "display", None)
        try:
            line = display("type-msg") if display else f"{type(error).__name__}: {error}"
            trace = display("traceback") if display else line
        except Exception:  # noqa: BLE001 - any rendering failure still answers
            line = trace = f"{type(error).__name__}: {error}"
        return {"status": "error", "execution_id": record["execution_id"],
                "session_id": record["session_id"], "error": line.splitlines()[-1] if line else "",
                "stdout": record["stdout"], "stderr": trace}

    def start(self, body):
        code = body.get("code")
        if not isinstance(code, str) or not code.strip():
            return 400, {"error": "code is required"}
        tools = {}
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                return 400, {"error": "a tool needs a name"}
            parameters = tool.get("parameters") or {}
            properties = list((parameters.get("properties") or {}).keys())
            required = parameters.get("required") or []
            order = [p for p in properties if p in required] + \
                    [p for p in properties if p not in required]
            tools[python_name(tool["name"])] = [tool["name"], order]
        record = {"execution_id": uuid.uuid4().hex,
                  "session_id": body.get("session_id") or secrets.token_urlsafe(16)[:21],
                  "tools": tools, "stdout": "", "calls": {}}
        out = self.m.CollectString()
        try:
            with self.pool.checkout() as session:
                snapshot = session.feed_start(code, print_callback=out)
                outcome = self.drive(record, snapshot)
        except self.m.MontyError as error:
            return 200, self.failure(record, error, out.output)
        return 200, self.answer(record, outcome, out.output)

    def resume(self, token, results):
        if not isinstance(token, str):
            return 400, {"error": "Invalid continuation token"}
        with self.lock:
            if token in self.in_flight:
                return 409, {"error": "continuation already in progress"}
            self.in_flight.add(token)
        try:
            found = self.load(token)
            if found is None:
                return 400, {"error": "Invalid continuation token"}
            record, blob = found
            if not isinstance(results, list):
                with self.lock:
                    self.memory[token] = found
                return 400, {"error": "tool_results is required with a continuation_token"}
            pending = record["calls"]
            given = [r.get("call_id") for r in results if isinstance(r, dict)]
            if len(given) != len(results) or sorted(given) != sorted(pending) \
                    or len(set(given)) != len(given):
                with self.lock:
                    self.memory[token] = found
                return 400, {"error": f"results must answer exactly the calls {sorted(pending)}"}
            answers = {}
            for r in results:
                if r.get("is_error"):
                    answers[pending[r["call_id"]]] = {
                        "exc_type": "RuntimeError",
                        "message": r.get("error_message") or "tool call failed"}
                else:
                    answers[pending[r["call_id"]]] = {"return_value": r.get("result")}
            out = self.m.CollectString()
            try:
                with self.pool.checkout() as session:
                    snapshot = session.load_snapshot(blob, print_callback=out)
                    snapshot = snapshot.resume(answers)
                    outcome = self.drive(record, snapshot)
            except self.m.MontyError as error:
                self.forget(token)
                return 200, self.failure(record, error, out.output)
            reply = self.answer(record, outcome, out.output)
            self.forget(token)
            return 200, reply
        finally:
            with self.lock:
                self.in_flight.discard(token)

    def handle(self, body):
        if body.get("continuation_token") is not None:
            return self.resume(body["continuation_token"], body.get("tool_results"))
        return self.start(body)


def serve_monty(argv):
    import http.server

    parser = argparse.ArgumentParser(prog="peer.py serve-monty")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    import pydantic_monty

    created = not os.path.isdir(args.dir)
    os.makedirs(args.dir, exist_ok=True)
    if created:  # the directory's own entry, and the directory, on disk
        for path in (args.dir, os.path.dirname(os.path.abspath(args.dir))):
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *_args):
            pass

        def reply(self, status, payload):
            data = json.dumps(payload).encode()
            head = (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
            self.wfile.write(head.encode() + data)  # one write: head and body

        def do_GET(self):
            if self.path == "/health":
                self.reply(200, {"status": "ok", "monty": pydantic_monty.__version__})
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/exec/programmatic":
                self.reply(404, {"error": "not found"})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self.reply(400, {"error": "the body is not JSON"})
                return
            if not isinstance(body, dict):
                self.reply(400, {"error": "the body must be a JSON object"})
                return
            try:
                status, payload = self.server.peer.handle(body)
            except Exception as error:  # noqa: BLE001 - a 500 that says why
                status, payload = 500, {"error": f"{type(error).__name__}: {error}"}
            self.reply(status, payload)

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    def stop(_signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with pydantic_monty.Monty(min_processes=args.workers, max_processes=args.workers) as pool:
        server = Server(("127.0.0.1", args.port), Handler)
        server.peer = MontyPeer(pool, args.dir)
        print(f"monty {pydantic_monty.__version__} peer on 127.0.0.1:{args.port}, "
              f"{args.workers} workers, snapshots in {args.dir}", file=sys.stderr, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------

def ensure_venv():
    """The venv's python, with pydantic-monty 1.4.0 installed in it."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"making the peer's venv at {VENV} ...", file=sys.stderr, flush=True)
        VENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    probe = subprocess.run(
        [str(python), "-c",
         "import importlib.metadata as m; print(m.version('pydantic-monty'))"],
        capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != MONTY_VERSION:
        print(f"installing {MONTY_REQUIREMENT} into {VENV} ...", file=sys.stderr, flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", MONTY_REQUIREMENT], check=True)
    return python


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no stderr)"


class StartFailed(Exception):
    pass


class Server:
    """A server process, its port, its stderr file, one keep-alive connection."""

    def __init__(self, name, command, port, scratch):
        self.name = name
        self.label = LABELS.get(name, name)
        self.port = port
        self.stderr_path = os.path.join(scratch, f"{name}.stderr")
        self.stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                        start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise StartFailed(f"{self.label} exited with {self.process.returncode} at start; "
                                  f"stderr tail:\n{tail(self.stderr_path)}")
            try:
                probe = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                probe.request("GET", "/health")
                ok = probe.getresponse().status == 200
                probe.close()
                if ok:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise StartFailed(f"{self.label} did not answer GET /health in 60 s; "
                                  f"stderr tail:\n{tail(self.stderr_path)}")
            time.sleep(0.1)
        self.reconnect()
        # baton's zygote ignores SIGCHLD, so the kernel reaps its children and
        # their CPU never reaches anyone's cutime: count them by the control
        # group baton puts the zygote and every child in, where there is one.
        zygote = zygote_of(self.process.pid) if name in BATONS else None
        self.cgroup = cgroup_cpu_file(zygote) if zygote else None

    def cpu_seconds(self):
        """CPU time of the server and everything it runs, s (see the docstring)."""
        if self.cgroup:
            return own_cpu_seconds(self.process.pid) + cgroup_cpu_seconds(self.cgroup)
        return tree_cpu_seconds(self.process.pid)

    def cpu_source(self):
        if self.cgroup:
            return f"server process + control group {os.path.dirname(self.cgroup[0])}"
        return "server process tree"

    def reconnect(self):
        """A fresh keep-alive connection: each measure starts on one, since a
        server may close a connection left idle during another system's
        measure (baton closes one idle past its header-read timeout)."""
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def post(self, path, body):
        """(status, raw reply, ms) of one POST of `body` (bytes)."""
        began = time.perf_counter()
        self.connection.request("POST", path, body,
                                {"x-api-key": API_KEY, "content-type": "application/json"})
        response = self.connection.getresponse()
        raw = response.read()
        return response.status, raw, (time.perf_counter() - began) * 1e3

    def post_json(self, path, body):
        status, raw, took = self.post(path, json.dumps(body).encode())
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = {"raw": raw[:500].decode(errors="replace")}
        if status != 200:
            raise RuntimeError(f"{self.label}: HTTP {status} for {path}: {reply}")
        return reply, took

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()


# -- CPU accounting ---------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds():
    """All CPUs' busy time since boot: total minus idle minus iowait."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / TICK


def own_cpu_seconds(pid):
    """utime + stime + cutime + cstime of one process (0 when gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / TICK


def children_of():
    """{parent pid: [child pids]} of every live process."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def zygote_of(pid):
    """The pid of baton's `zygote` child of `pid`, or None."""
    for child in children_of().get(pid, []):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"zygote" in f.read().split(b"\0"):
                    return child
        except OSError:
            continue
    return None


def cgroup_cpu_file(pid):
    """The CPU counter of the control group that holds the group of `pid`
    (baton's `baton-<server pid>`, holding `zygote` and every child's
    `c<pid>`): (path, "v1" | "v2"), or None when there is none."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            memberships = [line.rstrip("\n").split(":", 2) for line in f]
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    for _, controllers, path in memberships:
        if not path.endswith("/zygote"):
            continue
        group = path[:-len("/zygote")]
        for fields in mounts:
            fstype, options = fields[fields.index("-") + 1], fields[-1].split(",")
            if controllers == "" and fstype == "cgroup2":
                candidate, kind = f"{fields[4]}{group}/cpu.stat", "v2"
            elif "cpuacct" in controllers.split(",") and fstype == "cgroup" and "cpuacct" in options:
                candidate, kind = f"{fields[4]}{group}/cpuacct.usage", "v1"
            else:
                continue
            if fields[3] == "/" and os.path.exists(candidate):
                return candidate, kind
    return None


def cgroup_cpu_seconds(counter):
    path, kind = counter
    try:
        with open(path) as f:
            if kind == "v1":
                return int(f.read()) / 1e9
            for line in f:
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
    except (OSError, ValueError):
        pass
    return 0.0


def tree_cpu_seconds(root):
    """utime + stime + cutime + cstime of `root` and every live descendant."""
    children, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        cpu[pid] = sum(int(x) for x in fields[11:15])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / TICK


# -- bytes written ------------------------------------------------------------

def io_counters(pid):
    """(write_bytes, wchar) of one process from `/proc/<pid>/io` (all its
    threads, and the children it reaped); None when it is gone."""
    try:
        with open(f"/proc/{pid}/io") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields["write_bytes"]), int(fields["wchar"])


def tree_pids(root):
    """`root` and every live descendant."""
    children = children_of()
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def written(server):
    """{"all": (write_bytes, wchar), "own": (...)}: baton's server process
    (both the same), or monty's server process tree and its server alone."""
    pid = server.process.pid
    own = io_counters(pid)
    if own is None:
        raise RuntimeError(f"{server.label}: the server process is gone")
    if server.name in BATONS:
        return {"all": own, "own": own}
    total = [0, 0]
    for member in tree_pids(pid):
        counters = own if member == pid else io_counters(member)
        if counters is not None:
            total[0] += counters[0]
            total[1] += counters[1]
    return {"all": tuple(total), "own": own}


def measure_appends(server):
    """One execution of FETCH, every call answered with a 1 MiB string; for
    each pause k of APPEND_PAUSES, the continue that produced it:
    {k: (ms, write_bytes, wchar, own write_bytes, own wchar)}."""
    body = json.dumps({"code": FETCH, "tools": FETCH_TOOLS}).encode()
    server.reconnect()
    time.sleep(GAP)
    status, raw, _ = server.post("/exec/programmatic", body)
    reply = json.loads(raw)
    out = {}
    for pause in range(1, 21):  # `reply` is pause `pause`
        calls = reply.get("tool_calls") or []
        if status != 200 or reply.get("status") != "tool_call_required" or len(calls) != 1 \
                or calls[0].get("name") != "fetch" or calls[0].get("input") != {"i": pause - 1}:
            raise RuntimeError(f"{server.label}: expected pause {pause}, a call "
                               f"fetch(i={pause - 1}): HTTP {status}: {str(reply)[:500]}")
        body = json.dumps(continue_body(reply, BIG_RESULT)).encode()
        measured = pause + 1 in APPEND_PAUSES
        time.sleep(GAP)
        if measured:
            before = written(server)
        status, raw, took = server.post("/exec/programmatic", body)
        if measured:
            after = written(server)
            out[pause + 1] = (took,
                              after["all"][0] - before["all"][0],
                              after["all"][1] - before["all"][1],
                              after["own"][0] - before["own"][0],
                              after["own"][1] - before["own"][1])
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = {"raw": raw[:500].decode(errors="replace")}
    expected = f"{20 * (1 << 20)}\n"
    if status != 200 or reply.get("status") != "completed" or reply.get("stdout") != expected:
        raise RuntimeError(f"{server.label}: the 1 MiB program ended wrong (expected stdout "
                           f"{expected!r}): HTTP {status}: {str(reply)[:500]}")
    return out


# -- latency ----------------------------------------------------------------

def continue_body(reply, result):
    call = reply["tool_calls"][0]
    return {"continuation_token": reply["continuation_token"],
            "tool_results": [{"call_id": call["id"], "result": result}]}


def measure_latency(servers, systems, echo, iterations):
    """{system: {kind: [ms]}}, and the echo floor's [ms] (or None)."""
    times = {s: {k: [] for k in KINDS} for s in systems}
    floor = [] if echo else None
    for server in [servers[s] for s in systems] + ([echo] if echo else []):
        server.reconnect()
    rotation = systems + (["echo"] if echo else [])
    for iteration in range(iterations + 3):
        shift = iteration % len(rotation)
        order = rotation[shift:] + rotation[:shift]
        replies = {s: None for s in systems}
        for index, kind in enumerate(KINDS):
            bodies = {}
            for system in systems:
                if index == 0:
                    bodies[system] = {"code": TWO_CALL, "tools": TOOLS}
                else:
                    expected = "get_city" if index == 1 else "get_weather"
                    reply = replies[system]
                    if reply.get("status") != "tool_call_required" or \
                            reply["tool_calls"][0]["name"] != expected:
                        raise RuntimeError(f"{LABELS[system]}: expected a call to {expected}: {reply}")
                    bodies[system] = continue_body(reply, "SF" if index == 1 else {"t": 1})
            encoded = {s: json.dumps(b).encode() for s, b in bodies.items()}
            for system in order:
                if system == "echo":
                    if index != 1:
                        continue
                    time.sleep(GAP)
                    status, raw, took = echo.post("/echo", encoded["baton"])
                    if status != 200 or json.loads(raw) != {"ok": True}:
                        raise RuntimeError(f"echo: HTTP {status}: {raw[:200]!r}")
                    if iteration >= 3:
                        floor.append(took)
                    continue
                time.sleep(GAP)
                status, raw, took = servers[system].post("/exec/programmatic", encoded[system])
                reply = json.loads(raw)
                if status != 200 or reply.get("status") == "error":
                    raise RuntimeError(f"{LABELS[system]}: HTTP {status}: {reply}")
                replies[system] = reply
                if iteration >= 3:
                    times[system][kind].append(took)
        for system in systems:
            reply = replies[system]
            if reply.get("status") != "completed" or reply.get("stdout") != "SF 1\n":
                raise RuntimeError(f"{LABELS[system]}: the 2-call program ended wrong: {reply}")
    return times, floor


# -- throughput ---------------------------------------------------------------

def throughput_client(port, seconds, barrier, finished, results, index):
    """One client process: executions of LOOP back to back on one connection."""
    error = None
    rounds, cpu, elapsed = 0, 0.0, 0.0
    reply = None
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"x-api-key": API_KEY, "content-type": "application/json"}

    def step(previous):
        if previous is None or previous.get("status") == "completed":
            body = {"code": LOOP, "tools": TOOLS}
        else:
            call = previous["tool_calls"][0]
            body = {"continuation_token": previous["continuation_token"],
                    "tool_results": [{"call_id": call["id"],
                                      "result": {"temperature": int(call["input"]["city"])}}]}
        connection.request("POST", "/exec/programmatic", json.dumps(body), headers)
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {answer}")
        status = answer.get("status")
        if status == "completed":
            if answer.get("stdout") != "190\n":
                raise RuntimeError(f"wrong output: {answer}")
        elif status != "tool_call_required" or len(answer.get("tool_calls", [])) != 1:
            raise RuntimeError(f"unexpected reply: {answer}")
        return answer

    try:
        try:
            reply = step(None)  # warm-up: one whole execution
            while reply["status"] != "completed":
                reply = step(reply)
            reply = None
        finally:
            barrier.wait(timeout=300)
        cpu0, t0 = time.process_time(), time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            reply = step(reply)
            rounds += 1
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    except Exception as exc:  # noqa: BLE001 - reported to the driver
        error = f"client {index}: {type(exc).__name__}: {exc}"
    results.put((index, rounds, cpu, elapsed, error))
    try:
        finished.wait(timeout=300)
        while error is None and reply is not None and reply["status"] == "tool_call_required":
            reply = step(reply)  # finish the execution in flight, unmeasured
    except Exception:  # noqa: BLE001 - the window is already measured
        pass
    connection.close()


def measure_throughput(server, clients, seconds):
    """rounds/s, rounds, window (s), machine CPU minus clients (s), server tree CPU (s)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(clients + 1)
    finished = context.Barrier(clients + 1)
    results = context.Queue()
    processes = [context.Process(target=throughput_client,
                                 args=(server.port, seconds, barrier, finished, results, i),
                                 daemon=True)
                 for i in range(clients)]
    for process in processes:
        process.start()
    try:
        barrier.wait(timeout=300)
        busy0, tree0, own0 = machine_busy_seconds(), server.cpu_seconds(), \
            time.process_time()
        t0 = time.perf_counter()
        reports = [results.get(timeout=seconds + 300) for _ in range(clients)]
        window = time.perf_counter() - t0
        busy1, tree1, own1 = machine_busy_seconds(), server.cpu_seconds(), \
            time.process_time()
        finished.wait(timeout=300)
    except threading.BrokenBarrierError:
        raise RuntimeError(f"{server.label}: a client did not reach the start "
                           f"({clients} clients); stderr tail:\n{tail(server.stderr_path)}")
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    errors = [r[4] for r in reports if r[4]]
    if errors:
        raise RuntimeError(f"{server.label}: " + "; ".join(errors[:3]))
    rounds = sum(r[1] for r in reports)
    client_cpu = sum(r[2] for r in reports)
    return {"rate": rounds / window, "rounds": rounds, "window": window,
            "cpu": (busy1 - busy0) - client_cpu - (own1 - own0),
            "server_cpu": tree1 - tree0}


# -- reporting ----------------------------------------------------------------

def p99(values):
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 \
        else values[0]


def summarize(times, floor, throughput, appends, systems):
    """The numbers of one run."""
    out = {}
    for system in systems:
        for pause in APPEND_PAUSES:
            took, wb, wc, own_wb, own_wc = appends[system][pause]
            out[(system, f"append_ms{pause}")] = took
            out[(system, f"append_wb{pause}")] = wb / 1e6
            out[(system, f"append_wc{pause}")] = wc / 1e6
            out[(system, f"append_own_wb{pause}")] = own_wb / 1e6
            out[(system, f"append_own_wc{pause}")] = own_wc / 1e6
        out[(system, "first")] = statistics.median(times[system][KINDS[0]])
        out[(system, "first99")] = p99(times[system][KINDS[0]])
        out[(system, "next")] = statistics.median(times[system][KINDS[1]])
        out[(system, "done")] = statistics.median(times[system][KINDS[2]])
        for clients in CLIENT_COUNTS:
            out[(system, f"rate{clients}")] = throughput[(system, clients)]["rate"]
        top = throughput[(system, CLIENT_COUNTS[-1])]
        out[(system, "cpu")] = top["cpu"] / top["rounds"] * 1e3 if top["rounds"] else float("nan")
        out[(system, "server_cpu")] = (top["server_cpu"] / top["rounds"] * 1e3
                                       if top["rounds"] else float("nan"))
    out["floor"] = statistics.median(floor) if floor else None
    return out


def ratio(a, b):
    return a / b if b else float("nan")


def table(numbers, title, systems):
    """The markdown table of `numbers`: a column per system, then the ratios
    baton / monty and (with "before") baton / before."""
    def get(system, key):
        return numbers[(system, key)]

    pair = lambda parts: f"{parts[0]} ({parts[1]})"
    joined = " / ".join
    pauses = " / ".join(map(str, APPEND_PAUSES))
    # (label, keys, format of a value, how a cell's parts are put together)
    rows = [
        ("start → first pause, median (p99), ms", ["first", "first99"], ".2f", pair),
        ("continue → next pause, median, ms", ["next"], ".2f", joined),
        ("continue → completed, median, ms", ["done"], ".2f", joined),
        ("rounds/s at " + " / ".join(map(str, CLIENT_COUNTS)) + " clients",
         [f"rate{c}" for c in CLIENT_COUNTS], ".0f", joined),
        (f"CPU per round at {CLIENT_COUNTS[-1]} clients (ms)", ["cpu"], ".3f", joined),
        (f"cross-check: server-side CPU per round at {CLIENT_COUNTS[-1]} clients (ms)",
         ["server_cpu"], ".3f", joined),
        ("1 MiB results: continue → pause " + pauses + ", ms",
         [f"append_ms{k}" for k in APPEND_PAUSES], ".2f", joined),
        ("1 MiB results: MB written (write_bytes) for pause " + pauses,
         [f"append_wb{k}" for k in APPEND_PAUSES], ".2f", joined),
        ("1 MiB results: MB passed to write (wchar) for pause " + pauses,
         [f"append_wc{k}" for k in APPEND_PAUSES], ".2f", joined),
    ]
    comparisons = [("baton", "monty")] + ([("baton", "before")] if "before" in systems else [])
    if "before" in systems:
        head = ("| measure | " + " | ".join(LABELS[s] for s in systems) + " | "
                + " | ".join(f"{a} / {b}" for a, b in comparisons) + " |")
    else:
        head = "| measure | baton | monty | ratio baton/monty |"
    lines = [f"### {title}", "", head, "|---" * (1 + len(systems) + len(comparisons)) + "|"]
    for label, keys, fmt, put in rows:
        cells = [put([format(get(s, k), fmt) for k in keys]) for s in systems]
        if keys[0].startswith("append_"):  # three pauses: the last one's ratio only
            last = keys[-1]
            cells += [f"{ratio(get(a, last), get(b, last)):.2f} (pause {APPEND_PAUSES[-1]})"
                      for a, b in comparisons]
        else:
            cells += [put([format(ratio(get(a, k), get(b, k)), ".2f") for k in keys])
                      for a, b in comparisons]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"machine busy CPU in one idle second before the throughput windows: "
                 f"{numbers['background'] * 1e3:.0f} ms")
    if numbers["floor"] is None:
        lines.append("durable echo floor: skipped (no echo binary)")
    else:
        line = (f"durable echo floor (median) {numbers['floor']:.2f} ms; baton continue → "
                f"next pause minus floor: {get('baton', 'next') - numbers['floor']:.2f} ms")
        if "before" in systems:
            line += f"; baton before's: {get('before', 'next') - numbers['floor']:.2f} ms"
        lines.append(line)
    first, last = APPEND_PAUSES[0], APPEND_PAUSES[-1]
    for system in systems:
        lines.append(
            f"{LABELS[system]}: pause {last} / pause {first}: "
            f"time {ratio(get(system, f'append_ms{last}'), get(system, f'append_ms{first}')):.2f}, "
            f"bytes {ratio(get(system, f'append_wb{last}'), get(system, f'append_wb{first}')):.2f} "
            f"(wchar {ratio(get(system, f'append_wc{last}'), get(system, f'append_wc{first}')):.2f})")
    lines.append("monty's server process alone: MB written "
                 + " / ".join(f"{get('monty', f'append_own_wb{k}'):.2f}" for k in APPEND_PAUSES)
                 + ", wchar "
                 + " / ".join(f"{get('monty', f'append_own_wc{k}'):.2f}" for k in APPEND_PAUSES))
    return "\n".join(lines)


def summary(numbers, systems):
    """The closing lines, from the medians: for baton (and "before"), its
    start p99 over its own start median, then its figures over monty's."""
    lines = []
    for system in [s for s in systems if s in BATONS][::-1]:  # baton, then before
        def versus_monty(key):
            return format(ratio(numbers[(system, key)], numbers[("monty", key)]), ".2f")
        top = CLIENT_COUNTS[-1]
        lines += [
            f"{LABELS[system]}, from the medians:",
            f"  start p99 / own median: "
            f"{ratio(numbers[(system, 'first99')], numbers[(system, 'first')]):.2f}",
            f"  CPU per round / monty's: {versus_monty('cpu')}",
            f"  rounds/s at {top} clients / monty's: {versus_monty(f'rate{top}')}",
            f"  continue → next pause / monty's: {versus_monty('next')}",
            f"  continue → completed / monty's: {versus_monty('done')}",
            f"  start → first pause / monty's: {versus_monty('first')}",
        ]
    return "\n".join(lines)


def median_numbers(runs):
    keys = runs[0].keys()
    out = {}
    for key in keys:
        values = [r[key] for r in runs if r[key] is not None]
        out[key] = statistics.median(values) if values else None
    return out


def main(argv):
    parser = argparse.ArgumentParser(description="baton beside Pydantic Monty 1.4 (see the docstring)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--baton", default=str(REPO / "target" / "release" / "baton"))
    parser.add_argument("--before", default=None,
                        help="an earlier baton binary, measured as a third system")
    parser.add_argument("--echo", default=str(REPO / "target" / "release" / "examples" / "durable_echo"))
    parser.add_argument("--monty-workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    if not os.access(args.baton, os.X_OK):
        sys.exit(f"no baton binary at {args.baton}: build it with "
                 f"`cargo build --release --ignore-rust-version`, or give --baton PATH")
    if args.before is not None and not os.access(args.before, os.X_OK):
        sys.exit(f"no baton binary at {args.before} (--before)")
    systems = (["before"] if args.before else []) + SYSTEMS
    echo_binary = args.echo if os.access(args.echo, os.X_OK) else None
    if echo_binary is None:
        print(f"durable echo floor skipped: no binary at {args.echo}; build it with "
              f"`cargo build --release --ignore-rust-version --example durable_echo`",
              file=sys.stderr)
    venv_python = ensure_venv()

    scratch = tempfile.mkdtemp(prefix="baton-peer-")
    servers, echo = {}, None
    runs = []
    try:
        try:
            for system, binary in [("baton", args.baton), ("before", args.before)]:
                if binary is None:
                    continue
                port = free_port()
                servers[system] = Server(system, [
                    binary, "serve", "--listen", f"127.0.0.1:{port}",
                    "--data-dir", os.path.join(scratch, f"{system}-data"), "--api-key", API_KEY],
                    port, scratch)
            port = free_port()
            servers["monty"] = Server("monty", [
                str(venv_python), str(Path(__file__).resolve()), "serve-monty", "--port", str(port),
                "--dir", os.path.join(scratch, "monty-snapshots"),
                "--workers", str(args.monty_workers)], port, scratch)
            if echo_binary:
                port = free_port()
                echo = Server("echo", [echo_binary, "--listen", f"127.0.0.1:{port}",
                                       "--file", os.path.join(scratch, "echo.log")], port, scratch)
        except StartFailed as failure:
            sys.exit(f"a server failed to start: {failure}")
        print("server-side CPU: " + "; ".join(f"{LABELS[s]} from {servers[s].cpu_source()}"
                                              for s in systems), file=sys.stderr)
        print(f"baton {args.baton}; "
              + (f"baton before {args.before}; " if args.before else "")
              + f"monty {MONTY_VERSION} with {args.monty_workers} workers; "
              f"echo floor {'on' if echo else 'skipped'}; {os.cpu_count()} CPUs; "
              f"{args.iterations} iterations, {GAP * 1e3:.0f} ms apart; "
              f"{args.seconds} s per throughput window", file=sys.stderr, flush=True)
        for run in range(args.runs):
            print(f"run {run + 1}/{args.runs}: latency ...", file=sys.stderr, flush=True)
            times, floor = measure_latency(servers, systems, echo, args.iterations)
            appends = {}
            for system in (systems if run % 2 == 0 else systems[::-1]):
                print(f"run {run + 1}/{args.runs}: {LABELS[system]}, a pause appends "
                      f"(1 MiB results) ...", file=sys.stderr, flush=True)
                appends[system] = measure_appends(servers[system])
            throughput = {}
            busy0 = machine_busy_seconds()
            time.sleep(1.0)
            background = machine_busy_seconds() - busy0
            for clients in CLIENT_COUNTS:
                order = systems if run % 2 == 0 else systems[::-1]
                for system in order:
                    print(f"run {run + 1}/{args.runs}: {LABELS[system]}, {clients} clients ...",
                          file=sys.stderr, flush=True)
                    throughput[(system, clients)] = measure_throughput(
                        servers[system], clients, args.seconds)
                    time.sleep(0.5)
            numbers = summarize(times, floor, throughput, appends, systems)
            numbers["background"] = background
            runs.append(numbers)
            print(table(numbers, f"run {run + 1}", systems), flush=True)
            print(flush=True)
    finally:
        for server in list(servers.values()) + ([echo] if echo else []):
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    if runs:
        medians = median_numbers(runs)
        print(table(medians, f"median of {len(runs)} runs", systems))
        print()
        print(summary(medians, systems))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve-monty":
        serve_monty(sys.argv[2:])
    else:
        main(sys.argv[1:])
