//! Tool data nested as deep as the interpreter's recursion limit allows,
//! both ways, over real HTTP against a real server, compared with CPython
//! 3.11 running the same program with the same tools: inputs and results
//! 500 levels deep under the default limit and 3,000 deep under a raised
//! one pass; deeper ones raise CPython's `RecursionError` at the call in
//! the code (never a 400 on the continuation); a result 100,000 deep is
//! refused by the code's `json`, not by the server; the same with the
//! server SIGKILLed before every continuation. Inputs deeper than any
//! recursion limit, forged through the native bridge, fail the execution
//! with a clear error and the server goes on.

mod common;

use std::collections::HashMap;

use common::server::Server;
use serde_json::value::RawValue;

/// The program: `echo(value=...)` sends a value and gets it back;
/// `nest(depth=n)` gets a list nested `n` deep.
const PROGRAM: &str = r#"
import asyncio, json, sys

def make(n):
    v = 0
    for _ in range(n):
        v = [v]
    return v

def depth(v):
    d = 0
    while isinstance(v, (list, dict)):
        v = v[0] if isinstance(v, list) else v["value"]
        d += 1
    return d

async def show(label, make_call):
    try:
        value = await make_call()
        print(label, "depth", depth(value))
    except RecursionError as e:
        # The decoder's words differ (README: known differences).
        print(label, "RecursionError", str(e) if "encoding" in str(e) else "")

for n in (10, 500, 1500):
    await show("echo %d" % n, lambda: echo(value=make(n)))
    await show("nest %d" % n, lambda: nest(depth=n))
sys.setrecursionlimit(4000)
for n in (3000, 6000):
    await show("echo %d" % n, lambda: echo(value=make(n)))
    await show("nest %d" % n, lambda: nest(depth=n))
await show("nest 100000", lambda: nest(depth=100000))
both = await asyncio.gather(nest(depth=700), echo(value=make(800)))
print("gathered", [depth(v) for v in both])
"#;

/// The tools in CPython: JSON both ways, read in the tool's coroutine.
const CPYTHON_TOOLS: &str = r#"
import ast, asyncio, json, sys
async def echo(**arguments):
    return json.loads(json.dumps(arguments))
async def nest(depth):
    return json.loads("[" * depth + "0" + "]" * depth)
code = compile(sys.stdin.read(), "<code>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
asyncio.run(eval(code, {"echo": echo, "nest": nest}))
"#;

const TOOLS: &str = r#"[
 {"name": "echo", "description": "Sends a value back.", "parameters": {"type": "object", "properties": {"value": {}}}},
 {"name": "nest", "description": "A list nested depth deep.", "parameters": {"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"]}}
]"#;

