"""Runs CPython 3.11's own regression tests for the modules agents use most
under `baton run` and under CPython 3.11, and prints each module's pass
rate: of the tests that pass under CPython (with the same stand-in for
`test.support`), how many pass under baton.

    python3 tests/fidelity/regrtest_sweep.py [--baton target/release/baton] [module ...]

Each module becomes one program: the test module's source (and the helper
modules it imports from `test`) installed as modules from strings, a small
stand-in for `test.support` (CPython's own imports what a sandbox refuses:
subprocess, sockets, resource...), and `unittest` run with a result that
prints one line per test. Not a test of the suite (the figures go to
FIDELITY.md): the rates move as RustPython moves.
"""

import argparse
import base64
import json
import zlib
import os
import subprocess
import sys
import tempfile

LIB = os.path.dirname(json.__file__).rsplit("/", 1)[0]
TEST = os.path.join(LIB, "test")

# Modules swept, each with the helper modules of `test` it imports
# (`datetimetester` is what test_datetime runs; test_inspect is not swept:
# its tests read their own source files).
MODULES = {
    "test_set": [],
    "test_dict": ["mapping_tests"],
    "test_fractions": [],
    "test_statistics": [],
    "datetimetester": [],
    "test_re": [],
    "test_json": ["test_json.test_decode", "test_json.test_default", "test_json.test_dump",
                  "test_json.test_encode_basestring_ascii", "test_json.test_enum",
                  "test_json.test_fail", "test_json.test_float", "test_json.test_indent",
                  "test_json.test_pass1", "test_json.test_pass2", "test_json.test_pass3",
                  "test_json.test_recursion", "test_json.test_scanstring",
                  "test_json.test_separators", "test_json.test_speedups",
                  "test_json.test_unicode"],
    "test_decimal": [],
}

SUPPORT = r'''
import contextlib, functools, gc, io, sys, unittest, warnings
verbose = 0
MISSING_C_DOCSTRINGS = False
ALWAYS_EQ = type("_ALWAYS_EQ", (), {"__eq__": lambda s, o: True, "__ne__": lambda s, o: False, "__hash__": None})()
NEVER_EQ = type("_NEVER_EQ", (), {"__eq__": lambda s, o: False, "__ne__": lambda s, o: True, "__hash__": None})()
LARGEST = type("_LARGEST", (), {"__eq__": lambda s, o: isinstance(o, type(s)), "__lt__": lambda s, o: False, "__gt__": lambda s, o: True, "__hash__": None})()
SMALLEST = type("_SMALLEST", (), {"__eq__": lambda s, o: isinstance(o, type(s)), "__lt__": lambda s, o: True, "__gt__": lambda s, o: False, "__hash__": None})()
class TestFailed(Exception): pass
class ResourceDenied(unittest.SkipTest): pass
def _id(f): return f
def cpython_only(f):
    return f if sys.implementation.name == "cpython" else unittest.skip("CPython only")(f)
def check_impl_detail(**guards):
    return guards.get(sys.implementation.name, not guards or not any(guards.values()))
def impl_detail(msg=None, **guards):
    return _id if check_impl_detail(**guards) else unittest.skip(msg or "implementation detail")
def requires_IEEE_754(f): return f
def requires_resource(resource): return unittest.skip("resource %s" % resource)
def is_resource_enabled(resource): return False
def requires(resource, msg=None): raise ResourceDenied(msg or resource)
def skip_if_pgo_task(f): return f
def requires_docstrings(f): return f
def refcount_test(f): return unittest.skip("refcounts")(f)
def bigmemtest(size, memuse, dry_run=True):
    def decorator(f):
        @functools.wraps(f)
        def wrapper(self): return f(self, 5147)
        return wrapper
    return decorator
def bigaddrspacetest(f): return unittest.skip("address space")(f)
_1G = 1 << 30
_2G = 2 * _1G
_4G = 4 * _1G
MAX_Py_ssize_t = sys.maxsize
def gc_collect():
    gc.collect()
def check_free_after_iterating(test, iter, cls, args=()):
    pass
def run_with_locale(*args):
    return _id
def run_with_tz(tz):
    return _id
def no_tracing(f): return f
def infinite_recursion(max_depth=75):
    return contextlib.nullcontext()
def swap_attr(obj, attr, new_val):
    @contextlib.contextmanager
    def cm():
        old = getattr(obj, attr)
        setattr(obj, attr, new_val)
        try:
            yield
        finally:
            setattr(obj, attr, old)
    return cm()
def swap_item(obj, item, new_val):
    @contextlib.contextmanager
    def cm():
        old = obj.get(item)
        obj[item] = new_val
        try:
            yield
        finally:
            obj[item] = old
    return cm()
@contextlib.contextmanager
def captured_output(name):
    orig = getattr(sys, name)
    setattr(sys, name, io.StringIO())
    try:
        yield getattr(sys, name)
    finally:
        setattr(sys, name, orig)
def captured_stdout(): return captured_output("stdout")
def captured_stderr(): return captured_output("stderr")
def anticipate_failure(condition): return unittest.expectedFailure if condition else _id
def load_package_tests(pkg_dir, loader, standard_tests, pattern):
    return standard_tests
def get_attribute(obj, name):
    try:
        return getattr(obj, name)
    except AttributeError:
        raise unittest.SkipTest("no %s" % name)
class Error(Exception): pass
has_no_debug_ranges = lambda: False
def requires_debug_ranges(msg=""): return _id
Py_DEBUG = False
is_emscripten = is_wasi = False
has_socket_support = False
def disable_gc():
    return contextlib.nullcontext()
def sortdict(d):
    return "{%s}" % ", ".join("%r: %r" % kv for kv in sorted(d.items()))
def check_disallow_instantiation(testcase, tp, *args, **kwds):
    import re
    mod, name = tp.__module__, tp.__name__
    qualname = name if mod == "builtins" else "%s.%s" % (mod, name)
    msg = "cannot create '%s' instances" % re.escape(qualname)
    testcase.assertRaisesRegex(TypeError, msg, tp, *args, **kwds)
SHORT_TIMEOUT = LONG_TIMEOUT = 30.0
def requires_legacy_unicode_capi(f): return unittest.skip("legacy unicode C API")(f)
def check_sanitizer(**kw): return False
darwin_malloc_err_warning = ""
def check_sanitizer_skip(*a, **k): return _id
def check_syntax_error(testcase, statement, errtext="", *, lineno=None, offset=None):
    with testcase.assertRaisesRegex(SyntaxError, errtext):
        compile(statement, "<test string>", "exec")
'''

