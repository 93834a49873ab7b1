//! JSON of any depth Python code can nest, through a server that never
//! overflows its stack on it.
//!
//! Tool inputs and results travel as JSON text. `serde_json` refuses to
//! build a tree more than 128 levels deep, and building or printing a
//! tree recurses once a level; Python code nests data as deep as its
//! recursion limit (up to [`MAX_DEPTH`]), and CPython's `json` follows it
//! there. So:
//! - a continuation's results are never built into trees: [`compact`]
//!   takes a value's text (already checked to be JSON) without its
//!   insignificant whitespace, in one pass with no recursion; the child's
//!   `json.loads` reads it under the interpreter's recursion limit, and
//!   raises CPython's `RecursionError` where CPython would;
//! - the server's own check of a call's input needs a tree: [`with_tree`]
//!   measures the depth first ([`depth`], one pass), refuses more than
//!   [`MAX_DEPTH`] levels, and builds, uses and drops the tree on a stack
//!   sized for its depth.
//!
//! Invariants: nothing here recurses over the input except inside
//! [`with_tree`], whose stack grows with the depth it measured; [`compact`]
//! of a JSON text is JSON meaning the same value.

use serde::Deserialize;
use serde_json::Value;

/// The deepest input a call may carry: the highest recursion limit code
/// may set, so deeper text never came from the interpreter's `json`.
pub const MAX_DEPTH: usize = crate::config::defaults::RECURSION_CAP as usize;

/// Levels below which a tree is built on the caller's stack.
const SHALLOW: usize = 64;
/// Stack given to each level of a deep tree: building it, checking it,
/// printing it in an error and dropping it, as a debug build spends it.
const STACK_PER_LEVEL: usize = 16 << 10;
/// Stack beside the levels, for what the caller's function does.
const STACK_BASE: usize = 1 << 20;

/// Why a text gave no tree.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("it is nested {depth} levels deep, over the limit of {MAX_DEPTH}")]
    TooDeep {
        /// Its depth.
        depth: usize,
    },
    /// Not JSON.
    #[error("it is not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
}

/// The nesting depth of a JSON text: 0 for a scalar, 1 for `[]` or `{}`,
/// one more for each level of arrays and objects inside. Brackets inside
/// strings do not count. Any text gives a number; only JSON's means it.
pub fn depth(text: &str) -> usize {
    let mut deepest = 0usize;
    let mut open = 0usize;
    for_each_char(text, |ch, in_string| match ch {
        '[' | '{' if !in_string => {
            open += 1;
            deepest = deepest.max(open);
        }
        ']' | '}' if !in_string => open = open.saturating_sub(1),
        _ => {}
    });
    deepest
}

/// A JSON text without the whitespace between its tokens: the same value,
/// the same strings, numbers as written. The text must be JSON (a
/// `RawValue` is).
pub fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for_each_char(text, |ch, in_string| {
        if in_string || !matches!(ch, ' ' | '\t' | '\n' | '\r') {
            out.push(ch);
        }
    });
    out
}

