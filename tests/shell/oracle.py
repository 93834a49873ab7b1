#!/usr/bin/env python3
"""Differential test of baton's shell (`stdlib_shims/baton_shell.py`)
against real GNU bash and coreutils.

For each case of `corpus.json` (`{"name", "script", "files"?, "compare"?}`)
the script runs twice, each time in a fresh temporary directory seeded with
the case's files:

(a) with `bash -c SCRIPT` (LC_ALL=C, HOME=<dir>, PATH=/usr/bin:/bin, cwd
    <dir>);
(b) with `baton_shell.run` on this interpreter (cwd and HOME <dir>), or,
    with `--server URL --key KEY`, through a running baton server's
    `POST /exec` (the shell then sees `/mnt/data` itself). The server runs
    the shell frozen into its binary when it was built; with
    `--shell-source` it runs this checkout's `baton_shell.py` instead, sent
    as a `lang: "py"` program that loads it and calls `run` as the
    runtime's `_run_shell` does (for a binary older than the shell).

`/mnt/data` in the script is replaced by the directory's path before the
run, and the directory's path by `/mnt/data` in what comes out. Compared:
stdout, stderr (bash's `bash: line N: ` and `bash: -c: line N: ` read as
`bash: `), the exit status and the final tree (names and contents). A case
may narrow that with `"compare": ["status", ...]`.

Prints one JSON line per case, `{"name", "ok", "diff"}`, and exits 1 if any
case differs. Python 3.11, standard library only.
"""

import argparse
import base64
import contextlib
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MNT = "/mnt/data"
FIELDS = ("stdout", "stderr", "status", "files")
BASH_LINE = re.compile(r"^bash: (?:-c: )?line [0-9]+: ", re.M)


# ----------------------------------------------------------------- seeding


def content_bytes(value):
    """A corpus file's content: text, or `{"base64": ...}` for bytes."""
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return value.encode("utf-8")


def seed(directory, files):
    for name, value in (files or {}).items():
        path = os.path.join(directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content_bytes(value))


def fresh_dir(tag):
    """A temporary directory; every one has a name of the same length, so
    that text in which the path was replaced keeps its layout."""
    return tempfile.mkdtemp(prefix="baton-sh-%s-" % tag)


def tree(directory):
    """{relative path: text} of every file, and `path/` for every
    directory; the directory's own path reads as /mnt/data in contents."""
    out = {}
    for root, dirs, names in os.walk(directory):
        rel = os.path.relpath(root, directory)
        for d in dirs:
            out[os.path.normpath(os.path.join(rel, d)) + "/"] = None
        for n in names:
            path = os.path.join(root, n)
            key = os.path.normpath(os.path.join(rel, n))
            if os.path.islink(path):
                out[key] = "-> " + os.readlink(path)
                continue
            with open(path, "rb") as f:
                out[key] = shown(f.read(), directory)
    return out


def shown(data, directory):
    """Bytes as comparable text: UTF-8 when it decodes, else base64."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")
    return text.replace(directory, MNT)


# ------------------------------------------------------------------ runners


def run_bash(case):
    directory = fresh_dir("a")
    try:
        seed(directory, case.get("files"))
        env = {"LC_ALL": "C", "HOME": directory, "PATH": "/usr/bin:/bin", "PWD": directory,
               "PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ in the tree
        script = case["script"].replace(MNT, directory)
        proc = subprocess.run(["bash", "-c", script], cwd=directory, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        stdout = proc.stdout.decode("utf-8", "replace").replace(directory, MNT)
        stderr = proc.stderr.decode("utf-8", "replace").replace(directory, MNT)
        return {"stdout": stdout, "stderr": BASH_LINE.sub("bash: ", stderr),
                "status": proc.returncode, "files": tree(directory)}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def load_shell():
    sys.path.insert(0, os.path.join(ROOT, "stdlib_shims"))
    sys.dont_write_bytecode = True
    import baton_shell
    return baton_shell


def run_inprocess(case, shell):
    directory = fresh_dir("b")
    cwd = os.getcwd()
    saved_env = dict(os.environ)
    try:
        seed(directory, case.get("files"))
        script = case["script"].replace(MNT, directory)
        out, err = io.StringIO(), io.StringIO()
        os.chdir(directory)
        try:
            status = shell.run(script, (), stdout=out, stderr=err, home=directory)
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        return {"stdout": out.getvalue().replace(directory, MNT),
                "stderr": err.getvalue().replace(directory, MNT),
                "status": status, "files": tree(directory)}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


#: A `lang: "py"` program that runs a script with a given `baton_shell`
#: source, hooked to the runtime as `baton_runtime._run_shell` hooks it.
SHELL_PROGRAM = """import sys, types
_shell = types.ModuleType("baton_shell")
exec(compile(%r, "<baton_shell>", "exec"), _shell.__dict__)
_runtime = sys.modules.get("baton_runtime")
if _runtime is not None:
    _shell.compile_source = _runtime._shell_compile
    _shell.control_exceptions = (_runtime._ControlExit,)
