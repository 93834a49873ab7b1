"""An RLM-style loop (recursive language models) on a baton session.

The root model never reads the long document: it writes Python that looks
at `context`, a variable of the session's namespace, calls `llm_query(prompt)`
(a tool: a sub-model asked about one small piece), and keeps what it learns
in variables from one turn to the next. The loop ends when the code sets
`FINAL`. The namespace is durable: a restart of baton between two turns
loses nothing (the session's cells are replayed from their journals).

Run it against a server:
    BATON_URL=http://127.0.0.1:8080 BATON_API_KEY=... python3 examples/rlm_loop.py
The models here are scripted stand-ins; put a real model's code writer in
`ScriptedModel.next_code` and a real sub-model call in `llm_query`.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))

from baton_client import Client  # noqa: E402

DOCUMENT = "order,city,status\n1,Lyon,late\n2,Nice,on time\n3,Lyon,late\n4,Paris,late\n5,Nice,on time\n"


class ScriptedModel:
    """Stands for the root model: each turn, the code it writes after
    reading what the last turn printed."""

    TURNS = [
        "lines = context.splitlines()\nprint(len(lines) - 1, 'rows:', lines[0])",
        "late = []\n"
        "for row in lines[1:]:\n"
        "    verdict = await llm_query(prompt='Is this order late? ' + row)\n"
        "    if verdict == 'yes':\n"
        "        late.append(row.split(',')[1])\n"
        "print(len(late), 'late')",
        "from collections import Counter\n"
        "city, _ = Counter(late).most_common(1)[0]\n"
        "FINAL = f'{len(late)} late orders; most in {city}'",
    ]

    def __init__(self) -> None:
        self.turn = 0

    def next_code(self, question: str, last_output: str) -> str:
        code = self.TURNS[self.turn]
        self.turn += 1
        return code


def llm_query(prompt: str) -> str:
    """A sub-model asked one short question (here: reads the row's status)."""
    return "yes" if prompt.endswith(",late") else "no"


def solve(client: Client, model: ScriptedModel, document: str, question: str, max_turns: int = 10):
    """Runs the loop; returns the code's `FINAL` and the turns it took."""
    with client.session() as session:
        session.run("context = %r" % document)
        last_output = ""
        for turn in range(1, max_turns + 1):
            code = model.next_code(question, last_output)
            result = session.run(code, tools={"llm_query": llm_query})
            last_output = result.stdout if result.ok else result.stderr
            if "FINAL" in session.names():
                return session.run("print(FINAL)").stdout.strip(), turn
    raise RuntimeError("the model gave no answer in %d turns" % max_turns)


if __name__ == "__main__":
    client = Client(os.environ.get("BATON_URL", "http://127.0.0.1:8080"), os.environ["BATON_API_KEY"])
    answer, turns = solve(client, ScriptedModel(), DOCUMENT, "How many orders were late, and where most?")
    print(f"{answer} (in {turns} turns)")
