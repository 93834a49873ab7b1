"""Two builds side by side, request by request: starts `baton serve` from
each binary on a fresh data directory, then sends the 2-call program of
issue #15 and an `/exec` of `print(1)` to one and then the other, one
request at a time (30 ms apart, `BATON_INTERLEAVED_GAP_MS`; one keep-alive
connection each), and prints the client-side median and p90 of each kind
of request for both builds (ms) and their ratio.

Alternating every request, not every run, keeps the machine's drift (which
moves a run's medians by ±10-15% here) out of the comparison.

Also prints the CPU time the server process and its zygote took per
iteration (from `/proc/<pid>/stat`), for each build: the zygote's includes
forking each child (and, with control groups, making its group).

Usage: python3 benches/interleaved.py <before baton> <after baton> [iterations]
(standard library only). Extra flags for either server:
`BATON_INTERLEAVED_BEFORE_ARGS`, `BATON_INTERLEAVED_AFTER_ARGS` (split on
spaces), e.g. the same binary twice with `--child-cgroups false` before.
"""

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

GAP = float(os.environ.get("BATON_INTERLEAVED_GAP_MS", "30")) / 1000
CODE = "city = await get_city()\nw = await get_weather(city=city)\nprint(city, w['t'])\n"
TOOLS = [
    {"name": name, "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    for name in ["get_city", "get_weather", "get_time", "search_web", "send_email",
                 "read_calendar", "create_event", "translate", "convert_currency"]
]
KINDS = ["start → pause", "continue → pause", "continue → completed", "/exec print(1)"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User and system CPU time of a process, seconds (0 when gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def zygote_of(pid):
    """The pid of the server's `zygote` child."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                is_zygote = b"zygote" in f.read().split(b"\0")
        except OSError:
            continue
        if ppid == pid and is_zygote:
            return int(entry)
    return None


class Server:
    def __init__(self, binary, data, extra=()):
        self.port = free_port()
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir",
             os.path.join(data, "store"), "--api-key", "bench-key", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                probe = http.client.HTTPConnection("127.0.0.1", self.port)
                probe.request("GET", "/health")
                if probe.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port)
        self.zygote = zygote_of(self.process.pid)

    def cpu(self):
        """CPU seconds of the server and of its zygote so far."""
        return cpu_seconds(self.process.pid), cpu_seconds(self.zygote)

    def post(self, path, body):
        """The reply and the time it took, ms."""
        began = time.perf_counter()
        self.connection.request("POST", path, json.dumps(body),
                                {"x-api-key": "bench-key", "content-type": "application/json"})
        reply = json.loads(self.connection.getresponse().read())
        return reply, (time.perf_counter() - began) * 1e3

    def stop(self):
        self.process.terminate()
        self.process.wait()


def steps():
    """The requests of one iteration: each takes the last reply, gives (path, body)."""
    def answer(result):
        def body(reply):
            call = reply["tool_calls"][0]
            return "/exec/programmatic", {
                "continuation_token": reply["continuation_token"],
                "tool_results": [{"call_id": call["id"], "result": result}]}
        return body
    return [
        lambda _: ("/exec/programmatic", {"code": CODE, "tools": TOOLS}),
        answer("SF"),
        answer({"t": 1}),
        lambda _: ("/exec", {"lang": "py", "code": "print(1)"}),
    ]


def main():
    before, after = sys.argv[1], sys.argv[2]
    iterations = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    times = {build: {kind: [] for kind in KINDS} for build in ("before", "after")}
    extra = {build: os.environ.get(f"BATON_INTERLEAVED_{build.upper()}_ARGS", "").split()
             for build in ("before", "after")}
    cpu = {}
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        servers = {"before": Server(before, one, extra["before"]),
                   "after": Server(after, two, extra["after"])}
        try:
            for iteration in range(iterations + 3):
                if iteration == 3:
                    cpu = {build: server.cpu() for build, server in servers.items()}
                order = ["before", "after"] if iteration % 2 == 0 else ["after", "before"]
                replies = {build: None for build in order}
                for kind, step in zip(KINDS, steps()):
                    for build in order:
                        time.sleep(GAP)
                        path, body = step(replies[build])
                        reply, took = servers[build].post(path, body)
                        assert "error" not in reply or reply.get("status") == "completed", reply
                        replies[build] = reply
                        if iteration >= 3:  # the first three warm up
                            times[build][kind].append(took)
                    if kind == "continue → completed":
                        for build in order:
                            assert replies[build]["stdout"] == "SF 1\n", replies[build]
            cpu = {build: tuple((b - a) * 1e3 / iterations for a, b in zip(cpu[build], server.cpu()))
                   for build, server in servers.items()}
        finally:
            for server in servers.values():
                server.stop()
    print(f"| request ({iterations} each, client side, ms) | before median | after median | after / before | before p90 | after p90 |")
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        b, a = times["before"][kind], times["after"][kind]
        bm, am = statistics.median(b), statistics.median(a)
        b90, a90 = statistics.quantiles(b, n=10)[-1], statistics.quantiles(a, n=10)[-1]
        print(f"| {kind} | {bm:.2f} | {am:.2f} | {am / bm:.2f} | {b90:.2f} | {a90:.2f} |")
    print()
    print("| CPU per iteration (ms) | before | after | after / before |")
    print("|---|---|---|---|")
    for index, name in enumerate(("server", "zygote")):
        b, a = cpu["before"][index], cpu["after"][index]
        print(f"| {name} | {b:.2f} | {a:.2f} | {a / b if b else float('nan'):.2f} |")


if __name__ == "__main__":
    main()
