"""The client against a real `baton serve` (its URL and key in BATON_URL
and BATON_API_KEY; `tests/python_client.rs` starts one and runs these)."""

import asyncio
import os
import socket
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from baton_client import BatonError, Client, Execution, Paused, tool_definition  # noqa: E402

URL = os.environ.get("BATON_URL", "")
KEY = os.environ.get("BATON_API_KEY", "")


def get_city() -> str:
    """The user's city."""
    return "Bern"


async def get_weather(city: str, unit: str = "C") -> dict:
    """Current weather of a city."""
    await asyncio.sleep(0.01)
    return {"city": city, "temp": len(city), "unit": unit}


def broken(reason: str) -> None:
    raise RuntimeError(f"broken: {reason}")


class DropFirstReply:
    """A TCP proxy in front of baton that forwards the first request of
    `drop_on` whole but closes the client's connection before the answer:
    the request was served, its reply lost."""

    def __init__(self, target: str, drop_on: bytes) -> None:
        host, port = target.replace("http://", "").split(":")
        self.target = (host, int(port))
        self.drop_on = drop_on
        self.dropped = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            client, _ = self.listener.accept()
            threading.Thread(target=self.relay, args=(client,), daemon=True).start()

    def relay(self, client: socket.socket) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += client.recv(65536)
        head, _, body = request.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += client.recv(65536)
        upstream = socket.create_connection(self.target)
        upstream.sendall(head + b"\r\n\r\n" + body)
        reply = b""
        while True:
            chunk = upstream.recv(65536)
            if not chunk:
                break
            reply += chunk
            if b"\r\n\r\n" in reply:
                rhead, _, rbody = reply.partition(b"\r\n\r\n")
                rlength = next((int(line.split(b":")[1]) for line in rhead.split(b"\r\n")
                                if line.lower().startswith(b"content-length:")), None)
                if rlength is not None and len(rbody) >= rlength:
                    break
        upstream.close()
        if self.drop_on in body and self.dropped == 0:
            self.dropped += 1
            client.close()
            return
        client.sendall(reply)
        client.close()