/// Gives each character of `text` to `visit` with whether it is part of a
/// string (its quotes included).
fn for_each_char(text: &str, mut visit: impl FnMut(char, bool)) {
    let mut in_string = false;
    let mut escaped = false;
    for ch in text.chars() {
        if in_string {
            visit(ch, true);
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else {
            in_string = ch == '"';
            visit(ch, in_string);
        }
    }
}

/// "an array", "a string"...: what the JSON text `text` holds, from its
/// first token, for messages.
pub fn kind_of(text: &str) -> &'static str {
    match text.trim_start().as_bytes().first() {
        Some(b'[') => "an array",
        Some(b'{') => "an object",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// Builds the tree of `text` and gives it to `use_tree`, on a stack deep
/// enough for the text's depth (the tree is dropped there too), or says
/// why there is no tree.
pub fn with_tree<R>(text: &str, use_tree: impl FnOnce(Value) -> R) -> Result<R, TreeError> {
    let depth = depth(text);
    if depth > MAX_DEPTH {
        return Err(TreeError::TooDeep { depth });
    }
    let build_and_use = || -> Result<R, TreeError> {
        let mut reader = serde_json::Deserializer::from_str(text);
        reader.disable_recursion_limit();
        let tree = Value::deserialize(&mut reader)?;
        reader.end()?;
        Ok(use_tree(tree))
    };
    if depth <= SHALLOW {
        return build_and_use();
    }
    stacker::grow(STACK_BASE + depth * STACK_PER_LEVEL, build_and_use)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        let mut text = "\"leaf\"".to_owned();
        for level in 0..levels {
            text = if level % 2 == 0 {
                format!("[ {text} ]")
            } else {
                format!("{{\"k\" : {text}, \"s\": \"]}}[{{\\\"\"}}")
            };
        }
        text
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(depth("1"), 0);
        assert_eq!(depth("\"[[[\""), 0);
        assert_eq!(depth("[]"), 1);
        assert_eq!(depth(r#"{"a": [1, {"b": "\"]"}], "c": []}"#), 3);
        for levels in [1, 2, 7, 300] {
            assert_eq!(depth(&nested(levels)), levels);
        }
    }

    #[test]
    fn compact_keeps_the_value_and_the_strings() {
        let text = " { \"a b\" : [ 1 , 2.50e3 ,\n\t\"x \\\" ]\" ] , \"c\" : null } ";
        let compacted = compact(text);
        assert_eq!(compacted, r#"{"a b":[1,2.50e3,"x \" ]"],"c":null}"#);
        let a: Value = serde_json::from_str(text).unwrap();
        let b: Value = serde_json::from_str(&compacted).unwrap();
        assert_eq!(a, b);
    }

    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            r#"[ "\\\[\]{}:,a-z\t\né😀]{0,12}"#.prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::vec((r#"[ a-z"\\{}]{0,6}"#, inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Any JSON, printed with whitespace everywhere, compacts to the
        /// same value, with no whitespace left outside strings and the
        /// depth it had.
        #[test]
        fn compact_of_any_pretty_json_is_the_same_value(value in any_json()) {
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            let compacted = compact(&pretty);
            let back: Value = serde_json::from_str(&compacted).unwrap();
            proptest::prop_assert_eq!(&back, &value);
            proptest::prop_assert_eq!(&compacted, &value.to_string());
            proptest::prop_assert_eq!(depth(&compacted), depth(&pretty));
        }
    }

    #[test]
    fn kind_of_names_the_first_token() {
        let kinds: Vec<_> = [" [1]", "{}", "\"s\"", "true", "false", "null", "-1"]
            .iter()
            .map(|text| kind_of(text))
            .collect();
        assert_eq!(
            kinds,
            [
                "an array",
                "an object",
                "a string",
                "a boolean",
                "a boolean",
                "null",
                "a number"
            ]
        );
    }

    /// The deepest tree allowed is built, printed (as a schema error
    /// prints its instance) and dropped from a thread with a small stack.
    #[test]
    fn the_deepest_tree_allowed_needs_no_stack_of_the_caller() {
        let text = nested(MAX_DEPTH);
        let worker = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || with_tree(&text, |tree| tree.to_string().len()))
            .unwrap();
        let printed = worker.join().unwrap().unwrap();
        assert!(printed > 4 * MAX_DEPTH);
    }

    #[test]
    fn deeper_trees_and_bad_text_are_refused() {
        let refused = with_tree(&nested(MAX_DEPTH + 1), |_| ()).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "it is nested {} levels deep, over the limit of {MAX_DEPTH}",
                MAX_DEPTH + 1
            )
        );
        // Only the brackets of a text that is not JSON: refused as not
        // JSON, with no tree started.
        let unclosed = "[".repeat(MAX_DEPTH);
        assert!(matches!(
            with_tree(&unclosed, |_| ()),
            Err(TreeError::NotJson(_))
        ));
        assert!(matches!(
            with_tree("[1] 2", |_| ()),
            Err(TreeError::NotJson(_))
        ));
    }
}
