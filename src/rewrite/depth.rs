//! Bounding the work on a program's syntax tree, so that no input can
//! overflow a stack.
//!
//! The parser grows its own stack (`stacker`), so any source parses; but a
//! tree as deep as the source is long (`x = ------...-1`, a 100,000-term
//! sum) would overflow every recursive walk over it, and the drop of the
//! tree itself recurses as deep. So:
//! - [`first_too_deep`] finds the first node past the depth the VM's own
//!   compiler accepts (it counts statements, expressions and patterns the
//!   same way, against `CompileOpts::recursion_limit`); it stops descending
//!   there, so it never recurses deeper than that limit. A program past it is
//!   not walked further: the VM's compile reports it as CPython does
//!   (`RecursionError: maximum recursion depth exceeded during compilation`).
//! - [`on_sized_stack`] runs the whole analysis, and the drop of whatever
//!   tree it built, on a stack sized for the source: a tree has at most one
//!   level per byte of source, and each level of the drop takes at most
//!   [`STACK_PER_SOURCE_BYTE`] bytes of stack.
//!
//! Invariant: a walk over a tree that passed [`first_too_deep`] recurses at
//! most `recursion_limit` levels; nothing else recurses over user input.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Pattern, Stmt};
use ruff_text_size::Ranged;

/// Stack reserved per byte of source, enough for the drop of a tree as deep
/// as the source is long (measured on 100,000-level trees of every shape:
/// 64 bytes per level in a release build, 80 in the test profile). Kept
/// modest: in a child the stack counts against the memory limit.
pub(super) const STACK_PER_SOURCE_BYTE: usize = 128;

/// Stack for the bounded walks themselves, whatever the source (measured:
/// under 180 bytes per level, so under 180 KiB at the depth limit).
pub(super) const BASE_STACK: usize = 1 << 20;

/// The deepest tree the VM's compiler accepts.
pub(super) fn depth_limit() -> usize {
    rustpython_vm::compiler::CompileOpts::default().recursion_limit
}

/// Runs `analysis` on a stack with room for any tree of a source of
/// `source_len` bytes: in place when the current stack has that room left,
/// else on a new stack of that size.
pub fn on_sized_stack<R>(source_len: usize, analysis: impl FnOnce() -> R) -> R {
    let size = BASE_STACK.saturating_add(source_len.saturating_mul(STACK_PER_SOURCE_BYTE));
    stacker::maybe_grow(size, size, analysis)
}

/// The source offset of the first node nested deeper than the compiler
/// accepts, if any.
pub(super) fn first_too_deep(body: &[Stmt]) -> Option<usize> {
    let mut checker = DepthChecker {
        depth: 0,
        limit: depth_limit(),
        too_deep: None,
    };
    checker.visit_body(body);
    checker.too_deep
}

/// Whether `source` (a module, or an expression when `expression`) nests
/// deeper than the compiler accepts, found without ever dropping a deep
/// tree: a tree found too deep is leaked. For a process that ends soon (a
/// child compiling a huge source for `exec`), where a stack sized for the
/// drop would not fit its memory limit.
pub fn leaks_too_deep(source: &str, expression: bool) -> bool {
    use ruff_python_ast::Mod;
    let mode = if expression {
        ruff_python_parser::Mode::Expression
    } else {
        ruff_python_parser::Mode::Module
    };
    if bracket_depth(source, mode) > MAX_BRACKET_DEPTH {
        // The compiler refuses it by its tokens ("too many nested
        // parentheses"), and parsing it here would cost the parser's
        // deepest recursion for nothing.
        return false;
    }
    let parsed = ruff_python_parser::parse_unchecked(source, mode.into());
    let mut checker = DepthChecker {
        depth: 0,
        limit: depth_limit(),
        too_deep: None,
    };
    match parsed.syntax() {
        Mod::Module(module) => checker.visit_body(&module.body),
        Mod::Expression(expression) => checker.visit_expr(&expression.body),
    }
    let too_deep = checker.too_deep.is_some();
    if too_deep {
        std::mem::forget(parsed);
    }
    too_deep
}

/// The bracket nesting the compiler accepts (CPython's `MAXLEVEL`).
const MAX_BRACKET_DEPTH: usize = 200;

/// The deepest nesting of `(`, `[` and `{` in `source`, from its tokens.
fn bracket_depth(source: &str, mode: ruff_python_parser::Mode) -> usize {
    use ruff_python_ast::token::TokenKind;
    let mut lexer = ruff_python_parser::lexer::lex(source, mode);
    let (mut depth, mut deepest) = (0usize, 0usize);
    loop {
        match lexer.next_token() {
            TokenKind::EndOfFile => return deepest,
            TokenKind::Lpar | TokenKind::Lsqb | TokenKind::Lbrace => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            TokenKind::Rpar | TokenKind::Rsqb | TokenKind::Rbrace => {
                depth = depth.saturating_sub(1)
            }
            _ => {}
        }
    }
}

struct DepthChecker {
    depth: usize,
    limit: usize,
    too_deep: Option<usize>,
}

impl DepthChecker {
    fn descend(&mut self, offset: usize, walk: impl FnOnce(&mut Self)) {
        if self.too_deep.is_some() {
            return;
        }
        if self.depth >= self.limit {
            self.too_deep = Some(offset);
            return;
        }
        self.depth += 1;
        walk(self);
        self.depth -= 1;
    }
}

impl<'a> Visitor<'a> for DepthChecker {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        self.descend(stmt.start().into(), |c| visitor::walk_stmt(c, stmt));
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        self.descend(expr.start().into(), |c| visitor::walk_expr(c, expr));
    }

    fn visit_pattern(&mut self, pattern: &'a Pattern) {
        self.descend(pattern.start().into(), |c| {
            visitor::walk_pattern(c, pattern)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_error(source: &str) -> Option<usize> {
        on_sized_stack(source.len(), || {
            let parsed = ruff_python_parser::parse_module(source).ok()?;
            first_too_deep(&parsed.syntax().body)
        })
    }

    #[test]
    fn shallow_programs_pass() {
        assert_eq!(depth_error("x = -(-1) + [1, [2, [3]]]\nprint(x)\n"), None);
        let wide = format!("x = [{}]\n", vec!["-1"; 50_000].join(", "));
        assert_eq!(depth_error(&wide), None);
    }

    #[test]
    fn every_deep_shape_is_found_without_overflowing() {
        let shapes = [
            format!("x = {}1\n", "-".repeat(100_000)),
            format!("x = {}\n", vec!["1"; 100_000].join(" + ")),
            format!("x = a{}\n", ".b".repeat(50_000)),
            format!("x = {}1{}\n", "[".repeat(50_000), "]".repeat(50_000)),
            format!("x = {}1\n", "not ".repeat(50_000)),
            format!("x = {}1\n", "lambda: ".repeat(20_000)),
            format!("x = {}1\n", "x if y else ".repeat(20_000)),
            format!("x = f{}\n", "()".repeat(50_000)),
        ];
        for source in &shapes {
            let offset = depth_error(source);
            assert!(offset.is_some(), "not found too deep: {}", &source[..40]);
        }
    }

    #[test]
    fn parentheses_alone_do_not_deepen_the_tree() {
        // The VM's compile refuses them by counting tokens
        // ("too many nested parentheses"); the tree stays flat.
        let source = format!("x = {}1{}\n", "(".repeat(50_000), ")".repeat(50_000));
        assert_eq!(depth_error(&source), None);
    }
}
