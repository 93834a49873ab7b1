//! The tool-name normaliser against `PROTOCOL.md`'s rules.
//!
//! Properties: for any name, the Python name is `None` exactly when nothing
//! usable is left; otherwise it is a valid identifier (`[A-Za-z_][A-Za-z0-9_]*`),
//! not a Python 3.11 keyword, a fixed point (normalising it again changes
//! nothing), and equal to a second implementation written from the rules'
//! text: `-` and whitespace become `_`, every other character outside
//! `[A-Za-z0-9_]` is dropped, `_` is prefixed to a leading digit, `_tool`
//! appended to a keyword.
#![no_main]

use baton::rewrite::python_name;
use libfuzzer_sys::fuzz_target;

const KEYWORDS: &str = "False None True and as assert async await break class continue def del \
                        elif else except finally for from global if import in is lambda nonlocal \
                        not or pass raise return try while with yield";

fn by_the_rules(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.chars() {
        if c == '-' || c.is_whitespace() {
            out.push('_');
        } else if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        }
    }
    if out.is_empty() {
        return None;
    }
    if out.as_bytes()[0].is_ascii_digit() {
        out = format!("_{out}");
    }
    if KEYWORDS.split_whitespace().any(|k| k == out) {
        out.push_str("_tool");
    }
    Some(out)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fuzz_target!(|name: &str| {
    let normalised = python_name(name);
    assert_eq!(
        normalised,
        by_the_rules(name),
        "differs from the rules for {name:?}"
    );
    let Some(normalised) = normalised else {
        return;
    };
    assert!(
        is_identifier(&normalised),
        "{normalised:?} is not an identifier"
    );
    assert!(
        !KEYWORDS.split_whitespace().any(|k| k == normalised),
        "{normalised:?} is a keyword"
    );
    assert_eq!(
        python_name(&normalised).as_deref(),
        Some(normalised.as_str()),
        "not stable"
    );
});
