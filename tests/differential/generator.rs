//! Random LLM-style programs and random tool answers, as proptest
//! strategies that shrink to small programs.
//!
//! A program is a prelude (imports, a result list `R`, helper functions and
//! a class whose method call tools) and a body of statements: tool calls in
//! every style (awaited, plain, `tools.x`, positional), `asyncio.gather`
//! batches (literal, comprehension, `map` over a lambda, coroutines kept in
//! variables and gathered later), coroutines passed to a helper that awaits
//! them, made by a plain `def`, made up front in a list or dict and awaited
//! one at a time (stopping at the first failure), tasks cancelled before and
//! after they start, `as_completed`, calls through the helper and the
//! method, prints of the results, `for` loops, branches on results, and
//! `try`/`except ToolError` around tools.
//!
//! Invariant: every generated program is valid Python 3.11 whose names are
//! all bound, so the only way it fails is a tool error left uncaught. A
//! program without plain (un-awaited) calls is valid CPython: every
//! coroutine it awaits is awaited, and the oracle runs it natively.

use proptest::prelude::*;
use serde_json::{Value, json};

/// The tools every program may call.
pub(crate) const TOOLS: &str = r#"[
  {"name": "fetch", "parameters": {"type": "object",
    "properties": {"key": {}, "n": {"type": "integer"}}}},
  {"name": "compute-score", "parameters": {"type": "object", "properties": {"x": {}, "y": {}}}},
  {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {}}}}
]"#;

/// Python name and first parameter of each tool.
const TOOL_SIGNATURES: [(&str, &str); 3] =
    [("fetch", "key"), ("compute_score", "x"), ("lookup", "q")];

const PRELUDE: &str = r#"import asyncio
import json
R = []


async def helper(a):
    r = await lookup(q=a)
    return {"helper": r}


class Agent:
    def __init__(self, tag):
        self.tag = tag

    async def ask(self, q):
        r = await compute_score(x=self.tag, y=q)
        return [self.tag, r]


async def audited(label, coro):
    r = await coro
    print("audited", label)
    return r


def make(k):
    return lookup(q=k)


"#;

/// A tool argument.
#[derive(Clone, Debug)]
pub(crate) enum Arg {
    Int(i64),
    Text(String),
    /// The last result, or `None`.
    Last,
    /// The innermost loop variable (0 outside loops).
    LoopVar,
}

/// How a call is written.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Style {
    Awaited,
    Plain,
    Namespaced,
    Positional,
}

/// One tool call.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub tool: usize,
    pub style: Style,
    pub arg: Arg,
}

/// A statement.
#[derive(Clone, Debug)]
pub(crate) enum Stmt {
    Call(Call),
    Gather(Vec<(usize, Arg)>),
    GatherComprehension(usize, u8),
    Helper(Arg),
    Method(String, Arg),
    Print(u8),
    For(u8, Vec<Stmt>),
    If(u8, Vec<Stmt>, Vec<Stmt>),
    Try(Vec<Stmt>),
    /// Coroutines kept in variables, gathered later.
    StoredGather(Vec<(usize, Arg)>),
    /// A coroutine passed to a helper that awaits it.
    Audited(usize, Arg),
    /// A coroutine made by a plain `def`, awaited.
    Made(Arg),
    /// Coroutines made up front in a list, awaited one at a time; the loop
    /// stops at the first failure (the rest are never awaited).
    AwaitEach(Vec<(usize, Arg)>),
    /// Coroutines in a dict; only the one of key `n % len` is awaited.
    AwaitOne(Vec<(usize, Arg)>, u8),
    /// A task cancelled before (`false`) or after (`true`) its first step.
    CancelledTask(usize, Arg, bool),
    /// `gather(*map(lambda ...))`.
    GatherMap(usize, u8),
    /// `as_completed` over a list of coroutines.
    AsCompleted(Vec<(usize, Arg)>),
    /// A call its tool's signature or schema refuses (one of
    /// [`BAD_CALLS`]), its TypeError caught and printed.
    BadCall(u8, Arg),
}

/// Calls that do not bind or check: `{}` is the argument.
const BAD_CALLS: [&str; 6] = [
    "await fetch(key={}, n='many')",
    "fetch(key={}, kee=1)",
    "await lookup({}, {})",
    "compute_score({}, x=1)",
    "await fetch(key={}, n=2.5)",
    "await tools.fetch(key={}, n=True)",
];

