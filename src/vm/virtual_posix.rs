//! The `posix` module every import route builds: the interpreter's own,
//! with its entropy (`urandom`, `getrandom`) drawn from the execution's
//! seeded stream, its identity (`getpid`, `getppid`, `uname`) and its
//! process clock (`times`) the virtual ones, and the functions the Python
//! fence refuses on `os` (processes, signals, identities, descriptors)
//! refused natively, merged as [`super::merged_module`] says. The runtime's
//! `os` already answers so from Python; this holds for a `posix` code
//! builds itself (`sys.modules.pop('posix')` then `_imp.create_builtin`),
//! which would otherwise read the host's entropy, clock and kernel name,
//! break its own replay, and reach functions only the system-call filter
//! walls.
//!
//! Invariants:
//! - The entropy functions draw exactly as many bytes as they return, from
//!   the same stream as `os.urandom`, so what a program draws either way
//!   replays the same.
//! - The refused names are the fence's own list (`_DENIED_OS` of the
//!   runtime; a test keeps the two equal). `register_at_fork` is not among
//!   them: the stdlib calls it at import, and with no fork it never acts.

use std::cell::RefCell;

use rustpython_vm::builtins::PyModuleDef;
use rustpython_vm::function::{Callee, FuncArgs, ItemDoc, PyMethodDef, PyMethodFlags};
use rustpython_vm::{Context, PyObjectRef, PyResult, VirtualMachine, pymodule};

use super::merged_module;

/// The virtual kernel: system, host, release, version (the machine is the
/// build's).
pub(super) const UNAME: [&str; 4] = ["Linux", "baton", "6.0.0", "#1 SMP"];

/// The result types the virtual functions build, in the order of
/// [`ResultType`].
const RESULT_TYPE_NAMES: [&str; 2] = ["times_result", "uname_result"];

/// A result type of `posix` (an index into [`RESULT_TYPE_NAMES`]).
#[derive(Clone, Copy)]
enum ResultType {
    Times = 0,
    Uname = 1,
}

thread_local! {
    /// The types [`RESULT_TYPE_NAMES`] names, taken at warm-up.
    static RESULT_TYPES: RefCell<Option<[PyObjectRef; 2]>> = const { RefCell::new(None) };
}

/// At warm-up: keeps the result types of `times` and `uname`, which the
/// virtual ones build.
pub(super) fn remember_result_types(vm: &VirtualMachine) -> PyResult<()> {
    let posix = vm.import("posix", 0)?;
    let [times, uname] = RESULT_TYPE_NAMES;
    let types = [posix.get_attr(times, vm)?, posix.get_attr(uname, vm)?];
    RESULT_TYPES.with(|slot| *slot.borrow_mut() = Some(types));
    Ok(())
}

/// A result of type `kind` holding `fields`.
fn result_of(kind: ResultType, fields: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    let class = RESULT_TYPES
        .with(|slot| {
            slot.borrow()
                .as_ref()
                .map(|types| types[kind as usize].clone())
        })
        .ok_or_else(|| vm.new_system_error("posix result types not taken at warm-up"))?;
    class.call((fields,), vm)
}

/// Declares the natively refused functions, each raising the fence's
/// `PermissionError` under its own name.
macro_rules! refused_functions {
    ($($name:literal),* $(,)?) => {
        /// What the merged `posix` refuses.
        const REFUSED: &[PyMethodDef] = &[$(
            PyMethodDef::new_raw_const(
                $name,
                |vm: &VirtualMachine, _args: FuncArgs, _callee: Callee| -> PyResult {
                    Err(vm.new_errno_error(1, format!("os.{} is not available in baton", $name)).upcast())
                },
                PyMethodFlags::empty(),
                ItemDoc::NONE,
            )
        ),*];

        /// Their names.
        #[cfg(test)]
        pub(super) const REFUSED_NAMES: &[&str] = &[$($name),*];
    };
}

refused_functions!(
    "system",
    "popen",
    "fork",
    "forkpty",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "_execvpe",
    "spawnl",
    "spawnle",
    "spawnlp",
    "spawnlpe",
    "spawnv",
    "spawnve",
    "spawnvp",
    "spawnvpe",
    "posix_spawn",
    "posix_spawnp",
    "kill",
    "killpg",
    "fchdir",
    "chroot",
    "fchmod",
    "lchmod",
    "chown",
    "fchown",
    "lchown",
    "mkfifo",
    "mknod",
    "link",
    "symlink",
    "setuid",
    "setgid",
    "seteuid",
    "setegid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setsid",
    "setpgid",
    "setpgrp",
    "nice",
    "openpty",
    "login_tty",
    "sched_setaffinity",
    "memfd_create",
    "dup",
    "dup2",
    "pipe",
    "pipe2",
    "eventfd",
    "pidfd_open",
    "setpriority",
    "sched_setscheduler",
    "sched_setparam",
    "setns",
    "unshare",
);

/// The `posix` definition code gets, made from the interpreter's own in
/// `defs`; `None` when there is none.
pub(super) fn module_def(
    ctx: &Context,
    defs: &[&'static PyModuleDef],
) -> Option<&'static PyModuleDef> {
    let native = merged_module::native(defs, "posix")?;
    Some(merged_module::merge(
        ctx,
        native,
        &[identity_functions::METHOD_DEFS, REFUSED],
    ))
}

// Generated items the merged definition does not use (its own
// `module_def`, `module_exec`).
#[allow(dead_code)]
#[pymodule(name = "posix")]
pub(crate) mod identity_functions {
    use rustpython_vm::function::OptionalArg;
    use rustpython_vm::{PyResult, VirtualMachine};

    use super::{ResultType, UNAME, result_of};
    use crate::journal::MONOTONIC_ORIGIN;
    use crate::vm::bridge::{draw_entropy, read_clock};

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

    /// The code's own CPU time is the time it has run on the virtual
    /// monotonic clock; children's are zero.
    #[pyfunction]
    fn times(vm: &VirtualMachine) -> PyResult {
        let now = read_clock(1);
        let fields = (now - MONOTONIC_ORIGIN, 0.0, 0.0, 0.0, now);
        result_of(ResultType::Times, vm.new_tuple(fields).into(), vm)
    }

    #[pyfunction]
    fn uname(vm: &VirtualMachine) -> PyResult {
        let [system, host, release, version] = UNAME;
        let fields = (system, host, release, version, std::env::consts::ARCH);
        result_of(ResultType::Uname, vm.new_tuple(fields).into(), vm)
    }
}

#[cfg(test)]
mod tests {
    /// The runtime's `_DENIED_OS` names, in order.
    fn fenced_names() -> Vec<String> {
        let source = crate::vm::RUNTIME_SOURCE;
        let start = source
            .find("_DENIED_OS = (")
            .unwrap_or_else(|| panic!("no _DENIED_OS"));
        let body = &source[start..];
        let end = body
            .find(')')
            .unwrap_or_else(|| panic!("_DENIED_OS not closed"));
        body[..end]
            .split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn posix_refuses_natively_what_the_fence_refuses_on_os() {
        let fenced = fenced_names();
        assert!(fenced.len() > 50, "{fenced:?}");
        assert_eq!(fenced, super::REFUSED_NAMES);
    }
}
