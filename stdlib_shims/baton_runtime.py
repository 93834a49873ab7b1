"""baton's runtime inside the interpreter: tool call sites, the event loop
that batches pending calls into one pause, deterministic time/random/uuid,
captured output, and the program runner. The virtual `/mnt/data` is
`baton_workspace`, loaded first.

It runs in two hosts: the RustPython child (where `_baton` is the native
bridge to the server) and the CPython oracle harness in tests (where
`_baton` is a pure-Python fake with the same semantics). Keep it to the
subset both interpreters share.

Invariants:
- A pause happens only through `_flush()`, and `_flush()` sends every tool
  call registered and not yet answered, in registration order. So the batch
  of a pause is a pure function of the program and the answers so far, which
  is what makes a replay reach the same pauses.
- Every source of time and entropy the program can reach goes through
  `_baton.clock` and `_baton.entropy`, which the host makes deterministic
  per execution and reproduces on replay.
"""

import sys
import json
import asyncio
import asyncio.base_events
import heapq
import math
import operator
import collections.abc
import time
import random
import os
import traceback
import linecache
import posixpath
import io
import zlib
import builtins
import inspect
import keyword
import re
import datetime
import statistics
import pprint
import copy
import decimal
import weakref
import reprlib
import types
import contextvars

import _baton
import baton_contract as _contract
from baton_workspace import _ABSENT_OS, _WORKSPACE_FUNCTIONS, _WS, _install_workspace

SYNC, AWAITED, DEFERRED = "Sync", "Awaited", "Deferred"
FILENAME = "<string>"
PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
CO_COROUTINE = 0x80


class ToolError(Exception):
    """Raised at a tool call site when the client reports the tool failed."""

    def __init__(self, message, tool=None):
        super().__init__(message)
        self.tool = tool


# Tracebacks name it `ToolError`, as user code does, not `baton_runtime.ToolError`.
ToolError.__module__ = "builtins"


class _ControlExit(BaseException):
    """Base of the exceptions the host uses to end a program."""


class TimeLimitExceeded(_ControlExit):
    pass


class OutputLimitExceeded(_ControlExit):
    pass


class NonDeterminismError(_ControlExit):
    pass


_baton.register_exceptions(TimeLimitExceeded, OutputLimitExceeded, NonDeterminismError)

# ---------------------------------------------------------------- output


class _Stream:
    """sys.stdout / sys.stderr: every write goes to the host's capture."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, fd, name):
        self._fd = fd
        self.name = name

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        _baton.write(self._fd, s)
        return len(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def fileno(self):
        raise OSError("captured stream has no file descriptor")


# ---------------------------------------------------------------- time


def _time():
    return _baton.clock(0)


def _monotonic():
    return _baton.clock(1)


def _ns(f):
    return lambda: int(f() * 1_000_000_000)


_real_localtime = time.localtime
_real_gmtime = time.gmtime
_real_strftime = time.strftime
_real_ctime = time.ctime
_real_asctime = time.asctime


def _localtime(secs=None):
    return _real_localtime(_time() if secs is None else secs)


def _gmtime(secs=None):
    return _real_gmtime(_time() if secs is None else secs)


def _strftime(fmt, t=None):
    return _real_strftime(fmt, _localtime() if t is None else t)


def _ctime(secs=None):
    return _real_ctime(_time() if secs is None else secs)


def _asctime(t=None):
    return _real_asctime(_localtime() if t is None else t)


def _sleep(secs):
    if secs < 0:
        raise ValueError("sleep length must be non-negative")
    _baton.sleep(float(secs))


def _clock_gettime(clock_id):
    """Every clock id reads the virtual clock: the wall clock for
    CLOCK_REALTIME (and its TAI and coarse forms), the monotonic one for the
    rest (monotonic, boot time, CPU time)."""
    if not isinstance(clock_id, int):
        raise TypeError("'%s' object cannot be interpreted as an integer" % type(clock_id).__name__)
    return _time() if clock_id in _WALL_CLOCKS else _monotonic()


#: CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_TAI.
_WALL_CLOCKS = frozenset((0, 5, 11))


def _os_times():
    """`os.times()` from the virtual clock: the code's own CPU time is the
    time it has run; children's are zero."""
    now = _monotonic()
    return _TIMES_RESULT((now - _MONOTONIC_ORIGIN, 0.0, 0.0, 0.0, now))


#: Where the virtual monotonic clock of every execution starts.
_MONOTONIC_ORIGIN = 1000.0
_TIMES_RESULT = type(os.times())


def _install_time():
    os.times = _os_times
    if sys.implementation.name == "rustpython":
        # `time` is baton's native module on the virtual clock already
        # (src/vm/virtual_time.rs): no Python function of it leads to the
        # bridge. The patch below is for the CPython oracle.
        return
    time.time = _time
    time.time_ns = _ns(_time)
    for name in ("monotonic", "perf_counter", "process_time", "thread_time"):
        setattr(time, name, _monotonic)
        setattr(time, name + "_ns", _ns(_monotonic))
    time.clock_gettime = _clock_gettime
    time.clock_gettime_ns = lambda clock_id: int(_clock_gettime(clock_id) * 1_000_000_000)
    time.sleep = _sleep
    time.localtime = _localtime
    time.gmtime = _gmtime
    time.strftime = _strftime
    time.ctime = _ctime
    time.asctime = _asctime


# ---------------------------------------------------------------- the machine
#
# What code can learn of the machine is the same on every machine and in
# every child, so a replay sees what the first run saw: one process (pid 1,
# as in its own pid namespace), a fixed host and kernel, no build paths.

_UNAME = None


def _install_machine():
    global _UNAME
    _UNAME = type(os.uname())(("Linux", "baton", "6.0.0", "#1 SMP", os.uname().machine))
    os.uname = lambda: _UNAME
    os.getpid = lambda: 1
    os.getppid = lambda: 0
    if sys.implementation.name == "rustpython":
        # The stdlib is frozen into the binary, and the interpreter's paths
        # are virtual (`hide_build_paths` in src/vm/mod.rs): nothing the
        # warm-up looked up on the host stays.
        sys.path[:] = []
        sys.path_importer_cache.clear()
    import uuid
    # uuid1() reads the real clock and network card through `_uuid`: use the
    # virtual clock and a node from the execution's random stream instead.
    uuid._generate_time_safe = None
    uuid._GETTERS[:] = []


# ---------------------------------------------------------------- entropy

_real_seed = random.Random.seed


def _seed(self, a=None, version=2):
    if a is None:
        a = int.from_bytes(_baton.entropy(32), "big")
    _real_seed(self, a, version)


def _urandom(n):
    return _baton.entropy(int(n))


def _install_entropy():
    random.Random.seed = _seed
    # random.py bound these at import, before the patch: rebind them.
    random.seed = random._inst.seed
    random._urandom = _urandom
    os.urandom = _urandom
    os.getrandom = lambda size, flags=0: _baton.entropy(int(size))


def _reseed():
    """Per execution: the global generator restarts from the execution's stream."""
    random._inst.seed()


# ---------------------------------------------------------------- tool calls

_registry = []  # calls awaited (or used) and not yet sent, in that order
_unawaited = {}  # id -> call: coroutines made and never awaited nor used

# A call's life: made (a coroutine), pending (in the registry: the next
# pause sends it), done (answered), or withdrawn (cancelled or closed
# before it was sent: it is never made).
_MADE, _PENDING, _DONE, _WITHDRAWN = 0, 1, 2, 3

#: Modules whose code handles coroutines as coroutines: when they look at a
#: call (its class, its attributes, its repr), the call is not used as a value.
_MACHINERY = ("asyncio", "inspect", "abc", "_py_abc", "_collections_abc", "collections.abc",
              "types", "typing", "functools", "traceback", "linecache", "reprlib", "warnings",
              "baton_runtime", "logging")


def _asked_by_machinery(depth):
    """Whether the Python code `depth` frames up is asyncio & co."""
    try:
        name = sys._getframe(depth + 1).f_globals.get("__name__", "")
    except ValueError:
        return False
    return name.startswith(_MACHINERY)


_Future = asyncio.Future


