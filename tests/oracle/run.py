"""Runs corpus programs under the CPython oracle, for writing and debugging
the corpus by hand (the Rust test `corpus_oracle` does the same, then runs
baton hot, cold and mixed and compares).

    python3 tests/oracle/run.py tests/corpus/*.py

Uses `$BATON_BIN` or `target/debug/baton` to rewrite each program.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WALL0, STEP, SEED = 1767225600.0, 2.5, "2a" * 32


def run(path):
    binary = os.environ.get("BATON_BIN", os.path.join(ROOT, "target", "debug", "baton"))
    tools = open(os.path.join(HERE, "tools.json")).read()
    program = subprocess.run([binary, "program", "--tools", tools], stdin=open(path), capture_output=True, text=True,
                             check=True).stdout
    request = {"program": json.loads(program), "seed": SEED, "wall0": WALL0, "step": STEP}
    done = subprocess.run([sys.executable, os.path.join(HERE, "harness.py")], input=json.dumps(request),
                          capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": "harness crashed", "stderr": done.stderr, "stdout": "", "rounds": []}
    return json.loads(done.stdout)


def main():
    for path in sys.argv[1:]:
        reply = run(path)
        print("=== %s: %d rounds, error=%s" % (path, len(reply["rounds"]), reply["error"]))
        print(reply["stdout"], end="")
        if reply["stderr"]:
            print("--- stderr\n" + reply["stderr"], end="")


if __name__ == "__main__":
    main()
