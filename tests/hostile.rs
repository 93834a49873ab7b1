//! Hostile code: every attack program is stopped with a clear error, and the
//! engine (real children from a real zygote) keeps serving afterwards.
//!
//! Two tables. `REFUSED`: attacks that must raise inside Python; each runs
//! wrapped so that it prints `BLOCKED <ExceptionType> <message>` or
//! `ESCAPED`, and the exception type must be one of those listed. `STOPPED`:
//! resource attacks that must end the execution with the contract's error.
//! The HTTP test at the end runs attacks and ordinary executions at once.

mod common;

use baton::engine::{Engine, Step};
use baton::failure::Failure;
use baton::journal::FrameSummary;
use baton::sandbox::protocol::{ChildOutcome, FromChild, PendingCall, encode_frame};
use common::{engine_with, run_to_end, spec, tools, value};
use serde_json::{Value, json};

const WEATHER: &str = r#"[{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]"#;

/// (name, attack body, exception types that count as blocked)
const REFUSED: &[(&str, &str, &[&str])] = &[
    // Modules that reach the host, by every import route.
    ("import socket", "import socket", &["ModuleNotFoundError"]),
    ("import _socket", "import _socket", &["ModuleNotFoundError"]),
    (
        "import subprocess",
        "import subprocess",
        &["ModuleNotFoundError"],
    ),
    (
        "import _posixsubprocess",
        "import _posixsubprocess",
        &["ModuleNotFoundError"],
    ),
    ("import ctypes", "import ctypes", &["ModuleNotFoundError"]),
    ("import mmap", "import mmap", &["ModuleNotFoundError"]),
    ("import select", "import select", &["ModuleNotFoundError"]),
    ("import signal", "import signal", &["ModuleNotFoundError"]),
    (
        "import resource",
        "import resource",
        &["ModuleNotFoundError"],
    ),
    ("import fcntl", "import fcntl", &["ModuleNotFoundError"]),
    ("import pty", "import pty", &["ModuleNotFoundError"]),
    (
        "import multiprocessing",
        "import multiprocessing",
        &["ModuleNotFoundError"],
    ),
    // `posix` imports (shutil needs it) without what the fence refuses.
    (
        "posix.system",
        "import posix\nposix.system('id')",
        &["PermissionError"],
    ),
    (
        "posix.open",
        "import posix\nposix.open('/etc/passwd', 0)",
        &["PermissionError"],
    ),
    (
        "posix.setpriority",
        "import posix\nposix.setpriority(0, 0, 19)",
        &["PermissionError"],
    ),
    ("import pwd", "import pwd", &["ModuleNotFoundError"]),
    ("import grp", "import grp", &["ModuleNotFoundError"]),
    ("import ssl", "import ssl", &["ModuleNotFoundError"]),
    ("import _baton", "import _baton", &["ModuleNotFoundError"]),
    (
        // Its panic guard would let a program carry on past a crash of the
        // interpreter in anything it called.
        "the bridge's compile around another callable",
        "import sys\nsys.modules['baton_runtime']._baton.compile(print, 'x', 's', 'exec', 0)",
        &["TypeError"],
    ),
    (
        "urllib.request",
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:1/')",
        &["ModuleNotFoundError"],
    ),
    (
        "http.client",
        "import http.client\nhttp.client.HTTPConnection('127.0.0.1').connect()",
        &["ModuleNotFoundError"],
    ),
    (
        "importlib.import_module",
        "import importlib\nimportlib.import_module('socket')",
        &["ModuleNotFoundError"],
    ),
    (
        "__import__",
        "__import__('subprocess')",
        &["ModuleNotFoundError"],
    ),
    (
        "exec import",
        "exec('import socket')",
        &["ModuleNotFoundError"],
    ),
    (
        "eval __import__",
        "eval(\"__import__('ctypes')\")",
        &["ModuleNotFoundError"],
    ),
    (
        "compile and exec",
        "exec(compile('import mmap', 'x', 'exec'))",
        &["ModuleNotFoundError"],
    ),
    (
        "fence removed, then socket()",
        "import sys\nsys.meta_path[:] = [f for f in sys.meta_path if 'Fence' not in repr(f)]\nimport socket\nsocket.socket()",
        &["PermissionError", "ModuleNotFoundError", "ImportError"],
    ),
    (
        "socket module kept by asyncio",
        "import asyncio.base_events as b\nb.socket.socket(b.socket.AF_INET, b.socket.SOCK_STREAM)",
        &["PermissionError"],
    ),
    (
        "asyncio.open_connection",
        "import asyncio\nasync def f():\n    await asyncio.open_connection('127.0.0.1', 80)\nasyncio.run(f())",
        &["PermissionError", "NotImplementedError", "RuntimeError"],
    ),
    // Files of the host.
    (
        "open /etc/passwd",
        "open('/etc/passwd').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "open /proc/self/environ",
        "open('/proc/self/environ', 'rb').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "open /proc/self/mem",
        "open('/proc/self/mem', 'rb').read(1)",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "open the signing key",
        "open('baton-data/signing_key').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "open the store",
        "open('baton-data/store/conf').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "write a file",
        "open('/tmp/baton-pwned', 'w').write('x')",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "pathlib read",
        "import pathlib\npathlib.Path('/etc/hostname').read_text()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "io.FileIO",
        "import io\nio.FileIO('/etc/passwd').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "os.open",
        "import os\nos.open('/etc/passwd', 0)",
        &["PermissionError"],
    ),
    (
        "os.listdir",
        "import os\nos.listdir('/etc')",
        &["PermissionError"],
    ),
    (
        "os.scandir",
        "import os\nlist(os.scandir('/proc'))",
        &["PermissionError"],
    ),
    (
        "os.remove",
        "import os\nos.remove('/tmp/x')",
        &["PermissionError"],
    ),
    (
        "escape /mnt/data with ..",
        "open('/mnt/data/../../etc/passwd').read()",
        &["PermissionError"],
    ),
    (
        "relative escape",
        "open('../../../etc/passwd').read()",
        &["PermissionError"],
    ),
    (
        "NUL byte in a workspace path",
        "open('/mnt/data/a\\0b', 'w')",
        &["ValueError"],
    ),
    (
        "very long workspace name",
        "open('/mnt/data/' + 'n' * 300, 'w')",
        &["OSError"],
    ),
    (
        "fill the workspace",
        "with open('/mnt/data/big.bin', 'wb') as f:\n    f.write(b'x' * (40 << 20))",
        &["OSError"],
    ),
    (
        "os.stat of a host path",
        "import os\nos.stat('/etc/passwd')",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "probe for files",
        "import os\nif os.path.exists('/etc/passwd') or os.path.isdir('/proc'):\n    raise AssertionError('host files are visible')\nraise PermissionError('nothing seen')",
        &["PermissionError"],
    ),
    (
        "os.mkdir",
        "import os\nos.mkdir('/tmp/baton-dir')",
        &["PermissionError"],
    ),
    (
        "os.chdir",
        "import os\nos.chdir('/etc')",
        &["PermissionError"],
    ),
    (
        "FileIO found by __subclasses__",
        "io = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_IOBase']\nassert io, 'setup: no _IOBase'\nraw = [c for c in io[0].__subclasses__() if c.__name__ == '_RawIOBase']\nassert raw, 'setup: no _RawIOBase'\nfio = [c for c in raw[0].__subclasses__() if c.__name__ == 'FileIO']\nassert fio, 'setup: no FileIO'\nfio[0]('/etc/passwd').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "os.system through a __globals__ walk",
        "w = [c for c in object.__subclasses__() if c.__name__ == '_wrap_close'][0]\nw.__init__.__globals__['system']('id')",
        &["PermissionError"],
    ),
    (
        "posix functions through a __globals__ walk",
        "import posix as imported\nw = [c for c in object.__subclasses__() if c.__name__ == '_wrap_close'][0]\nexit = w.__init__.__globals__['_exit']\nposix = getattr(exit, '__self__', None) or imported\nassert hasattr(posix, 'system'), 'setup: no posix module'\nposix.system('id')",
        &["PermissionError"],
    ),
    (
        "__builtins__ tampering, then a raw file",
        "import builtins, io\nbuiltins.open = io.FileIO\nopen('/etc/passwd').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    (
        "open via builtins of a function's globals",
        "import builtins\nb = (lambda: 0).__globals__.get('__builtins__', builtins)\nb = b if isinstance(b, dict) else vars(b)\nassert 'open' in b, 'setup: no open'\nb['open']('/etc/shadow').read()",
        &["PermissionError", "FileNotFoundError"],
    ),
    // Processes, threads, signals.
    (
        "os.system",
        "import os\nos.system('id')",
        &["PermissionError"],
    ),
    (
        "os.popen",
        "import os\nos.popen('id').read()",
        &["PermissionError"],
    ),
    ("os.fork", "import os\nos.fork()", &["PermissionError"]),
    (
        "fork bomb",
        "import os\nwhile True:\n    os.fork()",
        &["PermissionError"],
    ),
    (
        "os.execv",
        "import os\nos.execv('/bin/sh', ['sh', '-c', 'id'])",
        &["PermissionError"],
    ),
    (
        "os.posix_spawn",
        "import os\nos.posix_spawn('/bin/sh', ['sh'], {})",
        &["PermissionError"],
    ),
    (
        "os.kill the server",
        "import os\nos.kill(os.getppid(), 9)",
        &["PermissionError"],
    ),
    (
        "os.kill pid 1",
        "import os\nos.kill(1, 9)",
        &["PermissionError"],
    ),
    ("setuid", "import os\nos.setuid(0)", &["PermissionError"]),
    (
        "a process pool",
        "from concurrent.futures import ProcessPoolExecutor\nProcessPoolExecutor(2).submit(print, 1)",
        &["PermissionError"],
    ),
    // Limits the code might try to lift.
    (
        "raise the recursion limit",
        "import sys\nsys.setrecursionlimit(10**6)",
        &["ValueError"],
    ),
    (
        "recursion",
        "def f(n):\n    return f(n + 1)\nf(0)",
        &["RecursionError"],
    ),
    (
        "huge tool input",
        "get_weather(city='x' * (2 << 20))",
        &["ValueError"],
    ),
    (
        "tool input not JSON",
        "get_weather(city=object())",
        &["TypeError"],
    ),
];

