//! Tool contracts over real HTTP: a call its tool's schema refuses fails at
//! the call site, in the first request, before any pause and without the
//! client ever seeing the call; the traceback shows the user's line; a
//! misspelt tool gets CPython 3.12's hint; a good call pauses with its
//! input as bound.

mod common;

use common::server::{Server, answers, continue_};
use serde_json::{Value, json};

fn tools() -> Value {
    json!([
        {"name": "get_weather", "description": "Current weather in a city.",
         "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]},
                           "days": {"type": "array", "items": {"type": "integer"}}},
            "required": ["city"]}},
    ])
}

fn run(server: &Server, code: &str) -> Value {
    let (status, reply) = server.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": tools()}),
    );
    assert_eq!(status, 200, "{reply}");
    reply
}

#[test]
fn refused_calls_fail_at_the_call_site_before_any_pause() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    for (code, line, error) in [
        (
            "print('start')\nw = await get_weather(town='Oslo')\n",
            "w = await get_weather(town='Oslo')",
            "TypeError: get_weather() got an unexpected keyword argument 'town'",
        ),
        (
            "x = 1\nw = await get_weather()\n",
            "w = await get_weather()",
            "TypeError: get_weather() missing 1 required positional argument: 'city'",
        ),
        (
            "w = await get_weather(city=['Oslo'])\n",
            "w = await get_weather(city=['Oslo'])",
            "TypeError: get_weather() argument 'city' must be str, not list",
        ),
        (
            "w = await get_weather('Oslo', 'K')\n",
            "w = await get_weather('Oslo', 'K')",
            "ValueError: get_weather() argument 'unit' must be one of 'C', 'F', not 'K'",
        ),
        (
            "w = await get_weather('Oslo', days=[1, '2'])\n",
            "w = await get_weather('Oslo', days=[1, '2'])",
            "TypeError: get_weather() argument 'days'[1] must be int, not str",
        ),
        (
            "w = await get_wheather(city='Oslo')\n",
            "w = await get_wheather(city='Oslo')",
            "NameError: name 'get_wheather' is not defined. Did you mean: 'get_weather'?",
        ),
    ] {
        let reply = run(&server, code);
        assert_eq!(reply["status"], "error", "{code}: {reply}");
        assert!(reply["tool_calls"].is_null(), "{code}: {reply}");
        let stderr = reply["stderr"].as_str().unwrap_or_default();
        assert!(
            stderr.contains(&format!("    {line}\n")),
            "{code}: {stderr}"
        );
        assert!(stderr.trim_end().ends_with(error), "{code}: {stderr}");
    }
}

#[test]
fn a_good_call_pauses_with_its_input_as_bound() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let code = "import inspect\nprint(inspect.signature(get_weather), get_weather.__doc__)\n\
        help(get_weather)\nw = await get_weather('Oslo', None, days=(1, 2.0))\nprint(w)\n";
    let paused = run(&server, code);
    assert_eq!(paused["status"], "tool_call_required", "{paused}");
    assert_eq!(
        paused["tool_calls"][0]["input"],
        json!({"city": "Oslo", "days": [1, 2.0]})
    );
    let (status, done) = continue_(&server, &paused, answers(&paused));
    assert_eq!(status, 200, "{done}");
    let stdout = done["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.starts_with(
            "(city, unit=None, days=None) Current weather in a city.\nHelp on function get_weather"
        ) && stdout.contains(
            // An `async def` to `inspect`, as CPython's `help` shows one.
            ":\n\nasync get_weather(city, unit=None, days=None)\n    Current weather in a city.\n\n"
        ) && stdout.ends_with("\nget_weather\n"),
        "{stdout}"
    );
}