class ToolCall:
    """One call of a tool, as the program sees it: a coroutine.

    Making it calls nothing. Awaiting it, directly or as a task (`gather`,
    `create_task`, `wait`, `as_completed`, `TaskGroup`), puts it in the
    registry, and the next pause sends every registered call: calls awaited
    together are one round. A task cancelled or a coroutine closed before its
    pause withdraws the call. Used as a plain value (baton's extension for
    code that forgets `await`), it is made on the spot and stands for its
    result.
    """

    __slots__ = ("site", "input", "frame", "_state", "_awaited", "_ok", "_value", "_text", "_waiters",
                 "_gen")

    def __init__(self, site, tool_input, frame):
        self.site = site
        self.input = tool_input
        self.frame = frame
        self._state = _MADE
        self._awaited = False
        self._ok = False
        self._value = None
        self._text = None
        self._waiters = []
        self._gen = None
        _unawaited[id(self)] = self

    def _register(self):
        if self._state in (_MADE, _WITHDRAWN):
            _unawaited.pop(id(self), None)
            self._state = _PENDING
            _registry.append(self)

    def _withdraw(self):
        """Takes back a call that was not sent yet."""
        _unawaited.pop(id(self), None)
        if self._state == _PENDING:
            for index, call in enumerate(_registry):
                if call is self:
                    del _registry[index]
                    break
        if self._state != _DONE:
            self._state = _WITHDRAWN

    def _resolve(self, ok, payload):
        """Ends the call: `payload` is the result's JSON text, or the
        error's message."""
        self._state, self._ok = _DONE, ok
        if ok:
            self._text = payload
        else:
            self._value = payload
        self.frame = None
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters = []

    def result(self):
        """The call's value, making the call now if it was not made."""
        if self._state != _DONE:
            self._register()
            _flush()
        if not self._ok:
            raise ToolError(self._value, self.site.tool)
        if self._text is not None:
            # Read where the code first takes the value, under its frames,
            # as CPython reads a result in the tool's coroutine: data nested
            # deeper than the recursion limit allows raises RecursionError
            # there (and again at each later look).
            self._value = _decode_result(self._text)
            self._text = None
        return self._value

    def __await__(self):
        if self._awaited:
            raise RuntimeError("cannot reuse already awaited coroutine")
        self._awaited = True
        if self._state != _DONE:
            self._register()
            loop = asyncio.events._get_running_loop()
            if loop is None:
                _flush()
            else:
                fut = _Future(loop=loop)
                self._waiters.append(fut)
                try:
                    yield from fut
                except BaseException:
                    if self._state != _DONE:
                        self._withdraw()
                    raise
        return self.result()

    # The coroutine protocol, as asyncio's tasks drive a coroutine.
    def send(self, value):
        if self._gen is None:
            self._gen = self.__await__()
        return self._gen.send(value)

    def throw(self, *exc):
        if self._gen is None:
            # Thrown into before it started (a task cancelled before its
            # first step): the tool is never called.
            self._withdraw()
            self._gen = self.__await__()
        return self._gen.throw(*exc)

    def close(self):
        if self._gen is not None:
            self._gen.close()
        elif self._state == _MADE:
            self._withdraw()

    def _coroutine_repr(self):
        return "<coroutine object %s at %#x>" % (self.site.python, id(self))

    # Looked at by the program, it is its value; by asyncio, a coroutine.
    @property
    def __class__(self):
        if _asked_by_machinery(1):
            return ToolCall
        return type(self.result())

    # What `inspect` reads of a coroutine (as CPython's for an `async def`
    # of the tool's name): created, suspended while awaited, closed once
    # answered; never running (a tool's body is not Python).
    @property
    def cr_running(self):
        return False

    @property
    def cr_suspended(self):
        return self._awaited and self._state != _DONE

    @property
    def cr_await(self):
        return None

    @property
    def cr_origin(self):
        return None

    @property
    def cr_code(self):
        return _tool_code(self.site.python)

    @property
    def cr_frame(self):
        if self._state == _DONE:
            return None
        return _CoroutineFrame(self)

    def __getattr__(self, name):
        if name in ("__name__", "__qualname__"):
            return self.site.python
        if name.startswith("_") or name in _COROUTINE_ATTRIBUTES or _asked_by_machinery(1):
            raise AttributeError("'coroutine' object has no attribute '%s'" % name)
        return getattr(self.result(), name)

    def __getitem__(self, key):
        return self.result()[key]

    # Defined on the class, not only forwarded: `{**call}` and `dict(call)`
    # look for `keys` on the type to take a value for a mapping.
    def keys(self):
        return self.result().keys()

    def __iter__(self):
        return iter(self.result())

    def __len__(self):
        return len(self.result())

    def __contains__(self, item):
        return item in self.result()

    def __str__(self):
        if _asked_by_machinery(1):
            return self._coroutine_repr()
        return str(self.result())

    def __repr__(self):
        if _asked_by_machinery(1):
            return self._coroutine_repr()
        return repr(self.result())

    def __format__(self, spec):
        return format(self.result(), spec)

    def __bool__(self):
        return bool(self.result())

    def __eq__(self, other):
        if _asked_by_machinery(1):
            return self is other
        return self.result() == other

    def __ne__(self, other):
        if _asked_by_machinery(1):
            return self is not other
        return self.result() != other

    def __lt__(self, other):
        return self.result() < other

    def __le__(self, other):
        return self.result() <= other

    def __gt__(self, other):
        return self.result() > other

    def __ge__(self, other):
        return self.result() >= other

    def __add__(self, other):
        return self.result() + other

    def __radd__(self, other):
        return other + self.result()

    def __int__(self):
        return int(self.result())

    def __float__(self):
        return float(self.result())

    def __index__(self):
        return operator.index(self.result())

    def __complex__(self):
        return complex(self.result())

    def __round__(self, ndigits=None):
        return round(self.result()) if ndigits is None else round(self.result(), ndigits)

    def __trunc__(self):
        return math.trunc(self.result())

    def __floor__(self):
        return math.floor(self.result())

    def __ceil__(self):
        return math.ceil(self.result())

    def __neg__(self):
        return -self.result()

    def __pos__(self):
        return +self.result()

    def __abs__(self):
        return abs(self.result())

    def __setitem__(self, key, value):
        self.result()[key] = value

    def __delitem__(self, key):
        del self.result()[key]

    def __reversed__(self):
        return reversed(self.result())

    def __copy__(self):
        return copy.copy(self.result())

    def __deepcopy__(self, memo):
        return copy.deepcopy(self.result(), memo)

    __hash__ = object.__hash__


_COROUTINE_ATTRIBUTES = frozenset({"gi_frame", "gi_running", "gi_code"})


class _CoroutineFrame:
    """`cr_frame` of a tool call not yet answered: where it stands, as
    CPython 3.11's `inspect.getcoroutinestate` reads it (`f_lasti` -1
    before it starts), and its arguments as its locals."""

    __slots__ = ("f_lasti", "f_locals", "f_code", "f_lineno")

    def __init__(self, call):
        self.f_lasti = 0 if call._awaited else -1
        self.f_locals = dict(call.input) if isinstance(call.input, dict) else {}
        self.f_code = _tool_code(call.site.python)
        self.f_lineno = self.f_code.co_firstlineno if self.f_code is not None else 0


_tool_codes = {}


def _tool_code(name):
    """A code object of an `async def` named as the tool (`cr_code`)."""
    code = _tool_codes.get(name)
    if code is None:
        try:
            code = _real_compile("async def _tool(): pass", "<tool>", "exec").co_consts[0]
            if name.isidentifier():
                code = code.replace(co_name=name, co_qualname=name)
        except Exception:
            code = None
        _tool_codes[name] = code
    return code


def _forward_binary(name, op):
    def forward(self, other):
        return op(self.result(), other)

    def reflected(self, other):
        return op(other, self.result())

    forward.__name__, reflected.__name__ = "__%s__" % name, "__r%s__" % name
    setattr(ToolCall, "__%s__" % name, forward)
    setattr(ToolCall, "__r%s__" % name, reflected)


