//! Inside the sandbox processes: the zygote that builds and warms one
//! interpreter, and the children forked from it that each run one execution.
//!
//! The zygote (`baton zygote`, started by the server) builds a RustPython
//! interpreter with the frozen stdlib, imports the modules LLM code uses and
//! installs the runtime (`stdlib_shims/baton_runtime.py`), then waits on its
//! control socket (fd 0). Each fork request gets a fresh socket pair: the child
//! keeps one end, the server receives the other (with the child's pid) over
//! the control socket as `SCM_RIGHTS`.
//!
//! Invariants:
//! - The zygote never runs user code and has no Python threads, so a fork
//!   copies a quiescent interpreter.
//! - The interpreter runs on one thread with a 64 MiB stack; children continue
//!   on that same thread, so deep recursion raises RecursionError instead of
//!   overflowing.
//! - A child never returns into the zygote's loop: it ends with `_exit`,
//!   also on a panic of the interpreter (see [`panics`]).

pub mod bridge;
pub mod clock;
pub mod exit;
pub mod fidelity;
pub mod host;
mod huge_pages;
pub mod merged_module;
pub mod oom;
pub mod panics;
mod refused;
mod replay;
mod seeded_random;
pub mod to_json;
mod virtual_posix;
pub mod virtual_time;
pub mod watchdog;

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::os::unix::net::UnixStream;

use rustpython_vm::{Interpreter, InterpreterBuilder, PyObjectRef, VirtualMachine, scope::Scope};

use crate::failure::Failure;
use crate::program::{HASH_SEED, Program, ProgramLimits};
use crate::sandbox::isolation::{self, Confinement};
use crate::sandbox::limits::ChildRlimits;

/// The Python runtime, frozen into the binary.
pub const RUNTIME_SOURCE: &str = include_str!("../../stdlib_shims/baton_runtime.py");
/// The runtime's virtual `/mnt/data`, loaded before the runtime imports it.
pub const WORKSPACE_SOURCE: &str = include_str!("../../stdlib_shims/baton_workspace.py");
/// Tool contracts at the call site, loaded before the runtime imports it.
pub const CONTRACT_SOURCE: &str = include_str!("../../stdlib_shims/baton_contract.py");
/// The small shell of `lang: "bash"`, loaded after the runtime.
pub const SHELL_SOURCE: &str = include_str!("../../stdlib_shims/baton_shell.py");
/// The snapshot a session's compaction carries (`baton_snapshot`).
pub const SNAPSHOT_SOURCE: &str = include_str!("../../stdlib_shims/baton_snapshot.py");

/// Modules imported once in the zygote so children start warm.
const WARM_MODULES: &[&str] = &[
    "_strptime",
    "json",
    "re",
    "datetime",
    "math",
    "statistics",
    "random",
    "collections",
    "itertools",
    "functools",
    "string",
    "textwrap",
    "decimal",
    "fractions",
    "heapq",
    "bisect",
    "dataclasses",
    "enum",
    "typing",
    "asyncio",
    "base64",
    "hashlib",
    "uuid",
    "copy",
    "pprint",
    "operator",
    "traceback",
    "linecache",
    "contextlib",
    "abc",
    "types",
    "time",
    "os",
    "csv",
    "io",
    "struct",
    "array",
    "calendar",
    "difflib",
    "html",
    "urllib.parse",
    "inspect",
];

