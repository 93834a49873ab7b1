"""What a session's cell costs beside a fresh execution, side by side:
one `baton serve` (hot: a session's child is kept parked between cells)
and one with `--max-parked 0` (cold: every cell rebuilds the namespace by
replaying the earlier cells' journals), requests interleaved one at a time.

Prints the client-side median (ms) of:
- a fresh `/exec/programmatic` start of a one-line cell (the baseline);
- the next cell of a parked session (hot), with one tool call (start →
  pause → completed) and without;
- the next cell of a session of N cells on the cold server, for N in 1,
  10, 50, 100 (the cost of a cold resume as the session grows).
- on a third server at the default cap (64 cells listed), the cell that
  compacts a 64-cell session (a snapshot in the parked child, the base in
  a fresh one, then the cell), and on a fourth (no parking) the next cell
  after a compaction, cold (it replays the base and the few cells since).
And the CPU seconds the server and its zygote took per cell (hot and cold).

Usage: python3 benches/sessions.py <baton> [iterations] (standard library
only; `BATON_SESSIONS_BENCH_CELLS` the longest session, default 100).
"""

import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interleaved import Server  # noqa: E402

TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
CELL = "n = n + 1 if 'n' in globals() else 1\nprint(n)\n"
TOOL_CELL = "w = await get_weather(city='SF')\nprint(w['t'])\n"


def new_session(server):
    reply, _ = server.post("/sessions", {})
    return reply["session_id"]


def to_the_end(server, path, code):
    """Posts `code` to `path` and answers its calls until it ends; the end
    and the total ms."""
    reply, ms = server.post(path, {"code": code, "tools": TOOLS})
    while reply.get("status") == "tool_call_required":
        call = reply["tool_calls"][0]
        reply, more = server.post("/exec/programmatic", {
            "continuation_token": reply["continuation_token"],
            "tool_results": [{"call_id": call["id"], "result": {"t": 1}}]})
        ms += more
    assert reply.get("status") == "completed", reply
    return reply, ms


def run_cell(server, session, code):
    """Runs a cell to its end; total ms, and how it was resumed."""
    reply, ms = to_the_end(server, f"/sessions/{session}/exec", code)
    return ms, reply["session"]["resumed"]


def fresh(server, code):
    """Runs `code` as a new execution to its end; total ms."""
    return to_the_end(server, "/exec/programmatic", code)[1]


def main():
    binary = sys.argv[1]
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    longest = int(os.environ.get("BATON_SESSIONS_BENCH_CELLS", "100"))
    sizes = [n for n in (1, 10, 50, 100, 200) if n <= longest]
    flags = ["--session-max-cells", str(longest + 2 * iterations + 10)]
    times = {k: [] for k in ["fresh", "fresh+tool", "hot", "hot+tool"] + [f"cold@{n}" for n in sizes]}
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        hot = Server(binary, one, flags)
        cold = Server(binary, two, flags + ["--max-parked", "0"])
        try:
            hot_session = new_session(hot)
            run_cell(hot, hot_session, CELL)
            cold_sessions = {}
            for n in sizes:
                session = new_session(cold)
                for _ in range(n):
                    run_cell(cold, session, CELL)
                cold_sessions[n] = session
            cpu_hot0, cpu_cold0 = hot.cpu(), cold.cpu()
            for _ in range(iterations):
                times["fresh"].append(fresh(hot, CELL.replace("'n' in globals()", "False")))
                ms, resumed = run_cell(hot, hot_session, CELL)
                assert resumed == "hot", resumed
                times["hot"].append(ms)
                times["fresh+tool"].append(fresh(hot, TOOL_CELL))
                ms, _ = run_cell(hot, hot_session, TOOL_CELL)
                times["hot+tool"].append(ms)
            cpu_hot1 = hot.cpu()
            cold_cells = 0
            for _ in range(max(3, iterations // 10)):
                for n in sizes:
                    ms, resumed = run_cell(cold, cold_sessions[n], CELL)
                    assert resumed == "cold", resumed
                    times[f"cold@{n}"].append(ms)
                    cold_cells += 1
            cpu_cold1 = cold.cpu()
        finally:
            hot.stop()
            cold.stop()
    times.update(compaction(binary, max(3, iterations // 10)))
    base = statistics.median(times["fresh"])
    print(f"{'kind':<22} {'median ms':>10} {'vs fresh':>9}")
    for kind, values in times.items():
        median = statistics.median(values)
        print(f"{kind:<22} {median:>10.2f} {median / base:>8.2f}x")
    hot_cells = 2 * iterations
    per = lambda a, b, cells: [(y - x) / cells * 1e3 for x, y in zip(a, b)]
    print("CPU ms per cell (server, zygote): hot+fresh mix %.2f, %.2f; cold %.2f, %.2f" % (
        *per(cpu_hot0, cpu_hot1, hot_cells * 2), *per(cpu_cold0, cpu_cold1, cold_cells)))


def compaction(binary, samples):
    """Medians' samples of the compacting cell of a 64-cell session (hot
    server) and of the cold cell after a compaction (no parking)."""
    times = {"compacting@64": [], "cold after compaction": []}
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        hot = Server(binary, one, [])
        cold = Server(binary, two, ["--max-parked", "0"])
        try:
            for _ in range(samples):
                session = new_session(hot)
                for _ in range(64):
                    run_cell(hot, session, CELL)
                ms, resumed = run_cell(hot, session, CELL)
                assert resumed == "cold", resumed
                times["compacting@64"].append(ms)
            session = new_session(cold)
            for _ in range(65):
                run_cell(cold, session, CELL)
            for _ in range(samples):
                ms, resumed = run_cell(cold, session, CELL)
                assert resumed == "cold", resumed
                # It replays the base and the few cells since.
                times["cold after compaction"].append(ms)
        finally:
            hot.stop()
            cold.stop()
    return times


if __name__ == "__main__":
    main()