/// A tool's answer: a value, or an error with its message.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    Value(Value),
    Error(String),
}

/// A generated case: the program and the answers, given in call order.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub body: Vec<Stmt>,
    pub answers: Vec<Answer>,
}

fn has_plain_call(body: &[Stmt]) -> bool {
    body.iter().any(|stmt| match stmt {
        Stmt::Call(call) => matches!(call.style, Style::Plain),
        Stmt::For(_, inner) | Stmt::Try(inner) => has_plain_call(inner),
        Stmt::If(_, then, otherwise) => has_plain_call(then) || has_plain_call(otherwise),
        _ => false,
    })
}

impl Case {
    /// Whether CPython can run the program: every call awaited.
    pub(crate) fn is_valid_cpython(&self) -> bool {
        !has_plain_call(&self.body)
    }

    /// The program's source.
    pub(crate) fn source(&self) -> String {
        let mut out = String::from(PRELUDE);
        render_block(&mut out, &self.body, 0, 0);
        out
    }

    /// The answers as the oracle harness's table.
    pub(crate) fn table(&self) -> Value {
        Value::Array(
            self.answers
                .iter()
                .map(|answer| match answer {
                    Answer::Value(value) => json!({"ok": true, "value": value}),
                    Answer::Error(message) => json!({"ok": false, "message": message}),
                })
                .collect(),
        )
    }
}

fn render_block(out: &mut String, body: &[Stmt], indent: usize, loops: usize) {
    if body.is_empty() {
        line(out, indent, "pass");
    }
    for stmt in body {
        render_stmt(out, stmt, indent, loops);
    }
}

fn line(out: &mut String, indent: usize, text: &str) {
    out.push_str(&"    ".repeat(indent));
    out.push_str(text);
    out.push('\n');
}

fn arg(arg: &Arg, loops: usize) -> String {
    match arg {
        Arg::Int(n) => n.to_string(),
        Arg::Text(text) => format!("{text:?}"),
        Arg::Last => "(R[-1] if R else None)".into(),
        Arg::LoopVar if loops > 0 => format!("i{}", loops - 1),
        Arg::LoopVar => "0".into(),
    }
}

fn call(call: &Call, loops: usize) -> String {
    let (name, param) = TOOL_SIGNATURES[call.tool];
    let value = arg(&call.arg, loops);
    match call.style {
        Style::Awaited => format!("await {name}({param}={value})"),
        Style::Plain => format!("{name}({param}={value})"),
        Style::Namespaced => format!("await tools.{name}({param}={value})"),
        Style::Positional => format!("await {name}({value})"),
    }
}

const PRINTS: [&str; 5] = [
    "print('count', len(R))",
    "print('last', R[-1] if R else None)",
    "print('json', json.dumps(R[-1] if R else None, sort_keys=True))",
    "print('types', [type(x).__name__ for x in R])",
    "print('size', sum(len(str(x)) for x in R))",
];

const CONDITIONS: [&str; 3] = [
    "len(R) % 2 == 0",
    "R and isinstance(R[-1], dict)",
    "len(str(R[-1] if R else '')) > 8",
];

fn coroutine(tool: usize, a: &Arg, loops: usize) -> String {
    let (name, param) = TOOL_SIGNATURES[tool];
    format!("{name}({param}={})", arg(a, loops))
}

fn coroutines(calls: &[(usize, Arg)], loops: usize) -> Vec<String> {
    calls
        .iter()
        .map(|(tool, a)| coroutine(*tool, a, loops))
        .collect()
}