/// Builds the interpreter: frozen stdlib, native stdlib modules, `_baton`,
/// and a user-signal channel for the run-time watchdog.
pub fn build_interpreter() -> Interpreter {
    let mut settings = rustpython_vm::Settings::default();
    settings.hash_seed = Some(HASH_SEED);
    settings.buffered_stdio = false;
    settings.install_signal_handlers = false;
    settings.import_site = false;
    settings.isolated = true;
    settings.ignore_environment = true;
    settings.user_site_directory = false;
    let builder = InterpreterBuilder::new().settings(settings);
    let mut defs = rustpython_stdlib::stdlib_module_defs(&builder.ctx);
    defs.push(bridge::_baton::module_def(&builder.ctx));
    // The virtual `time` and `posix` replace the interpreter's own (a later
    // definition of a name wins).
    let mut interpreter_defs = rustpython_vm::stdlib::builtin_module_defs(&builder.ctx);
    interpreter_defs.extend(defs.iter().copied());
    defs.extend(virtual_time::module_def(&builder.ctx, &interpreter_defs));
    defs.extend(virtual_posix::module_def(&builder.ctx, &interpreter_defs));
    // Last: each refused name replaces the interpreter's own module.
    defs.extend(refused::module_defs(&builder.ctx));
    defs.extend(refused::failing_defs(&builder.ctx));
    builder
        .add_native_modules(&defs)
        .add_frozen_modules(rustpython_pylib::FROZEN_STDLIB)
        .init_hook(|vm| {
            if let Some(state) = rustpython_vm::common::rc::PyRc::get_mut(&mut vm.state) {
                hide_build_paths(&mut state.config.paths);
            }
            let (sender, receiver) = rustpython_vm::signal::user_signal_channel();
            vm.set_user_signal_channel(receiver);
            let _ = SIGNAL_SENDER.set(sender);
            fidelity::install(vm);
        })
        .build()
}

/// Where code sees the standard library: the frozen modules' `__file__`
/// and `__path__` are made from it (the interpreter's default is the
/// build machine's registry folder).
pub const STDLIB_DIR: &str = "/usr/lib/python3.11";

/// Paths the interpreter shows code (`sys._stdlib_dir`, `sys.prefix`,
/// `sys.executable`, `sys.path`, the modules' files): the same virtual ones
/// on every machine, none of the build's or of the host's.
fn hide_build_paths(paths: &mut rustpython_vm::vm::Paths) {
    paths.stdlib_dir = Some(STDLIB_DIR.to_owned());
    paths.module_search_paths.clear();
    for prefix in [
        &mut paths.prefix,
        &mut paths.base_prefix,
        &mut paths.exec_prefix,
        &mut paths.base_exec_prefix,
    ] {
        *prefix = "/usr".to_owned();
    }
    paths.executable = "/usr/bin/python3".to_owned();
    paths.base_executable = "/usr/bin/python3".to_owned();
}

static SIGNAL_SENDER: std::sync::OnceLock<rustpython_vm::signal::UserSignalSender> =
    std::sync::OnceLock::new();

/// Imports the warm modules and installs the runtime.
pub fn warm_up(vm: &VirtualMachine) -> Result<(), String> {
    let compile = vm
        .builtins
        .get_attr("compile", vm)
        .map_err(|e| format_exception(vm, e))?;
    bridge::remember_compile(compile);
    let scope = vm.new_scope_with_builtins();
    let source = format!("import {}\n", WARM_MODULES.join(", "));
    run_python(vm, scope, &source, "<warm-up>")?;
    virtual_posix::remember_result_types(vm).map_err(|e| format_exception(vm, e))?;
    seeded_random::install(vm).map_err(|e| format_exception(vm, e))?;
    let scope = vm.new_scope_with_builtins();
    for (name, source) in [
        ("RUNTIME", RUNTIME_SOURCE),
        ("WORKSPACE", WORKSPACE_SOURCE),
        ("CONTRACT", CONTRACT_SOURCE),
        ("SHELL", SHELL_SOURCE),
        ("SNAPSHOT", SNAPSHOT_SOURCE),
    ] {
        scope
            .globals
            .set_item(name, vm.ctx.new_str(source).into(), vm)
            .map_err(|e| format_exception(vm, e))?;
    }
    let bootstrap = "import sys, types\n\
        def load(name, source):\n\
        \x20   m = types.ModuleType(name)\n\
        \x20   m.__file__ = '<' + name + '>'\n\
        \x20   sys.modules[name] = m\n\
        \x20   exec(compile(source, '<' + name + '>', 'exec'), m.__dict__)\n\
        \x20   return m\n\
        load('baton_workspace', WORKSPACE)\n\
        load('baton_contract', CONTRACT)\n\
        m = load('baton_runtime', RUNTIME)\n\
        load('baton_shell', SHELL)\n\
        load('baton_snapshot', SNAPSHOT)\n\
        m.install()\n\
        import gc\n\
        gc.disable()\n\
        if hasattr(gc, 'freeze'):\n    gc.freeze()\n";
    run_python(vm, scope, bootstrap, "<bootstrap>")?;
    rehearse(vm);
    Ok(())
}

