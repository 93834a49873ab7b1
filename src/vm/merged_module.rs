//! Builtin modules made from the interpreter's own definition with some of
//! its functions replaced (the clocks of `time`, the entropy and identity
//! of `posix`): a definition registered after the interpreter's, so that
//! every import route (`import`, `sys.modules.pop` and a new import,
//! `_imp.create_builtin`) builds it.
//!
//! Invariant: every function of a merged module belongs to it (a native
//! function's `__self__` is the merged module, never a module of the
//! interpreter's own definition), and its set-up is the interpreter's own
//! (the definition's `exec` slot: constants, types, `environ`...).

use rustpython_vm::Context;
use rustpython_vm::builtins::{PyModuleDef, PyModuleSlots};
use rustpython_vm::function::PyMethodDef;

/// The interpreter's own definition of `name` among `defs` (the last one).
pub fn native(defs: &[&'static PyModuleDef], name: &str) -> Option<&'static PyModuleDef> {
    defs.iter()
        .rev()
        .copied()
        .find(|def| def.name.as_str() == name)
}

/// `native` with the functions of `ours` in place of its functions of the
/// same names (and added where it has none).
pub fn merge(
    ctx: &Context,
    native: &'static PyModuleDef,
    ours: &[&'static [PyMethodDef]],
) -> &'static PyModuleDef {
    let ours: Vec<&PyMethodDef> = ours.iter().flat_map(|defs| defs.iter()).collect();
    let mut methods: Vec<PyMethodDef> = native
        .methods
        .iter()
        .filter(|method| ours.iter().all(|own| own.name != method.name))
        .cloned()
        .collect();
    methods.extend(ours.iter().map(|own| (*own).clone()));
    let mut slots = PyModuleSlots::default();
    slots.exec = native.slots.exec;
    let def = PyModuleDef {
        name: ctx.intern_str(native.name.as_str()),
        doc: native.doc,
        methods: Box::leak(methods.into_boxed_slice()),
        slots,
    };
    Box::leak(Box::new(def))
}