IMPORT_HELPER = r'''
import importlib, sys, unittest
def import_module(name, deprecated=False, *, required_on=()):
    try:
        return importlib.import_module(name)
    except ImportError as msg:
        raise unittest.SkipTest(str(msg))
def import_fresh_module(name, fresh=(), blocked=(), deprecated=False):
    saved = {}
    for n in list(fresh) + [name] + list(blocked):
        for m in [m for m in sys.modules if m == n or m.startswith(n + ".")]:
            saved[m] = sys.modules.pop(m)
    for n in blocked:
        sys.modules[n] = None
    try:
        for n in fresh:
            importlib.import_module(n)
        return importlib.import_module(name)
    except ImportError:
        return None
    finally:
        for n in list(fresh) + list(blocked) + [name]:
            for m in [m for m in sys.modules if m == n or m.startswith(n + ".")]:
                del sys.modules[m]
        sys.modules.update(saved)
class DirsOnSysPath:
    def __init__(self, *paths): pass
    def __enter__(self): return self
    def __exit__(self, *a): pass
class CleanImport:
    def __init__(self, *names): pass
    def __enter__(self): return self
    def __exit__(self, *a): pass
'''

WARNINGS_HELPER = r'''
import contextlib, warnings
class WarningsRecorder:
    def __init__(self, w): self._warnings = w; self._last = 0
    def __getattr__(self, attr):
        if len(self._warnings) > self._last:
            return getattr(self._warnings[-1], attr)
        if attr in warnings.WarningMessage._WARNING_DETAILS:
            return None
        raise AttributeError(attr)
    @property
    def warnings(self): return self._warnings[self._last:]
    def reset(self): self._last = len(self._warnings)
@contextlib.contextmanager
def check_warnings(*filters, quiet=True):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        yield WarningsRecorder(w)
def ignore_warnings(*, category):
    import functools
    def decorator(test):
        @functools.wraps(test)
        def wrapper(self, *args, **kwargs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=category)
                return test(self, *args, **kwargs)
        return wrapper
    return decorator
@contextlib.contextmanager
def check_no_resource_warning(testcase):
    yield
'''

THREADING_HELPER = r'''
import contextlib
def reap_threads(f): return f
def requires_working_threading(*, module=False):
    import unittest
    return unittest.skip("threads")
@contextlib.contextmanager
def wait_threads_exit(timeout=None):
    yield
'''

OS_HELPER = r'''
TESTFN = "/mnt/data/@test"
TESTFN_ASCII = TESTFN
def unlink(name):
    import os
    try:
        os.unlink(name)
    except OSError:
        pass
'''