/// A program that walks the runtime's common path: compile with top-level
/// await, the event loop, tasks, gather, json.
const REHEARSAL: &str = r#"import asyncio, json
async def _f(x):
    await asyncio.sleep(0)
    return {'x': x}
class _C:
    def __init__(self, n):
        self.n = n
    async def go(self):
        return await rehearsal(x=self.n)
r = await asyncio.gather(_f(1), _f(2), rehearsal(x=1), rehearsal(2))
total = 0
for i in range(3):
    w = await rehearsal(x=str(i))
    total += len(str(w)) + i
    print(f"{i}: {w} {total:>4}", i, sep=' ')
a = await rehearsal(x=[3, 'a', 1.5, None])
b = rehearsal(x={'k': True})
c = [rehearsal(x=i) for i in range(2)]
d = await _C(5).go()
try:
    raise ToolError('x', 'rehearsal')
except ToolError as e:
    m = str(e)
s = json.dumps(r) + f'{len(r)}' + str(a) + str(b) + str(c[0]) + str(sorted({'b': 1, 'a': 2}.items())) + m
"#;

/// The rewritten [`REHEARSAL`]: built once in the zygote, inherited by every
/// child through the fork.
static REHEARSAL_PROGRAM: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

fn rehearsal_program() -> Option<String> {
    let tool = crate::tools::ToolDef {
        name: "rehearsal".into(),
        description: None,
        parameters: Some(r#"{"type": "object", "properties": {"x": {}}}"#.into()),
    };
    Program::build(REHEARSAL, &[tool], ProgramLimits::default(), &[], &[])
        .ok()
        .map(|program| program.to_json())
}

/// Runs [`REHEARSAL`] without a host. In the zygote it performs the lazy
/// initialisations once for every child; in an idle child (before its job
/// arrives) it takes the copy-on-write faults of the common path off the
/// critical path of the start. Every child rehearses the same way, so hot
/// and cold children stay in step.
fn rehearse(vm: &VirtualMachine) {
    if let Some(program) = REHEARSAL_PROGRAM.get_or_init(rehearsal_program) {
        let _ = run_program(vm, program);
    }
    let prepared = vm
        .import("baton_runtime", 0)
        .and_then(|runtime| runtime.get_attr("prepare", vm)?.call((), vm));
    if let Err(error) = prepared {
        eprintln!(
            "baton child: prepare failed:\n{}",
            format_exception(vm, error)
        );
    }
}

fn run_python(vm: &VirtualMachine, scope: Scope, source: &str, path: &str) -> Result<(), String> {
    vm.run_string(scope, source, path)
        .map(|_| ())
        .map_err(|e| format_exception(vm, e))
}

fn format_exception(
    vm: &VirtualMachine,
    exc: rustpython_vm::builtins::PyBaseExceptionRef,
) -> String {
    let mut text = String::new();
    let _ = vm.write_exception(&mut text, &exc);
    text
}

/// The zygote's entry: build, warm, then fork children on request. Never returns.
pub fn zygote_main(rlimits: ChildRlimits, cgroups: Vec<std::path::PathBuf>) -> ! {
    // Prepared while this process still has one thread.
    let confinement = match Confinement::prepare(rlimits) {
        Ok(confinement) => Confinement {
            cgroups,
            ..confinement
        },
        Err(error) => {
            eprintln!("baton zygote: cannot prepare the children's confinement: {error}");
            std::process::exit(1)
        }
    };
    panics::install_hook();
    let spawned = std::thread::Builder::new()
        .name("zygote".into())
        .stack_size(64 << 20)
        .spawn(move || {
            let interpreter = build_interpreter();
            interpreter.enter(|vm| {
                if let Err(error) = warm_up(vm) {
                    eprintln!("baton zygote: warm-up failed:\n{error}");
                    exit::exit_now();
                }
                huge_pages::back_the_zygote();
                serve_forks(vm, &confinement)
            })
        });
    match spawned {
        Ok(handle) => {
            let _ = handle.join();
        }
        Err(error) => eprintln!("baton zygote: cannot start: {error}"),
    }
    std::process::exit(1)
}

/// Answers fork requests on fd 0 until the server goes away.
fn serve_forks(vm: &VirtualMachine, confinement: &Confinement) -> ! {
    // SAFETY: fd 0 is the control socket the server gave this process.
    let mut control = unsafe { UnixStream::from_raw_fd(0) };
    // SAFETY: ignoring SIGCHLD makes the kernel reap children; no handler runs.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
    }
    let mut command = [0u8; 1];
    loop {
        if control.read_exact(&mut command).is_err() {
            // The server is gone: so are we (children die with us).
            exit::exit_now();
        }
        if let Err(error) = fork_child(vm, &control, confinement) {
            eprintln!("baton zygote: fork failed: {error}");
            exit::exit_now();
        }
    }
}