/// (name, program, the execution's error)
const STOPPED: &[(&str, &str, &str)] = &[
    ("string memory bomb", "s = 'a' * 10**10\n", "Out of memory"),
    ("list memory bomb", "l = [0] * 10**10\n", "Out of memory"),
    (
        "exponential string",
        "s = 'a'\nwhile True:\n    s += s\n",
        "Out of memory",
    ),
    ("bytearray bomb", "b = bytearray(10**10)\n", "Out of memory"),
    (
        "dict growth",
        "d = {}\ni = 0\nwhile True:\n    d[i] = [i] * 1000\n    i += 1\n",
        "Out of memory",
    ),
    (
        "infinite loop",
        "while True:\n    pass\n",
        "Time limit exceeded",
    ),
    (
        "loop that swallows the interrupt",
        "while True:\n    try:\n        while True: pass\n    except BaseException:\n        pass\n",
        "Time limit exceeded",
    ),
    (
        "long native call",
        "sum(range(10**13))\n",
        "Time limit exceeded",
    ),
    (
        "sleep forever",
        "import time\ntime.sleep(10**6)\n",
        "Time limit exceeded",
    ),
    (
        "catch the interrupt and finish",
        "try:\n    while True: pass\nexcept BaseException:\n    print('survived')\n",
        "Time limit exceeded",
    ),
    (
        "catch the interrupt, then call a tool",
        "try:\n    while True: pass\nexcept BaseException:\n    pass\nget_weather(city='x')\n",
        "Time limit exceeded",
    ),
    (
        "a thread that never ends",
        // It spins without allocating: a loop that fills a list would reach
        // the memory limit before the clock on a fast machine.
        "import threading\ndef spin():\n    while True:\n        pass\nthreading.Thread(target=spin).start()\n",
        "Time limit exceeded",
    ),
    (
        "thread bomb",
        "import threading\nwhile True:\n    threading.Thread(target=lambda: None).start()\n",
        "Time limit exceeded",
    ),
    (
        "a pool's work that never ends (the time limit is not a result it keeps)",
        "from concurrent.futures import ThreadPoolExecutor\ndef spin():\n    while True:\n        pass\nf = ThreadPoolExecutor().submit(spin)\nprint('escaped', f)\n",
        "Time limit exceeded",
    ),
    (
        "raised recursion limit, then deep recursion",
        "import sys\nsys.setrecursionlimit(4000)\ndef f(n):\n    return f(n + 1)\nf(0)\n",
        "RecursionError: maximum recursion depth exceeded",
    ),
    (
        "100 MB of prints",
        "while True:\n    print('x' * 10000)\n",
        "stdout length exceeded",
    ),
    (
        "forged tool call through the bridge",
        "import sys\nb = sys.modules['baton_runtime']._baton\nb.pause([0], ['rm -rf /'], ['{}'], [1], '', 0, '{}')\n",
        "Invalid tool call: no tool named \"rm -rf /\"",
    ),
    (
        "tool call with an input that is not an object",
        "import sys\nb = sys.modules['baton_runtime']._baton\nb.pause([0], ['get_weather'], ['[1]'], [1], '', 0, '{}')\n",
        "Invalid tool call to \"get_weather\": the input is not a JSON object",
    ),
    (
        "tool call its schema refuses, through the bridge",
        "import sys\nb = sys.modules['baton_runtime']._baton\nb.pause([0], ['get_weather'], ['{\"city\": 3}'], [1], '', 0, '{}')\n",
        "Invalid tool call to \"get_weather\": its input does not match the tool's schema: 3 is not of type \"string\" (at /city)",
    ),
    (
        // The server would park a child that waits on nothing and answer
        // the client with a pause of no calls.
        "a pause with no call, through the bridge",
        "import sys\nb = sys.modules['baton_runtime']._baton\nb.pause([], [], [], [], '', 0, '{}')\n",
        "Invalid report: a pause with no call",
    ),
    (
        "an input of 2 MiB through the bridge, over the 1 MiB limit",
        "import sys\nb = sys.modules['baton_runtime']._baton\nb.pause([0], ['get_weather'], ['{\"city\": \"' + 'x' * (2 << 20) + '\"}'], [1], '', 0, '{}')\n",
        "Invalid tool call to \"get_weather\": its input has 2097164 bytes, over the limit of 1048576",
    ),
    (
        "more calls in one pause than a round carries, through the bridge",
        "import sys\nb = sys.modules['baton_runtime']._baton\nn = 10001\nb.pause([0] * n, ['get_weather'] * n, ['{}'] * n, [1] * n, '', 0, '{}')\n",
        "Invalid report: a pause with 10001 calls, over the limit of 10000",
    ),
    (
        "produced file with an escaping name",
        "import sys\nb = sys.modules['baton_runtime']._baton\nb.produced('../../etc/cron.d/x', b'1')\n",
        "Invalid workspace file name \"../../etc/cron.d/x\"",
    ),
    (
        // A RustPython bug: its compiler panics on this source. `exec` and
        // `compile` answer with the SyntaxError (see the corpus); the raw
        // builtin, reached behind the runtime's back, panics, and the panic
        // must end the child at once, not leave it to the clock.
        "source that makes the interpreter panic",
        "import sys\nsys.modules['baton_runtime']._real_compile(\"'a\\xe9\", 's', 'exec')\n",
        "Execution crashed: the interpreter process died",
    ),
    (
        "stderr flood",
        "import sys\nwhile True:\n    sys.stderr.write('y' * 10000)\n",
        "stderr length exceeded",
    ),
];

