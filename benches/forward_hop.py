#!/usr/bin/env python3
"""What forwarding a continuation costs (issue #14): two `baton serve` nodes
on one PostgreSQL database (started here: Debian's `postgresql` package,
run as `nobody` under root), one client, 30 ms between requests. Each
2-call execution starts on node 1; its continuations go to node 1 (where
its child is parked) or to node 2 (which forwards them to node 1),
alternately. Prints the medians, ms.

    python3 benches/forward_hop.py target/release/baton 60

Standard library only.
"""
import glob, http.client, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time

SIGNING = "t1:" + "".join(f"{i:02x}" for i in range(32))
TOOLS = [{"name": "get_city", "parameters": {"type": "object", "properties": {}}},
         {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
CODE = "city = await get_city()\nw = await get_weather(city=city)\nprint(city, w['t'])\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_postgres(work):
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    if not bins:
        sys.exit("needs PostgreSQL's server: apt-get install postgresql")
    bin_dir, data = bins[-1], os.path.join(work, "data")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    if as_nobody:
        os.chown(work, 65534, 65534)
    subprocess.run(as_nobody + [f"{bin_dir}/initdb", "--auth=trust", "--username=baton", "--locale=C",
                                "--no-sync", "-D", data], check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    server = subprocess.Popen(as_nobody + [f"{bin_dir}/postgres", "-D", data, "-c", "listen_addresses=127.0.0.1",
                                           "-c", f"port={port}", "-c", "unix_socket_directories="],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return server, f"postgres://baton@127.0.0.1:{port}/postgres"
        except OSError:
            time.sleep(0.05)
    sys.exit("postgres did not start")


def main():
    binary, iterations = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 60
    work = tempfile.mkdtemp(prefix="baton-hop-")
    database, url = start_postgres(work)
    nodes, ports = [], []
    try:
        for _ in range(2):
            port = free_port()
            nodes.append(subprocess.Popen(
                [binary, "serve", "--listen", f"127.0.0.1:{port}", "--store", url,
                 "--advertise", f"http://127.0.0.1:{port}", "--api-key", "k", "--signing-key", SIGNING,
                 "--data-dir", tempfile.mkdtemp(dir=work)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "BATON_LOG": "warn"}))
            ports.append(port)
        connections = {port: http.client.HTTPConnection("127.0.0.1", port) for port in ports}

        def post(port, body):
            for _ in range(300):
                try:
                    connection = connections[port]
                    began = time.perf_counter()
                    connection.request("POST", "/exec/programmatic", json.dumps(body),
                                       {"x-api-key": "k", "content-type": "application/json"})
                    response = connection.getresponse()
                    reply = json.loads(response.read())
                    if response.status == 503:
                        raise OSError("not ready")
                    return reply, (time.perf_counter() - began) * 1000
                except OSError:
                    connections[port] = http.client.HTTPConnection("127.0.0.1", port)
                    time.sleep(0.05)
            sys.exit(f"node {port} never answered")

        def answer(reply, value):
            return {"continuation_token": reply["continuation_token"],
                    "tool_results": [{"call_id": c["id"], "result": value, "is_error": False}
                                     for c in reply["tool_calls"]]}

        times = {key: [] for key in ("pause, to the holder", "pause, forwarded",
                                     "end, to the holder", "end, forwarded")}
        for i in range(2 * iterations):
            way = "to the holder" if i % 2 == 0 else "forwarded"
            holder, receiver = ports[0], ports[0] if i % 2 == 0 else ports[1]
            time.sleep(0.03)
            reply, _ = post(holder, {"code": CODE, "tools": TOOLS})
            time.sleep(0.03)
            reply, took = post(receiver, answer(reply, "SF"))
            times["pause, " + way].append(took)
            time.sleep(0.03)
            reply, took = post(receiver, answer(reply, {"t": 21}))
            times["end, " + way].append(took)
            assert reply.get("stdout") == "SF 21\n", reply
        for key, values in times.items():
            print(f"continue → {key}: {statistics.median(values):.2f} ms")
    finally:
        for node in nodes:
            node.kill()
            node.wait()
        database.terminate()
        database.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