fn fork_child(
    vm: &VirtualMachine,
    control: &UnixStream,
    confinement: &Confinement,
) -> io::Result<()> {
    let (server_end, child_end) = UnixStream::pair()?;
    // The child is a copy of this thread only: the interpreter's (the
    // zygote's main thread waits for it and holds no lock).
    match confinement.spawn()? {
        isolation::Cloned::Child => {
            drop(server_end);
            let control_fd = control.as_raw_fd();
            child_main(vm, child_end, control_fd, confinement)
        }
        isolation::Cloned::Parent(pid, pidfd) => {
            // In its groups before the server can send it a job.
            let admitted = crate::sandbox::cgroups::admit_child(
                &confinement.cgroups,
                pid,
                confinement.rlimits.memory_mb,
            );
            if let Err(error) = admitted {
                // SAFETY: a signal to the child just cloned (ignored
                // SIGCHLD: it is reaped by the kernel).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
                return Err(io::Error::other(format!(
                    "cannot put the child in its control group: {error}"
                )));
            }
            let sent = crate::sandbox::fdpass::send_child(
                control,
                server_end.as_raw_fd(),
                pidfd.as_ref().map(AsRawFd::as_raw_fd),
                pid,
            );
            drop(server_end);
            drop(child_end);
            sent
        }
    }
}

/// A child's whole life: confine, read the job, run, report, exit.
fn child_main(
    vm: &VirtualMachine,
    stream: UnixStream,
    control_fd: i32,
    confinement: &Confinement,
) -> ! {
    // SAFETY: closing the zygote's control socket in the child only.
    unsafe {
        libc::close(control_fd);
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
    if nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).is_err() {
        exit::exit_now();
    }
    huge_pages::keep_the_child_small();
    let stream_fd = stream.into_raw_fd();
    if confinement.apply(stream_fd).is_err() {
        exit::exit_now();
    }
    // SAFETY: we own stream_fd (just taken from the stream).
    let stream = unsafe { UnixStream::from_raw_fd(stream_fd) };
    oom::arm(stream_fd);
    rehearse(vm);
    // Everything that does not depend on the job is ready before it comes.
    let Ok(mut writer) = stream.try_clone() else {
        exit::exit_now()
    };
    if crate::sandbox::protocol::write_frame(
        &mut writer,
        &crate::sandbox::protocol::FromChild::Ready,
    )
    .is_err()
    {
        exit::exit_now();
    }
    let identity = crate::sandbox::seccomp::ChildIdentity {
        pid: std::process::id() as i32,
        socket_fds: [stream.as_raw_fd(), writer.as_raw_fd()],
    };
    let shared = watchdog::Shared::new(writer);
    watchdog::spawn_watchdog(shared.clone(), interrupt_with_time_limit);
    // From here on: no files, no sockets, no processes or threads.
    if crate::sandbox::seccomp::lock_down(identity).is_err() {
        exit::exit_now();
    }
    let (host, program_json, earlier) = match host::Host::from_socket(stream, shared) {
        Ok(started) => started,
        Err(_) => exit::exit_now(),
    };
    bridge::install_host(host);
    run_earlier_cells(vm, earlier);
    bridge::with_host(|host| {
        host.begin_current();
        host.begin();
    });
    let mut error = run_program(vm, &program_json);
    // A session's cell that ended by itself waits here for the next.
    loop {
        let Some(next) = bridge::with_host(|host| host.end_cell(error)) else {
            exit::exit_now()
        };
        error = run_program(vm, &next);
    }
}

