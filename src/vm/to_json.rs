//! Native JSON encoding of plain Python values, for the runtime's hot paths
//! (tool inputs at every call, locals of the paused frame).
//!
//! Invariant: a value is encoded only when the encoding means exactly what
//! `json.dumps(value, allow_nan=False)` means: `str`, `bool`, `int` (64-bit),
//! finite `float`, `None`, `list`, `tuple`, and `dict` with `str` keys, nested
//! at most [`MAX_DEPTH`] deep. Anything else (a pending tool call, a big int,
//! NaN, a non-string key, a cycle) gives `None`, and the runtime falls back
//! to Python's `json` with its exact rules and errors. Floats keep a decimal
//! point or an exponent (`2.0`, `1e16`), so they stay floats for the reader.

use rustpython_vm::builtins::{PyDict, PyFloat, PyInt, PyList, PyStr, PyTuple};
use rustpython_vm::{AsObject, PyObject, VirtualMachine};
use serde_json::{Map, Number, Value};

/// Deeper values go to the Python path (which reports recursion properly).
pub const MAX_DEPTH: usize = 100;

/// The JSON text of `obj`, or `None` when the Python path must decide.
pub fn dumps(obj: &PyObject, vm: &VirtualMachine) -> Option<String> {
    serde_json::to_string(&to_value(obj, vm, 0)?).ok()
}

fn to_value(obj: &PyObject, vm: &VirtualMachine, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    if vm.is_none(obj) {
        return Some(Value::Null);
    }
    if let Some(text) = obj.downcast_ref::<PyStr>() {
        return text.to_str().map(|s| Value::String(s.to_owned()));
    }
    if obj.class().is(vm.ctx.types.bool_type) {
        return Some(Value::Bool(obj.is(&vm.ctx.true_value)));
    }
    if let Some(int) = obj.downcast_ref::<PyInt>() {
        let value = int.as_bigint();
        return i64::try_from(value)
            .map(Number::from)
            .or_else(|_| u64::try_from(value).map(Number::from))
            .ok()
            .map(Value::Number);
    }
    if let Some(float) = obj.downcast_ref::<PyFloat>() {
        return Number::from_f64(float.to_f64()).map(Value::Number);
    }
    if let Some(list) = obj.downcast_ref::<PyList>() {
        let items = list.borrow_vec().to_vec();
        return sequence(&items, vm, depth);
    }
    if let Some(tuple) = obj.downcast_ref::<PyTuple>() {
        return sequence(tuple.as_slice(), vm, depth);
    }
    if let Some(dict) = obj.downcast_ref::<PyDict>() {
        let mut map = Map::new();
        for (key, value) in dict {
            let key = key.downcast_ref::<PyStr>()?.to_str()?.to_owned();
            map.insert(key, to_value(&value, vm, depth + 1)?);
        }
        return Some(Value::Object(map));
    }
    None
}

fn sequence(
    items: &[rustpython_vm::PyObjectRef],
    vm: &VirtualMachine,
    depth: usize,
) -> Option<Value> {
    items
        .iter()
        .map(|item| to_value(item, vm, depth + 1))
        .collect::<Option<Vec<_>>>()
        .map(Value::Array)
}
