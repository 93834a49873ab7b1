//! Finding tool call sites and how each one's result is used.
//!
//! A call `f(...)` or `tools.f(...)` whose callee names a tool (and is not a
//! name the program binds itself) is a site. Its mode:
//! - `Awaited`: the direct operand of `await`;
//! - `Deferred`: an element of a list, tuple, set, dict value or
//!   comprehension, or an argument of a call that collects awaitables
//!   (`gather`, `create_task`, `wait`, `append`...): the call is registered
//!   and batched with the others, and waited on when used;
//! - `Sync`: anywhere else: the call pauses on the spot and is its value.
//!
//! Module-level `asyncio.run(x)` (one positional argument, as a statement, an
//! assignment's value or a call argument) becomes `await (x)`, since the
//! whole program already runs as a coroutine.
//!
//! Invariant: every edit replaces the callee's source range only, and only
//! when that range lies on one line, so lines never move.

use std::collections::HashSet;

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::CallMode;

/// Callees whose arguments are collected awaitables rather than values.
const COLLECTORS: &[&str] = &[
    "gather",
    "create_task",
    "ensure_future",
    "wait",
    "wait_for",
    "as_completed",
    "shield",
    "append",
    "extend",
    "insert",
    "add",
    "put_nowait",
];

/// One tool call found in the source.
pub struct FoundSite {
    /// Index of the tool in the bindings.
    pub tool: usize,
    /// Range of the callee text.
    pub callee: TextRange,
    /// How the result is used.
    pub mode: CallMode,
}

/// What the walk found.
#[derive(Default)]
pub struct Findings {
    /// Tool call sites, in source order.
    pub sites: Vec<FoundSite>,
    /// Callee ranges of module-level `asyncio.run`.
    pub asyncio_runs: Vec<TextRange>,
}

/// Walks a module.
pub struct SiteFinder<'s> {
    source: &'s str,
    /// Python name → tool index, for names the program does not bind.
    direct: std::collections::HashMap<&'s str, usize>,
    /// Whether `tools.x` may be rewritten (`tools` is not bound and not a tool).
    namespace: bool,
    /// All tool names, for `tools.x`.
    all: std::collections::HashMap<&'s str, usize>,
    /// Nesting in function, lambda and class bodies.
    depth: usize,
    /// Result.
    pub findings: Findings,
}

impl<'s> SiteFinder<'s> {
    /// A finder for `python_names` (index = tool index), skipping `bound`.
    pub fn new(source: &'s str, python_names: &'s [String], bound: &HashSet<String>) -> Self {
        let all: std::collections::HashMap<_, _> = python_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let direct = all
            .iter()
            .filter(|(n, _)| !bound.contains(**n))
            .map(|(n, i)| (*n, *i))
            .collect();
        let namespace = !bound.contains("tools") && !all.contains_key("tools");
        Self {
            source,
            direct,
            namespace,
            all,
            depth: 0,
            findings: Findings::default(),
        }
    }

    /// The tool a call's callee names, when it is a rewritable site.
    fn tool_of(&self, call: &ExprCall) -> Option<usize> {
        let tool = match call.func.as_ref() {
            Expr::Name(name) => self.direct.get(name.id.as_str()).copied(),
            Expr::Attribute(attr) if self.namespace => match attr.value.as_ref() {
                Expr::Name(base) if base.id.as_str() == "tools" => {
                    self.all.get(attr.attr.as_str()).copied()
                }
                _ => None,
            },
            _ => None,
        }?;
        self.on_one_line(call.func.range()).then_some(tool)
    }

    fn on_one_line(&self, range: TextRange) -> bool {
        !self.source[range].contains(['\n', '\r', '\\', '#'])
    }

    /// Records `expr` as a site of `mode` if it is a tool call; then walks it.
    fn visit_maybe_site(&mut self, expr: &Expr, mode: CallMode) {
        if let Expr::Call(call) = expr
            && let Some(tool) = self.tool_of(call)
        {
            self.findings.sites.push(FoundSite {
                tool,
                callee: call.func.range(),
                mode,
            });
            self.visit_arguments(&call.arguments);
            return;
        }
        self.visit_expr(expr);
    }

    fn visit_elements(&mut self, elements: &[Expr]) {
        for element in elements {
            self.visit_maybe_site(element, CallMode::Deferred);
        }
    }

