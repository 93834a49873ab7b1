//! CPython 3.11's words for the interpreter's own arithmetic errors.
//!
//! RustPython raises `ZeroDivisionError("division by zero")` for every
//! division, modulo and `divmod` by zero, and "zero to a negative power" for
//! `0 ** -1`; CPython names the operation (`integer modulo by zero`, `float
//! floor division by zero`...), and programs print those texts. The number
//! slots of `int` and `float` are wrapped here, once, in the zygote before
//! any import: a wrapper calls the interpreter's own slot and, only when
//! that raised such a `ZeroDivisionError`, raises CPython's text instead.
//! Subclasses made later (`bool` aside) inherit the wrapped slots.
//!
//! Invariant: a wrapper never changes a result or any other error; it costs
//! one indirect call on the arithmetic path.

use std::sync::OnceLock;

use rustpython_vm::protocol::{PyNumberBinaryFunc, PyNumberTernaryFunc};

use rustpython_vm::{AsObject, PyObject, PyResult, VirtualMachine};

/// The texts RustPython uses for the errors this module rewords.
const RUSTPYTHON_TEXTS: &[&str] = &["division by zero", "zero to a negative power"];

/// `error` reworded as `text` when it is one of RustPython's division
/// errors; otherwise unchanged.
fn reword(result: PyResult, text: &str, vm: &VirtualMachine) -> PyResult {
    let Err(error) = result else {
        return result;
    };
    if !error.fast_isinstance(vm.ctx.exceptions.zero_division_error) {
        return Err(error);
    }
    let args = error.args();
    let ours = args
        .first()
        .and_then(|first| first.downcast_ref::<rustpython_vm::builtins::PyStr>())
        .is_some_and(|message| {
            RUSTPYTHON_TEXTS.contains(&message.as_wtf8().to_string_lossy().as_ref())
        });
    if ours {
        Err(vm.new_zero_division_error(text.to_owned()))
    } else {
        Err(error)
    }
}

/// Declares a wrapper of one binary slot: a static that keeps the
/// interpreter's function, and a function with CPython's text.
macro_rules! binary_wrapper {
    ($original:ident, $wrapper:ident, $text:expr) => {
        static $original: OnceLock<PyNumberBinaryFunc> = OnceLock::new();

        fn $wrapper(a: &PyObject, b: &PyObject, vm: &VirtualMachine) -> PyResult {
            match $original.get() {
                Some(original) => reword(original(a, b, vm), $text, vm),
                None => Ok(vm.ctx.not_implemented()),
            }
        }
    };
}

/// The same for a ternary slot (`pow`).
macro_rules! ternary_wrapper {
    ($original:ident, $wrapper:ident, $text:expr) => {
        static $original: OnceLock<PyNumberTernaryFunc> = OnceLock::new();

        fn $wrapper(a: &PyObject, b: &PyObject, c: &PyObject, vm: &VirtualMachine) -> PyResult {
            match $original.get() {
                Some(original) => reword(original(a, b, c, vm), $text, vm),
                None => Ok(vm.ctx.not_implemented()),
            }
        }
    };
}

const NEGATIVE_POWER: &str = "0.0 cannot be raised to a negative power";

binary_wrapper!(INT_MOD, int_mod, "integer modulo by zero");
binary_wrapper!(INT_RMOD, int_rmod, "integer modulo by zero");
binary_wrapper!(
    INT_FLOORDIV,
    int_floordiv,
    "integer division or modulo by zero"
);
binary_wrapper!(
    INT_RFLOORDIV,
    int_rfloordiv,
    "integer division or modulo by zero"
);
binary_wrapper!(INT_DIVMOD, int_divmod, "integer division or modulo by zero");
binary_wrapper!(
    INT_RDIVMOD,
    int_rdivmod,
    "integer division or modulo by zero"
);
ternary_wrapper!(INT_POW, int_pow, NEGATIVE_POWER);
ternary_wrapper!(INT_RPOW, int_rpow, NEGATIVE_POWER);
binary_wrapper!(FLOAT_MOD, float_mod, "float modulo");
binary_wrapper!(FLOAT_RMOD, float_rmod, "float modulo");
binary_wrapper!(
    FLOAT_FLOORDIV,
    float_floordiv,
    "float floor division by zero"
);
binary_wrapper!(
    FLOAT_RFLOORDIV,
    float_rfloordiv,
    "float floor division by zero"
);
binary_wrapper!(FLOAT_DIVMOD, float_divmod, "float divmod()");
binary_wrapper!(FLOAT_RDIVMOD, float_rdivmod, "float divmod()");
binary_wrapper!(FLOAT_TRUEDIV, float_truediv, "float division by zero");
binary_wrapper!(FLOAT_RTRUEDIV, float_rtruediv, "float division by zero");
ternary_wrapper!(FLOAT_POW, float_pow, NEGATIVE_POWER);
ternary_wrapper!(FLOAT_RPOW, float_rpow, NEGATIVE_POWER);

/// Puts `$wrapper` in `$slot`, keeping the interpreter's function in `$original`.
macro_rules! wrap {
    ($slot:expr, $original:ident, $wrapper:ident) => {
        if let Some(function) = $slot.load()
            && $original.set(function).is_ok()
        {
            $slot.store(Some($wrapper));
        }
    };
}

/// Wraps the slots, once per process (the zygote, before any import).
pub fn install(vm: &VirtualMachine) {
    let int = &vm.ctx.types.int_type.slots.as_number;
    wrap!(int.remainder, INT_MOD, int_mod);
    wrap!(int.right_remainder, INT_RMOD, int_rmod);
    wrap!(int.floor_divide, INT_FLOORDIV, int_floordiv);
    wrap!(int.right_floor_divide, INT_RFLOORDIV, int_rfloordiv);
    wrap!(int.divmod, INT_DIVMOD, int_divmod);
    wrap!(int.right_divmod, INT_RDIVMOD, int_rdivmod);
    wrap!(int.power, INT_POW, int_pow);
    wrap!(int.right_power, INT_RPOW, int_rpow);
    let float = &vm.ctx.types.float_type.slots.as_number;
    wrap!(float.remainder, FLOAT_MOD, float_mod);
    wrap!(float.right_remainder, FLOAT_RMOD, float_rmod);
    wrap!(float.floor_divide, FLOAT_FLOORDIV, float_floordiv);
    wrap!(float.right_floor_divide, FLOAT_RFLOORDIV, float_rfloordiv);
    wrap!(float.divmod, FLOAT_DIVMOD, float_divmod);
    wrap!(float.right_divmod, FLOAT_RDIVMOD, float_rdivmod);
    wrap!(float.true_divide, FLOAT_TRUEDIV, float_truediv);
    wrap!(float.right_true_divide, FLOAT_RTRUEDIV, float_rtruediv);
    wrap!(float.power, FLOAT_POW, float_pow);
    wrap!(float.right_power, FLOAT_RPOW, float_rpow);
}
