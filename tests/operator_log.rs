//! The operator's log of a real server: one line per request that changes
//! an execution (start, continue, `/exec`, cancel, and refused ones), with
//! the execution id, the key's id (never the key), status, round, duration
//! and failure kind; as text without colour when not on a terminal, or as
//! JSON; `debug` without the storage engine's internals.

mod common;

use baton::token::key_identity;
use common::server::{KEY, Server, answers, continue_, weather_tools};
use serde_json::{Value, json};

fn server(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), extra);
    (dir, server)
}

/// Runs one of each request; returns the execution ids and the token.
fn traffic(server: &Server) -> (String, String, String) {
    let (status, paused) = server.post(
        "/exec/programmatic",
        &json!({"code": "w = await get_weather(city='a')\nprint(w['temp'])\n", "tools": weather_tools()}),
    );
    assert_eq!(status, 200, "{paused}");
    let (status, done) = continue_(server, &paused, answers(&paused));
    assert_eq!(
        (status, &done["status"]),
        (200, &json!("completed")),
        "{done}"
    );
    // The same token with other results: refused.
    let (status, refused) = continue_(server, &paused, vec![]);
    assert_eq!(status, 409, "{refused}");
    let (status, failed) = server.post("/exec", &json!({"lang": "py", "code": "1 / 0"}));
    assert_eq!(status, 200, "{failed}");
    let (status, _) = server.post("/exec/programmatic/cancel", &json!({"request_id": "r-1"}));
    assert_eq!(status, 200);
    let id = |v: &Value| v["execution_id"].as_str().unwrap_or_default().to_owned();
    let token = paused["continuation_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(id(&paused), id(&done));
    (id(&paused), id(&failed), token)
}

/// Waits until the server has printed `count` lines that satisfy `wanted`.
fn lines_where(server: &Server, count: usize, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let lines: Vec<String> = server
            .log_lines()
            .into_iter()
            .filter(|l| wanted(l))
            .collect();
        if lines.len() >= count || std::time::Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn each_request_is_one_text_line_with_ids_not_secrets() {
    let (_dir, server) = server(&["--log", "info"]);
    let (execution, exec_id, token) = traffic(&server);
    let key_id = hex::encode(key_identity(KEY));
    let requests = lines_where(&server, 5, |l| l.contains(" request="));
    let find = |needles: &[&str]| {
        requests
            .iter()
            .find(|l| needles.iter().all(|n| l.contains(n)))
            .unwrap_or_else(|| panic!("no line with {needles:?} in {requests:#?}"))
    };
    let line = find(&[
        "request=start",
        &format!("execution={execution}"),
        "status=\"paused\"",
        "round=1",
    ]);
    assert!(line.contains(&format!("key={key_id}")), "{line}");
    assert!(line.contains(" ms="), "{line}");
    find(&[
        "request=continue",
        &format!("execution={execution}"),
        "status=\"completed\"",
        "round=1",
    ]);
    find(&[
        "request=continue",
        "status=\"refused\"",
        "http=409",
        "Continuation already used",
    ]);
    find(&[
        "request=exec",
        &format!("execution={exec_id}"),
        "status=\"failed\"",
        "failure=\"exception\"",
    ]);
    find(&["request=cancel", "request_id=\"r-1\"", "status=Pending"]);
    for line in server.log_lines() {
        assert!(!line.contains(KEY), "the key is logged: {line}");
        assert!(!line.contains(&token), "a token is logged: {line}");
        assert!(
            !line.contains('\u{1b}'),
            "colour when not on a terminal: {line}"
        );
    }
}

#[test]
fn json_lines_carry_the_same_fields_and_debug_hides_the_storage_engine() {
    let (_dir, server) = server(&["--log", "debug", "--log-format", "json"]);
    let (execution, _, _) = traffic(&server);
    let requests = lines_where(&server, 5, |l| l.contains("\"request\""));
    let parsed: Vec<Value> = requests
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let start = parsed
        .iter()
        .find(|v| v["fields"]["request"] == "start")
        .unwrap_or_else(|| panic!("{parsed:#?}"));
    assert_eq!(start["fields"]["execution"], execution.as_str());
    assert_eq!(start["fields"]["status"], "paused");
    assert_eq!(start["fields"]["round"], 1);
    assert_eq!(
        start["fields"]["key"],
        hex::encode(key_identity(KEY)).as_str()
    );
    assert_eq!(start["level"], "INFO");
    assert!(
        start["fields"]["ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{start}"
    );
    let lines = server.log_lines();
    let targets: Vec<String> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["target"].as_str().map(str::to_owned))
        .collect();
    assert!(targets.iter().any(|t| t.starts_with("baton")), "{lines:#?}");
    for target in &targets {
        for library in ["sled", "hyper", "h2", "tower", "mio"] {
            assert!(
                !target.starts_with(library),
                "{library}'s internals at debug: {target}"
            );
        }
    }
}
