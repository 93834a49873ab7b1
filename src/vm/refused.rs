//! Native modules no code may reach: each name is registered with an empty
//! module that takes the place of the interpreter's own, so that no import
//! route (`import`, `sys.meta_path` edits, `_imp.create_builtin`,
//! `importlib` internals, a subinterpreter) can load the real one. The
//! Python fence refuses the same names with a clear message; this is the
//! layer under it.
//!
//! Invariant: a module listed here is never needed by the warm-up (the
//! zygote imports the stdlib with these stubs in place), and nothing of the
//! real module is reachable from Python: `_ctypes`, the one module that can
//! call arbitrary native code, first among them.

use rustpython_vm::builtins::PyModuleDef;
use rustpython_vm::{Context, pymodule};

/// Declares an empty module named `$name`.
macro_rules! refused {
    ($($module:ident = $name:literal),* $(,)?) => {
        $(
            #[pymodule(name = $name)]
            mod $module {}
        )*

        /// The empty modules, to register after the interpreter's own (a
        /// later definition of a name replaces the earlier one).
        pub(super) fn module_defs(ctx: &Context) -> Vec<&'static PyModuleDef> {
            vec![$($module::module_def(ctx)),*]
        }

        /// The names of the refused modules.
        #[cfg(test)]
        pub(super) const NAMES: &[&str] = &[$($name),*];
    };
}

refused! {
    // Calls any native function: the escape hatch itself.
    ctypes_module = "_ctypes",
    // Memory mappings, descriptors' flags and limits of the process.
    mmap_module = "mmap",
    fcntl_module = "fcntl",
    resource_module = "resource",
    // Processes, shared memory and terminals.
    multiprocessing_module = "_multiprocessing",
    posixshmem_module = "_posixshmem",
    termios_module = "termios",
    // The host's users and groups, its log.
    grp_module = "grp",
    syslog_module = "syslog",
    // Interpreter internals for tests and debuggers.
    faulthandler_module = "faulthandler",
    testinternalcapi_module = "_testinternalcapi",
    remote_debugging_module = "_remote_debugging",
}

/// Declares modules whose import fails by every route, each with the
/// reason its error gives.
macro_rules! failing {
    ($($module:ident = $name:literal: $reason:literal),* $(,)?) => {
        $(
            #[pymodule(name = $name)]
            mod $module {
                use rustpython_vm::builtins::PyModule;
                use rustpython_vm::{Py, PyResult, VirtualMachine};

                pub(crate) fn module_exec(vm: &VirtualMachine, _module: &Py<PyModule>) -> PyResult<()> {
                    super::fail_import(vm, $name, $reason)
                }
            }
        )*

        /// The modules whose import always fails.
        pub(super) fn failing_defs(ctx: &Context) -> Vec<&'static PyModuleDef> {
            vec![$($module::module_def(ctx)),*]
        }
    };
}

failing! {
    // `now()` and `today()` read the host's clock: `datetime` is then the
    // pure-Python one (`_pydatetime`, on the virtual clock).
    datetime_module = "_datetime": "_datetime reads the host's clock: baton's datetime is the pure-Python one",
    // `generate_time_safe` reads the host's clock and network card: `uuid`
    // is then the pure-Python one (`uuid1` on the virtual clock, its node
    // from the execution's entropy).
    uuid_module = "_uuid": "_uuid reads the host's clock and network card: baton's uuid is the pure-Python one",
}

/// Fails the import of `name` with `reason`. `_imp.create_builtin` puts the
/// module in `sys.modules` before its set-up runs and leaves it there when
/// that fails: it is taken out, so the next import fails too instead of
/// finding it empty.
fn fail_import(
    vm: &rustpython_vm::VirtualMachine,
    name: &'static str,
    reason: &'static str,
) -> rustpython_vm::PyResult<()> {
    let modules = vm.sys_module.get_attr("modules", vm)?;
    let _ = modules.del_item(name, vm);
    Err(vm.new_import_error(reason, vm.ctx.new_str(name)))
}

#[cfg(test)]
mod tests {
    use super::NAMES;

    /// Runs `source` in a fresh interpreter's scope; panics with the
    /// traceback when it raises.
    fn run(vm: &rustpython_vm::VirtualMachine, source: &str, what: &str) {
        let scope = vm.new_scope_with_builtins();
        if let Err(error) = vm.run_string(scope, source, "<refused>") {
            let mut text = String::new();
            let _ = vm.write_exception(&mut text, &error);
            panic!("{what}: {text}");
        }
    }