/// A realistic tool set: the corpus's thirteen tools.
fn corpus_tools() -> Value {
    let text = std::fs::read_to_string(common::root().join("tests/oracle/tools.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
}

fn stubs(server: &Server, tools: &Value, format: Option<&str>) -> (u16, Value) {
    let mut body = json!({"tools": tools});
    if let Some(format) = format {
        body["format"] = json!(format);
    }
    server.post("/tools/stubs", &body)
}

#[test]
fn stubs_are_deterministic_in_both_formats() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let tools = corpus_tools();
    let (status, python) = stubs(&server, &tools, None);
    assert_eq!(
        (status, &python["format"]),
        (200, &json!("python")),
        "{python}"
    );
    let python = python["stubs"].as_str().unwrap_or_default().to_owned();
    // Nested objects, arrays, enums, a union with null, a schema baton
    // cannot decide, a tool without properties, a name with a space.
    for expected in [
        "async def book_trip(traveler: dict[str, Any], legs: list[dict[str, Any]], cabin: Literal[\"economy\", \"business\"] | None = None, notes: str | None = None, budget: float | None = None, flexible: bool | None = None, extras: str | list[Any] | None = None) -> Any:\n    \"\"\"Books a trip: a traveler, legs, a cabin\n    \"\"\"\n",
        "async def get_weather(city: str, unit: Literal[\"C\", \"F\"] | None = None) -> Any:\n    \"\"\"Current weather for a city\n    \"\"\"\n",
        "async def ping(**kwargs: Any) -> Any:\n    \"\"\"Takes anything\n    \"\"\"\n",
        "async def get_exchange_rate(base: str, quote: str) -> Any:\n    \"\"\"Exchange rate between two currencies\n    Tool \"get exchange rate\".\n    \"\"\"\n",
        "async def forecast(city: str, units: str | None = None, days: int | None = None) -> Any:",
    ] {
        assert!(python.contains(expected), "{expected}\nnot in\n{python}");
    }
    // The stubs are valid Python (CPython compiles them).
    let compiled = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys; compile(sys.stdin.read(), 'stubs', 'exec')",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(python.as_bytes())?;
            }
            child.wait()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.success());
    let (_, again) = stubs(&server, &tools, Some("python"));
    assert_eq!(again["stubs"], json!(python), "same tools, same bytes");

    let (status, compact) = stubs(&server, &tools, Some("compact"));
    assert_eq!(status, 200, "{compact}");
    let compact = compact["stubs"].as_str().unwrap_or_default().to_owned();
    assert_eq!(compact.lines().count(), 13, "{compact}");
    assert!(
        compact.contains("search(query: str, limit?: int) -> Any  # Web search\n"),
        "{compact}"
    );
    assert!(
        compact.contains("ping(**kwargs) -> Any  # Takes anything\n"),
        "{compact}"
    );
    let (_, again) = stubs(&server, &tools, Some("compact"));
    assert_eq!(again["stubs"], json!(compact));

    // What the compact form saves, in tokens (OpenAI's o200k_base).
    let tokenizer = tiktoken_rs::o200k_base().unwrap_or_else(|e| panic!("{e}"));
    let count = |text: &str| tokenizer.encode_with_special_tokens(text).len();
    let schemas = count(&tools.to_string());
    let (python_tokens, compact_tokens) = (count(&python), count(&compact));
    eprintln!(
        "tokens for the corpus's 13 tools: JSON schemas {schemas}, python stubs {python_tokens}, compact {compact_tokens}"
    );
    assert!(
        compact_tokens * 2 < schemas,
        "{compact_tokens} vs {schemas}"
    );
    assert!(python_tokens < schemas, "{python_tokens} vs {schemas}");
}

#[test]
fn stub_requests_are_checked() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let (status, reply) = stubs(&server, &json!([]), Some("yaml"));
    assert_eq!(status, 400, "{reply}");
    assert_eq!(
        reply["error"],
        "format must be \"python\" or \"compact\", not \"yaml\""
    );
    let clash = json!([{"name": "a-b"}, {"name": "a b"}]);
    let (status, reply) = stubs(&server, &clash, None);
    assert_eq!(status, 400, "{reply}");
    let (status, reply) = stubs(&server, &json!({"not": "a list"}), None);
    assert_eq!(status, 400, "{reply}");
    let (status, _) = server.post_as(
        "/tools/stubs",
        &json!({"tools": []}),
        Some(("x-api-key", "wrong")),
    );
    assert_eq!(status, 401);
    let (status, empty) = stubs(&server, &json!([]), Some("compact"));
    assert_eq!((status, &empty["stubs"]), (200, &json!("")));
}

