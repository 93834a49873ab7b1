//! Finding tool call sites and how each one's value is used.
//!
//! To the program every tool is an `async def` stub: a call makes a
//! coroutine, and the tool is called when that coroutine is awaited (alone,
//! or with others through `gather`, tasks, `wait`...). baton keeps that rule
//! and adds one extension: a call whose value the program uses directly, as
//! if the tool were a plain function, is made on the spot. Each site's mode
//! says which applies:
//! - `Awaited`: the direct operand of `await`.
//! - `Sync` (made on the spot, the call is its value): a bare call used as a
//!   statement; a call used as a value (subscripted, an attribute taken, an
//!   operand, formatted in an f-string, tested, iterated, unpacked, passed to
//!   a builtin that only reads values such as `print`, `len`, `sorted`,
//!   `str.join`, `json.dumps`); a call assigned to a name that the program
//!   only ever uses in those ways. CPython would never await such a
//!   coroutine, so a program that is valid CPython has no `Sync` site.
//! - `Deferred` (a coroutine, called only if and when awaited): everything
//!   else: an element of a list, tuple, set or dict, an argument of any other
//!   call, a returned or yielded value, a lambda's body, a value assigned to
//!   an attribute, an item, or a name the program awaits, passes on, stores
//!   or never uses.
//!
//! Module-level `asyncio.run(x)` (one positional argument, as a statement, an
//! assignment's value or a call argument) becomes `await (x)`, since the
//! whole program already runs as a coroutine.
//!
//! Invariants:
//! - Every edit replaces the callee's source range only, and only when that
//!   range lies on one line, so lines never move.
//! - The analysis errs towards `Deferred`: a name counts as "used as a
//!   value" only when every load of it anywhere in the module is a value
//!   use, and not at all when the program can reach names dynamically
//!   (`eval`, `exec`, `locals`, `globals`, `vars`).
//! - The walks recurse once per AST level; the caller bounds the depth.

use std::collections::{HashMap, HashSet};

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::CallMode;

/// How the value of an expression is used, from the weakest to the
/// strongest claim that it is consumed as a plain value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Use {
    /// Kept, passed on, returned, stored, or unknown: it may be awaited later.
    Lazy,
    /// The operand of `await`.
    Awaited,
    /// A bare expression statement.
    Statement,
    /// Consumed as a value; its elements may still flow on (`for x in v`).
    Value,
    /// Consumed as a value, elements included (`print(v)`, `sorted(v)`).
    Deep,
}

impl Use {
    /// The mode of a tool call used this way.
    fn mode(self) -> CallMode {
        match self {
            Use::Lazy => CallMode::Deferred,
            Use::Awaited => CallMode::Awaited,
            Use::Statement | Use::Value | Use::Deep => CallMode::Sync,
        }
    }

    /// How the elements of a container used this way are used.
    fn elements(self) -> Use {
        if self == Use::Deep {
            Use::Deep
        } else {
            Use::Lazy
        }
    }

    /// What a load of a name in this position says about the name.
    fn of_name(self) -> Use {
        match self {
            Use::Lazy | Use::Awaited => Use::Lazy,
            Use::Statement | Use::Value => Use::Value,
            Use::Deep => Use::Deep,
        }
    }
}

/// Builtins that read their arguments (and the elements of them) and keep
/// nothing: a coroutine passed to one could never be awaited.
const DEEP_BUILTINS: &[&str] = &[
    "print",
    "len",
    "str",
    "repr",
    "ascii",
    "format",
    "sum",
    "any",
    "all",
    "sorted",
    "min",
    "max",
    "hash",
    "abs",
    "round",
    "divmod",
    "pow",
    "bool",
    "int",
    "float",
    "complex",
    "ord",
    "chr",
    "hex",
    "oct",
    "bin",
    "isinstance",
    "type",
    "id",
    "callable",
];

/// Builtins that consume their argument but may hand its elements on.
const SHALLOW_BUILTINS: &[&str] = &[
    "list",
    "tuple",
    "set",
    "frozenset",
    "dict",
    "iter",
    "next",
    "enumerate",
    "zip",
    "reversed",
    "map",
    "filter",
    "range",
];

/// Methods that read their arguments as values and keep nothing of them.
const DEEP_METHODS: &[&str] = &["join", "format", "write", "writelines", "dumps", "dump"];

/// Modules whose functions only read values.
const DEEP_MODULES: &[&str] = &["json", "statistics", "math", "textwrap", "pprint"];