# A call used in arithmetic stands for its value (`rates[0] * 100`).
for _name, _op in (
    ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
    ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
    ("matmul", operator.matmul), ("and", operator.and_), ("or", operator.or_),
    ("xor", operator.xor), ("lshift", operator.lshift), ("rshift", operator.rshift),
):
    _forward_binary(_name, _op)

collections.abc.Coroutine.register(ToolCall)
# asyncio asks `type(obj) in _iscoroutine_typecache` first: a call passes
# without its class being looked at.
asyncio.coroutines._iscoroutine_typecache.add(ToolCall)


def _never_awaited():
    """Warns, as CPython does, of every coroutine the program never awaited
    (its tool was not called)."""
    if not _unawaited:
        return
    calls = [call for call in _unawaited.values() if call._state == _MADE]
    _unawaited.clear()
    for call in calls:
        sys.stderr.write("%s:%d: RuntimeWarning: coroutine '%s' was never awaited (the tool was not called)\n"
                         % (_user_files[-1], call.site.line, call.site.python))


def _value(item):
    return item.result() if type(item) is ToolCall else item


def _values(data):
    """`data` with every call in it (one level) replaced by its value."""
    if type(data) is ToolCall:
        data = data.result()
    if type(data) in (list, tuple):
        return [_value(item) for item in data]
    if type(data) is dict:
        return {key: _value(item) for key, item in data.items()}
    if hasattr(data, "__next__"):
        return (_value(item) for item in data)
    return data


def _deep_values(data, depth=0):
    """`data` with calls replaced by their values, through plain containers."""
    data = _value(data)
    if depth > 50:
        return data
    if type(data) in (list, tuple):
        return type(data)(_deep_values(item, depth + 1) for item in data)
    if type(data) is dict:
        return {key: _deep_values(item, depth + 1) for key, item in data.items()}
    return data


def _reading_values(function, unwrap):
    """`function` with its positional arguments unwrapped first."""
    def reading(*args, **kwargs):
        return function(*[unwrap(arg) for arg in args], **kwargs)

    reading.__name__ = reading.__qualname__ = function.__name__
    reading.__doc__ = function.__doc__
    return reading


def _install_value_readers():
    """Library functions that look at the exact type of their data read
    calls used as values (statistics over a list of calls, pprint)."""
    for name in getattr(statistics, "__all__", ()):
        function = getattr(statistics, name, None)
        if callable(function) and not isinstance(function, type):
            setattr(statistics, name, _reading_values(function, _values))
    for name in ("pprint", "pformat", "pp"):
        function = getattr(pprint, name, None)
        if function is not None:
            setattr(pprint, name, _reading_values(function, _deep_values))


class Site:
    """The callable a rewritten call site names: `_B[3](city="SF")`."""

    __slots__ = ("id", "tool", "python", "params", "optional", "accepts_more", "checks",
                 "direct_only", "mode", "line", "max_input")

    def __init__(self, site_id, tool, mode, line, max_input):
        """`tool`: the program's binding of the tool (`original`, `python`,
        `params`, `optional`, `open`, `checks`)."""
        self.id = site_id
        self.tool = tool["original"]
        self.python = tool["python"]
        self.params = tool["params"]
        self.optional = tool["optional"]
        self.accepts_more = tool["open"]
        # The checks' JSON text, parsed at the first call (most tools of a
        # start are never called); None when there is nothing to check.
        self.checks = None if tool["checks"] == "{}" else tool["checks"]
        self.direct_only = tool["direct_only"]
        self.mode = mode
        self.line = line
        self.max_input = max_input

    def __call__(self, *args, **kwargs):
        call = ToolCall(self, self._input(args, kwargs), sys._getframe(1))
        if self.mode == SYNC:
            return call.result()
        return call

    def _input(self, args, kwargs):
        """The call's input as JSON text: the arguments bound to the tool's
        signature (CPython's TypeErrors when they do not bind), optional
        arguments given as None left out, each checked against its
        parameter's schema (TypeError, or ValueError for an enum miss). A
        tool only the model may call raises PermissionError."""
        if self.direct_only:
            raise PermissionError(
                "%s() can only be called directly by the model, not from code "
                "(its allowed_callers do not include code execution)" % self.python)
        tool_input = _contract.bind(self.python, self.params, self.optional, self.accepts_more,
                                    args, kwargs)
        text = _baton.dumps(tool_input)
        plain = text is not None
        try:
            if text is None:
                text = _INPUT_ENCODER.encode(tool_input)
        except (TypeError, ValueError) as e:
            raise TypeError("%s(): arguments must be JSON values: %s" % (self.python, e)) from None
        if self.checks is not None:
            if self.checks.__class__ is str:
                self.checks = json.loads(self.checks)
            # Values that were not plain (calls used as values, tuples in
            # dicts...) are checked as the tool will receive them.
            _contract.check(self.python, tool_input if plain else json.loads(text), self.checks)
        if len(text) > self.max_input:
            raise ValueError("%s(): input of %d bytes exceeds the limit of %d" % (self.python, len(text), self.max_input))
        return text


#: The native scanner `json.loads` ends in, called directly: a result's
#: text is the server's compact JSON (`deep_json::compact`), one value with
#: nothing around it, so `loads`' layers (type checks, whitespace, the end)
#: have nothing to do; nesting deeper than the recursion limit raises
#: RecursionError from the scanner, as through `loads`.
_scan_result = json.decoder.JSONDecoder().scan_once


def _decode_result(text):
    return _scan_result(text, 0)[0]


def _jsonable(value):
    if isinstance(value, ToolCall):
        return value.result()
    raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)


# Built once: json.dumps() with options builds an encoder per call.
_INPUT_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_jsonable)


_real_default = json.JSONEncoder.default


def _encoder_default(self, o):
    if isinstance(o, ToolCall):
        return o.result()
    return _real_default(self, o)


def _frame_summary(frame):
    """The paused frame for inspection: `(function, line, locals)`, the
    locals being up to 20 that render as JSON (each cut to 200 characters),
    as the text of a JSON object."""
    if frame is None:
        return ("", 0, "{}")
    parts = []
    for name, value in frame.f_locals.items():
        if len(parts) >= 20:
            break
        # Exact types only: modules, functions and classes are skipped
        # without the cost of a failed encode.
        kind = type(value)
        if kind not in _RENDERABLE or name.startswith("__") or name in _hidden_names:
            continue
        if kind in _CONTAINERS and len(value) > 50:
            text = _string_json("<%s of %d items>" % (kind.__name__, len(value)))
        else:
            # At most the first 804 bytes (201 characters or more): what a
            # value holds past its first 200 characters is never shown, nor
            # encoded.
            text = _baton.preview(value, 804)
            if text is None:
                continue
            if len(text) > 200:
                text = _string_json(text[:197] + "...")
        key = _baton.dumps(name)  # inline: once per local at every pause
        if key is None:
            key = _LOCALS_ENCODER.encode(name)
        parts.append(key + ": " + text)
    return (frame.f_code.co_name, frame.f_lineno, "{" + ", ".join(parts) + "}")


_RENDERABLE = (str, int, float, bool, type(None), list, dict, tuple)
_CONTAINERS = (list, dict, tuple)


_LOCALS_ENCODER = json.JSONEncoder()


def _string_json(text):
    """A string as JSON, natively (its text as is), or by `json` for the
    strings the native encoder leaves to it (lone surrogates)."""
    encoded = _baton.dumps(text)
    return _LOCALS_ENCODER.encode(text) if encoded is None else encoded


_hidden_names = set()


_pausing = []  # non-empty while a pause is being made

_calls_per_round = 10000  # set from the program's limits by `run`


def _flush():
    """Pause: send every registered call, wait for the answers, deliver them."""
    if _pausing:
        # Looking at the frame must never need a call's value.
        raise RuntimeError("baton: a tool call's value was needed while pausing")
    pending = [call for call in _registry if call._state == _PENDING]
    # A round carries at most `_calls_per_round` calls; the rest wait, in
    # order, for the next round.
    batch = pending[:_calls_per_round]
    _registry[:] = pending[_calls_per_round:]
    if not batch:
        return
    _pausing.append(True)
    try:
        function, line, locals_ = _frame_summary(batch[0].frame)
        answers = _baton.pause(
            [c.site.id for c in batch],
            [c.site.tool for c in batch],
            [c.input for c in batch],
            [c.site.line for c in batch],
            function,
            line,
            locals_,
        )
    finally:
        _pausing.clear()
    for call, (ok, payload) in zip(batch, answers):
        call._resolve(ok, payload)


