//! `_baton`: the native module through which the Python runtime reaches the
//! child's [`Host`]: pauses, output, the virtual clock, entropy, and a
//! compile that survives the interpreter's panics.
//!
//! Invariant: the interpreter of a child runs on one thread, and the host is
//! installed in that thread's slot before any program code runs; a call made
//! with no host installed (the rehearsal in the zygote and in an idle child,
//! before any job) sees a fixed clock, a fixed entropy stream, and every tool
//! answering `null`; what it prints is dropped.

use std::cell::RefCell;

use rustpython_vm::{
    AsObject, PyObjectRef, PyResult, VirtualMachine, builtins::PyTypeRef, pymodule,
};

use crate::vm::clock::{Clock, Entropy};
use crate::vm::host::{Host, WriteRefused};

thread_local! {
    static HOST: RefCell<Option<Host>> = const { RefCell::new(None) };
    static WARMUP: RefCell<(Clock, Entropy)> = RefCell::new((
        Clock::new(crate::journal::ClockBase { wall: 1_767_225_600.0, mono: crate::journal::MONOTONIC_ORIGIN }),
        Entropy::new([0; 32]),
    ));
    static CONTROL: RefCell<Option<ControlTypes>> = const { RefCell::new(None) };
    /// The interpreter's own `compile`, taken before any Python ran: the
    /// one function `_baton.compile` runs under its panic guard.
    static REAL_COMPILE: RefCell<Option<PyObjectRef>> = const { RefCell::new(None) };
}

/// Keeps the interpreter's own `compile` (at warm-up, before the runtime
/// replaces `builtins.compile` and before any program runs).
pub fn remember_compile(compile: PyObjectRef) {
    REAL_COMPILE.with(|slot| *slot.borrow_mut() = Some(compile));
}

/// Whether `callable` is the interpreter's own `compile`.
fn is_real_compile(callable: &PyObjectRef) -> bool {
    REAL_COMPILE.with(|slot| slot.borrow().as_ref().is_some_and(|real| real.is(callable)))
}

/// The runtime's exception classes the host raises.
#[derive(Clone)]
pub struct ControlTypes {
    /// `TimeLimitExceeded`
    pub time_limit: PyTypeRef,
    /// `OutputLimitExceeded`
    pub output_limit: PyTypeRef,
    /// `NonDeterminismError`
    pub nondeterminism: PyTypeRef,
}

/// Reads the execution's virtual wall (0) or monotonic (1) clock (the
/// warm-up's own before any execution).
pub(crate) fn read_clock(kind: i32) -> f64 {
    with_host(|host| host.clock.read(kind))
        .unwrap_or_else(|| WARMUP.with(|w| w.borrow_mut().0.read(kind)))
}

/// Sleeps `secs` (live) or advances the virtual clock by it (replay, and
/// the warm-up).
pub(crate) fn virtual_sleep(secs: f64) {
    if with_host(|host| host.sleep(secs)).is_none() {
        WARMUP.with(|w| w.borrow_mut().0.advance(secs));
    }
}

/// The next `n` bytes (at most 1 MiB) of the execution's entropy stream
/// (the warm-up's own before any execution).
pub(crate) fn draw_entropy(n: usize) -> Vec<u8> {
    let n = n.min(1 << 20);
    with_host(|host| host.entropy.take(n))
        .unwrap_or_else(|| WARMUP.with(|w| w.borrow_mut().1.take(n)))
}

/// Installs the execution's host on this thread.
pub fn install_host(host: Host) {
    HOST.with(|slot| *slot.borrow_mut() = Some(host));
}

/// Runs `f` with the installed host, if any.
pub fn with_host<R>(f: impl FnOnce(&mut Host) -> R) -> Option<R> {
    HOST.with(|slot| slot.borrow_mut().as_mut().map(f))
}

/// The runtime's control exception types, once registered.
pub fn control_types() -> Option<ControlTypes> {
    CONTROL.with(|slot| slot.borrow().clone())
}

/// A new exception of one of the control types.
pub fn control_exception(
    vm: &VirtualMachine,
    pick: impl FnOnce(&ControlTypes) -> PyTypeRef,
    message: &str,
) -> rustpython_vm::builtins::PyBaseExceptionRef {
    match control_types() {
        Some(types) => {
            let class = pick(&types);
            match vm.invoke_exception(&class, vec![vm.ctx.new_str(message).into()]) {
                Ok(exc) => exc,
                Err(exc) => exc,
            }
        }
        None => vm.new_runtime_error(message.to_owned()),
    }
}

