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

#[cfg(test)]
mod tests {
    use super::NAMES;

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
                let scope = vm.new_scope_with_builtins();
                if let Err(error) = vm.run_string(scope, &source, "<refused>") {
                    let mut text = String::new();
                    let _ = vm.write_exception(&mut text, &error);
                    panic!("{name}: {text}");
                }
            }
        });
    }
}
