#!/usr/bin/env python3
"""Where a request's time goes: starts `baton serve --trace-requests` on a
fresh data directory, runs the 2-call program of issue #15 and an `/exec` of
`print(1)` one request at a time (30 ms apart, `BATON_BREAKDOWN_GAP_MS`; one keep-alive
connection),
and prints the median time of every traced step (busy + idle, in µs) for a
start, a continue to a pause, a continue to the end and the `/exec`.

Usage: python3 benches/breakdown.py [path/to/baton] [iterations]
(standard library only; the binary defaults to target/release/baton).
`BATON_BREAKDOWN_TAIL=1` also prints each step's median over the slowest 2%
of each kind of request beside its median over all: where a slow start's
time went.
"""

import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

GAP = float(os.environ.get("BATON_BREAKDOWN_GAP_MS", "30")) / 1000
# Also print each step over the slowest 2% of each kind of request.
TAIL = os.environ.get("BATON_BREAKDOWN_TAIL") == "1"
# A PostgreSQL URL to keep executions in instead of the embedded store.
STORE = os.environ.get("BATON_BREAKDOWN_STORE")
UNITS = {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6}
CODE = "city = await get_city()\nw = await get_weather(city=city)\nprint(city, w['t'])\n"
TOOLS = [
    {"name": name, "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    for name in ["get_city", "get_weather", "get_time", "search_web", "send_email",
                 "read_calendar", "create_event", "translate", "convert_currency"]
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drive(port, iterations):
    connection = http.client.HTTPConnection("127.0.0.1", port)

    def post(path, body):
        connection.request("POST", path, json.dumps(body),
                           {"x-api-key": "bench-key", "content-type": "application/json"})
        return json.loads(connection.getresponse().read())

    def answer(reply, result):
        call = reply["tool_calls"][0]
        return post("/exec/programmatic", {"continuation_token": reply["continuation_token"],
                                           "tool_results": [{"call_id": call["id"], "result": result}]})

    for _ in range(iterations):
        time.sleep(GAP)
        reply = post("/exec/programmatic", {"code": CODE, "tools": TOOLS})
        time.sleep(GAP)
        reply = answer(reply, "SF")
        time.sleep(GAP)
        reply = answer(reply, {"t": 1})
        assert reply["stdout"] == "SF 1\n", reply
        time.sleep(GAP)
        reply = post("/exec", {"lang": "py", "code": "print(1)"})
        assert reply["stdout"] == "1\n", reply


def micros(text):
    number, unit = re.match(r"([\d.]+)(ns|µs|ms|s)$", text).groups()
    return float(number) * UNITS[unit]


def requests_of(log_lines):
    """Groups span closes into requests: each request's operator line
    (`request=...`) ends it, with the `respond` span that closes right
    after it."""
    requests, current, ended = [], {}, False
    for line in log_lines:
        if " request=" in line:
            ended = True
            continue
        if "close time.busy" not in line:
            continue
        fields = line.split()
        name = fields[2].rstrip(":")
        if ended and name != "respond":
            requests.append(current)
            current, ended = {}, False
        busy = micros(fields[4].split("=")[1])
        idle = micros(fields[5].split("=")[1])
        current[name] = current.get(name, 0.0) + busy + idle
        if ended:
            requests.append(current)
            current, ended = {}, False
    if current:
        requests.append(current)
    return requests


KINDS = ["start → pause", "continue → pause", "continue → completed", "/exec print(1)"]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/baton"
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        log_path = os.path.join(data, "log")
        with open(log_path, "w") as log:
            server = subprocess.Popen(
                [binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
                 os.path.join(data, "store"), "--api-key", "bench-key", "--trace-requests"]
                + (["--store", STORE] if STORE else []),
                stdout=log, stderr=subprocess.STDOUT)
            try:
                for _ in range(300):
                    try:
                        connection = http.client.HTTPConnection("127.0.0.1", port)
                        connection.request("GET", "/health")
                        if connection.getresponse().status == 200:
                            break
                    except OSError:
                        pass
                    time.sleep(0.1)
                drive(port, 2)  # warm up, not counted
                with open(log_path) as f:
                    skip = len(f.readlines())
                drive(port, iterations)
            finally:
                server.terminate()
                server.wait()
        with open(log_path) as f:
            lines = f.readlines()[skip:]
    # The requests come in the order `drive` sends them.
    kinds = {kind: [] for kind in KINDS}
    for index, request in enumerate(requests_of(lines)):
        kinds[KINDS[index % len(KINDS)]].append(request)
    names = sorted({name for request in requests_of(lines) for name in request},
                   key=lambda n: (n.split(":")[0], n.count(":"), n))
    print("| step | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for name in names:
        cells = []
        for requests in kinds.values():
            values = [r[name] for r in requests if name in r]
            cells.append(f"{statistics.median(values):.0f}" if values else "—")
        print(f"| `{name}` | " + " | ".join(cells) + " |")
    print("requests:", {kind: len(requests) for kind, requests in kinds.items()})
    if TAIL:
        print_tail(kinds, names)


def print_tail(kinds, names):
    """Each step's median over the slowest 2% of each kind of request (by
    its longest span, the whole request), beside its median over all."""
    print()
    print("| step (slowest 2% / all, µs) | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    slowest = {}
    for kind, requests in kinds.items():
        ranked = sorted(requests, key=lambda r: max(r.values()))
        slowest[kind] = ranked[-max(1, len(ranked) // 50):]
    for name in names:
        cells = []
        for kind, requests in kinds.items():
            tail = [r[name] for r in slowest[kind] if name in r]
            every = [r[name] for r in requests if name in r]
            cells.append(f"{statistics.median(tail):.0f} / {statistics.median(every):.0f}"
                         if tail else "—")
        print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