/// The exception for a source whose compile panicked: the compiler's own
/// `SyntaxError` for it, or a `SystemError` naming the panic when the
/// compiler (alone) accepts it or panics too.
fn compile_panic_error(
    source: &str,
    filename: &str,
    mode: &str,
    panic: &str,
    vm: &VirtualMachine,
) -> rustpython_vm::builtins::PyBaseExceptionRef {
    use rustpython_vm::compiler::{CompileOpts, Mode, compile};
    let opts = CompileOpts {
        allow_top_level_await: true,
        ..CompileOpts::default()
    };
    if panic.contains("allocate stack") {
        // The parser grows its stack on the heap; a source deep enough to
        // need more than the child's memory allows is too deep to compile.
        return vm
            .new_recursion_error("maximum recursion depth exceeded during compilation".to_owned());
    }
    let mode = match mode {
        "eval" => Mode::Eval,
        "single" => Mode::Single,
        _ => Mode::Exec,
    };
    match crate::vm::panics::catch(|| compile(source, mode, filename, opts)) {
        Ok(Err(error)) => vm.new_syntax_error(&error, Some(source)),
        _ => vm.new_system_error(format!(
            "the interpreter failed to compile this program: {panic}"
        )),
    }
}

/// Sources past this size are checked for depth first (see
/// [`crate::rewrite::leaks_too_deep`]): the stack a drop of their tree could
/// need would not fit a child's memory limit.
const LARGE_SOURCE: usize = 192 << 10;

/// The native module `_baton`, as the runtime imports it.
#[pymodule]
pub mod _baton {
    use super::*;
    use crate::journal::{CallResult, FrameSummary};
    use crate::sandbox::protocol::PendingCall;
    use rustpython_vm::FromArgs;
    use rustpython_vm::builtins::{PyBytesRef, PyStrRef};
    use rustpython_vm::convert::ToPyObject;

    /// Registers the runtime's control exception classes.
    #[pyfunction]
    fn register_exceptions(
        time_limit: PyTypeRef,
        output_limit: PyTypeRef,
        nondeterminism: PyTypeRef,
    ) {
        CONTROL.with(|slot| {
            *slot.borrow_mut() = Some(ControlTypes {
                time_limit,
                output_limit,
                nondeterminism,
            })
        });
    }

    /// Appends to stdout (1) or stderr (2).
    #[pyfunction]
    fn write(fd: i32, text: PyStrRef, vm: &VirtualMachine) -> PyResult<()> {
        let text = text.as_wtf8().to_string_lossy().into_owned();
        match with_host(|host| host.write(fd, &text)) {
            Some(Err(WriteRefused::OverCap(failure))) => Err(control_exception(
                vm,
                |t| t.output_limit.clone(),
                &failure.to_string(),
            )),
            Some(Ok(())) => Ok(()),
            // The rehearsal's output goes nowhere.
            None => Ok(()),
        }
    }

    /// Reads the virtual wall (0) or monotonic (1) clock.
    #[pyfunction]
    fn clock(kind: i32) -> f64 {
        super::read_clock(kind)
    }

    /// Sleeps (live) or advances the clock (replay).
    #[pyfunction]
    fn sleep(secs: f64) {
        super::virtual_sleep(secs);
    }

    /// `compile_fn(source, filename, mode, flags, True)`, where
    /// `compile_fn` is the builtin `compile`, on a stack sized for the
    /// source (a tree as deep as the source is long is parsed, refused and
    /// dropped without overflowing; see [`crate::rewrite::depth`]). Some
    /// invalid sources make the interpreter's compiler panic (an
    /// unterminated string ending in a non-ASCII character panics its
    /// escape-warning pass); then the error is the `SyntaxError` the
    /// compiler itself gives for the source, without that pass, as
    /// `compile` would have raised it.
    #[pyfunction]
    fn compile(
        compile_fn: PyObjectRef,
        source: PyStrRef,
        filename: PyStrRef,
        mode: PyStrRef,
        flags: i32,
        vm: &VirtualMachine,
    ) -> PyResult {
        // Only the interpreter's own compile: a panic caught in anything
        // else would let a program carry on past a crash of the interpreter.
        if !is_real_compile(&compile_fn) {
            return Err(vm.new_type_error(
                "_baton.compile runs the interpreter's own compile only".to_owned(),
            ));
        }
        let args = vec![
            source.clone().into(),
            filename.clone().into(),
            mode.clone().into(),
            vm.ctx.new_int(flags).into(),
            vm.ctx.new_bool(true).into(),
        ];
        let source_len = source.byte_len();
        // A parse that runs out of stack segments (the child's memory limit)
        // is too deep as well.
        if source_len > LARGE_SOURCE
            && crate::vm::panics::catch(|| {
                crate::rewrite::leaks_too_deep(
                    &source.as_wtf8().to_string_lossy(),
                    mode.as_wtf8() == "eval",
                )
            })
            .unwrap_or(true)
        {
            return Err(vm.new_recursion_error(
                "maximum recursion depth exceeded during compilation".to_owned(),
            ));
        }
        let compiled = crate::rewrite::on_sized_stack(source_len, || {
            crate::vm::panics::catch(|| compile_fn.call(args, vm))
        });
        match compiled {
            Ok(compiled) => compiled,
            Err(panic) => Err(compile_panic_error(
                &source.as_wtf8().to_string_lossy(),
                &filename.as_wtf8().to_string_lossy(),
                &mode.as_wtf8().to_string_lossy(),
                &panic,
                vm,
            )),
        }
    }