/// Methods that consume an iterable or mapping but keep its elements.
const SHALLOW_METHODS: &[&str] = &["extend", "update"];

/// Attributes of a coroutine itself: taking one does not use the value.
const COROUTINE_ATTRIBUTES: &[&str] = &[
    "send",
    "throw",
    "close",
    "__await__",
    "cr_await",
    "cr_code",
    "cr_frame",
    "cr_running",
];

/// Calls that reach names dynamically.
const DYNAMIC_NAME_ACCESS: &[&str] = &["eval", "exec", "locals", "globals", "vars"];

/// One tool call found in the source.
pub(super) struct FoundSite {
    /// Index of the tool in the bindings.
    pub tool: usize,
    /// Range of the callee text.
    pub callee: TextRange,
    /// How the result is used.
    pub mode: CallMode,
}

/// What the walk found.
#[derive(Default)]
pub(super) struct Findings {
    /// Tool call sites, in source order.
    pub sites: Vec<FoundSite>,
    /// Callee ranges of module-level `asyncio.run`.
    pub asyncio_runs: Vec<TextRange>,
}

/// Finds the sites of a module.
pub(super) fn find(
    source: &str,
    body: &[Stmt],
    python_names: &[String],
    bound: &HashSet<String>,
) -> Findings {
    let mut usage = Walker::new(source, python_names, bound, None);
    usage.visit_body(body);
    let names = if usage.dynamic {
        HashMap::new()
    } else {
        usage.names
    };
    let mut finder = Walker::new(source, python_names, bound, Some(names));
    finder.visit_body(body);
    finder.findings
}

/// The walk: the first pass (`name_uses: None`) learns how every name is
/// used; the second finds the sites, classifying assignments by those uses.
struct Walker<'s> {
    source: &'s str,
    /// Python name → tool index, for names the program does not bind.
    direct: HashMap<&'s str, usize>,
    /// Whether `tools.x` may be rewritten (`tools` is not bound and not a tool).
    namespace: bool,
    /// All tool names, for `tools.x`.
    all: HashMap<&'s str, usize>,
    /// Names the program binds itself (its own `print` is not the builtin).
    bound: &'s HashSet<String>,
    /// In the second pass: the weakest use of each name loaded anywhere.
    name_uses: Option<HashMap<String, Use>>,
    /// How the expression being visited is used.
    here: Use,
    /// Nesting in function, lambda and class bodies.
    depth: usize,
    /// First pass: the weakest use of each loaded name.
    names: HashMap<String, Use>,
    /// First pass: whether the program reaches names dynamically.
    dynamic: bool,
    /// Second pass: the result.
    findings: Findings,
}