RUNNER = r'''
import sys, types
_out = sys.stdout
for _refused in ("signal", "socket"):
    try:
        __import__(_refused)
    except ImportError:
        # baton refuses it; unittest and doctest import it for what a
        # sweep never uses (Ctrl-C handling, pdb).
        _stub = types.ModuleType(_refused)
        _stub.SIGINT = 2
        _stub.SIG_DFL = _stub.SIG_IGN = 0
        _stub.default_int_handler = lambda *a: None
        _stub.getsignal = lambda n: _stub.default_int_handler
        _stub.signal = lambda n, h: _stub.default_int_handler
        sys.modules[_refused] = _stub
import unittest

def _install(name, source, package=False):
    module = types.ModuleType(name)
    module.__file__ = "<%s>" % name
    if package:
        module.__path__ = []
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module

try:
    for _name, _source, _package in SOURCES:
        _install(_name, _source or "", _package or _source is None)
except BaseException as _e:
    print("IMPORT-ERROR %s: %s" % (type(_e).__name__, _e))
    raise SystemExit(0)

class _Result(unittest.TestResult):
    def _line(self, test, outcome):
        _out.write("%s %s\n" % (outcome, test.id()))
        _out.flush()
    def addSuccess(self, test): self._line(test, "ok")
    def addFailure(self, test, err): self._line(test, "FAIL")
    def addError(self, test, err): self._line(test, "ERROR")
    def addSkip(self, test, reason): self._line(test, "skip")
    def addExpectedFailure(self, test, err): self._line(test, "xfail")
    def addUnexpectedSuccess(self, test): self._line(test, "xpass")
    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._line(test, "FAIL")

try:
    _target = sys.modules[TARGET]
    # The plain test classes: a module's own `load_tests` reads data files
    # (test_decimal's .decTest) or runs doctests.
    if hasattr(_target, "load_tests"):
        del _target.load_tests
    _suite = unittest.defaultTestLoader.loadTestsFromModule(_target)
    for _sub in SUBMODULES:
        _suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(sys.modules[_sub]))
except BaseException as _e:
    print("IMPORT-ERROR %s: %s" % (type(_e).__name__, _e))
    raise SystemExit(0)
_suite.run(_Result())
'''


def source_of(name):
    path = os.path.join(TEST, *name.split("."))
    if os.path.isdir(path):
        return open(os.path.join(path, "__init__.py")).read(), True
    return open(path + ".py").read(), False


def program(module):
    sources = [("test", None, True)]
    sources += [("test.support", SUPPORT, True), ("test.support.import_helper", IMPORT_HELPER, False),
                ("test.support.warnings_helper", WARNINGS_HELPER, False),
                ("test.support.threading_helper", THREADING_HELPER, False),
                ("test.support.os_helper", OS_HELPER, False)]
    target_source, target_package = source_of(module)
    submodules = [h for h in MODULES[module] if h.startswith(module + ".")]
    helpers = [h for h in MODULES[module] if h not in submodules]
    for helper in helpers:
        text, package = source_of(helper)
        sources.append(("test." + helper, text, package))
    # A package's submodules import it: it goes first, run without tests.
    sources.append(("test." + module, target_source, target_package))
    for sub in submodules:
        text, package = source_of(sub)
        sources.append(("test." + sub, text, package))
    # Compressed: the largest modules are over `baton run`'s source limit.
    packed = base64.b64encode(zlib.compress(json.dumps(sources).encode(), 9)).decode()
    head = ("import base64, json, zlib\n"
            "SOURCES = json.loads(zlib.decompress(base64.b64decode(%r)))\n"
            "TARGET = %r\nTARGET_IS_PACKAGE = %r\nSUBMODULES = %r\n") % (
        packed, "test." + module, target_package, ["test." + s for s in submodules])
    return head + RUNNER


def outcomes(text):
    found = {}
    for line in text.splitlines():
        outcome, _, test = line.partition(" ")
        if outcome in ("ok", "FAIL", "ERROR", "skip", "xfail", "xpass"):
            # A test with a failing subtest reports FAIL then ok: FAIL wins.
            if found.get(test) not in ("FAIL", "ERROR"):
                found[test] = outcome
        elif outcome == "IMPORT-ERROR":
            found["<import>"] = line
    return found


def run(command, path, timeout):
    try:
        done = subprocess.run(command + [path], capture_output=True, text=True, timeout=timeout)
        return done.stdout + "\n" + done.stderr[-2000:]
    except subprocess.TimeoutExpired as e:
        return (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baton", default="target/release/baton")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--show", action="store_true", help="list the tests that differ")
    parser.add_argument("modules", nargs="*", default=list(MODULES))
    args = parser.parse_args()
    print("| module | pass under CPython | of those, pass under baton | rate | of the others, skipped under baton |")
    print("|---|---|---|---|---|")
    for module in args.modules:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(program(module))
        cpython = outcomes(run([sys.executable], f.name, args.timeout))
        baton = outcomes(run([args.baton, "run", "--timeout-ms", str(args.timeout * 1000),
                              "--memory-mb", "1024"], f.name, args.timeout + 30))
        passing = [t for t, o in cpython.items() if o == "ok"]
        kept = [t for t in passing if baton.get(t) == "ok"]
        rate = 100.0 * len(kept) / len(passing) if passing else 0.0
        skipped = [t for t in passing if baton.get(t) == "skip"]
        print("| %s | %d | %d | %.1f%% | %d |" % (module, len(passing), len(kept), rate, len(skipped)))
        if "<import>" in baton:
            print("|  | (baton: %s) | | |" % baton["<import>"][:120])
        if args.show:
            for t in passing:
                if baton.get(t) != "ok":
                    print("    %s %s" % (baton.get(t, "missing"), t))
        os.unlink(f.name)


if __name__ == "__main__":
    main()