@unittest.skipUnless(URL and KEY, "needs BATON_URL and BATON_API_KEY")
class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(URL, KEY, retries=3, backoff=0.05)

    def test_run_answers_sync_and_async_tools_concurrently(self) -> None:
        code = (
            "city = await get_city()\n"
            "a, b = await asyncio.gather(get_weather(city=city), get_weather(city='Chur', unit='F'))\n"
            "print(city, a['temp'], b['temp'], b['unit'])\n"
        )
        result = self.client.run(code, tools={"get_city": get_city, "get_weather": get_weather})
        self.assertIsInstance(result, Execution)
        self.assertTrue(result.ok, result)
        self.assertEqual(result.stdout, "Bern 4 4 F\n")
        self.assertEqual(result.rounds, 2)

    def test_a_tool_that_raises_is_a_tool_error_in_the_code(self) -> None:
        code = "try:\n    await broken(reason='x')\nexcept ToolError as e:\n    print('caught', e)\n"
        result = self.client.run(code, tools={"broken": broken})
        self.assertEqual(result.stdout, "caught broken: x\n", result)

    def test_a_failing_program_is_an_error_with_its_output(self) -> None:
        result = self.client.run("print('before')\n1 / 0\n")
        self.assertEqual(result.status, "error")
        self.assertIn("ZeroDivisionError", result.error or "")
        self.assertEqual(result.stdout, "before\n")

    def test_a_lost_continuation_reply_is_retried_and_the_tool_runs_once(self) -> None:
        proxy = DropFirstReply(URL, drop_on=b"continuation_token")
        calls = []

        def counted(city: str) -> dict:
            calls.append(city)
            return {"temp": len(city)}

        client = Client(proxy.url, KEY, retries=3, backoff=0.05)
        result = client.run(
            "w = await counted(city='Zurich')\nv = await counted(city='Bern')\nprint(w['temp'], v['temp'])\n",
            tools={"counted": counted},
        )
        self.assertEqual(proxy.dropped, 1)
        self.assertEqual(result.stdout, "6 4\n", result)
        self.assertEqual(calls, ["Zurich", "Bern"], "a tool ran twice for one call")

    def test_files_in_and_out(self) -> None:
        session = "sess_pyclient"
        stored = self.client.upload(session, "data.csv", b"a,b\n1,2\n")
        result = self.client.run(
            "rows = open('/mnt/data/data.csv').read().splitlines()\n"
            "open('/mnt/data/out.txt', 'w').write(str(len(rows)))\nprint(rows[1])\n",
            files=[{"id": stored["id"], "name": "data.csv", "session_id": session}],
            session_id=session,
        )
        self.assertEqual(result.stdout, "1,2\n", result)
        produced = {f["name"]: f for f in result.files}
        self.assertIn("out.txt", produced)
        self.assertEqual(self.client.download(session, produced["out.txt"]["id"]), b"2")

    def test_pause_inspect_cancel_and_list(self) -> None:
        paused = self.client.start(
            "w = await get_weather(city='a')\nprint(w)\n",
            [tool_definition("get_weather", get_weather)],
            request_id="pyclient-cancel-1",
        )
        self.assertIsInstance(paused, Paused)
        self.assertEqual(paused.tool_calls[0].name, "get_weather")
        self.assertEqual(paused.tool_calls[0].input, {"city": "a"})
        view = self.client.inspect(paused.execution_id)
        self.assertEqual(view["status"], "paused")
        self.assertEqual(self.client.cancel("pyclient-cancel-1"), "cancelled")
        self.assertEqual(self.client.inspect(paused.execution_id)["status"], "cancelled")
        listed = self.client.executions(limit=500)
        ids = [e["execution_id"] for e in listed["executions"]]
        self.assertIn(paused.execution_id, ids)
        with self.assertRaises(BatonError) as refused:
            self.client.continue_(paused, [{"call_id": paused.tool_calls[0].id, "result": 1}])
        self.assertEqual(refused.exception.status, 409)

    def test_a_session_keeps_its_names_from_cell_to_cell(self) -> None:
        tools = {"get_weather": get_weather}
        with self.client.session() as session:
            first = session.run(
                "import statistics\n"
                "async def temp(city):\n"
                "    return (await get_weather(city=city))['temp']\n"
                "temps = [await temp('Bern')]\n",
                tools=tools,
            )
            self.assertTrue(first.ok, first)
            self.assertEqual((first.session.cell, first.session.resumed), (1, "new"))
            second = session.run("temps.append(await temp('Zug'))\nprint(statistics.mean(temps))\n",
                                 tools=tools)
            self.assertEqual(second.stdout, "3.5\n", second)
            self.assertEqual(second.session.cell, 2)
            self.assertIn(second.session.resumed, ("hot", "cold"))
            names = session.names()
            self.assertEqual(names["temps"], {"type": "list", "repr": "[4, 3]"})
            self.assertEqual(names["temp"]["repr"], "<function temp>")
            listed = [s["session_id"] for s in self.client.sessions()]
            self.assertIn(session.session_id, listed)
        with self.assertRaises(BatonError) as gone:
            session.info()
        self.assertEqual(gone.exception.status, 404)

    def test_a_long_session_is_compacted_and_names_what_it_lost(self) -> None:
        # The server's default cap: 64 cells listed; the 65th compacts them.
        with self.client.session() as session:
            session.run("g = (i for i in range(3))\nrows = []\n")
            for k in range(63):
                session.run("rows.append(%d)\n" % k)
            after = session.run("print(len(rows), rows[-1], sum(rows))\n")
            self.assertEqual(after.stdout, "63 62 1953\n", after)
            self.assertEqual((after.session.cell, after.session.lost), (65, ["g"]))
            self.assertIsNone(session.run("print(1)\n").session.lost)
            info = session.info()
            self.assertEqual((info["cells"], info["compacted_cells"], info["lost"]), (66, 64, ["g"]))

    def test_a_lost_cell_reply_is_retried_and_the_cell_runs_once(self) -> None:
        proxy = DropFirstReply(URL, drop_on=b"count += 1")
        client = Client(proxy.url, KEY, retries=3, backoff=0.05)
        with client.session() as session:
            session.run("count = 0\n")
            again = session.run("count += 1\nprint(count)\n")
            self.assertEqual(proxy.dropped, 1)
            self.assertEqual(again.stdout, "1\n", again)
            self.assertEqual(session.run("print(count)\n").stdout, "1\n")

    def test_the_rlm_example_loops_until_the_code_sets_its_answer(self) -> None:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
        import rlm_loop
        answer, turns = rlm_loop.solve(self.client, rlm_loop.ScriptedModel(), rlm_loop.DOCUMENT,
                                       "How many orders were late, and which city had most?")
        self.assertEqual(answer, "3 late orders; most in Lyon")
        self.assertEqual(turns, 3)

    def test_a_wrong_key_is_a_401(self) -> None:
        with self.assertRaises(BatonError) as refused:
            Client(URL, "not-the-key").run("print(1)")
        self.assertEqual(refused.exception.status, 401)

    def test_tool_definitions_follow_the_signature(self) -> None:
        definition = tool_definition("get_weather", get_weather)
        self.assertEqual(definition["description"], "Current weather of a city.")
        self.assertEqual(definition["parameters"], {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        })


if __name__ == "__main__":
    unittest.main()