impl<'s> Walker<'s> {
    fn new(
        source: &'s str,
        python_names: &'s [String],
        bound: &'s HashSet<String>,
        name_uses: Option<HashMap<String, Use>>,
    ) -> Self {
        let all: HashMap<_, _> = python_names
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
            bound,
            name_uses,
            here: Use::Statement,
            depth: 0,
            names: HashMap::new(),
            dynamic: false,
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

    /// Visits `expr` as used in the way `how`.
    fn visit_as(&mut self, expr: &Expr, how: Use) {
        let outer = std::mem::replace(&mut self.here, how);
        self.visit_expr(expr);
        self.here = outer;
    }

    /// Visits the children of `node` through `walk`, each used as `how`.
    fn walk_as(&mut self, how: Use, walk: impl FnOnce(&mut Self)) {
        let outer = std::mem::replace(&mut self.here, how);
        walk(self);
        self.here = outer;
    }

    fn nested(&mut self, walk: impl FnOnce(&mut Self)) {
        self.depth += 1;
        walk(self);
        self.depth -= 1;
    }

    /// The weakest use of the name `id` (second pass; `Lazy` when unknown
    /// or never loaded).
    fn name_use(&self, id: &str) -> Use {
        self.name_uses
            .as_ref()
            .and_then(|uses| uses.get(id).copied())
            .unwrap_or(Use::Lazy)
    }

    /// How a value assigned to `target` is used.
    fn assigned_use(&self, target: &Expr) -> Use {
        match target {
            // The first pass does not know the names yet: assume the worst.
            Expr::Name(name) if self.name_uses.is_some() => self.name_use(name.id.as_str()),
            Expr::Tuple(_) | Expr::List(_) | Expr::Starred(_) => Use::Value,
            _ => Use::Lazy,
        }
    }

    fn record_load(&mut self, id: &str, how: Use) {
        let how = how.of_name();
        self.names
            .entry(id.to_owned())
            .and_modify(|seen| *seen = (*seen).min(how))
            .or_insert(how);
    }

    /// How the arguments of a call to `func` are used.
    fn argument_use(&self, func: &Expr) -> Use {
        match func {
            Expr::Name(name) if !self.bound.contains(name.id.as_str()) => {
                let id = name.id.as_str();
                if DEEP_BUILTINS.contains(&id) {
                    Use::Deep
                } else if SHALLOW_BUILTINS.contains(&id) {
                    Use::Value
                } else {
                    Use::Lazy
                }
            }
            Expr::Attribute(attr) => {
                let method = attr.attr.as_str();
                let module_function = matches!(attr.value.as_ref(), Expr::Name(base)
                    if DEEP_MODULES.contains(&base.id.as_str())
                        && !self.bound.contains(base.id.as_str()));
                if module_function || DEEP_METHODS.contains(&method) {
                    Use::Deep
                } else if SHALLOW_METHODS.contains(&method) {
                    Use::Value
                } else {
                    Use::Lazy
                }
            }
            _ => Use::Lazy,
        }
    }

    fn visit_call(&mut self, call: &ExprCall, how: Use) {
        if let Some(tool) = self.tool_of(call) {
            self.findings.sites.push(FoundSite {
                tool,
                callee: call.func.range(),
                mode: how.mode(),
            });
        } else {
            if let Expr::Name(name) = call.func.as_ref()
                && DYNAMIC_NAME_ACCESS.contains(&name.id.as_str())
            {
                self.dynamic = true;
            }
            self.visit_as(&call.func, Use::Value);
        }
        let arguments = self.argument_use(&call.func);
        for arg in &call.arguments.args {
            if !self.try_asyncio_run(arg) {
                self.visit_as(arg, arguments);
            }
        }
        for keyword in &call.arguments.keywords {
            if !self.try_asyncio_run(&keyword.value) {
                self.visit_as(&keyword.value, arguments);
            }
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
        self.visit_as(&call.arguments.args[0], Use::Awaited);
        true
    }

    fn visit_comprehension_parts(
        &mut self,
        generators: &[ruff_python_ast::Comprehension],
        elements: &[&Expr],
        how: Use,
    ) {
        for generator in generators {
            self.visit_as(&generator.iter, Use::Value);
            self.visit_as(&generator.target, Use::Lazy);
            for condition in &generator.ifs {
                self.visit_as(condition, Use::Value);
            }
        }
        for element in elements {
            self.visit_as(element, how.elements());
        }
    }

    /// An assignment: the value is used as its targets are.
    fn visit_assignment(&mut self, targets: &[&Expr], value: &Expr) {
        let how = targets
            .iter()
            .map(|target| self.assigned_use(target))
            .min()
            .unwrap_or(Use::Lazy);
        if !self.try_asyncio_run(value) {
            self.visit_as(value, how);
        }
        for target in targets {
            self.visit_as(target, Use::Lazy);
        }
    }
}

impl<'a> Visitor<'a> for Walker<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {
                self.nested(|s| s.walk_as(Use::Lazy, |s| visitor::walk_stmt(s, stmt)))
            }
            Stmt::Expr(statement) => {
                if !self.try_asyncio_run(&statement.value) {
                    self.visit_as(&statement.value, Use::Statement);
                }
            }
            Stmt::Assign(assign) => {
                let targets: Vec<&Expr> = assign.targets.iter().collect();
                self.visit_assignment(&targets, &assign.value);
            }
            Stmt::AnnAssign(assign) => {
                self.visit_as(&assign.annotation, Use::Value);
                match &assign.value {
                    Some(value) => self.visit_assignment(&[&assign.target], value),
                    None => self.visit_as(&assign.target, Use::Lazy),
                }
            }
            Stmt::AugAssign(assign) => {
                self.visit_as(&assign.target, Use::Value);
                self.visit_as(&assign.value, Use::Value);
            }
            Stmt::If(branch) => {
                self.visit_as(&branch.test, Use::Value);
                self.visit_body(&branch.body);
                for clause in &branch.elif_else_clauses {
                    if let Some(test) = &clause.test {
                        self.visit_as(test, Use::Value);
                    }
                    self.visit_body(&clause.body);
                }
            }
            Stmt::While(loop_) => {
                self.visit_as(&loop_.test, Use::Value);
                self.visit_body(&loop_.body);
                self.visit_body(&loop_.orelse);
            }
            Stmt::For(loop_) => {
                self.visit_as(&loop_.iter, Use::Value);
                self.visit_as(&loop_.target, Use::Lazy);
                self.visit_body(&loop_.body);
                self.visit_body(&loop_.orelse);
            }
            Stmt::With(with) => {
                for item in &with.items {
                    self.visit_as(&item.context_expr, Use::Value);
                    if let Some(vars) = &item.optional_vars {
                        self.visit_as(vars, Use::Lazy);
                    }
                }
                self.visit_body(&with.body);
            }
            Stmt::Assert(assert) => {
                self.visit_as(&assert.test, Use::Value);
                if let Some(message) = &assert.msg {
                    self.visit_as(message, Use::Deep);
                }
            }
            Stmt::Match(match_) => {
                self.visit_as(&match_.subject, Use::Value);
                self.walk_as(Use::Lazy, |s| {
                    for case in &match_.cases {
                        s.visit_match_case(case);
                    }
                });
            }
            _ => self.walk_as(Use::Lazy, |s| visitor::walk_stmt(s, stmt)),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        let how = self.here;
        match expr {
            Expr::Name(name) => {
                if name.ctx == ruff_python_ast::ExprContext::Load {
                    self.record_load(name.id.as_str(), how);
                }
            }
            Expr::Await(awaited) => self.visit_as(&awaited.value, Use::Awaited),
            Expr::Call(call) => self.visit_call(call, how),
            Expr::Attribute(attr) => {
                let on_coroutine = COROUTINE_ATTRIBUTES.contains(&attr.attr.as_str());
                let base = if on_coroutine { Use::Lazy } else { Use::Value };
                self.visit_as(&attr.value, base);
            }
            Expr::Subscript(subscript) => {
                self.visit_as(&subscript.value, Use::Value);
                self.visit_as(&subscript.slice, Use::Value);
            }
            Expr::BinOp(_) | Expr::UnaryOp(_) | Expr::Compare(_) | Expr::Slice(_) => {
                self.walk_as(Use::Value, |s| visitor::walk_expr(s, expr))
            }
            Expr::Starred(starred) => self.visit_as(&starred.value, how.max(Use::Value)),
            // The value of `a or b` is one of its operands; same for `x if c else y`.
            Expr::BoolOp(boolean) => {
                for value in &boolean.values {
                    self.visit_as(value, how);
                }
            }
            Expr::If(choice) => {
                self.visit_as(&choice.test, Use::Value);
                self.visit_as(&choice.body, how);
                self.visit_as(&choice.orelse, how);
            }
            Expr::Named(named) => {
                let target = self.assigned_use(&named.target);
                self.visit_as(&named.value, how.min(target));
                self.visit_as(&named.target, Use::Lazy);
            }
            Expr::FString(_) | Expr::TString(_) => {
                self.walk_as(Use::Deep, |s| visitor::walk_expr(s, expr))
            }
            Expr::List(list) => self.walk_elements(&list.elts, how),
            Expr::Tuple(tuple) => self.walk_elements(&tuple.elts, how),
            Expr::Set(set) => self.walk_elements(&set.elts, how),
            Expr::Dict(dict) => {
                for item in &dict.items {
                    if let Some(key) = &item.key {
                        self.visit_as(key, Use::Value);
                    }
                    self.visit_as(&item.value, how.elements());
                }
            }
            Expr::ListComp(comp) => {
                self.visit_comprehension_parts(&comp.generators, &[&comp.elt], how)
            }
            Expr::SetComp(comp) => {
                self.visit_comprehension_parts(&comp.generators, &[&comp.elt], how)
            }
            Expr::Generator(comp) => {
                self.visit_comprehension_parts(&comp.generators, &[&comp.elt], how)
            }
            Expr::DictComp(comp) => {
                self.visit_comprehension_parts(&comp.generators, &[], how);
                if let Some(key) = &comp.key {
                    self.visit_as(key, Use::Value);
                }
                self.visit_as(&comp.value, how.elements());
            }
            Expr::Lambda(_) => {
                self.nested(|s| s.walk_as(Use::Lazy, |s| visitor::walk_expr(s, expr)))
            }
            _ => self.walk_as(Use::Lazy, |s| visitor::walk_expr(s, expr)),
        }
    }
}

impl Walker<'_> {
    fn walk_elements(&mut self, elements: &[Expr], how: Use) {
        for element in elements {
            self.visit_as(element, how.elements());
        }
    }
}
