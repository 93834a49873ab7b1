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
//! Invariant: those rules are written once ([`Plain`]), serialised straight
//! into the text, whole ([`dumps`]) or up to a cap ([`preview`]).

use rustpython_vm::builtins::{PyDict, PyFloat, PyInt, PyList, PyStr, PyTuple};
use rustpython_vm::{AsObject, PyObject, VirtualMachine};
use serde_json::Number;

/// Deeper values go to the Python path (which reports recursion properly).
pub const MAX_DEPTH: usize = 100;

/// The JSON text of `obj`, or `None` when the Python path must decide.
pub fn dumps(obj: &PyObject, vm: &VirtualMachine) -> Option<String> {
    serde_json::to_string(&Plain::new(obj, vm, usize::MAX)).ok()
}

/// The start of `obj`'s compact JSON text, in time bounded by `cap`, not by
/// the value's size: the whole text when it is at most `cap` bytes long,
/// else a prefix of it of at least `cap` bytes (cut at a character
/// boundary, so at least `cap / 4` characters). `None` for a value
/// [`dumps`] would refuse. The paused frame's locals are shown this way at
/// every pause: a local holding megabytes of tool results costs a pause
/// what a small one does.
pub fn preview(obj: &PyObject, vm: &VirtualMachine, cap: usize) -> Option<String> {
    let mut out = Capped {
        bytes: Vec::new(),
        cap,
    };
    match serde_json::to_writer(&mut out, &Plain::new(obj, vm, cap)) {
        Ok(()) => {}
        Err(error) if error.is_io() => {}
        Err(_) => return None,
    }
    match std::str::from_utf8(&out.bytes) {
        Ok(text) => Some(text.to_owned()),
        Err(error) => std::str::from_utf8(&out.bytes[..error.valid_up_to()])
            .ok()
            .map(str::to_owned),
    }
}

/// A writer that takes bytes until it holds more than `cap`, then fails
/// (which ends the serialisation).
struct Capped {
    bytes: Vec<u8>,
    cap: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() > self.cap {
            return Err(std::io::Error::other("capped"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A Python value serialised by the rules above, without a tree: strings
/// of more than `cap` bytes are cut to `cap + 1` characters (their text
/// then runs past the cap, so the cut never shows in a capped prefix; with
/// no cap, `usize::MAX`, nothing is cut).
struct Plain<'a> {
    obj: &'a PyObject,
    vm: &'a VirtualMachine,
    depth: usize,
    cap: usize,
}

impl<'a> Plain<'a> {
    fn new(obj: &'a PyObject, vm: &'a VirtualMachine, cap: usize) -> Plain<'a> {
        Plain {
            obj,
            vm,
            depth: 0,
            cap,
        }
    }

    fn inner<'b>(&'b self, obj: &'b PyObject) -> Plain<'b> {
        Plain {
            obj,
            vm: self.vm,
            depth: self.depth + 1,
            cap: self.cap,
        }
    }
}

/// An `int` that fits 64 bits or a finite `float`, as a JSON number.
fn number(obj: &PyObject) -> Option<Number> {
    if let Some(int) = obj.downcast_ref::<PyInt>() {
        let value = int.as_bigint();
        return i64::try_from(value)
            .map(Number::from)
            .or_else(|_| u64::try_from(value).map(Number::from))
            .ok();
    }
    obj.downcast_ref::<PyFloat>()
        .and_then(|float| Number::from_f64(float.to_f64()))
}

impl serde::Serialize for Plain<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap, SerializeSeq};
        let (obj, vm) = (self.obj, self.vm);
        let not_plain = || S::Error::custom("not a plain value");
        if self.depth > MAX_DEPTH {
            return Err(not_plain());
        }
        if vm.is_none(obj) {
            return serializer.serialize_unit();
        }
        if let Some(text) = obj.downcast_ref::<PyStr>() {
            let text = text.to_str().ok_or_else(not_plain)?;
            if text.len() <= self.cap {
                return serializer.serialize_str(text);
            }
            let end = text
                .char_indices()
                .nth(self.cap.saturating_add(1))
                .map_or(text.len(), |(at, _)| at);
            return serializer.serialize_str(&text[..end]);
        }
        if obj.class().is(vm.ctx.types.bool_type) {
            return serializer.serialize_bool(obj.is(&vm.ctx.true_value));
        }
        if obj.downcast_ref::<PyInt>().is_some() || obj.downcast_ref::<PyFloat>().is_some() {
            return number(obj).ok_or_else(not_plain)?.serialize(serializer);
        }
        if let Some(list) = obj.downcast_ref::<PyList>() {
            // Item by item, not a copy of the list: a cap may end it early.
            let mut seq = serializer.serialize_seq(None)?;
            let mut index = 0;
            while let Some(item) = list.borrow_vec().get(index).cloned() {
                seq.serialize_element(&self.inner(&item))?;
                index += 1;
            }
            return seq.end();
        }
        if let Some(tuple) = obj.downcast_ref::<PyTuple>() {
            let mut seq = serializer.serialize_seq(Some(tuple.len()))?;
            for item in tuple.as_slice() {
                seq.serialize_element(&self.inner(item))?;
            }
            return seq.end();
        }
        if let Some(dict) = obj.downcast_ref::<PyDict>() {
            let mut map = serializer.serialize_map(None)?;
            for (key, value) in dict {
                let key = key.downcast_ref::<PyStr>().and_then(|key| key.to_str());
                map.serialize_entry(key.ok_or_else(not_plain)?, &self.inner(&value))?;
            }
            return map.end();
        }
        Err(not_plain())
    }
}