# ---------------------------------------------------------------- event loop


class _Deadlock(RuntimeError):
    pass


class _IdleSelector:
    """Stands where a selector would: the loop asks it to wait when idle."""

    def select(self, timeout):
        if timeout is not None and timeout <= 0:
            return []
        if _registry:
            _flush()
            return []
        if timeout is None:
            raise _Deadlock(
                "the program awaits something that can never complete "
                "(no task can run and no tool call is pending)"
            )
        _baton.sleep(timeout)
        return []

    def close(self):
        pass


_Handle = asyncio.events.Handle
_new_handle = object.__new__
_copy_context = contextvars.copy_context


class EventLoop(asyncio.base_events.BaseEventLoop):
    """asyncio's base loop with no I/O: idle means 'pause for tool calls'."""

    def __init__(self):
        super().__init__()
        self._selector = _IdleSelector()

    def _process_events(self, event_list):
        pass

    def call_soon(self, callback, *args, context=None):
        """BaseEventLoop's, in one call where it took five (`_check_closed`,
        `_call_soon`, `Handle.__init__` and its `get_debug`): the same
        `Handle`, filled in place. In debug mode, BaseEventLoop's own."""
        if self._debug:
            return super().call_soon(callback, *args, context=context)
        if self._closed:
            raise RuntimeError('Event loop is closed')
        handle = _new_handle(_Handle)
        handle._context = _copy_context() if context is None else context
        handle._loop = self
        handle._callback = callback
        handle._args = args
        handle._cancelled = False
        handle._repr = None
        handle._source_traceback = None
        self._ready.append(handle)
        return handle

    def run_until_complete(self, future):
        """BaseEventLoop's, without run_forever's stop machinery: runs
        iterations until the future is done."""
        self._check_closed()
        self._check_running()
        future = asyncio.ensure_future(future, loop=self)
        old_hooks = sys.get_asyncgen_hooks()
        sys.set_asyncgen_hooks(firstiter=self._asyncgen_firstiter_hook, finalizer=self._asyncgen_finalizer_hook)
        asyncio.events._set_running_loop(self)
        try:
            while not future.done():
                self._run_once()
        finally:
            asyncio.events._set_running_loop(None)
            sys.set_asyncgen_hooks(*old_hooks)
        return future.result()

    def _run_once(self):
        """BaseEventLoop's iteration, minus what a loop without I/O does not
        need: no poll while callbacks are ready, no clock read without timers."""
        scheduled, ready = self._scheduled, self._ready
        while scheduled and scheduled[0]._cancelled:
            self._timer_cancelled_count -= 1
            heapq.heappop(scheduled)._scheduled = False
        if not ready and not self._stopping:
            timeout = None
            if scheduled:
                timeout = max(0, scheduled[0]._when - self.time())
            self._selector.select(timeout)
        if scheduled:
            end_time = self.time() + self._clock_resolution
            while scheduled and scheduled[0]._when < end_time:
                handle = heapq.heappop(scheduled)
                handle._scheduled = False
                ready.append(handle)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if not handle._cancelled:
                handle._run()

    def _write_to_self(self):
        pass

    def close(self):
        super().close()


class _Policy(asyncio.DefaultEventLoopPolicy):
    _loop_factory = EventLoop


def _install_loop():
    asyncio.set_event_loop_policy(_Policy())


# ---------------------------------------------------------------- running a program


#: Bound in every program's globals before it runs, as `import json` would
#: bind them: the API design's pre-imported modules (LibreChat's tool
#: description shows `await asyncio.gather(...)` with no import).
PRE_IMPORTED = {"asyncio": asyncio, "json": json, "re": re, "datetime": datetime}


class _Tools:
    """The `tools` namespace: `tools.get_weather(...)` outside rewritten sites."""

    def __init__(self, funcs):
        self.__dict__.update(funcs)

    def __repr__(self):
        return "<tools: %s>" % ", ".join(sorted(self.__dict__))


def _plain_site(tool, max_input):
    """A tool function for calls the rewrite did not see (aliases, getattr)."""
    site = Site(-1, tool, DEFERRED, 0, max_input)

    def call(*args, **kwargs):
        frame = sys._getframe(1)
        site.line = frame.f_lineno
        return ToolCall(site, site._input(args, kwargs), frame)

    return describe(call, tool)


class _ToolSignature(inspect.Signature):
    """A tool's signature for `inspect.signature`: its parameters, required
    ones first, optional ones defaulting to None, `**kwargs` when its schema
    allows more. Built when first looked at: a start binds every tool, and
    few programs ever ask."""

    __slots__ = ("_spec", "_built")

    def __init__(self, params, optional, accepts_more):
        self._spec = (params, optional, accepts_more)
        self._built = None

    def _signature(self):
        if self._built is None:
            params, optional, accepts_more = self._spec
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
            # A parameter no `def` could name (`class`, `max-n`) is reached
            # through **kwargs.
            writable = [name for name in params if name.isidentifier() and not keyword.iskeyword(name)]
            made = [inspect.Parameter(name, kind, default=None if name in optional else inspect.Parameter.empty)
                    for name in writable]
            if accepts_more or len(writable) < len(params):
                rest = "kwargs" if "kwargs" not in writable else "_kwargs"
                made.append(inspect.Parameter(rest, inspect.Parameter.VAR_KEYWORD))
            self._built = inspect.Signature(made)
        return self._built

    @property
    def parameters(self):
        return self._signature().parameters

    @property
    def return_annotation(self):
        return inspect.Signature.empty


def describe(function, tool):
    """Names a tool's function, gives it the tool's description as its
    docstring and its signature, and marks it a coroutine function, as an
    `async def` is to `inspect` and `asyncio` (also used by the CPython
    oracle)."""
    function.__name__ = function.__qualname__ = tool["python"]
    function.__module__ = "__main__"
    function.__doc__ = tool["doc"]
    function.__signature__ = _ToolSignature(tool["params"], tool["optional"], tool["open"])
    if hasattr(inspect, "markcoroutinefunction"):
        inspect.markcoroutinefunction(function)
    return function


def _bindings_for(program):
    """What a program finds bound before it runs: its tools' functions, the
    `tools` namespace, its site list under its marker, `ToolError`."""
    max_input = program["limits"]["max_input_bytes"]
    tools = program["tools"]
    funcs = {}
    for t in tools:
        funcs[t["python"]] = _plain_site(t, max_input)
    sites = []
    for s in program["sites"]:
        sites.append(Site(s["id"], tools[s["tool"]], s["mode"], s["line"], max_input))
    bound = dict(funcs)
    if "tools" not in funcs:
        bound["tools"] = _Tools(funcs)
    bound[program["marker"]] = sites
    bound["ToolError"] = ToolError
    bound["ToolExecutionError"] = ToolError
    return bound


def _globals_for(program):
    g = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
    g.update(PRE_IMPORTED)
    g.update(_bindings_for(program))
    _hidden_names.clear()
    _hidden_names.update(g)
    _injected.clear()
    _injected.update(g)
    return g


#: What the runtime put in a session's globals, by name: a later cell's
#: bindings replace only these (a name the code bound itself stays).
_injected = {}


def bind_cell(g, bound):
    """Binds a later cell's tools in the session's globals `g`: a name the
    runtime bound before is bound again, a name the code rebound (or
    deleted) is left as the code left it. Also used by the CPython oracle."""
    for name, value in bound.items():
        if name not in g or g[name] is _injected.get(name, _MISSING):
            if name in _injected or name not in g:
                g[name] = value
                _injected[name] = value
    _hidden_names.update(bound)


_MISSING = object()


_spare_loops = []


def prepare():
    """In an idle child, before its job: build the loop the program will use."""
    _spare_loops[:] = [EventLoop()]


