//! LibreChat's wrapper of tool-free programmatic code: its client sends
//! code that selected no tools to `/exec` as
//!
//! ```text
//! async def __user_main__():
//!     """Auto-generated wrapper for user code to support top-level await"""
//!     <the code, each line indented by 4, blank lines emptied>
//!
//! if __name__ == "__main__":
//!     import asyncio
//!     asyncio.run(__user_main__())
//! ```
//!
//! (`@librechat/agents`, `ProgrammaticToolCalling.ts`, the wrapper of
//! `runPlainExecution`). baton runs top-level `await` itself, so the body
//! runs as the program: its names are globals, its tracebacks show the
//! model's own lines in `<module>`, as the same code sent with tools does.
//!
//! Invariant: only that exact shape is unwrapped, and only when the body is
//! a valid program on its own (a module-level `return` or `yield` would
//! not be): anything else runs as it came.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Stmt};

const HEAD: &str = "async def __user_main__():\n    \"\"\"Auto-generated wrapper for user code to support top-level await\"\"\"\n";
const TAIL: &str =
    "\n\nif __name__ == \"__main__\":\n    import asyncio\n    asyncio.run(__user_main__())\n";

/// The code LibreChat wrapped, when `source` is its wrapper around code
/// that stands as a program by itself.
pub fn unwrap_librechat_main(source: &str) -> Option<String> {
    let body = source.strip_prefix(HEAD)?.strip_suffix(TAIL)?;
    let mut lines = Vec::new();
    for line in body.split('\n') {
        if line.is_empty() {
            lines.push("");
        } else {
            lines.push(line.strip_prefix("    ")?);
        }
    }
    let unwrapped = lines.join("\n") + "\n";
    super::depth::on_sized_stack(unwrapped.len(), || stands_alone(&unwrapped)).then_some(unwrapped)
}

/// Whether `source` parses, is no deeper than the compiler takes, and has
/// no `return` or `yield` outside a function (top-level `await` is fine:
/// baton runs it).
fn stands_alone(source: &str) -> bool {
    let Ok(parsed) = ruff_python_parser::parse_module(source) else {
        return false;
    };
    let body = &parsed.syntax().body;
    if super::depth::first_too_deep(body).is_some() {
        return false;
    }
    let mut finder = FunctionOnly { found: false };
    finder.visit_body(body);
    !finder.found
}

/// Finds a `return` or `yield` outside any function.
struct FunctionOnly {
    found: bool,
}

impl<'a> Visitor<'a> for FunctionOnly {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            Stmt::Return(_) => self.found = true,
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Lambda(_) => {}
            Expr::Yield(_) | Expr::YieldFrom(_) => self.found = true,
            _ => visitor::walk_expr(self, expr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrap(code: &str) -> String {
        let indented: Vec<String> = code
            .split('\n')
            .map(|line| {
                if line.trim().is_empty() {
                    String::new()
                } else {
                    format!("    {line}")
                }
            })
            .collect();
        format!("{HEAD}{}{TAIL}", indented.join("\n"))
    }

    #[test]
    fn librechats_wrapper_gives_back_the_code() {
        let code = "import json\nx = {'a': 1}\n\nif x:\n    print(json.dumps(x))\nr = await asyncio.sleep(0)";
        assert_eq!(
            unwrap_librechat_main(&wrap(code)).as_deref(),
            Some(format!("{code}\n").as_str())
        );
        // Class bodies and nested functions may return and yield.
        let nested = "def f():\n    yield 1\n    return 2\nclass C:\n    g = lambda: (yield)\nprint(list(f()))";
        assert!(unwrap_librechat_main(&wrap(nested)).is_some());
    }

    #[test]
    fn anything_else_runs_as_it_came() {
        for code in [
            "return 5",
            "x = 1\nif x:\n    return x",
            "y = (yield 1)",
            "def f(:\n  pass",
        ] {
            assert_eq!(unwrap_librechat_main(&wrap(code)), None, "{code:?}");
        }
        let plain = "print(1)\n";
        assert_eq!(unwrap_librechat_main(plain), None);
        // An edited wrapper (one more line after it) is not LibreChat's.
        assert_eq!(
            unwrap_librechat_main(&format!("{}print(2)\n", wrap("print(1)"))),
            None
        );
        // A body line without the indent is not LibreChat's either.
        let odd = format!("{HEAD}print(1)\n{TAIL}");
        assert_eq!(unwrap_librechat_main(&odd), None);
    }
}