    /// Runs `lines` in a fresh interpreter; panics when they raise.
    fn run_fresh(lines: &[&str], what: &str) {
        let interpreter = crate::vm::build_interpreter();
        interpreter.enter(|vm| run(vm, &lines.join("\n"), what));
    }

    #[test]
    fn time_reads_the_virtual_clock_by_every_import_route() {
        // The virtual clocks start at fixed instants (wall: 2026-01-01,
        // monotonic: 1000 s) and read no further than the bridge's own
        // reading after them; a host clock reads elsewhere.
        run_fresh(
            &[
                "import importlib, importlib.machinery, _imp, sys, threading, _baton",
                "import time as first",
                "sys.modules.pop('time')",
                "spec = importlib.machinery.ModuleSpec('time', None)",
                "for module in (first, __import__('time'), importlib.import_module('time'), _imp.create_builtin(spec)):",
                "    for read in (module.time, lambda: module.clock_gettime(0), lambda: module.time_ns() / 1e9):",
                "        value = read()",
                "        assert 1_767_225_600 <= value <= _baton.clock(0), ('wall', read, value)",
                "    for read in (module.monotonic, module.perf_counter, module.process_time, module.thread_time, lambda: module.clock_gettime(1), threading._time):",
                "        value = read()",
                "        assert 1000 <= value <= _baton.clock(1), ('monotonic', read, value)",
                "    assert module.mktime.__self__ is module, module.mktime.__self__",
                "    assert module.localtime().tm_year == module.gmtime(module.time()).tm_year",
                "    assert module.struct_time and module.CLOCK_MONOTONIC == 1",
            ],
            "time",
        );
    }

    /// The text `source` leaves in its global `out`, run in a fresh
    /// interpreter on a thread of its own (so with the warm-up's entropy
    /// stream from its start).
    fn out_of(source: &'static str) -> String {
        let ran = std::thread::spawn(move || {
            let interpreter = crate::vm::build_interpreter();
            interpreter.enter(|vm| {
                let scope = vm.new_scope_with_builtins();
                if let Err(error) = vm.run_string(scope.clone(), source, "<posix>") {
                    let mut text = String::new();
                    let _ = vm.write_exception(&mut text, &error);
                    return text;
                }
                scope
                    .globals
                    .get_item("out", vm)
                    .and_then(|out| out.str(vm))
                    .map(|out| out.as_wtf8().to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
        });
        ran.join().unwrap_or_default()
    }

    #[test]
    fn posix_draws_the_seeded_entropy_and_says_pid_one_by_every_route() {
        let fresh = out_of(
            "import sys, _imp, importlib.machinery\n\
             sys.modules.pop('posix', None)\n\
             posix = _imp.create_builtin(importlib.machinery.ModuleSpec('posix', None))\n\
             assert (posix.getpid(), posix.getppid()) == (1, 0)\n\
             assert posix.urandom.__self__ is posix\n\
             out = posix.urandom(16).hex() + posix.getrandom(8).hex()",
        );
        let seeded =
            out_of("import _baton\nout = _baton.entropy(16).hex() + _baton.entropy(8).hex()");
        assert_eq!(fresh.len(), 48, "{fresh}");
        assert_eq!(
            fresh, seeded,
            "a new posix drew other bytes than the stream"
        );
    }

    #[test]
    fn datetime_is_the_pure_python_one_by_every_import_route() {
        run_fresh(
            &[
                "import importlib, importlib.machinery, _imp, sys",
                "sys.modules.pop('_datetime', None)",
                "spec = importlib.machinery.ModuleSpec('_datetime', None)",
                "for load in (lambda: __import__('_datetime'), lambda: importlib.import_module('_datetime'), lambda: _imp.create_builtin(spec)):",
                "    try:",
                "        load()",
                "    except ImportError:",
                "        pass",
                "    else:",
                "        raise AssertionError('_datetime imported')",
                "import datetime",
                // A classmethod of Python code, not a native one.
                "assert datetime.datetime.now.__func__.__code__.co_name == 'now'",
            ],
            "_datetime",
        );
    }

    #[test]
    fn every_refused_module_is_empty_by_every_import_route() {
        let interpreter = crate::vm::build_interpreter();
        interpreter.enter(|vm| {
            for name in NAMES {
                let source = [
                    "import importlib, importlib.machinery, _imp".to_owned(),
                    format!("spec = importlib.machinery.ModuleSpec('{name}', None)"),
                    format!("for module in (__import__('{name}'), importlib.import_module('{name}'), _imp.create_builtin(spec)):"),
                    "    left = [n for n in dir(module) if not n.startswith('__')]".to_owned(),
                    format!("    assert left == [], ('{name}', left)"),
                ]
                .join("\n");
                run(vm, &source, name);
            }
        });
    }
}