fn render_stmt(out: &mut String, stmt: &Stmt, indent: usize, loops: usize) {
    if render_coroutine_stmt(out, stmt, indent, loops) {
        return;
    }
    match stmt {
        Stmt::Call(c) => line(out, indent, &format!("v = {}; R.append(v)", call(c, loops))),
        Stmt::BadCall(kind, a) => {
            let template = BAD_CALLS[usize::from(*kind) % BAD_CALLS.len()];
            let value = arg(a, loops);
            line(out, indent, "try:");
            line(
                out,
                indent + 1,
                &format!("v = {}; R.append(v)", template.replace("{}", &value)),
            );
            line(out, indent, "except TypeError as e:");
            line(out, indent + 1, "print('refused', e)");
        }
        Stmt::Gather(calls) => {
            let items: Vec<String> = calls
                .iter()
                .map(|(tool, a)| {
                    let (name, param) = TOOL_SIGNATURES[*tool];
                    format!("{name}({param}={})", arg(a, loops))
                })
                .collect();
            line(
                out,
                indent,
                &format!(
                    "vs = await asyncio.gather({}); R.extend(vs)",
                    items.join(", ")
                ),
            );
        }
        Stmt::GatherComprehension(tool, n) => {
            let (name, param) = TOOL_SIGNATURES[*tool];
            line(
                out,
                indent,
                &format!(
                    "vs = await asyncio.gather(*[{name}({param}=str(j)) for j in range({n})]); R.extend(vs)"
                ),
            );
        }
        Stmt::Helper(a) => line(
            out,
            indent,
            &format!("v = await helper({}); R.append(v)", arg(a, loops)),
        ),
        Stmt::Method(tag, a) => line(
            out,
            indent,
            &format!(
                "v = await Agent({tag:?}).ask({}); R.append(v)",
                arg(a, loops)
            ),
        ),
        Stmt::Print(kind) => line(out, indent, PRINTS[usize::from(*kind) % PRINTS.len()]),
        Stmt::For(n, body) => {
            line(out, indent, &format!("for i{loops} in range({n}):"));
            render_block(out, body, indent + 1, loops + 1);
        }
        Stmt::If(cond, then, otherwise) => {
            line(
                out,
                indent,
                &format!("if {}:", CONDITIONS[usize::from(*cond) % CONDITIONS.len()]),
            );
            render_block(out, then, indent + 1, loops);
            line(out, indent, "else:");
            render_block(out, otherwise, indent + 1, loops);
        }
        Stmt::Try(body) => {
            line(out, indent, "try:");
            render_block(out, body, indent + 1, loops);
            line(out, indent, "except ToolError as e:");
            line(out, indent + 1, "print('caught', e)");
            line(out, indent + 1, "R.append(str(e))");
        }
        // Rendered by render_coroutine_stmt.
        _ => {}
    }
}

/// The statements that keep coroutines before awaiting them; false for
/// the others.
fn render_coroutine_stmt(out: &mut String, stmt: &Stmt, indent: usize, loops: usize) -> bool {
    match stmt {
        Stmt::StoredGather(calls) => {
            let made = coroutines(calls, loops);
            let names: Vec<String> = (0..made.len()).map(|k| format!("c{k}")).collect();
            for (name, call) in names.iter().zip(&made) {
                line(out, indent, &format!("{name} = {call}"));
            }
            line(
                out,
                indent,
                &format!(
                    "vs = await asyncio.gather({}); R.extend(vs)",
                    names.join(", ")
                ),
            );
        }
        Stmt::Audited(tool, a) => line(
            out,
            indent,
            &format!(
                "v = await audited({}, {}); R.append(v)",
                tool,
                coroutine(*tool, a, loops)
            ),
        ),
        Stmt::Made(a) => line(
            out,
            indent,
            &format!("v = await make({}); R.append(v)", arg(a, loops)),
        ),
        Stmt::AwaitEach(calls) => {
            line(
                out,
                indent,
                &format!("cs = [{}]", coroutines(calls, loops).join(", ")),
            );
            line(out, indent, "for c in cs:");
            line(out, indent + 1, "try:");
            line(out, indent + 2, "v = await c");
            line(out, indent + 1, "except ToolError as e:");
            line(out, indent + 2, "print('stopped', e)");
            line(out, indent + 2, "break");
            line(out, indent + 1, "R.append(v)");
        }
        Stmt::AwaitOne(calls, pick) => {
            let items: Vec<String> = coroutines(calls, loops)
                .iter()
                .enumerate()
                .map(|(k, call)| format!("'k{k}': {call}"))
                .collect();
            let key = usize::from(*pick) % calls.len().max(1);
            line(out, indent, &format!("d = {{{}}}", items.join(", ")));
            line(out, indent, &format!("v = await d['k{key}']; R.append(v)"));
        }
        Stmt::CancelledTask(tool, a, started) => {
            line(
                out,
                indent,
                &format!("t = asyncio.create_task({})", coroutine(*tool, a, loops)),
            );
            if *started {
                line(out, indent, "await asyncio.sleep(0)");
            }
            line(out, indent, "t.cancel()");
            line(out, indent, "try:");
            line(out, indent + 1, "R.append(await t)");
            line(out, indent, "except asyncio.CancelledError:");
            line(out, indent + 1, "print('cancelled')");
        }
        Stmt::GatherMap(tool, n) => {
            let (name, param) = TOOL_SIGNATURES[*tool];
            line(
                out,
                indent,
                &format!(
                    "vs = await asyncio.gather(*map(lambda s: {name}({param}=s), [str(j) for j in range({n})])); R.extend(vs)"
                ),
            );
        }
        Stmt::AsCompleted(calls) => {
            // Tasks made in order: `as_completed` over bare coroutines
            // starts them in set order, which CPython does not fix.
            line(
                out,
                indent,
                &format!(
                    "for f in asyncio.as_completed([asyncio.create_task(c) for c in [{}]]):",
                    coroutines(calls, loops).join(", ")
                ),
            );
            line(out, indent + 1, "R.append(await f)");
        }
        _ => return false,
    }
    true
}

