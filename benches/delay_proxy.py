#!/usr/bin/env python3
"""A TCP proxy that delays every byte by a fixed time each way, to measure
what the distance to a database costs (this machine's kernel has no
`netem`). Order and pipelining are kept: each direction has a reader
thread that stamps what it receives and a writer thread that sends it once
its time has come. Its own cost here: 0.33 ms per round trip (an echo
server answers in 0.04 ms direct).

Usage: python3 benches/delay_proxy.py <listen port> <target port> <delay ms each way>
(standard library only; both on 127.0.0.1). Then point baton at the
proxy, e.g. `BATON_BREAKDOWN_STORE=postgres://user@127.0.0.1:<listen port>/db
python3 benches/breakdown.py`.
"""

import queue
import socket
import sys
import threading
import time


def pump(source, target, delay):
    """Copies `source` to `target`, each piece `delay` seconds after it came."""
    pieces = queue.Queue()

    def read():
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            pieces.put((time.monotonic(), data))
            if not data:
                return

    def write():
        while True:
            arrived, data = pieces.get()
            wait = arrived + delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not data:
                try:
                    target.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            try:
                target.sendall(data)
            except OSError:
                return

    threading.Thread(target=read, daemon=True).start()
    threading.Thread(target=write, daemon=True).start()


def main():
    listen, target, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen))
    server.listen(128)
    while True:
        client, _ = server.accept()
        upstream = socket.create_connection(("127.0.0.1", target))
        for end in (client, upstream):
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pump(client, upstream, delay)
        pump(upstream, client, delay)


if __name__ == "__main__":
    main()