/// Tools for the caller and history tests: one only the model may call,
/// one whose callers include code execution, one that fails.
fn caller_tools() -> Value {
    json!([
        {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "send_email", "description": "Sends an email", "allowed_callers": ["direct"],
         "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}},
        {"name": "lookup", "allowed_callers": ["direct", "code_execution_20250825"],
         "parameters": {"type": "object", "properties": {"q": {}}}},
        {"name": "class", "parameters": {"type": "object", "properties": {"x": {}}}},
    ])
}

#[test]
fn a_tool_only_the_model_may_call_raises_in_code() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let code = "try:\n    await send_email(to='a@b.c')\nexcept PermissionError as e:\n    print('refused:', e)\n\
        r = await lookup(q='x')\nprint(r)\nawait send_email(to='a@b.c')\n";
    let (status, paused) = server.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": caller_tools()}),
    );
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["status"], "tool_call_required", "{paused}");
    assert_eq!(paused["tool_calls"][0]["name"], "lookup", "{paused}");
    let (status, done) = continue_(&server, &paused, answers(&paused));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "error", "{done}");
    assert_eq!(
        done["stdout"],
        "refused: send_email() can only be called directly by the model, not from code \
         (its allowed_callers do not include code execution)\nlookup\n"
    );
    assert!(
        done["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("PermissionError: send_email()")),
        "{done}"
    );
    // Its stub is not offered to code.
    let (status, stubs) = server.post(
        "/tools/stubs",
        &json!({"tools": caller_tools(), "format": "compact"}),
    );
    assert_eq!(status, 200, "{stubs}");
    let text = stubs["stubs"].as_str().unwrap_or_default();
    assert!(
        !text.contains("send_email") && text.contains("lookup("),
        "{text}"
    );
}

#[test]
fn the_history_lists_every_call_also_across_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &[]);
    let code = "a = await get_weather(city='Oslo')\ntry:\n    await class_tool(x=[1, 2])\nexcept ToolError:\n    pass\n\
        b, c = await asyncio.gather(get_weather(city='Rome'), lookup(q={'k': 1}))\nprint(a, b, c)\n";
    let (status, mut reply) = server.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": caller_tools(), "include_history": true}),
    );
    assert_eq!(status, 200, "{reply}");
    let mut round = 0;
    while reply["status"] == "tool_call_required" {
        round += 1;
        // The client takes its time; round 2's answer comes after a
        // SIGKILL and a restart of the server.
        std::thread::sleep(std::time::Duration::from_millis(60));
        if round == 2 {
            server.kill();
            server.restart();
        }
        let (status, next) = continue_(&server, &reply, answers(&reply));
        assert_eq!(status, 200, "{next}");
        reply = next;
    }
    assert_eq!(reply["status"], "completed", "{reply}");
    let history = reply["history"].as_array().cloned().unwrap_or_default();
    let calls: Vec<(u64, &str, &Value, bool)> = history
        .iter()
        .map(|c| {
            (
                c["round"].as_u64().unwrap_or(0),
                c["name"].as_str().unwrap_or(""),
                &c["input"],
                c["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            (1, "get_weather", &json!({"city": "Oslo"}), false),
            (2, "class", &json!({"x": [1, 2]}), true),
            (3, "get_weather", &json!({"city": "Rome"}), false),
            (3, "lookup", &json!({"q": {"k": 1}}), false),
        ],
        "{reply}"
    );
    for call in &history {
        // Round 2's pause may have gone with the killed server (a pause is
        // flushed with the next flush): then the round was run again to
        // it, and when it was first made is not known.
        if call["round"] == 2 && call["client_ms"].is_null() {
            continue;
        }
        let took = call["client_ms"].as_u64().unwrap_or(0);
        assert!((60..60_000).contains(&took), "{call}");
    }
    // Without the flag there is no history.
    let (_, plain) = server.post(
        "/exec/programmatic",
        &json!({"code": "print(1)", "tools": caller_tools()}),
    );
    assert!(plain.get("history").is_none(), "{plain}");
}

#[test]
fn datetime_range_errors_are_worded_as_cpythons_c_module_words_them() {
    // The oracle harness runs the pure-Python datetime (other words), so
    // these are compared with CPython 3.11 itself here.
    let code = "\
import datetime
for args in [(2024, 2, 30), (2024, 13, 1), (2024, 1, 1, 25), (2024, 1, 1, 1, 60)]:
    try:
        datetime.datetime(*args)
    except ValueError as e:
        print(e)
";
    let cpython = std::process::Command::new("python3")
        .args(["-c", code])
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let expected = String::from_utf8_lossy(&cpython.stdout).into_owned();
    assert_eq!(
        expected,
        "day is out of range for month\nmonth must be in 1..12\nhour must be in 0..23\nminute must be in 0..59\n"
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let reply = run(&server, code);
    assert_eq!(reply["status"], "completed", "{reply}");
    assert_eq!(reply["stdout"], expected.as_str(), "{reply}");
}
