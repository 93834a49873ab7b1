"""The client: HTTP with ``urllib``, the pause loop, files, cancel, inspect."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Union

Tool = Callable[..., Union[Any, Awaitable[Any]]]

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean",
               list: "array", dict: "object"}


class BatonError(Exception):
    """An HTTP error answer from baton (or a transport failure after retries)."""

    def __init__(self, status: int, error: str, message: Optional[str] = None,
                 body: Optional[dict] = None) -> None:
        super().__init__(f"{status} {error}" + (f": {message}" if message else ""))
        self.status = status
        self.error = error
        self.message = message
        self.body = body or {}


@dataclass
class ToolCall:
    """One call the code is waiting on."""

    id: str
    name: str
    input: Dict[str, Any]


@dataclass
class Paused:
    """An execution waiting on tool calls."""

    execution_id: str
    session_id: str
    continuation_token: str
    tool_calls: List[ToolCall]
    session: Optional[CellTag] = None


@dataclass
class CellTag:
    """Where a session's cell stands: its session, its number, where its
    namespace came from (``new``, ``hot``, ``cold``), and on the first cell
    after a compaction the names it could not carry (``lost``; ``None`` on
    any other cell)."""

    session_id: str
    cell: int
    resumed: str
    lost: Optional[List[str]] = None


@dataclass
class Execution:
    """An ended execution."""

    status: str  # "completed" or "error"
    execution_id: str
    session_id: str
    stdout: str
    stderr: str
    error: Optional[str] = None
    files: List[Dict[str, Any]] = field(default_factory=list)
    deleted_files: List[str] = field(default_factory=list)
    rounds: int = 0
    session: Optional[CellTag] = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"


def tool_definition(name: str, function: Tool) -> Dict[str, Any]:
    """The tool definition baton needs for ``function``: its name, its
    docstring as the description, its parameters as a JSON Schema (types
    from the annotations where they are plain ``str``, ``int``, ``float``,
    ``bool``, ``list`` or ``dict``)."""
    properties: Dict[str, Any] = {}
    required: List[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        schema: Dict[str, Any] = {}
        if parameter.annotation in _JSON_TYPES:
            schema["type"] = _JSON_TYPES[parameter.annotation]
        properties[parameter.name] = schema
        if parameter.default is parameter.empty:
            required.append(parameter.name)
    definition: Dict[str, Any] = {
        "name": name,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }
    if function.__doc__:
        definition["description"] = inspect.cleandoc(function.__doc__)
    return definition


class Client:
    """A baton server and an API key.

    ``retries`` is how many times a request is sent again after a transport
    failure (connection refused or reset, timeout), waiting ``backoff``
    seconds, doubled each time, in between."""

    def __init__(self, url: str, api_key: str, *, timeout: float = 330.0,
                 retries: int = 5, backoff: float = 0.2) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    # -- the loop -------------------------------------------------------

    def run(self, code: str, tools: Optional[Mapping[str, Tool]] = None, *,
            tool_definitions: Optional[Sequence[Dict[str, Any]]] = None,
            files: Optional[Sequence[Dict[str, Any]]] = None,
            session_id: Optional[str] = None, timeout_ms: Optional[int] = None,
            request_id: Optional[str] = None) -> Execution:
        """Runs ``code`` to its end, answering its tool calls with ``tools``.

        ``tool_definitions`` replaces the definitions derived from the
        functions (``tool_definition``). A tool that raises answers that
        call with an error (the code sees a ``ToolError``); a call of a tool
        ``tools`` lacks is answered with an error too."""
        tools = dict(tools or {})
        definitions = list(tool_definitions) if tool_definitions is not None else [
            tool_definition(name, function) for name, function in tools.items()]
        reply = self.start(code, definitions, files=files, session_id=session_id,
                           timeout_ms=timeout_ms, request_id=request_id)
        return self._until_the_end(reply, tools, request_id)

    def _until_the_end(self, reply: Union[Paused, "Execution"], tools: Mapping[str, Tool],
                       request_id: Optional[str]) -> "Execution":
        """Answers ``reply``'s pauses with ``tools`` until its end."""
        rounds = 0
        while isinstance(reply, Paused):
            rounds += 1
            results = _answer(reply.tool_calls, tools)
            reply = self.continue_(reply, results, request_id=request_id)
        reply.rounds = rounds
        return reply

    def start(self, code: str, tools: Sequence[Dict[str, Any]] = (), *,
              files: Optional[Sequence[Dict[str, Any]]] = None,
              session_id: Optional[str] = None, timeout_ms: Optional[int] = None,
              request_id: Optional[str] = None) -> Union[Paused, Execution]:
        """Starts ``code``; returns its first pause or its end. A start is
        not repeated after a transport failure (it is not idempotent)."""
        body: Dict[str, Any] = {"code": code, "tools": list(tools)}
        if files:
            body["files"] = list(files)
        if session_id:
            body["session_id"] = session_id
        if timeout_ms:
            body["timeout"] = timeout_ms
        return _reply(self._request("POST", "/exec/programmatic", body,
                                    request_id=request_id, retry=False))

    def continue_(self, paused: Paused, results: Sequence[Dict[str, Any]], *,
                  request_id: Optional[str] = None) -> Union[Paused, Execution]:
        """Posts the results of ``paused``'s calls (``{"call_id", "result"}``
        or ``{"call_id", "is_error": true, "error_message"}``), repeating the
        same request after a transport failure."""
        body = {"continuation_token": paused.continuation_token,
                "tool_results": list(results)}
        return _reply(self._request("POST", "/exec/programmatic", body,
                                    request_id=request_id, retry=True))

    # -- sessions ---------------------------------------------------------

    def session(self, ttl_seconds: Optional[int] = None) -> "Session":
        """A new Python session: ``with client.session() as s: s.run(code)``.
        Its cells share one namespace (names, imports, functions, files),
        which survives a restart of the server; it is deleted when the
        ``with`` block ends."""
        body: Dict[str, Any] = {}
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        created = self._request("POST", "/sessions", body, retry=False)
        return Session(self, created["session_id"])

    def sessions(self) -> List[Dict[str, Any]]:
        """``GET /sessions``: this key's sessions."""
        return self._request("GET", "/sessions", retry=True)["sessions"]

    # -- the rest of the API --------------------------------------------

    def exec(self, code: str, *, args: Sequence[str] = (),
             files: Optional[Sequence[Dict[str, Any]]] = None,
             session_id: Optional[str] = None) -> Dict[str, Any]:
        """``POST /exec``: code with no tools."""
        body: Dict[str, Any] = {"lang": "py", "code": code, "args": list(args)}
        if files:
            body["files"] = list(files)
        if session_id:
            body["session_id"] = session_id
        return self._request("POST", "/exec", body, retry=False)

    def cancel(self, request_id: str) -> str:
        """Cancels the execution of a request id; returns what the cancel
        found (``cancelled``, ``completed``, ``failed``, ``pending``...)."""
        return self._request("POST", "/exec/programmatic/cancel",
                             {"request_id": request_id}, retry=True)["status"]

    def inspect(self, execution_id: str) -> Dict[str, Any]:
        """``GET /executions/{id}``."""
        return self._request("GET", f"/executions/{urllib.parse.quote(execution_id)}", retry=True)

    def executions(self, *, status: Optional[str] = None, limit: Optional[int] = None,
                   cursor: Optional[str] = None) -> Dict[str, Any]:
        """``GET /executions``: a page of this key's executions, newest first."""
        query = {k: v for k, v in (("status", status), ("limit", limit), ("cursor", cursor))
                 if v is not None}
        path = "/executions" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        return self._request("GET", path, retry=True)

    def upload(self, session_id: str, name: str, content: bytes) -> Dict[str, Any]:
        """Stores a file in a session; returns its ``{"id", "name", ...}``."""
        boundary = f"baton-{uuid.uuid4().hex}"
        parts = [
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"session_id\"\r\n\r\n"
            f"{session_id}\r\n".encode(),
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n".encode()
            + content + b"\r\n",
            f"--{boundary}--\r\n".encode(),
        ]
        reply = self._request("POST", "/upload", b"".join(parts), retry=False,
                              content_type=f"multipart/form-data; boundary={boundary}")
        return reply["files"][0]

    def download(self, session_id: str, file_id: str) -> bytes:
        """A stored file's bytes."""
        path = f"/download/{urllib.parse.quote(session_id)}/{urllib.parse.quote(file_id)}"
        return self._request("GET", path, retry=True, raw=True)

    # -- HTTP -------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None, *, retry: bool,
                 request_id: Optional[str] = None, content_type: str = "application/json",
                 raw: bool = False) -> Any:
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"X-API-Key": self.api_key, "Content-Type": content_type}
        if request_id:
            headers["X-LibreChat-Code-Request-ID"] = request_id
        attempts = self.retries + 1 if retry else 1
        delay = self.backoff
        for attempt in range(attempts):
            request = urllib.request.Request(self.url + path, data=data, headers=headers,
                                             method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    payload = response.read()
                return payload if raw else json.loads(payload)
            except urllib.error.HTTPError as error:
                raise _http_error(error) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as error:
                if attempt + 1 == attempts:
                    raise BatonError(0, "transport", str(error)) from error
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")


def _http_error(error: urllib.error.HTTPError) -> BatonError:
    text = error.read().decode(errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = {"error": text}
    return BatonError(error.code, body.get("error", ""), body.get("message"), body)


class Session:
    """A Python session of a ``Client`` (``Client.session``): run cells in
    one namespace with ``run``; a context manager that deletes the session
    on exit."""

    def __init__(self, client: Client, session_id: str) -> None:
        self.client = client
        self.session_id = session_id
        self.cells = 0

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    def run(self, code: str, tools: Optional[Mapping[str, Tool]] = None, *,
            tool_definitions: Optional[Sequence[Dict[str, Any]]] = None,
            files: Optional[Sequence[Dict[str, Any]]] = None,
            timeout_ms: Optional[int] = None) -> Execution:
        """Runs ``code`` as the session's next cell, answering its tool calls
        with ``tools`` (as ``Client.run``). The cell's number is sent with
        it, so a cell whose answer was lost is answered again, not run
        twice, when it is sent again after a transport failure."""
        tools = dict(tools or {})
        definitions = list(tool_definitions) if tool_definitions is not None else [
            tool_definition(name, function) for name, function in tools.items()]
        body: Dict[str, Any] = {"code": code, "tools": definitions, "cell": self.cells + 1}
        if files:
            body["files"] = list(files)
        if timeout_ms:
            body["timeout"] = timeout_ms
        path = f"/sessions/{urllib.parse.quote(self.session_id)}/exec"
        reply = _reply(self.client._request("POST", path, body, retry=True))
        ended = self.client._until_the_end(reply, tools, None)
        if ended.session is not None:
            self.cells = ended.session.cell
        return ended

    def info(self) -> Dict[str, Any]:
        """``GET /sessions/{id}``: cells, status, expiry and names."""
        path = f"/sessions/{urllib.parse.quote(self.session_id)}"
        return self.client._request("GET", path, retry=True)

    def names(self) -> Dict[str, Dict[str, str]]:
        """The names the session holds: ``{name: {"type", "repr"}}``."""
        return {n["name"]: {"type": n["type"], "repr": n["repr"]} for n in self.info()["names"]}

    def delete(self) -> None:
        """Ends the session (a cell that holds it is cancelled)."""
        path = f"/sessions/{urllib.parse.quote(self.session_id)}"
        try:
            self.client._request("DELETE", path, retry=True, raw=True)
        except BatonError as error:
            if error.status != 404:
                raise


def _tag(body: Dict[str, Any]) -> Optional[CellTag]:
    tag = body.get("session")
    if not isinstance(tag, dict):
        return None
    lost = tag.get("lost")
    return CellTag(tag.get("session_id", ""), int(tag.get("cell", 0)), tag.get("resumed", ""),
                   list(lost) if isinstance(lost, list) else None)


def _reply(body: Dict[str, Any]) -> Union[Paused, Execution]:
    if body.get("status") == "tool_call_required":
        return Paused(
            execution_id=body.get("execution_id", ""),
            session_id=body.get("session_id", ""),
            continuation_token=body["continuation_token"],
            tool_calls=[ToolCall(c["id"], c["name"], c.get("input") or {})
                        for c in body.get("tool_calls", [])],
            session=_tag(body),
        )
    return Execution(
        status=body.get("status", "error"),
        execution_id=body.get("execution_id", ""),
        session_id=body.get("session_id", ""),
        stdout=body.get("stdout", ""),
        stderr=body.get("stderr", ""),
        error=body.get("error"),
        files=body.get("files", []),
        deleted_files=body.get("deleted_files", []),
        session=_tag(body),
    )


def _answer(calls: Sequence[ToolCall], tools: Mapping[str, Tool]) -> List[Dict[str, Any]]:
    """Calls the tools of one pause (concurrently when any is async) and
    turns their returns and exceptions into results."""

    async def one(call: ToolCall) -> Dict[str, Any]:
        function = tools.get(call.name)
        try:
            if function is None:
                raise LookupError(f"no tool named {call.name!r} in this client")
            value = function(**call.input)
            if inspect.isawaitable(value):
                value = await value
            return {"call_id": call.id, "result": value, "is_error": False}
        except Exception as error:  # the code sees it as a ToolError
            return {"call_id": call.id, "result": None, "is_error": True,
                    "error_message": str(error) or type(error).__name__}

    async def all_of_them() -> List[Dict[str, Any]]:
        return list(await asyncio.gather(*(one(call) for call in calls)))

    return asyncio.run(all_of_them())