fn cpython_stdout() -> String {
    let mut child = std::process::Command::new("python3")
        .args(["-c", CPYTHON_TOOLS])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    use std::io::Write;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(PROGRAM.as_bytes()).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A reply's top level, each value as its text.
type Reply = HashMap<String, Box<RawValue>>;

fn field<T: serde::de::DeserializeOwned>(reply: &Reply, name: &str) -> T {
    let text = reply.get(name).unwrap_or_else(|| panic!("no {name}"));
    serde_json::from_str(text.get()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn parse(status: u16, text: &str) -> Reply {
    assert_eq!(status, 200, "{:.600}", text);
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:.600}"))
}

/// The results of a paused reply's calls, as the tools answer: `echo`
/// its input's text, `nest` a list nested `depth` deep; and the depth
/// of each input.
fn answer(reply: &Reply) -> (String, Vec<usize>) {
    let calls: Vec<HashMap<String, Box<RawValue>>> = field(reply, "tool_calls");
    let mut results = Vec::new();
    let mut depths = Vec::new();
    for call in &calls {
        let name: String = serde_json::from_str(call["name"].get()).unwrap();
        let input = call["input"].get();
        depths.push(baton::deep_json::depth(input));
        let result = if name == "echo" {
            input.to_owned()
        } else {
            let arguments: serde_json::Value = serde_json::from_str(input).unwrap();
            let n = arguments["depth"].as_u64().unwrap() as usize;
            format!("{}0{}", "[".repeat(n), "]".repeat(n))
        };
        results.push(format!(
            r#"{{"call_id": {}, "result": {result}}}"#,
            call["id"].get()
        ));
    }
    let body = format!(
        r#"{{"continuation_token": {}, "tool_results": [{}]}}"#,
        reply["continuation_token"].get(),
        results.join(", ")
    );
    (body, depths)
}

/// Runs the program to its end, SIGKILLing the server before every
/// continuation when `kill`; the stdout, and every input's depth.
fn run(server: &mut Server, kill: bool) -> (String, Vec<usize>) {
    let start = format!(
        r#"{{"code": {}, "tools": {TOOLS}}}"#,
        serde_json::to_string(PROGRAM).unwrap()
    );
    let (status, text) = server.post_text("/exec/programmatic", &start);
    let mut reply = parse(status, &text);
    let mut depths = Vec::new();
    while field::<String>(&reply, "status") == "tool_call_required" {
        let (body, input_depths) = answer(&reply);
        depths.extend(input_depths);
        if kill {
            server.restart();
        }
        let (status, text) = server.post_text("/exec/programmatic", &body);
        reply = parse(status, &text);
    }
    assert_eq!(
        field::<String>(&reply, "status"),
        "completed",
        "{:?}",
        reply.get("stderr")
    );
    (field(&reply, "stdout"), depths)
}

#[test]
fn deep_inputs_and_results_behave_as_in_cpython_hot_and_across_kills() {
    let expected = cpython_stdout();
    // The oracle itself: what passes, what raises.
    for line in [
        "echo 500 depth 501",
        "nest 500 depth 500",
        "echo 1500 RecursionError maximum recursion depth exceeded while encoding a JSON object",
        "nest 1500 RecursionError ",
        "echo 3000 depth 3001",
        "nest 3000 depth 3000",
        "nest 6000 RecursionError ",
        "nest 100000 RecursionError ",
        "gathered [700, 801]",
    ] {
        assert!(
            expected.lines().any(|l| l == line),
            "{line:?} not in {expected}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let (stdout, depths) = run(&mut server, false);
    assert_eq!(stdout, expected);
    // Inputs reached the client as deep as the code made them.
    assert_eq!(depths.iter().max(), Some(&3001), "{depths:?}");
    let (stdout, _) = run(&mut server, true);
    assert_eq!(stdout, expected, "with a SIGKILL before every continuation");
}

#[test]
fn inputs_deeper_than_any_recursion_limit_through_the_bridge_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let limit = baton::deep_json::MAX_DEPTH;
    for (levels, expected) in [
        (
            400_000,
            format!(
                "Invalid tool call to \"echo\": its input: it is nested 400001 levels deep, over the limit of {limit}"
            ),
        ),
        // The deepest allowed, refused by the schema (`depth` must be an
        // integer): the error prints the 3,999-deep value, on a stack
        // grown for it.
        (
            limit - 1,
            "Invalid tool call to \"nest\": its input does not match the tool's schema: [[[["
                .into(),
        ),
    ] {
        let tool = if levels == limit - 1 { "nest" } else { "echo" };
        let key = if tool == "nest" { "depth" } else { "value" };
        let code = format!(
            "import sys\nb = sys.modules['baton_runtime']._baton\nn = {levels}\nb.pause([0], ['{tool}'], ['{{\"{key}\": ' + '[' * n + ']' * n + '}}'], [1], '', 0, '{{}}')\n"
        );
        let start = format!(
            r#"{{"code": {}, "tools": {TOOLS}}}"#,
            serde_json::to_string(&code).unwrap()
        );
        let (status, text) = server.post_text("/exec/programmatic", &start);
        let reply = parse(status, &text);
        assert_eq!(field::<String>(&reply, "status"), "error", "{text:.600}");
        let error: String = field(&reply, "error");
        assert!(error.starts_with(&expected), "{text:.600}");
    }
    // The server is fine: a plain program runs.
    let start = r#"{"code": "print(6 * 7)"}"#;
    let (status, text) = server.post_text("/exec/programmatic", start);
    assert_eq!(field::<String>(&parse(status, &text), "stdout"), "42\n");
}