sys.argv = ["bash"]
raise SystemExit(_shell.run(%r, ()))
"""


class Server:
    """A running baton server: `POST /upload`, `POST /exec`, `GET
    /download`."""

    def __init__(self, url, key, shell_source=None):
        self.url, self.key, self.shell_source = url.rstrip("/"), key, shell_source

    def request(self, method, path, body=None, content_type=None):
        headers = {"X-API-Key": self.key}
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def upload(self, files):
        """Uploads the seed files in one request: the exec body's refs."""
        boundary = "----baton" + uuid.uuid4().hex
        body = bytearray()
        for name, value in files.items():
            body += ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n" % (boundary, name.replace('"', "%22"))).encode()
            body += content_bytes(value) + b"\r\n"
        body += ("--%s--\r\n" % boundary).encode()
        status, answer = self.request("POST", "/upload", bytes(body),
                                      "multipart/form-data; boundary=" + boundary)
        if status != 200:
            raise RuntimeError("upload: HTTP %d: %s" % (status, answer[:300]))
        view = json.loads(answer)
        sid = view["storage_session_id"]
        return [{"id": f["fileId"], "storage_session_id": sid, "name": f["filename"]} for f in view["files"]]

    def run(self, case):
        files = case.get("files") or {}
        refs = self.upload(files) if files else []
        body = {"lang": "bash", "code": case["script"]}
        if self.shell_source is not None:
            body = {"lang": "py", "code": SHELL_PROGRAM % (self.shell_source, case["script"])}
        if refs:
            body["files"] = refs
        status, answer = self.request("POST", "/exec", json.dumps(body).encode(), "application/json")
        if status != 200:
            return {"stdout": "", "stderr": "HTTP %d: %s" % (status, answer.decode("utf-8", "replace")),
                    "status": None, "files": {}}
        reply = json.loads(answer)
        final = {name: shown(content_bytes(value), MNT) for name, value in files.items()}
        for name in reply.get("deleted_files") or []:
            final.pop(name, None)
        for ref in reply.get("files") or []:
            code, data = self.request("GET", "/download/%s/%s" % (ref["storage_session_id"], ref["id"]))
            final[ref["name"]] = shown(data, MNT) if code == 200 else "HTTP %d" % code
        return {"stdout": reply.get("stdout", ""), "stderr": reply.get("stderr", ""),
                "status": reply.get("code"), "files": final}


# --------------------------------------------------------------- comparing


def files_only(files):
    """The tree without directories: the server reports files only."""
    return {k: v for k, v in files.items() if not k.endswith("/")}


def compare(case, expected, actual, server):
    fields = case.get("compare") or FIELDS
    if server:
        expected = dict(expected, files=files_only(expected["files"]))
    diffs = []
    for field in fields:
        want, got = expected[field], actual[field]
        if want == got:
            continue
        if field == "status":
            diffs.append("status: bash %r, baton %r" % (want, got))
            continue
        if field == "files":
            want = json.dumps(want, indent=1, sort_keys=True) + "\n"
            got = json.dumps(got, indent=1, sort_keys=True) + "\n"
        diffs.extend(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                          "bash/" + field, "baton/" + field))
    return "".join(d if d.endswith("\n") else d + "\n" for d in diffs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.path.join(HERE, "corpus.json"))
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--server", help="a baton server's URL: run (b) through POST /exec")
    parser.add_argument("--key", default="", help="the server's API key")
    parser.add_argument("--shell-source", action="store_true",
                        help="with --server: run this checkout's baton_shell.py, not the server's own")
    opts = parser.parse_args()
    with open(opts.corpus, encoding="utf-8") as f:
        corpus = json.load(f)
    cases = corpus["cases"] if isinstance(corpus, dict) else corpus
    if opts.only:
        wanted = set(opts.only.split(","))
        unknown = wanted - {c["name"] for c in cases}
        if unknown:
            parser.error("no such case: %s" % ", ".join(sorted(unknown)))
        cases = [c for c in cases if c["name"] in wanted]
    if opts.shell_source and not opts.server:
        parser.error("--shell-source needs --server")
    source = None
    if opts.shell_source:
        with open(os.path.join(ROOT, "stdlib_shims", "baton_shell.py"), encoding="utf-8") as f:
            source = f.read()
    server = Server(opts.server, opts.key, source) if opts.server else None
    shell = None if server else load_shell()
    failed = 0
    for case in cases:
        expected = run_bash(case)
        try:
            actual = server.run(case) if server else run_inprocess(case, shell)
            diff = compare(case, expected, actual, server is not None)
        except Exception as e:  # a crash of the runner is a difference too
            diff = "runner failed: %s: %s\n" % (type(e).__name__, e)
        ok = not diff
        failed += not ok
        print(json.dumps({"name": case["name"], "ok": ok, "diff": diff}), flush=True)
    print("%d/%d cases match" % (len(cases) - failed, len(cases)), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