fn hostile_engine() -> std::sync::Arc<Engine> {
    engine_with(|c| {
        c.pool_size = 2;
        c.limits.stdout_cap = 1 << 20;
        c.limits.stderr_cap = 1 << 20;
        c.rlimits.memory_mb = 256;
    })
}

fn wrapped(body: &str) -> String {
    let indented: String = body.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "def __attack():\n{indented}\ntry:\n    __attack()\n    print('ESCAPED')\nexcept BaseException as e:\n    print('BLOCKED', type(e).__name__, str(e)[:300])\n"
    )
}

async fn run(engine: &Engine, source: &str, timeout_ms: u64) -> (Step, String, String) {
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), timeout_ms))
        .unwrap_or_else(|e| panic!("{e}"));
    let (step, _) = run_to_end(
        engine,
        &mut record,
        |_, _, _| value(json!({"temp": 1})),
        |_| false,
    )
    .await;
    (step, record.stdout.clone(), record.stderr.clone())
}

async fn still_serving(engine: &Engine) {
    let (step, stdout, stderr) = run(
        engine,
        "w = await get_weather(city='x')\nprint('alive', w['temp'])\n",
        5000,
    )
    .await;
    assert_eq!(
        (step, stdout.as_str()),
        (Step::Completed, "alive 1\n"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_inside_python_are_refused() {
    assert!(
        REFUSED.len() + STOPPED.len() >= 60,
        "{} attacks",
        REFUSED.len() + STOPPED.len()
    );
    let engine = hostile_engine();
    let mut escaped = Vec::new();
    for (name, body, blocked_as) in REFUSED {
        let (step, stdout, stderr) = run(&engine, &wrapped(body), 5000).await;
        let verdict = stdout.lines().last().unwrap_or_default().to_owned();
        let blocked = verdict
            .strip_prefix("BLOCKED ")
            .and_then(|rest| rest.split(' ').next())
            .is_some_and(|kind| blocked_as.contains(&kind));
        if step != Step::Completed || !blocked {
            escaped.push(format!(
                "{name}: {step:?} {verdict:?} {}",
                stderr.lines().last().unwrap_or_default()
            ));
        }
    }
    assert!(
        escaped.is_empty(),
        "not refused as expected:\n{}",
        escaped.join("\n")
    );
    still_serving(&engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_attacks_end_with_the_contract_error() {
    let engine = hostile_engine();
    let mut wrong = Vec::new();
    for (name, program, expected) in STOPPED {
        let started = std::time::Instant::now();
        // Attacks stopped by the clock get a short budget; the others must
        // be stopped by their own limit, and get time enough that a loaded
        // machine does not turn them into timeouts.
        let budget = if *expected == "Time limit exceeded" {
            1500
        } else {
            20_000
        };
        let (step, _, _) = run(&engine, program, budget).await;
        if !matches!(&step, Step::Failed(failure) if failure.to_string() == *expected) {
            wrong.push(format!("{name}: {step:?} after {:?}", started.elapsed()));
        }
    }
    assert!(wrong.is_empty(), "wrong outcome:\n{}", wrong.join("\n"));
    still_serving(&engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_shows_nothing_of_the_server() {
    let engine = hostile_engine();
    let source = "import os, sys\nprint(sorted(os.environ))\nprint(os.getenv('BATON_API_KEYS'), os.getcwd())\nprint([p for p in sys.path if 'baton' in p.lower()])\n";
    let (step, stdout, stderr) = run(&engine, source, 5000).await;
    assert_eq!(step, Step::Completed, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "['LANG', 'TZ']", "only what the zygote sets");
    assert!(lines[1].starts_with("None "), "{stdout}");
    assert_eq!(lines[2], "[]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_run_inline_and_create_no_os_thread() {
    let engine = hostile_engine();
    let source = "import threading, _thread\nmain = threading.get_ident()\nseen = []\nt = threading.Thread(target=lambda: seen.append(threading.get_ident()))\nt.start()\nseen.append('after start')\n_thread.start_new_thread(lambda: seen.append('raw'), ())\nprint(seen == [main, 'after start', 'raw'] or seen)\n";
    let (step, stdout, stderr) = run(&engine, source, 5000).await;
    assert_eq!(
        (step, stdout.as_str()),
        (Step::Completed, "True\n"),
        "{stderr}"
    );
}

#[test]
fn ordinary_executions_complete_while_attacks_run() {
    use common::server::Server;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--memory-mb", "256"]);
    let attacks = [
        "while True:\n    pass\n",
        "s = 'a'\nwhile True:\n    s += s\n",
        "import time\ntime.sleep(10**6)\n",
        "while True:\n    print('x' * 10000)\n",
        "sum(range(10**13))\n",
        "l = [0] * 10**10\n",
        "import os\nwhile True:\n    os.fork()\n",
        "def f():\n    return f()\nf()\n",
    ];
    std::thread::scope(|scope| {
        let attackers: Vec<_> = attacks
            .iter()
            .map(|code| {
                let server = &server;
                scope.spawn(move || {
                    server.post(
                        "/exec/programmatic",
                        &json!({"code": code, "tools": [], "timeout": 3000}),
                    )
                })
            })
            .collect();
        let ordinary: Vec<_> = (0..32)
            .map(|i| {
                let server = &server;
                let code = format!(
                    "a = await get_weather(city='a')\nb = await get_weather(city='bb')\nprint({i}, a['temp'], b['temp'])\n"
                );
                scope.spawn(move || common::server::run_program(server, &code).0)
            })
            .collect();
        for (i, handle) in ordinary.into_iter().enumerate() {
            let reply = handle.join().unwrap_or(Value::Null);
            assert_eq!(
                reply["stdout"],
                format!("{i} 11 12\n"),
                "execution {i}: {reply}"
            );
        }
        for handle in attackers {
            let (status, reply) = handle.join().unwrap_or((0, Value::Null));
            assert_eq!(
                (status, &reply["status"]),
                (200, &json!("error")),
                "{reply}"
            );
        }
    });
    assert_eq!(server.get("/health", None).1["status"], "ok");
}

/// Python-level attacks on the host through what an interpreter keeps
/// reachable even with the fence in place (the C-level `_io.FileIO`, the
/// raw `posix` module, `__subclasses__` walks, the workspace's own
/// functions pointed outside it), against a real server: after them the
/// host file keeps its mode and contents, the zygote its nice value,
/// scheduling policy and limits, the server runs, and no program read the
/// host file.
#[test]
fn python_attacks_leave_the_host_unchanged() {
    use common::server::Server;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "host secret\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644))
        .unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(&dir.path().join("data"), &[]);
    let zygote = server.zygote_pid().unwrap_or_else(|| panic!("no zygote"));
    let zygote_before = scheduling_of(zygote);
    let path = victim.display().to_string();
    let attacks = [
        format!("import _io\n_io.FileIO({path:?}, 'w').write(b'owned')"),
        format!("import _io\nprint(_io.open({path:?}).read())"),
        format!("import io\nprint(io.FileIO({path:?}).read())"),
        format!("import posix\nposix.chmod({path:?}, 0o777)"),
        format!("import os\nos.chmod({path:?}, 0o777)"),
        format!("import os\nos.utime({path:?}, (0, 0))"),
        format!("import os\nos.truncate({path:?}, 0)"),
        format!("import os\nfd = os.open({path:?}, os.O_RDWR)\nos.write(fd, b'x')"),
        format!("import shutil\nshutil.copy('/mnt/data/../../..{path}', '/mnt/data/stolen')"),
        format!(
            "seen = set()\ndef walk(c):\n    for s in type.__subclasses__(c):\n        if s not in seen:\n            seen.add(s)\n            walk(s)\nwalk(object)\nfileio = [c for c in seen if c.__name__ == 'FileIO']\nprint(len(fileio))\nprint(fileio[0]({path:?}).read())"
        ),
        format!("import os\nos.setpriority(os.PRIO_PROCESS, {zygote}, 19)"),
        "import os\nos.setpriority(os.PRIO_PGRP, 0, 19)".to_owned(),
        "import os\nos.setpriority(os.PRIO_USER, 0, 19)".to_owned(),
        format!("import os\nos.sched_setscheduler({zygote}, os.SCHED_IDLE, os.sched_param(0))"),
        "import os\nos.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))".to_owned(),
        format!("import os\nos.kill({zygote}, 9)"),
        "import os\nos.kill(os.getppid(), 9)".to_owned(),
        "import os\nos.killpg(0, 9)".to_owned(),
        "import os\nprint(os.listdir('/proc'))".to_owned(),
    ];
    for code in &attacks {
        let (status, reply) = server.post("/exec", &json!({"lang": "py", "code": code}));
        assert_eq!(status, 200, "{code}: {reply}");
        let output = format!("{}{}", reply["stdout"], reply["stderr"]);
        assert!(
            !output.contains("host secret"),
            "{code} read the host file: {reply}"
        );
        assert!(
            reply["stderr"]
                .as_str()
                .is_some_and(|e| e.contains("Error")),
            "{code} raised nothing: {reply}"
        );
    }
    let metadata = std::fs::metadata(&victim).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        metadata.permissions().mode() & 0o7777,
        0o644,
        "the host file's mode changed"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap_or_default(),
        "host secret\n",
        "the host file changed"
    );
    assert_eq!(server.zygote_pid(), Some(zygote), "the zygote died");
    assert_eq!(
        scheduling_of(zygote),
        zygote_before,
        "the zygote's scheduling changed"
    );
    assert_eq!(server.get("/health", None).0, 200);
    let (status, reply) = server.post("/exec", &json!({"lang": "py", "code": "print(6 * 7)"}));
    assert_eq!((status, &reply["stdout"]), (200, &json!("42\n")), "{reply}");
}

/// A process's nice value, scheduling policy and limits, as the host sees them.
fn scheduling_of(pid: i32) -> (String, String, String) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<String> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let pick = |n: usize| fields.get(n).cloned().unwrap_or_default();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    (pick(16), pick(38), limits)
}

// ------------------------------------------------- frames a child forges
//
// A program holding the runtime's native powers can write any bytes to its
// socket. What it writes there is a report like any other: checked, and a
// lie ends the execution; what the server decides (the time it charges,
// whether an execution was cancelled) it does not take from a frame.

/// Python that finds the child's socket (the one descriptor that is a
/// socket), runs `before`, writes `frame` to it and then waits on it, as a
/// hostile program can.
fn forging(before: &str, frame: &[u8]) -> String {
    forging_then(before, frame, "posix.read(sockets[0], 1)")
}

/// [`forging`], doing `after` once the frame is written.
fn forging_then(before: &str, frame: &[u8], after: &str) -> String {
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    // The fenced `posix` refuses `fstat`; a new one from the builtin
    // constructor does not (the system-call filter allows it on a
    // descriptor).
    format!(
        "import sys, _imp, importlib.machinery, stat\n\
         sys.modules.pop('posix', None)\n\
         posix = _imp.create_builtin(importlib.machinery.ModuleSpec('posix', None))\n\
         def _is_socket(fd):\n    try:\n        return stat.S_ISSOCK(posix.fstat(fd).st_mode)\n    except OSError:\n        return False\n\
         sockets = [fd for fd in range(64) if _is_socket(fd)]\n\
         assert sockets, 'setup: no socket'\n\
         {before}\n\
         posix.write(sockets[0], bytes.fromhex('{hex}'))\n\
         {after}\n"
    )
}

/// A pause on one valid call that says it ran for a microsecond.
fn forged_pause() -> FromChild {
    FromChild::Paused {
        calls: vec![PendingCall {
            site: 0,
            tool: "get_weather".into(),
            input: r#"{"city": "x"}"#.into(),
            line: 1,
        }],
        frame: FrameSummary::default(),
        stdout: String::new(),
        stderr: String::new(),
        run_us: 1,
    }
}

fn frame_of(message: &FromChild) -> Vec<u8> {
    encode_frame(message).unwrap_or_else(|e| panic!("{e}"))
}

async fn start(engine: &Engine, source: &str) -> (Step, baton::journal::ExecutionRecord) {
    let mut record = engine
        .prepare(spec(source, tools(WEATHER), 20_000))
        .unwrap_or_else(|e| panic!("{e}"));
    let step = engine
        .start(&mut record)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (step, record)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_time_a_child_reports_is_not_believed() {
    let engine = hostile_engine();
    let source = forging(
        "n = 0\nfor i in range(3_000_000):\n    n += i",
        &frame_of(&forged_pause()),
    );
    let started = std::time::Instant::now();
    let (step, record) = start(&engine, &source).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(step, Step::Paused(ref calls) if calls.len() == 1),
        "{step:?} {}",
        record.stderr
    );
    // The frame said 1 µs; the server charges what it saw pass: 3 million
    // iterations take well over 50 ms anywhere. (Not a share of the wall
    // time: on a loaded machine the start's own setup, a fork waited for,
    // can take most of it.)
    assert!(
        record.used_ms >= 50,
        "charged {} ms for a start of {elapsed:?}",
        record.used_ms
    );
    engine.evict(&record.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_cannot_end_its_execution_as_the_server_would() {
    let engine = hostile_engine();
    for failure in [
        Failure::Cancelled,
        Failure::Crashed("forged".into()),
        Failure::InvalidReport("forged".into()),
        Failure::Unrunnable("forged".into()),
    ] {
        let kind = failure.kind();
        let claim = FromChild::Finished {
            outcome: ChildOutcome::Failed(failure),
            files: Vec::new(),
            removed: Vec::new(),
            directories: Vec::new(),
            stdout: String::new(),
            stderr: String::new(),
            run_us: 1,
            names: Vec::new(),
        };
        let (step, record) = start(&engine, &forging("", &frame_of(&claim))).await;
        match step {
            Step::Failed(Failure::InvalidReport(message)) => assert_eq!(
                message,
                format!("Invalid report: a child may not end its execution as {kind:?}"),
            ),
            other => panic!("{kind:?}: {other:?} {}", record.stderr),
        }
    }
    still_serving(&engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_with_bytes_after_its_message_is_refused() {
    let engine = hostile_engine();
    let mut frame = frame_of(&forged_pause());
    frame.extend_from_slice(&[0xAB; 16]);
    let body_len = u32::try_from(frame.len() - 4).unwrap_or(u32::MAX);
    frame[..4].copy_from_slice(&body_len.to_le_bytes());
    let (step, record) = start(&engine, &forging("", &frame)).await;
    match step {
        Step::Failed(Failure::Crashed(message)) => {
            assert!(message.contains("bytes remaining"), "{message}");
        }
        other => panic!("{other:?} {}", record.stderr),
    }
    still_serving(&engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_child_that_runs_is_evicted() {
    let engine = hostile_engine();
    // It says it paused, then computes (and could allocate) while parked.
    let source = forging_then("", &frame_of(&forged_pause()), "while True:\n    pass");
    let (step, record) = start(&engine, &source).await;
    assert!(
        matches!(step, Step::Paused(_)),
        "{step:?} {}",
        record.stderr
    );
    let pid = engine.parked_pid(&record.id);
    assert!(pid.is_some(), "the child was not parked");
    // Measured after 200 ms, read again every second: gone well before
    // its own 20 s budget would end it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while engine.parked_pid(&record.id).is_some() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        engine.parked_pid(&record.id),
        None,
        "still parked, still running"
    );
    let alive = pid.is_some_and(|pid| {
        std::path::Path::new(&format!("/proc/{pid}/stat")).exists()
            && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.contains(") Z"))
    });
    assert!(!alive, "the evicted child still runs");
    still_serving(&engine).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_pauses_do_not_evict_anothers_parked_children() {
    let engine = engine_with(|c| {
        c.pool_size = 2;
        c.max_parked = 3;
    });
    let pause = "w = await get_weather(city='x')\nprint(w)\n";
    let mut parked = Vec::new();
    // B parks first; then A parks three: one over the count of three.
    for owner in [*b"bbbbbbbb", *b"aaaaaaaa", *b"aaaaaaaa", *b"aaaaaaaa"] {
        let mut record = engine
            .prepare(spec(pause, tools(WEATHER), 5000))
            .unwrap_or_else(|e| panic!("{e}"));
        record.owner = owner;
        let step = engine
            .start(&mut record)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(step, Step::Paused(_)), "{step:?}");
        parked.push(record.id);
    }
    let still: Vec<bool> = parked
        .iter()
        .map(|id| engine.parked_pid(id).is_some())
        .collect();
    // Least recently parked overall would be B's; A holds the most, so
    // A's oldest goes.
    assert_eq!(still, vec![true, false, true, true]);
}
