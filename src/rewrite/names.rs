//! Tool names as Python names, and the names a program binds itself.
//!
//! Invariants:
//! - [`python_name`] follows `PROTOCOL.md` exactly: `-` and whitespace become
//!   `_`, every other character outside `[A-Za-z0-9_]` is dropped, a leading
//!   digit gets a `_` prefix, a keyword gets a `_tool` suffix.
//! - [`bound_names`] over-approximates: a name bound anywhere in the module
//!   (assignment, def, class, parameter, import, `for`, `with`, `except`,
//!   pattern) counts as bound everywhere, so a call to it is never mistaken
//!   for a tool call.

use std::collections::HashSet;

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{ExceptHandler, Expr, ExprContext, Parameter, Pattern, Stmt};

/// Python 3.11's `keyword.kwlist`.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The Python name of a tool, or `None` when nothing of the name is left.
pub fn python_name(tool: &str) -> Option<String> {
    let mut name: String = tool
        .chars()
        .filter_map(|c| match c {
            '-' => Some('_'),
            c if c.is_whitespace() => Some('_'),
            c if c.is_ascii_alphanumeric() || c == '_' => Some(c),
            _ => None,
        })
        .collect();
    if name.is_empty() {
        return None;
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    if KEYWORDS.contains(&name.as_str()) {
        name.push_str("_tool");
    }
    Some(name)
}

/// Whether `name` can be written as a parameter of a `def`: an identifier
/// that is not a keyword.
pub fn is_parameter_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && !KEYWORDS.contains(&name)
}

/// Every name the module binds anywhere.
pub(super) fn bound_names(body: &[Stmt]) -> HashSet<String> {
    let mut collector = BoundNames::default();
    collector.visit_body(body);
    collector.names
}

#[derive(Default)]
struct BoundNames {
    names: HashSet<String>,
}

impl BoundNames {
    fn add(&mut self, name: &str) {
        self.names.insert(name.to_owned());
    }
}

impl<'a> Visitor<'a> for BoundNames {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(def) => self.add(def.name.as_str()),
            Stmt::ClassDef(def) => self.add(def.name.as_str()),
            Stmt::Import(import) => {
                for alias in &import.names {
                    let bound = alias.asname.as_ref().unwrap_or(&alias.name).as_str();
                    self.add(bound.split('.').next().unwrap_or(bound));
                }
            }
            Stmt::ImportFrom(import) => {
                for alias in &import.names {
                    self.add(alias.asname.as_ref().unwrap_or(&alias.name).as_str());
                }
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Name(name) = expr
            && matches!(name.ctx, ExprContext::Store | ExprContext::Del)
        {
            self.add(name.id.as_str());
        }
        visitor::walk_expr(self, expr);
    }

    fn visit_parameter(&mut self, parameter: &'a Parameter) {
        self.add(parameter.name.as_str());
        visitor::walk_parameter(self, parameter);
    }

    fn visit_except_handler(&mut self, handler: &'a ExceptHandler) {
        let ExceptHandler::ExceptHandler(handler_node) = handler;
        if let Some(name) = &handler_node.name {
            self.add(name.as_str());
        }
        visitor::walk_except_handler(self, handler);
    }

    fn visit_pattern(&mut self, pattern: &'a Pattern) {
        let captured = match pattern {
            Pattern::MatchAs(p) => p.name.as_ref(),
            Pattern::MatchStar(p) => p.name.as_ref(),
            Pattern::MatchMapping(p) => p.rest.as_ref(),
            _ => None,
        };
        if let Some(name) = captured {
            self.add(name.as_str());
        }
        visitor::walk_pattern(self, pattern);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_examples() {
        assert_eq!(python_name("get-weather").as_deref(), Some("get_weather"));
        assert_eq!(python_name("class").as_deref(), Some("class_tool"));
        assert_eq!(python_name("1st tool!").as_deref(), Some("_1st_tool"));
        assert_eq!(python_name("a\tb  c").as_deref(), Some("a_b__c"));
        assert_eq!(python_name("café.search").as_deref(), Some("cafsearch"));
        assert_eq!(python_name("None").as_deref(), Some("None_tool"));
        assert_eq!(python_name("match").as_deref(), Some("match"));
        assert_eq!(python_name("!!!"), None);
    }

    #[test]
    fn finds_every_kind_of_binding() {
        let source = "\
import a.b, c as d
from e import f, g as h
def i(j, *k, l=1, **m): pass
class n: pass
o = p = 1
for q, r in []: pass
with s() as t: pass
try: pass
except E as u: pass
(v := 1)
lambda w: w
[x for x in y]
match z:
    case {'k': aa, **bb}: pass
    case [cc, *dd]: pass
del ee
";
        let parsed = ruff_python_parser::parse_module(source).unwrap();
        let names = bound_names(&parsed.syntax().body);
        for name in [
            "a", "d", "f", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "t", "u", "v",
            "w", "x", "aa", "bb", "cc", "dd", "ee",
        ] {
            assert!(names.contains(name), "{name} missing from {names:?}");
        }
        for name in ["b", "c", "e", "g", "s", "y", "z", "E"] {
            assert!(!names.contains(name), "{name} wrongly bound");
        }
    }
}
