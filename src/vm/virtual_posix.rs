//! The `posix` module every import route builds: the interpreter's own,
//! with its entropy (`urandom`, `getrandom`) drawn from the execution's
//! seeded stream and its identity (`getpid`, `getppid`) the virtual one,
//! merged as [`super::merged_module`] says. The runtime's `os` already
//! answers so from Python; this holds for a `posix` code builds itself
//! (`sys.modules.pop('posix')` then `_imp.create_builtin`), which would
//! otherwise read the host's entropy and break its own replay.
//!
//! Invariant: the entropy functions draw exactly as many bytes as they
//! return, from the same stream as `os.urandom`, so what a program draws
//! either way replays the same.

use rustpython_vm::builtins::PyModuleDef;
use rustpython_vm::{Context, pymodule};

use super::merged_module;

/// The `posix` definition code gets, made from the interpreter's own in
/// `defs`; `None` when there is none.
pub fn module_def(ctx: &Context, defs: &[&'static PyModuleDef]) -> Option<&'static PyModuleDef> {
    let native = merged_module::native(defs, "posix")?;
    Some(merged_module::merge(
        ctx,
        native,
        identity_functions::METHOD_DEFS,
    ))
}

// Generated items the merged definition does not use (its own
// `module_def`, `module_exec`).
#[allow(dead_code)]
#[pymodule(name = "posix")]
pub(crate) mod identity_functions {
    use rustpython_vm::function::OptionalArg;
    use rustpython_vm::{PyResult, VirtualMachine};

    use crate::vm::bridge::draw_entropy;

    /// `size` bytes of the execution's entropy stream.
    fn drawn(size: isize, vm: &VirtualMachine) -> PyResult<Vec<u8>> {
        let size = usize::try_from(size)
            .map_err(|_| vm.new_value_error("negative argument not allowed"))?;
        Ok(draw_entropy(size))
    }

    #[pyfunction]
    fn urandom(size: isize, vm: &VirtualMachine) -> PyResult<Vec<u8>> {
        drawn(size, vm)
    }

    #[pyfunction]
    fn getrandom(size: isize, _flags: OptionalArg<u32>, vm: &VirtualMachine) -> PyResult<Vec<u8>> {
        drawn(size, vm)
    }

    /// Pid 1, as in its own pid namespace, in every child and replay.
    #[pyfunction]
    fn getpid() -> i32 {
        1
    }

    #[pyfunction]
    fn getppid() -> i32 {
        0
    }
}