def _run_code(code, g, loop=None):
    """Runs compiled code in `g`: with top-level `await`, on `loop` (a
    session's, whose tasks live on from cell to cell) or a fresh one."""
    if code.co_flags & CO_COROUTINE:
        if loop is None:
            loop = _spare_loops.pop() if _spare_loops else EventLoop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(_real_eval(code, g))
        finally:
            asyncio.set_event_loop(None)
    else:
        _real_exec(code, g)


def _error_line(exc):
    """The exception's one line, `Type: message`, as the contract's error."""
    text = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    return text.splitlines()[0].rstrip() if text else type(exc).__name__


def _failure(exc):
    """How the program failed, for the host: `("memory", "")` for a
    MemoryError, else `("exception", line)`. The failures the host raised
    itself (time limit, output cap, replay divergence) it knows, and reports
    in place of this."""
    if isinstance(exc, MemoryError):
        return ("memory", "")
    return ("exception", _error_line(exc))


def _report(exc):
    """A CPython-style traceback on stderr, with the user's frames only."""
    if isinstance(exc, (OutputLimitExceeded, NonDeterminismError)):
        return
    try:
        report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        _keep_user_frames(report, set())
        lines = list(report.format())
    except Exception:
        lines = ["%s\n" % _error_line(exc)]
    sys.stderr.write("".join(lines))


def _keep_user_frames(report, seen):
    """Drops the runtime's frames from a report and the ones it chains to;
    shows a syntax error with the user's own line."""
    while report is not None and id(report) not in seen:
        seen.add(id(report))
        report.stack = traceback.StackSummary.from_list(
            [frame for frame in report.stack if frame.filename in _user_files]
        )
        if report.exc_type is not None and issubclass(report.exc_type, SyntaxError) and report.lineno:
            line = linecache.getline(_user_files[-1], int(report.lineno))
            if line:
                report.text = line
        _keep_user_frames(report.__cause__, seen)
        report = report.__context__


#: The file names of the user's code in this process: `<string>`, or a
#: session's cells (`<cell 1>`, ...), the current one last.
_user_files = [FILENAME]

#: A session's globals and event loop, kept from cell to cell.
_session = {}


def run(program_json):
    """Runs one program, or one cell of a session in the globals the
    earlier cells left. Returns None on success, else `(kind, line)` (see
    `_failure`; `("exit", status)` for a non-zero integer exit)."""
    program = json.loads(program_json)
    place = program.get("session")
    later = place is not None and not place["first"] and "g" in _session
    sys.stdout = _Stream(1, "<stdout>")
    sys.stderr = _Stream(2, "<stderr>")
    _reseed()
    limits = program["limits"]
    global _recursion_cap, _calls_per_round
    _recursion_cap = limits["recursion_cap"]
    _calls_per_round = limits["calls_per_round"]
    if later and not place["fresh_workspace"]:
        _WS.lay(_baton.workspace(), program["read_only"], program["directories"])
    else:
        _WS.reset(_baton.workspace(), limits["workspace_bytes"], limits["workspace_files"],
                  program["read_only"], program["directories"])
    if not later:
        _real_setrecursionlimit(min(limits["recursion_limit"], _recursion_cap))
        del _registry[:]
        _unawaited.clear()
        _session.clear()
    if program["lang"] == "bash":
        return _run_shell(program)
    if later and place.get("snapshot"):
        return _write_snapshot(program, _session["g"])
    filename = FILENAME if place is None else "<cell %d>" % place["cell"]
    original = program["original"]
    linecache.cache[filename] = (len(original), None, original.splitlines(True), filename)
    if later:
        _user_files.append(filename)
        g = _session["g"]
        bind_cell(g, _bindings_for(program))
    else:
        _user_files[:] = [filename]
        del _cell_sources[:]
        sys.argv = ["main.py"] + program["argv"]
        # As CPython runs a program in the working directory: its modules there
        # import (see `baton_workspace._ModuleFinder`).
        sys.path[:0] = [""]
        g = _globals_for(program)
        if place is not None:
            _session["g"] = g
            _session["loop"] = _spare_loops.pop() if _spare_loops else EventLoop()
    parts = [(filename, program["source"])]
    if place is not None and place.get("base"):
        parts = _base_parts(program, filename)
    elif place is not None:
        _cell_sources.append((filename, original))
    outcome = _run_in(parts, g, _session.get("loop"))
    if place is not None:
        _report_names(g)
    return outcome


#: The sources of a session's cells run in this process, in order, as
#: `(file, source)`: a compaction's snapshot finds there the statements
#: that made each name (a base's parts each under their own file).
_cell_sources = []


def _base_parts(program, filename):
    """A compaction's base as `(file, source)` parts: each statement as if
    at its line of the cell it came from (blank lines before it), so that
    the functions it defines again say so in tracebacks; those files'
    lines are put in `linecache` and they count as the user's."""
    import baton_snapshot

    parts = []
    originals = baton_snapshot.segments(program["original"])
    for (line, name, text), (_, _, original) in zip(baton_snapshot.segments(program["source"]), originals):
        if name is None:
            parts.append((filename, text))
            continue
        padding = "\n" * max(line - 1, 0)
        parts.append((name, padding + text))
        _cell_sources.append((name, padding + original))
        _remember_lines(name, line, original)
        if name not in _user_files:
            _user_files.insert(len(_user_files) - 1, name)
    return parts


def _remember_lines(name, line, text):
    """Puts `text` at `line` of `name` in `linecache`."""
    entry = linecache.cache.get(name)
    lines = list(entry[2]) if entry else []
    new = text.splitlines(True)
    end = max(line - 1, 0) + len(new)
    lines.extend(["\n"] * (end - len(lines)))
    lines[max(line - 1, 0):end] = new
    linecache.cache[name] = (sum(len(x) for x in lines), None, lines, name)


def _run_in(parts, g, loop):
    """Compiles and runs each `(file, source)` part of a program in `g`,
    in order; its outcome, as `run` says."""
    try:
        for filename, source in parts:
            code = _baton.compile(_real_compile, source, filename, "exec", PyCF_ALLOW_TOP_LEVEL_AWAIT)
            _run_code(code, g, loop)
    except SystemExit as e:
        _never_awaited()
        _finish_files()
        return _exited(e)
    except BaseException as e:
        if not isinstance(e, _ControlExit):
            _never_awaited()
        _report(e)
        if not isinstance(e, (_ControlExit, MemoryError)):
            _finish_files()
        return _failure(e)
    _never_awaited()
    _WS.finish()
    return None


def _write_snapshot(program, g):
    """Writes on stdout, as JSON, the base source that compaction folds the
    session's cells into, the names it cannot carry (`baton_snapshot`) and
    the read-only files; reports every file of `/mnt/data` as made. This
    child is not used again."""
    import baton_snapshot

    cells = list(_cell_sources)
    bound = _bindings_for(program)

    def fresh_globals():
        fresh = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
        fresh.update(PRE_IMPORTED)
        fresh.update(bound)
        return fresh

    def run_statement(text, globals_):
        _real_exec(_baton.compile(_real_compile, text, "<session base>", "exec", 0), globals_)

    max_bytes = program["limits"]["max_source_bytes"]
    out, err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()
    try:
        source, lost = baton_snapshot.snapshot(g, cells, dict(_injected), fresh_globals, run_statement,
                                               max_bytes)
    except baton_snapshot.TooLarge:
        return ("exception", "its base source would pass --max-source-bytes (%d bytes)" % max_bytes)
    except Exception as exc:
        return _failure(exc)
    finally:
        sys.stdout, sys.stderr = out, err
    # Every file of /mnt/data is reported as made (the base starts with
    # them), read-only ones too (named: the base seals them again).
    read_only = sorted(_WS.read_only)
    _WS.initial = {}
    _WS.read_only = frozenset()
    _WS.finish()
    sys.stdout.write(json.dumps({"source": source, "lost": lost, "read_only": read_only}))
    return None


