//! The rewriter on arbitrary source.
//!
//! Input: one byte choosing which of six tool names are declared, then the
//! source. Properties:
//! - `rewrite` never panics, and refuses exactly what the parser refuses;
//! - the rewritten source parses, has the same lines, and every line it
//!   changed holds a call site or a module-level `asyncio.run`;
//! - the number of sites equals an independent count (below) whenever that
//!   count can tell which names the program binds.
#![no_main]

use std::collections::HashMap;

use baton::rewrite::{self, ToolBinding};
use baton::tools::ToolDef;
use libfuzzer_sys::fuzz_target;
use ruff_python_ast::token::TokenKind;
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprContext};
use ruff_text_size::Ranged;

const TOOL_NAMES: [&str; 6] = [
    "get-weather",
    "search",
    "class",
    "fetch data",
    "tools",
    "1st tool!",
];

fn bindings(mask: u8) -> Vec<ToolBinding> {
    let tools: Vec<ToolDef> = TOOL_NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, name)| ToolDef {
            name: (*name).to_owned(),
            description: None,
            parameters: None,
        })
        .collect();
    match rewrite::bind_tools(&tools) {
        Ok(bindings) => bindings,
        Err(error) => panic!("the fixed tool names must bind: {error}"),
    }
}

/// Every `Name` load, attribute name and call the AST holds, counted by a
/// visitor that knows nothing of the rewriter's rules.
#[derive(Default)]
struct Reference<'s> {
    source: &'s str,
    loads: HashMap<String, usize>,
    attributes: HashMap<String, usize>,
    /// Calls `f(...)` by name, callee on one line.
    direct_calls: HashMap<String, usize>,
    /// Calls `tools.f(...)` by `f`, callee on one line.
    namespaced_calls: HashMap<String, usize>,
}

impl<'a> Visitor<'a> for Reference<'_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(name) if name.ctx == ExprContext::Load => {
                *self.loads.entry(name.id.to_string()).or_default() += 1;
            }
            Expr::Attribute(attr) => {
                *self.attributes.entry(attr.attr.to_string()).or_default() += 1;
            }
            Expr::Call(call)
                if !self.source[call.func.range()].contains(['\n', '\r', '\\', '#']) =>
            {
                match call.func.as_ref() {
                    Expr::Name(name) => {
                        *self.direct_calls.entry(name.id.to_string()).or_default() += 1;
                    }
                    Expr::Attribute(attr) if matches!(attr.value.as_ref(), Expr::Name(base) if base.id.as_str() == "tools") =>
                    {
                        *self
                            .namespaced_calls
                            .entry(attr.attr.to_string())
                            .or_default() += 1;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

/// The expected number of sites, or `None` when a tool name (or `tools`)
/// is used other than as a load or an attribute somewhere, so the program
/// may bind it.
fn reference_count(source: &str, bindings: &[ToolBinding]) -> Option<usize> {
    let parsed = ruff_python_parser::parse_module(source).ok()?;
    let mut tokens: HashMap<&str, usize> = HashMap::new();
    for token in parsed
        .tokens()
        .iter()
        .filter(|t| t.kind() == TokenKind::Name)
    {
        *tokens.entry(&source[token.range()]).or_default() += 1;
    }
    let mut reference = Reference {
        source,
        ..Reference::default()
    };
    reference.visit_body(&parsed.syntax().body);
    let count = |map: &HashMap<String, usize>, name: &str| map.get(name).copied().unwrap_or(0);
    let only_read = |name: &str| {
        count(&reference.loads, name) + count(&reference.attributes, name)
            == tokens.get(name).copied().unwrap_or(0)
    };
    let mut expected = 0;
    for binding in bindings {
        let direct = count(&reference.direct_calls, &binding.python);
        if direct > 0 && !only_read(&binding.python) {
            return None;
        }
        expected += direct;
    }
    let tools_is_a_tool = bindings.iter().any(|b| b.python == "tools");
    let namespaced: usize = bindings
        .iter()
        .map(|b| count(&reference.namespaced_calls, &b.python))
        .sum();
    if namespaced > 0 && !tools_is_a_tool {
        if !only_read("tools") {
            return None;
        }
        expected += namespaced;
    }
    Some(expected)
}

/// The lines of `text` as Python counts them: `\r\n`, a lone `\r` and `\n`
/// each end one line.
fn lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\r' if bytes.get(at + 1) == Some(&b'\n') => {
                lines.push(&text[start..at]);
                at += 2;
                start = at;
            }
            b'\r' | b'\n' => {
                lines.push(&text[start..at]);
                at += 1;
                start = at;
            }
            _ => at += 1,
        }
    }
    lines.push(&text[start..]);
    lines
}

fuzz_target!(|data: &[u8]| {
    let Some((&mask, rest)) = data.split_first() else {
        return;
    };
    let Ok(source) = std::str::from_utf8(rest) else {
        return;
    };
    let bindings = bindings(mask);
    let parses = ruff_python_parser::parse_module(source).is_ok();
    let rewritten = match rewrite::rewrite(source, &bindings) {
        Ok(rewritten) => rewritten,
        Err(error) => {
            assert!(
                !parses,
                "the parser accepts what the rewriter refused: {error}"
            );
            return;
        }
    };
    assert!(parses, "the rewriter accepted what the parser refuses");
    if let Err(error) = ruff_python_parser::parse_module(&rewritten.source) {
        panic!(
            "the rewritten source does not parse: {error:?}\n{}",
            rewritten.source
        );
    }
    let (before, after) = (lines(source), lines(&rewritten.source));
    assert_eq!(before.len(), after.len(), "the line count changed");
    for (index, (old, new)) in before.iter().zip(&after).enumerate() {
        let edited = rewritten.sites.iter().any(|s| s.line == index + 1) || old.contains("asyncio");
        assert!(
            old == new || edited,
            "line {} changed with no site on it",
            index + 1
        );
    }
    for site in &rewritten.sites {
        let expected = format!("{}[{}]", rewritten.marker, site.id);
        assert!(
            after[site.line - 1].contains(&expected),
            "site {} is not on line {}",
            site.id,
            site.line
        );
    }
    if let Some(expected) = reference_count(source, &bindings) {
        assert_eq!(
            rewritten.sites.len(),
            expected,
            "site count differs from the reference count"
        );
    }
});