/// Runs a session's earlier cells again, in order, in the globals the
/// current cell will run in; the first that does not do what its journal
/// says ends the execution.
fn run_earlier_cells(vm: &VirtualMachine, earlier: Vec<crate::sandbox::protocol::EarlierCell>) {
    for (index, mut cell) in earlier.into_iter().enumerate() {
        let program_json = std::mem::take(&mut cell.program_json);
        bridge::with_host(|host| host.begin_earlier(index + 1, cell));
        let error = run_program(vm, &program_json);
        if let Some(Err(failure)) = bridge::with_host(|host| host.end_earlier(error)) {
            finish(Some(failure))
        }
    }
}

/// Reports the end and exits.
fn finish(error: Option<Failure>) -> ! {
    match bridge::with_host(|host| host.finish(error)) {
        Some(never) => never,
        None => exit::exit_now(),
    }
}

/// Raises `TimeLimitExceeded` in the interpreter at its next check.
fn interrupt_with_time_limit() {
    if let Some(sender) = SIGNAL_SENDER.get() {
        let _ = sender.send(Box::new(|vm| {
            Err(bridge::control_exception(
                vm,
                |t| t.time_limit.clone(),
                &Failure::TimeLimit.to_string(),
            ))
        }));
    }
}

/// Calls `baton_runtime.run(program_json)`; returns how the program
/// failed, if it did.
///
/// The runtime answers `None`, or `(kind, line)`: `"memory"` for a
/// `MemoryError`, `"exit"` with the status of a non-zero integer exit, else
/// the exception's line (the host knows the failures it
/// raised itself, time limit, output cap and replay divergence, and reports
/// those in place of this one).
fn run_program(vm: &VirtualMachine, program_json: &str) -> Option<Failure> {
    let outcome = vm.import("baton_runtime", 0).and_then(|runtime| {
        let run = runtime.get_attr("run", vm)?;
        run.call((vm.ctx.new_str(program_json),), vm)
    });
    match outcome {
        Ok(value) if vm.is_none(&value) => None,
        Ok(value) => Some(runtime_failure(vm, &value)),
        Err(exc) => {
            let text = format_exception(vm, exc);
            let _ = bridge::with_host(|host| host.write(2, &text));
            Some(Failure::Exception(
                text.lines().last().unwrap_or("internal error").to_owned(),
            ))
        }
    }
}

/// The failure the runtime's `(kind, line)` answer names.
fn runtime_failure(vm: &VirtualMachine, value: &PyObjectRef) -> Failure {
    let text = |item: Option<&PyObjectRef>| {
        item.and_then(|item| item.str(vm).ok())
            .map(|s| s.as_wtf8().to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let items = value
        .downcast_ref::<rustpython_vm::builtins::PyTuple>()
        .map(|tuple| tuple.as_slice().to_vec())
        .unwrap_or_default();
    let line = text(items.get(1));
    match text(items.first()).as_str() {
        "memory" => Failure::OutOfMemory,
        "exit" => match line.parse() {
            Ok(status) => Failure::Exit(status),
            Err(_) => Failure::Exception(format!("SystemExit: {line}")),
        },
        _ => Failure::Exception(line),
    }
}