#: Types whose values are shown with their repr (exact types only: no
#: code of the program runs to describe its names).
_PLAIN_TYPES = (int, float, complex, str, bytes, bool, type(None), list, tuple, dict, set, frozenset)
_PLAIN_SCALARS = (int, float, complex, str, bytes, bool, type(None))


def _plain_deep(value, budget):
    """Whether `value` is made only of `_PLAIN_TYPES` (at most `budget[0]`
    items looked at)."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return True
    if kind is dict:
        return all(_plain_deep(k, budget) and _plain_deep(v, budget) for k, v in dict.items(value))
    if kind in (list, tuple, set, frozenset):
        return all(_plain_deep(item, budget) for item in value)
    return False


_NAMES_REPR = reprlib.Repr()
_NAMES_REPR.maxstring = _NAMES_REPR.maxother = 200
_NAMES_REPR.maxlist = _NAMES_REPR.maxtuple = _NAMES_REPR.maxset = _NAMES_REPR.maxdict = 20


def _describe(value):
    """A value's type name and text for the session's listing, from the
    interpreter's own data only."""
    kind = type(value)
    type_name = type.__dict__["__name__"].__get__(kind)
    if kind in _PLAIN_TYPES and _plain_deep(value, [1000]):
        return type_name, _NAMES_REPR.repr(value)
    if kind is types.FunctionType:
        return type_name, "<function %s>" % types.FunctionType.__dict__["__qualname__"].__get__(value)
    if isinstance(kind, type) and issubclass(kind, type):
        return type_name, "<class '%s'>" % type.__dict__["__qualname__"].__get__(value)
    if kind is types.ModuleType:
        return type_name, "<module '%s'>" % dict.get(object.__getattribute__(value, "__dict__"), "__name__", "?")
    return type_name, "<%s object>" % type_name


def _report_names(g):
    """Reports the names a session's cell left in its globals (not those
    starting with `_`, nor what the runtime bound and the code left)."""
    count = 0
    for name in sorted(n for n in dict.keys(g) if type(n) is str and not n.startswith("_")):
        value = dict.get(g, name)
        if name in _injected and value is _injected[name]:
            continue
        try:
            type_name, text = _describe(value)
        except Exception:
            type_name, text = "object", "<object>"
        _baton.name(name, type_name, text[:200])
        count += 1
        if count >= 500:
            break


def _exited(exc):
    """How `SystemExit` ends the program: None for 0, `("exit", status)` for
    another integer; any other code is written to stderr (as CPython does)
    and is the error's text."""
    code = exc.code
    if code is None or code == 0 and isinstance(code, int):
        return None
    if isinstance(code, int):
        return ("exit", str(int(code)))
    sys.stderr.write("%s\n" % (code,))
    return ("exception", "SystemExit: %s" % (code,))


def _finish_files():
    """Reports the files of code that raised or exited (they stand, as on
    a disk); a failure to report them leaves them out."""
    try:
        _WS.finish()
    except Exception:
        pass


def _shell_compile(source, filename):
    return _baton.compile(_real_compile, source, filename, "exec", 0)


def _run_shell(program):
    """Runs a command line with baton's shell (`baton_shell`)."""
    import baton_shell
    baton_shell.compile_source = _shell_compile
    baton_shell.control_exceptions = (_ControlExit,)
    sys.argv = ["bash"]
    try:
        status = baton_shell.run(program["source"], program["argv"])
    except BaseException as e:
        _report(e)
        if not isinstance(e, (_ControlExit, MemoryError)):
            _finish_files()
        return _failure(e)
    _finish_files()
    return None if status == 0 else ("exit", str(status))


# ---------------------------------------------------------------- the fence
#
# The Python half of the sandbox: clear errors for what code may not do.
# It is not the wall (the child's seccomp filter and empty root are); it
# makes a refused attempt fail early, with a message that says why.

_BLOCKED_MODULES = frozenset({
    "socket", "_socket", "ssl", "_ssl", "subprocess", "_posixsubprocess",
    "multiprocessing", "_multiprocessing", "_posixshmem", "ctypes", "_ctypes",
    "mmap", "select", "signal", "_signal", "resource", "fcntl", "pty", "tty",
    "termios", "faulthandler", "_winapi", "nt", "msvcrt", "winreg", "pwd",
    "grp", "syslog", "_testinternalcapi", "_remote_debugging", "_baton",
})

_DENIED_OS = (
    "system", "popen", "fork", "forkpty", "execl", "execle", "execlp", "execlpe",
    "execv", "execve", "execvp", "execvpe", "_execvpe", "spawnl", "spawnle",
    "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
    "posix_spawn", "posix_spawnp", "kill", "killpg", "fchdir", "chroot", "fchmod",
    "lchmod", "chown", "fchown", "lchown", "mkfifo", "mknod", "link", "symlink", "setuid", "setgid",
    "seteuid", "setegid", "setreuid", "setregid", "setresuid", "setresgid",
    "setgroups", "setsid", "setpgid", "setpgrp", "nice", "openpty", "login_tty",
    "sched_setaffinity", "memfd_create", "dup", "dup2",
    "pipe", "pipe2", "eventfd", "pidfd_open", "setpriority",
    "sched_setscheduler", "sched_setparam", "setns", "unshare",
)

#: Deepest recursion limit code may ask for: the program's
#: `limits.recursion_cap` (the interpreter's thread has a 64 MiB stack;
#: deeper Python recursion would overflow it). Until a program sets it, no
#: raise at all.
_recursion_cap = sys.getrecursionlimit()


#: Third-party modules models reach for, with what to do instead. Code that
#: imports one gets CPython's `ModuleNotFoundError` and that sentence.
_DATA_HINT = "baton runs the Python standard library only: use lists and dicts, statistics, math, csv and json instead"
_PLOT_HINT = "baton runs the Python standard library only and cannot draw: print the numbers or write a CSV to /mnt/data instead"
_NETWORK_HINT = "code has no network access in baton: call the tools you were given instead"
_UNAVAILABLE = {
    **dict.fromkeys(("pandas", "numpy", "scipy", "sklearn", "polars", "statsmodels", "sympy",
                     "networkx", "pyarrow", "openpyxl", "xlrd", "yaml", "dateutil", "pytz",
                     "tabulate", "torch", "tensorflow", "jax", "numba"), _DATA_HINT),
    **dict.fromkeys(("matplotlib", "seaborn", "plotly", "bokeh", "altair", "PIL", "cv2"), _PLOT_HINT),
    **dict.fromkeys(("requests", "httpx", "aiohttp", "urllib3", "bs4", "lxml", "selenium",
                     "websockets", "boto3", "openai", "anthropic"), _NETWORK_HINT),
}