    fn visit_call(&mut self, call: &ExprCall) {
        self.visit_expr(&call.func);
        let mode = if is_collector(&call.func) {
            CallMode::Deferred
        } else {
            CallMode::Sync
        };
        for arg in &call.arguments.args {
            self.visit_argument(arg, mode);
        }
        for keyword in &call.arguments.keywords {
            self.visit_argument(&keyword.value, mode);
        }
    }

    fn visit_argument(&mut self, arg: &Expr, mode: CallMode) {
        if !self.try_asyncio_run(arg) {
            self.visit_maybe_site(arg, mode);
        }
    }

    /// Rewrites a module-level `asyncio.run(x)`; true when `expr` was one.
    fn try_asyncio_run(&mut self, expr: &Expr) -> bool {
        let Expr::Call(call) = expr else { return false };
        let is_run = matches!(call.func.as_ref(), Expr::Attribute(attr)
            if attr.attr.as_str() == "run"
                && matches!(attr.value.as_ref(), Expr::Name(base) if base.id.as_str() == "asyncio"));
        let plain = call.arguments.args.len() == 1
            && call.arguments.keywords.is_empty()
            && !matches!(call.arguments.args[0], Expr::Starred(_));
        if self.depth > 0 || !is_run || !plain || !self.on_one_line(call.func.range()) {
            return false;
        }
        self.findings.asyncio_runs.push(call.func.range());
        self.visit_arguments(&call.arguments);
        true
    }

    fn nested(&mut self, walk: impl FnOnce(&mut Self)) {
        self.depth += 1;
        walk(self);
        self.depth -= 1;
    }
}

fn is_collector(func: &Expr) -> bool {
    let name = match func {
        Expr::Name(name) => name.id.as_str(),
        Expr::Attribute(attr) => attr.attr.as_str(),
        _ => return false,
    };
    COLLECTORS.contains(&name)
}

impl<'a> Visitor<'a> for SiteFinder<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {
                self.nested(|s| visitor::walk_stmt(s, stmt))
            }
            Stmt::Expr(statement) if self.try_asyncio_run(&statement.value) => {}
            Stmt::Assign(assign) if self.try_asyncio_run(&assign.value) => {
                for target in &assign.targets {
                    self.visit_expr(target);
                }
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Await(awaited) => self.visit_maybe_site(&awaited.value, CallMode::Awaited),
            Expr::Call(call) => {
                if let Some(tool) = self.tool_of(call) {
                    self.findings.sites.push(FoundSite {
                        tool,
                        callee: call.func.range(),
                        mode: CallMode::Sync,
                    });
                    self.visit_arguments(&call.arguments);
                } else {
                    self.visit_call(call);
                }
            }
            Expr::List(list) => self.visit_elements(&list.elts),
            Expr::Tuple(tuple) => self.visit_elements(&tuple.elts),
            Expr::Set(set) => self.visit_elements(&set.elts),
            Expr::Dict(dict) => {
                for item in &dict.items {
                    if let Some(key) = &item.key {
                        self.visit_expr(key);
                    }
                    self.visit_maybe_site(&item.value, CallMode::Deferred);
                }
            }
            Expr::ListComp(comp) => self.visit_comprehension_parts(&comp.generators, &[&comp.elt]),
            Expr::SetComp(comp) => self.visit_comprehension_parts(&comp.generators, &[&comp.elt]),
            Expr::Generator(comp) => self.visit_comprehension_parts(&comp.generators, &[&comp.elt]),
            Expr::DictComp(comp) => {
                for generator in &comp.generators {
                    self.visit_comprehension(generator);
                }
                if let Some(key) = &comp.key {
                    self.visit_expr(key);
                }
                self.visit_maybe_site(&comp.value, CallMode::Deferred);
            }
            Expr::Lambda(_) => self.nested(|s| visitor::walk_expr(s, expr)),
            _ => visitor::walk_expr(self, expr),
        }
    }
}

impl SiteFinder<'_> {
    fn visit_comprehension_parts(
        &mut self,
        generators: &[ruff_python_ast::Comprehension],
        elements: &[&Expr],
    ) {
        for generator in generators {
            self.visit_comprehension(generator);
        }
        for element in elements {
            self.visit_maybe_site(element, CallMode::Deferred);
        }
    }
}
