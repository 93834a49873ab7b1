//! `_random.Random` seeded from the execution's entropy stream: an instance
//! made or seeded again without a seed (`_random.Random()`, `r.seed()`,
//! `r.seed(None)`) gets an integer of 32 bytes drawn from the stream, as
//! the runtime's `random.Random.seed` gives one, never the host's entropy
//! (the interpreter's own would read the operating system's generator,
//! which no replay can repeat).
//!
//! Invariants:
//! - The class is the interpreter's one static type, patched once at
//!   warm-up: every `_random` module, however it is built, has it.
//! - A given seed goes to the interpreter's own `seed` unchanged, so seeded
//!   generators draw exactly CPython's numbers.

use std::cell::RefCell;

use rustpython_vm::builtins::PyType;
use rustpython_vm::function::{FuncArgs, OptionalArg};
use rustpython_vm::{AsObject, Py, PyObject, PyObjectRef, PyResult, VirtualMachine};

use crate::vm::bridge::draw_entropy;

thread_local! {
    /// The interpreter's own `_random.Random.seed`.
    static OWN_SEED: RefCell<Option<PyObjectRef>> = const { RefCell::new(None) };
}

/// Bytes of entropy in a seed drawn for an instance given none.
const SEED_BYTES: usize = 32;

/// At warm-up: patches `_random.Random`'s `seed` and its initializer.
pub(super) fn install(vm: &VirtualMachine) -> PyResult<()> {
    let class = vm
        .import("_random", 0)?
        .get_attr("Random", vm)?
        .downcast::<PyType>()
        .map_err(|_| vm.new_type_error("_random.Random is not a type"))?;
    let name = vm.ctx.intern_str("seed");
    let own = class
        .get_attr(name)
        .ok_or_else(|| vm.new_attribute_error("_random.Random has no seed"))?;
    OWN_SEED.with(|slot| *slot.borrow_mut() = Some(own));
    // The type lives as long as the interpreter: a reference kept for good.
    let class: &'static Py<PyType> = Box::leak(Box::new(class));
    let seed = vm.new_method("seed", class, seed);
    class.set_attr(name, seed.into());
    class.slots.init.store(Some(init));
    Ok(())
}

/// `n`, or an integer drawn from the stream when it is absent or `None`.
fn seed_or_drawn(n: Option<PyObjectRef>, vm: &VirtualMachine) -> PyResult {
    match n {
        Some(n) if !vm.is_none(&n) => Ok(n),
        _ => {
            let bytes = vm.ctx.new_bytes(draw_entropy(SEED_BYTES));
            vm.ctx
                .types
                .int_type
                .as_object()
                .get_attr("from_bytes", vm)?
                .call((bytes, "big"), vm)
        }
    }
}

/// The interpreter's own `seed`.
fn own(vm: &VirtualMachine) -> PyResult {
    OWN_SEED
        .with(|slot| slot.borrow().clone())
        .ok_or_else(|| vm.new_system_error("_random.Random.seed not taken at warm-up"))
}

/// Calls the interpreter's own `seed` on `zelf` with `n`.
fn own_seed(zelf: PyObjectRef, n: PyObjectRef, vm: &VirtualMachine) -> PyResult<()> {
    own(vm)?.call((zelf, n), vm).map(drop)
}

fn seed(zelf: PyObjectRef, n: OptionalArg<PyObjectRef>, vm: &VirtualMachine) -> PyResult<()> {
    let n = seed_or_drawn(n.into_option(), vm)?;
    own_seed(zelf, n, vm)
}

/// `Random(n=None)`: seeded as [`seed`] seeds. More arguments go to the
/// interpreter's own, which refuses them with its own message.
fn init(zelf: &PyObject, args: FuncArgs, vm: &VirtualMachine) -> PyResult<()> {
    if args.args.len() > 1 || !args.kwargs.is_empty() {
        let mut args = args;
        args.prepend_arg(zelf.to_owned());
        return own(vm)?.call(args, vm).map(drop);
    }
    let n = seed_or_drawn(args.args.first().cloned(), vm)?;
    own_seed(zelf.to_owned(), n, vm)
}