class _Fence:
    """First on sys.meta_path: refuses the blocked modules by name, and
    names what to use instead of a third-party module."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in _BLOCKED_MODULES:
            raise ModuleNotFoundError(
                "module %r is not available in baton: code has no network, "
                "processes, signals or host files" % name,
                name=name,
            )
        top = name.partition(".")[0]
        hint = _UNAVAILABLE.get(top)
        if hint is not None:
            raise ModuleNotFoundError("No module named %r. %s" % (top, hint), name=top)
        return None


def _refusal(name):
    def refuse(*args, **kwargs):
        raise PermissionError(1, "os.%s is not available in baton" % name)

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


_real_setrecursionlimit = sys.setrecursionlimit


def _setrecursionlimit(limit):
    if not isinstance(limit, int) or limit > _recursion_cap:
        raise ValueError("recursion limit above %d is not allowed in baton" % _recursion_cap)
    _real_setrecursionlimit(limit)


def _install_fence():
    # The raw `posix` module (`import posix`, `os._exit.__self__`) keeps
    # nothing the fence refuses or the workspace replaces on `os`.
    posix = sys.modules.get("posix")
    if posix is not None:
        for name in _DENIED_OS + tuple(_WORKSPACE_FUNCTIONS) + _ABSENT_OS:
            if hasattr(posix, name):
                setattr(posix, name, _refusal(name))
    for name in _BLOCKED_MODULES:
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, _Fence)
    for name in _DENIED_OS:
        if hasattr(os, name):
            setattr(os, name, _refusal(name))
    sys.setrecursionlimit = _setrecursionlimit


# ---------------------------------------------------------------- CPython's answers
#
# Where RustPython's own text differs from CPython 3.11's and a program can
# see it, the library answers as CPython does (the interpreter's arithmetic
# errors are patched natively, see src/vm/fidelity.rs).

_real_compile = builtins.compile
_real_exec = builtins.exec
_real_eval = builtins.eval


def _compile(source, filename, mode, flags=0, dont_inherit=False, optimize=-1, **kwargs):
    """`compile` whose parse and checks run on a stack sized for the source,
    so no source can crash the interpreter process."""
    if isinstance(source, (str, bytes, bytearray)) and not kwargs and optimize == -1:
        if not isinstance(source, str):
            source = bytes(source).decode("utf-8")
        return _baton.compile(_real_compile, source, os.fspath(filename), mode, flags)
    return _real_compile(source, filename, mode, flags, dont_inherit, optimize, **kwargs)


def _compiled(source, mode):
    if isinstance(source, (str, bytes, bytearray)):
        if not isinstance(source, str):
            source = bytes(source).decode("utf-8")
        return _baton.compile(_real_compile, source, "<string>", mode, 0)
    return source


def _exec(source, globals=None, locals=None, /, **kwargs):
    if globals is None:
        frame = sys._getframe(1)
        globals, locals = frame.f_globals, frame.f_locals if locals is None else locals
    return _real_exec(_compiled(source, "exec"), globals, locals, **kwargs)


def _eval(source, globals=None, locals=None, /):
    if globals is None:
        frame = sys._getframe(1)
        globals, locals = frame.f_globals, frame.f_locals if locals is None else locals
    if isinstance(source, str):
        source = source.lstrip(" \t")
    return _real_eval(_compiled(source, "eval"), globals, locals)


_real_fsum = math.fsum


def _fsum(iterable):
    try:
        return _real_fsum(iterable)
    except OverflowError:
        raise OverflowError("intermediate overflow in fsum") from None
    except ValueError:
        raise ValueError("-inf + inf in fsum") from None


def _math_domain(function):
    """A math function whose domain errors say `math domain error`, as in
    CPython 3.11 (RustPython words them as CPython 3.14 does)."""
    def checked(*args):
        try:
            return function(*args)
        except ValueError as e:
            if str(e).startswith("expected "):
                raise ValueError("math domain error") from None
            raise

    checked.__name__ = checked.__qualname__ = function.__name__
    checked.__doc__ = function.__doc__
    return checked


_MATH_DOMAIN = ("sqrt", "log", "log2", "log10", "log1p", "acos", "asin", "acosh", "atanh",
                "sin", "cos", "tan", "gamma", "lgamma", "exp", "expm1", "pow", "fmod", "atan2",
                "cosh", "sinh", "erf", "erfc")


def _install_math():
    math.fsum = _fsum
    for name in _MATH_DOMAIN:
        function = getattr(math, name, None)
        if function is not None:
            setattr(math, name, _math_domain(function))


#: CPython's `decimal` (the C one) lists signals in this order and keeps
#: flags and traps as booleans; the pure-Python one used here keeps 0/1.
_SIGNAL_ORDER = ("InvalidOperation", "FloatOperation", "DivisionByZero", "Overflow", "Underflow",
                 "Subnormal", "Inexact", "Rounded", "Clamped")


class _SignalDict(dict):
    """Flags and traps of a decimal context: booleans, in CPython's order."""

    def __init__(self, values=()):
        values = dict(values)
        ordered = sorted(values, key=lambda s: _SIGNAL_ORDER.index(s.__name__)
                         if s.__name__ in _SIGNAL_ORDER else len(_SIGNAL_ORDER))
        super().__init__((signal, bool(values[signal])) for signal in ordered)

    def __setitem__(self, key, value):
        super().__setitem__(key, bool(value))

    def copy(self):
        return _SignalDict(self)