    /// Why a name under `/mnt/data` is refused, as `(errno, message)`, or
    /// `None`: the server's own rule ([`crate::workspace::name_problem`]),
    /// so the two sides cannot disagree.
    #[pyfunction]
    fn name_error(name: PyStrRef) -> Option<(i32, String)> {
        let name = name.as_wtf8().to_string_lossy();
        crate::workspace::name_problem(&name).map(|problem| {
            let errno = if problem.is_too_long() {
                libc::ENAMETOOLONG
            } else {
                libc::EINVAL
            };
            let message = crate::workspace::check_name(&name)
                .err()
                .map(|error| error.to_string())
                .unwrap_or_default();
            (errno, message)
        })
    }

    /// Compact JSON text of a plain value, or `None` when Python's `json`
    /// must decide (see [`crate::vm::to_json`]).
    #[pyfunction]
    fn dumps(value: PyObjectRef, vm: &VirtualMachine) -> Option<String> {
        crate::vm::to_json::dumps(&value, vm)
    }

    /// The start of a plain value's compact JSON text, in time bounded by
    /// `cap` (see [`crate::vm::to_json::preview`]), or `None`.
    #[pyfunction]
    fn preview(value: PyObjectRef, cap: usize, vm: &VirtualMachine) -> Option<String> {
        crate::vm::to_json::preview(&value, vm, cap)
    }

    /// The workspace the code starts with, as `(name, bytes)` pairs; empty
    /// the second time and with no execution.
    #[pyfunction]
    fn workspace(vm: &VirtualMachine) -> PyObjectRef {
        let files = with_host(|host| std::mem::take(&mut host.files)).unwrap_or_default();
        let items = files
            .into_iter()
            .map(|f| (f.name, vm.ctx.new_bytes(f.bytes)).to_pyobject(vm))
            .collect();
        vm.ctx.new_list(items).into()
    }

    /// Reports one file the code created or changed (called at its end).
    #[pyfunction]
    fn produced(name: String, bytes: PyBytesRef) {
        let file = crate::journal::WorkspaceFile {
            name,
            bytes: bytes.as_bytes().to_vec(),
        };
        with_host(|host| host.produced.push(file));
    }

    /// Reports one of the request's files the code removed (at its end).
    #[pyfunction]
    fn removed(name: String) {
        with_host(|host| host.removed.push(name));
    }

    /// Reports a directory the code left empty (at its end).
    #[pyfunction]
    fn directory(name: String) {
        with_host(|host| host.directories.push(name));
    }

    /// Reports one global name a session's cell left (at its end): at
    /// most [`crate::journal::MAX_NAMES`], each text cut to
    /// [`crate::journal::MAX_NAME_TEXT`] characters.
    #[pyfunction]
    fn name(name: String, ty: String, repr: String) {
        with_host(|host| {
            if host.names.len() < crate::journal::MAX_NAMES {
                host.names
                    .push(crate::journal::NameInfo::cut(name, ty, repr));
            }
        });
    }

    /// The next `n` bytes of the execution's entropy stream.
    #[pyfunction]
    fn entropy(n: usize) -> Vec<u8> {
        super::draw_entropy(n)
    }

    /// The frame of a pause's first call, as the last three positional
    /// arguments of `pause`: its function, its line, and its locals as the
    /// text of a JSON object.
    #[derive(FromArgs)]
    struct FrameArgs {
        #[pyarg(positional)]
        function: String,
        #[pyarg(positional)]
        line: i64,
        #[pyarg(positional)]
        locals: String,
    }

    /// Pauses on a batch of calls given as parallel lists, with the frame
    /// of the first call; returns one `(ok, payload)` per call, payload
    /// being JSON text or an error message.
    #[pyfunction]
    fn pause(
        sites: Vec<i64>,
        tools: Vec<String>,
        inputs: Vec<String>,
        lines: Vec<i64>,
        frame: FrameArgs,
        vm: &VirtualMachine,
    ) -> PyResult<PyObjectRef> {
        let frame = FrameSummary {
            function: frame.function,
            line: u32::try_from(frame.line).unwrap_or(0),
            locals: frame.locals,
        };
        let calls: Vec<PendingCall> = sites
            .into_iter()
            .zip(tools)
            .zip(inputs)
            .zip(lines)
            .map(|(((site, tool), input), line)| PendingCall {
                site: u32::try_from(site).unwrap_or(u32::MAX),
                tool,
                input,
                line: u32::try_from(line).unwrap_or(0),
            })
            .collect();
        let calls_len = calls.len();
        let answered = with_host(|host| host.pause(calls, frame));
        let results = match answered {
            Some(Ok(results)) => results,
            Some(Err(divergence)) => {
                return Err(control_exception(
                    vm,
                    |t| t.nondeterminism.clone(),
                    &divergence.to_string(),
                ));
            }
            // The rehearsal (no execution yet): every tool answers null.
            None => vec![CallResult::Value("null".into()); calls_len],
        };
        let items = results
            .into_iter()
            .map(|result| match result {
                CallResult::Value(json) => (true, json).to_pyobject(vm),
                CallResult::Error(message) => (false, message).to_pyobject(vm),
            })
            .collect();
        Ok(vm.ctx.new_list(items).into())
    }
}