fn text() -> impl Strategy<Value = String> {
    "[a-z0-9 é'\"]{0,6}"
}

fn arg_strategy() -> impl Strategy<Value = Arg> {
    prop_oneof![
        (-50i64..50).prop_map(Arg::Int),
        text().prop_map(Arg::Text),
        Just(Arg::Last),
        Just(Arg::LoopVar),
    ]
}

fn style() -> impl Strategy<Value = Style> {
    prop_oneof![
        3 => Just(Style::Awaited),
        1 => Just(Style::Plain),
        1 => Just(Style::Namespaced),
        1 => Just(Style::Positional),
    ]
}

fn leaf() -> impl Strategy<Value = Stmt> {
    prop_oneof![
        4 => (0..3usize, style(), arg_strategy())
            .prop_map(|(tool, style, arg)| Stmt::Call(Call { tool, style, arg })),
        2 => prop::collection::vec((0..3usize, arg_strategy()), 1..4).prop_map(Stmt::Gather),
        1 => (0..3usize, 0..4u8).prop_map(|(tool, n)| Stmt::GatherComprehension(tool, n)),
        1 => arg_strategy().prop_map(Stmt::Helper),
        1 => ("[a-z]{1,4}", arg_strategy()).prop_map(|(tag, arg)| Stmt::Method(tag, arg)),
        3 => (0..5u8).prop_map(Stmt::Print),
        1 => (0..6u8, arg_strategy()).prop_map(|(kind, arg)| Stmt::BadCall(kind, arg)),
        4 => coroutine_leaf(),
    ]
}

fn calls() -> impl Strategy<Value = Vec<(usize, Arg)>> {
    prop::collection::vec((0..3usize, arg_strategy()), 1..4)
}

fn coroutine_leaf() -> impl Strategy<Value = Stmt> {
    prop_oneof![
        calls().prop_map(Stmt::StoredGather),
        (0..3usize, arg_strategy()).prop_map(|(tool, a)| Stmt::Audited(tool, a)),
        arg_strategy().prop_map(Stmt::Made),
        calls().prop_map(Stmt::AwaitEach),
        (calls(), any::<u8>()).prop_map(|(calls, pick)| Stmt::AwaitOne(calls, pick)),
        (0..3usize, arg_strategy(), any::<bool>())
            .prop_map(|(tool, a, started)| Stmt::CancelledTask(tool, a, started)),
        (0..3usize, 0..4u8).prop_map(|(tool, n)| Stmt::GatherMap(tool, n)),
        calls().prop_map(Stmt::AsCompleted),
    ]
}

fn block(inner: impl Strategy<Value = Stmt>) -> impl Strategy<Value = Vec<Stmt>> {
    prop::collection::vec(inner, 0..4)
}

fn stmt() -> impl Strategy<Value = Stmt> {
    leaf().prop_recursive(2, 24, 4, |inner| {
        prop_oneof![
            (0..3u8, block(inner.clone())).prop_map(|(n, body)| Stmt::For(n, body)),
            (0..3u8, block(inner.clone()), block(inner.clone()))
                .prop_map(|(c, then, otherwise)| Stmt::If(c, then, otherwise)),
            block(inner).prop_map(Stmt::Try),
        ]
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(Value::from),
        prop::sample::select(vec![0.5, -2.25, 0.1, 3.0, 1e16, 123.456]).prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        5 => json_value().prop_map(Answer::Value),
        1 => "[a-z ]{1,12}".prop_map(Answer::Error),
    ]
}

/// Programs of one to eight statements and one to six answers.
pub(crate) fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(stmt(), 1..8),
        prop::collection::vec(answer(), 1..6),
    )
        .prop_map(|(body, answers)| Case { body, answers })
}