def _install_decimal():
    context = decimal.Context
    real_init = context.__dict__.get("__init__")
    if not isinstance(real_init, type(_install_decimal)):
        return  # the C decimal (the CPython oracle): already as CPython.

    def __init__(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        object.__setattr__(self, "flags", _SignalDict(self.flags))
        object.__setattr__(self, "traps", _SignalDict(self.traps))

    context.__init__ = __init__
    for current in (decimal.getcontext(), decimal.DefaultContext, decimal.BasicContext,
                    decimal.ExtendedContext):
        object.__setattr__(current, "flags", _SignalDict(current.flags))
        object.__setattr__(current, "traps", _SignalDict(current.traps))


# ------------------------------------------------------- CPython 3.11's words
#
# RustPython's pure-Python stdlib is that of CPython 3.12-3.14; where a later
# version words an error otherwise, or warns where 3.11 does not, the 3.11
# behaviour is put back here (what lives in RustPython's Rust code is
# patched there: PATCHES.md). Each installer leaves CPython alone.


def _decimal_signal(context_raise):
    """`decimal` raises as the C module of CPython does: the signal's list
    (`[<class 'decimal.ConversionSyntax'>]`), not the pure-Python text."""
    def _raise_error(self, condition, explanation=None, *args):
        try:
            return context_raise(self, condition, explanation, *args)
        except decimal.DecimalException as exc:
            if type(exc).__module__ != "decimal" or exc.args != (explanation,):
                raise
            raise type(exc)([condition]) from None

    return _raise_error


def _normal_samples(self, n, *, seed=None):
    "Generate *n* samples for a given mean and standard deviation."
    gauss = random.gauss if seed is None else random.Random(seed).gauss
    mu, sigma = self._mu, self._sigma
    return [gauss(mu, sigma) for i in range(n)]


def _geometric_mean(data):
    """CPython 3.11's `statistics.geometric_mean` (3.12 took zeros and
    worded its errors otherwise)."""
    try:
        return math.exp(statistics.fmean(map(math.log, data)))
    except ValueError:
        raise statistics.StatisticsError('geometric mean requires a non-empty dataset '
                                         'containing positive numbers') from None


def _quantiles_of(real):
    """CPython 3.11's `statistics.quantiles`: fewer than two data points is
    an error (3.13 repeats a single one)."""
    def quantiles(data, *, n=4, method='exclusive'):
        if n < 1:
            raise statistics.StatisticsError('n must be at least 1')
        data = sorted(data)
        if len(data) < 2:
            raise statistics.StatisticsError('must have at least two data points')
        return real(data, n=n, method=method)
    quantiles.__module__ = "statistics"
    return quantiles


def _check_date_fields(year, month, day):
    """`datetime`'s date checks in the words of CPython's C module."""
    year, month, day = operator.index(year), operator.index(month), operator.index(day)
    if not datetime.MINYEAR <= year <= datetime.MAXYEAR:
        raise ValueError("year %i is out of range" % year)
    if not 1 <= month <= 12:
        raise ValueError("month must be in 1..12")
    import _pydatetime
    if not 1 <= day <= _pydatetime._days_in_month(year, month):
        raise ValueError("day is out of range for month")
    return year, month, day


def _check_time_fields(hour, minute, second, microsecond, fold):
    """`datetime`'s time checks in the words of CPython's C module."""
    hour, minute, second, microsecond = (operator.index(hour), operator.index(minute),
                                         operator.index(second), operator.index(microsecond))
    for value, low, high, name in ((hour, 0, 23, "hour"), (minute, 0, 59, "minute"),
                                   (second, 0, 59, "second"),
                                   (microsecond, 0, 999999, "microsecond")):
        if not low <= value <= high:
            raise ValueError("%s must be in %d..%d" % (name, low, high))
    if fold not in (0, 1):
        raise ValueError("fold must be either 0 or 1")
    return hour, minute, second, microsecond, fold


@classmethod
def _utcfromtimestamp(cls, t):
    "Construct a naive UTC datetime from a POSIX timestamp."
    return cls._fromtimestamp(t, True, None)


@classmethod
def _utcnow(cls):
    "Return a new datetime representing UTC day and time."
    return cls._fromtimestamp(time.time(), True, None)


def _re_sub(pattern, repl, string, count=0, flags=0):
    """Return the string obtained by replacing the leftmost
    non-overlapping occurrences of the pattern in string by the
    replacement repl."""
    return re._compile(pattern, flags).sub(repl, string, count)


def _re_subn(pattern, repl, string, count=0, flags=0):
    """Return a 2-tuple containing (new_string, number)."""
    return re._compile(pattern, flags).subn(repl, string, count)


def _re_split(pattern, string, maxsplit=0, flags=0):
    """Split the source string by the occurrences of the pattern,
    returning a list containing the resulting substrings."""
    return re._compile(pattern, flags).split(string, maxsplit)


def _json_error_init(real_init):
    """`json` says what CPython 3.11's scanner says of a trailing comma:
    the value or name it expected where the bracket is."""
    def __init__(self, msg, doc, pos):
        if msg.startswith("Illegal trailing comma before end of "):
            msg = ("Expecting value" if msg.endswith("array")
                   else "Expecting property name enclosed in double quotes")
            pos += 1
            while pos < len(doc) and doc[pos] in " \t\n\r":
                pos += 1
        real_init(self, msg, doc, pos)

    return __init__


def _json_iterencode(real_iterencode):
    def iterencode(self, o, _one_shot=False):
        try:
            return real_iterencode(self, o, _one_shot)
        except ValueError as exc:
            text = str(exc)
            if text.startswith("Out of range float values are not JSON compliant: "):
                raise ValueError("Out of range float values are not JSON compliant") from None
            raise

    iterencode.__doc__ = real_iterencode.__doc__
    return iterencode


def _install_cpython311_words():
    if sys.implementation.name != "rustpython":
        return
    decimal.Context._raise_error = _decimal_signal(decimal.Context._raise_error)
    statistics.NormalDist.samples = _normal_samples
    _geometric_mean.__name__ = _geometric_mean.__qualname__ = "geometric_mean"
    _geometric_mean.__module__ = "statistics"
    statistics.geometric_mean = _geometric_mean
    statistics.quantiles = _quantiles_of(statistics.quantiles)
    import _pydatetime
    _pydatetime._check_date_fields = _check_date_fields
    _pydatetime._check_time_fields = _check_time_fields
    datetime.datetime.utcfromtimestamp = _utcfromtimestamp
    datetime.datetime.utcnow = _utcnow
    for name, function in (("sub", _re_sub), ("subn", _re_subn), ("split", _re_split)):
        function.__name__ = function.__qualname__ = name
        function.__module__ = "re"
        setattr(re, name, function)
    import json.decoder
    error = json.decoder.JSONDecodeError
    error.__init__ = _json_error_init(error.__init__)
    json.JSONEncoder.iterencode = _json_iterencode(json.JSONEncoder.iterencode)


def _help(*args, **kwargs):
    """`help()`, as CPython's `site` module adds it: pydoc's help (which
    writes to stdout when it is not a terminal)."""
    import pydoc
    return pydoc.help(*args, **kwargs)


# ---------------------------------------------------------------- executors
#
# A child has no OS threads (RustPython is built without them, and the
# system-call filter refuses new ones): `threading.Thread.start()` runs its
# target inline. A thread pool does the same with each piece of work, at
# once, in the calling thread, in submission order, so `ThreadPoolExecutor`,
# `asyncio.to_thread` and `loop.run_in_executor` work, deterministically (a
# replay runs the same work in the same order). A process pool is refused.
# The CPython oracle runs the same pool (its loop cannot wait for a real
# thread); `tests/executors.rs` compares both with CPython's real threads.


def _inline_executor_class():
    import concurrent.futures
    import concurrent.futures.thread

    pool = concurrent.futures.thread.ThreadPoolExecutor

    class ThreadPoolExecutor(pool):
        """A thread pool whose work runs at once, in the calling thread (its
        initializer once, before the first piece of work)."""

        def __init__(self, max_workers=None, thread_name_prefix="", initializer=None,
                     initargs=(), **kwargs):
            super().__init__(max_workers, thread_name_prefix, initializer, initargs, **kwargs)
            self._first = None if initializer is None else (initializer, initargs)

        def submit(self, fn, /, *args, **kwargs):
            with self._shutdown_lock:
                if self._broken:
                    raise concurrent.futures.thread.BrokenThreadPool(self._broken)
                if self._shutdown:
                    raise RuntimeError("cannot schedule new futures after shutdown")
            if self._first is not None:
                (initializer, initargs), self._first = self._first, None
                try:
                    initializer(*initargs)
                except _ControlExit:
                    raise
                except BaseException:
                    self._broken = ("A thread initializer failed, the thread pool "
                                    "is not usable anymore")
                    raise concurrent.futures.thread.BrokenThreadPool(self._broken)
            future = concurrent.futures.Future()
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except _ControlExit:
                    raise
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            return future

        def shutdown(self, wait=True, *, cancel_futures=False):
            with self._shutdown_lock:
                self._shutdown = True

    ThreadPoolExecutor.__module__ = pool.__module__
    return ThreadPoolExecutor


class ProcessPoolExecutor:
    """Refused: code cannot start processes."""

    def __init__(self, *args, **kwargs):
        raise PermissionError(
            1, "ProcessPoolExecutor is not available in baton: code cannot start "
               "processes; use ThreadPoolExecutor (its work runs inline)")


def _condition_is_owned(self):
    """A child has one thread: a condition's lock is its own while it is
    held. (The interpreter's `RLock` has no `_is_owned`, and the fallback
    of `threading.Condition`, which probes the lock by acquiring it, takes
    a held re-entrant lock for a free one: `notify` then raised.)"""
    return self._lock.locked()


def _install_executors():
    import concurrent.futures
    import concurrent.futures.thread
    if sys.implementation.name == "rustpython":
        import threading
        threading.Condition._is_owned = _condition_is_owned
    inline = _inline_executor_class()
    concurrent.futures.thread.ThreadPoolExecutor = inline
    concurrent.futures.ThreadPoolExecutor = inline
    concurrent.futures.ProcessPoolExecutor = ProcessPoolExecutor


def _install_coroutine_checks():
    """A tool call is a coroutine to `inspect` (`iscoroutine`,
    `getcoroutinestate`, `getcoroutinelocals`), and `asyncio`'s
    `iscoroutinefunction` answers as CPython 3.11's, without the warning
    of later versions."""
    real_iscoroutine = inspect.iscoroutine
    real_state = inspect.getcoroutinestate
    real_locals = inspect.getcoroutinelocals

    def iscoroutine(object):
        return type(object) is ToolCall or real_iscoroutine(object)

    def getcoroutinestate(coroutine):
        if type(coroutine) is not ToolCall:
            return real_state(coroutine)
        if coroutine._state == _DONE:
            return inspect.CORO_CLOSED
        return inspect.CORO_SUSPENDED if coroutine._awaited else inspect.CORO_CREATED

    def getcoroutinelocals(coroutine):
        if type(coroutine) is not ToolCall:
            return real_locals(coroutine)
        frame = coroutine.cr_frame
        return {} if frame is None else frame.f_locals

    for name, function in (("iscoroutine", iscoroutine), ("getcoroutinestate", getcoroutinestate),
                           ("getcoroutinelocals", getcoroutinelocals)):
        function.__name__ = function.__qualname__ = name
        function.__module__ = "inspect"
        function.__doc__ = getattr(inspect, name).__doc__
        setattr(inspect, name, function)
    quiet = asyncio.coroutines.__dict__.get("_iscoroutinefunction")
    if quiet is not None:
        asyncio.coroutines.iscoroutinefunction = quiet
        asyncio.iscoroutinefunction = quiet


def install():
    """Once per interpreter, before any program: patch the modules."""
    _install_time()
    _install_machine()
    _install_entropy()
    _install_loop()
    json.JSONEncoder.default = _encoder_default
    _install_executors()
    _install_coroutine_checks()
    _install_fence()
    _install_workspace()
    _install_value_readers()
    _install_math()
    _install_decimal()
    _install_cpython311_words()
    builtins.compile = _compile
    builtins.exec = _exec
    builtins.eval = _eval
    if not hasattr(builtins, "help"):
        builtins.help = _help
