//! What the official code API settles about continuations and cancels,
//! settled the same way, against a real `baton serve`:
//!
//! - a retried continuation (same token, same results) gets the answer of
//!   that round again: the next pause with a valid token, or the ended
//!   result with its stdout and files; while the original still runs, after
//!   it, and after a `kill -9` of the server; other results stay a 409;
//! - `tool_results` entries must be objects with `call_id` and `result`
//!   (a 400 naming the entry; the round stays paused);
//! - cancel works with the request id of a continuation, remembers an id
//!   that comes before its request, refuses a second request in flight with
//!   the same id, says when the execution had already ended, and is scoped
//!   to the API key; a cancel ends the round it finds running, which is
//!   never run again.

mod common;

use common::server::{
    KEY, OTHER_KEY, Server, answers, continue_, continue_until_done, counter, weather_tools,
};
use serde_json::{Value, json};

fn server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let server = Server::start(dir.path(), &[]);
    (dir, server)
}

fn start_with_id(server: &Server, code: &str, request_id: Option<&str>, key: &str) -> Value {
    let headers: Vec<(&str, &str)> = request_id
        .map(|id| vec![("X-LibreChat-Code-Request-ID", id)])
        .unwrap_or_default();
    let (status, reply) = server.post_raw(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools()}).to_string(),
        Some(("x-api-key", key)),
        &headers,
    );
    assert_eq!(status, 200, "{reply}");
    reply
}

fn start(server: &Server, code: &str) -> Value {
    start_with_id(server, code, None, KEY)
}

fn continue_with_id(server: &Server, reply: &Value, request_id: &str) -> (u16, Value) {
    let body =
        json!({"continuation_token": reply["continuation_token"], "tool_results": answers(reply)});
    server.post_raw(
        "/exec/programmatic",
        &body.to_string(),
        Some(("x-api-key", KEY)),
        &[("X-LibreChat-Code-Request-ID", request_id)],
    )
}

fn cancel(server: &Server, request_id: &str, key: &str) -> Value {
    let (status, body) = server.post_as(
        "/exec/programmatic/cancel",
        &json!({"request_id": request_id}),
        Some(("x-api-key", key)),
    );
    assert_eq!(status, 200, "{body}");
    body
}

const THREE_ROUNDS: &str = "a = await get_weather(city='x')\nb = await get_weather(city='yy')\nc = await get_weather(city='zzz')\nprint(a['temp'], b['temp'], c['temp'])\nopen('/mnt/data/out.txt', 'w').write('t')\n";

/// The parts of a pause that a retry must repeat.
fn calls(reply: &Value) -> Value {
    reply["tool_calls"].clone()
}

#[test]
fn a_retried_continuation_gets_the_same_answer() {
    let (_dir, mut server) = server();
    let first = start(&server, THREE_ROUNDS);
    let (status, second) = continue_(&server, &first, answers(&first));
    assert_eq!(status, 200, "{second}");
    // The answer was lost: the same request again.
    let (status, again) = continue_(&server, &first, answers(&first));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], "tool_call_required");
    assert_eq!(calls(&again), calls(&second));
    assert_eq!(again["execution_id"], second["execution_id"]);
    // Other results for the same round: refused.
    let mut other = answers(&first);
    other[0]["result"] = json!({"temp": 99});
    let (status, refused) = continue_(&server, &first, other);
    assert_eq!(
        (status, &refused["error"]),
        (409, &json!("Continuation already used"))
    );
    // The retried answer's token works like the original's.
    let (status, third) = continue_(&server, &again, answers(&again));
    assert_eq!(status, 200, "{third}");
    // After the server is killed, the last continuation retried: same pause.
    server.restart();
    let (status, again) = continue_(&server, &again, answers(&again));
    assert_eq!(status, 200, "{again}");
    assert_eq!(calls(&again), calls(&third));
    // An older continuation, once the client moved on: already used.
    let (status, old) = continue_(&server, &first, answers(&first));
    assert_eq!(
        (status, &old["error"]),
        (409, &json!("Continuation already used"))
    );
    // The last round: the retry repeats the ended result, files included.
    let (status, done) = continue_(&server, &third, answers(&third));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed", "{done}");
    server.restart();
    let (status, repeated) = continue_(&server, &third, answers(&third));
    assert_eq!(status, 200, "{repeated}");
    for field in [
        "status",
        "stdout",
        "stderr",
        "files",
        "execution_id",
        "session_id",
    ] {
        assert_eq!(repeated[field], done[field], "{field}");
    }
    assert_eq!(done["files"][0]["name"], "out.txt", "{done}");
}

#[test]
fn a_retry_while_the_original_runs_waits_for_its_answer() {
    let (_dir, server) = server();
    let code = "a = await get_weather(city='x')\nn = 0\nfor i in range(3_000_000):\n    n += i\nprint(a['temp'], n)\n";
    let paused = start(&server, code);
    let (original, retry) = std::thread::scope(|scope| {
        let original = scope.spawn(|| continue_(&server, &paused, answers(&paused)));
        std::thread::sleep(std::time::Duration::from_millis(50));
        let retry = scope.spawn(|| continue_(&server, &paused, answers(&paused)));
        (original.join(), retry.join())
    });
    let (original, retry) = match (original, retry) {
        (Ok(original), Ok(retry)) => (original, retry),
        _ => panic!("a client thread panicked"),
    };
    assert_eq!(original.0, 200, "{}", original.1);
    assert_eq!(retry.0, 200, "{}", retry.1);
    assert_eq!(original.1["stdout"], retry.1["stdout"]);
    assert_eq!(original.1["status"], "completed");
}

#[test]
fn tool_results_entries_are_objects_with_call_id_and_result() {
    let (_dir, server) = server();
    let paused = start(&server, "w = await get_weather(city='x')\nprint(w)\n");
    let token = paused["continuation_token"].clone();
    let call_id = paused["tool_calls"][0]["id"].clone();
    let bad = [
        (
            json!([[call_id, {"temp": 1}]]),
            "tool_results[0]: expected an object with call_id and result, got an array",
        ),
        (
            json!([{"call_id": call_id, "result": 1, "is_error": "no"}]),
            "tool_results[0]: is_error must be a boolean",
        ),
        (
            json!([{"result": 1}]),
            "tool_results[0]: call_id must be a string",
        ),
        (
            json!([{"call_id": call_id, "result": 1}, 7]),
            "tool_results[1]: expected an object",
        ),
    ];
    for (results, message) in bad {
        let (status, body) = server.post(
            "/exec/programmatic",
            &json!({"continuation_token": token, "tool_results": results}),
        );
        assert_eq!(status, 400, "{results}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.starts_with(message), "{results}: {error}");
    }
    // An error entry may leave `result` out; the round was still paused.
    let (status, done) = server.post(
        "/exec/programmatic",
        &json!({"continuation_token": token, "tool_results": [
            {"call_id": call_id, "is_error": true, "error_message": "down"}]}),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["error"], "ToolError: down", "{done}");
    // A result left out (a JavaScript tool that returned `undefined`) is
    // `None` to the code.
    let paused = start(&server, "w = await get_weather(city='x')\nprint(repr(w))\n");
    let call_id = paused["tool_calls"][0]["id"].clone();
    let (status, done) = server.post(
        "/exec/programmatic",
        &json!({"continuation_token": paused["continuation_token"],
                "tool_results": [{"call_id": call_id, "is_error": false}]}),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["stdout"], "None\n", "{done}");
}

#[test]
fn cancel_follows_the_request_ids_of_continuations() {
    let (_dir, server) = server();
    let paused = start_with_id(&server, THREE_ROUNDS, Some("start-1"), KEY);
    let (status, second) = continue_with_id(&server, &paused, "cont-2");
    assert_eq!(status, 200, "{second}");
    let body = cancel(&server, "cont-2", KEY);
    assert_eq!(body["status"], "cancelled", "{body}");
    let (status, refused) = continue_(&server, &second, answers(&second));
    assert_eq!(
        (status, &refused["error"]),
        (409, &json!("Execution was cancelled"))
    );
    // Cancelling it again, by either id: it is cancelled.
    assert_eq!(cancel(&server, "start-1", KEY)["status"], "cancelled");
    let inspect = format!(
        "/executions/{}",
        paused["execution_id"].as_str().unwrap_or_default()
    );
    assert_eq!(server.get(&inspect, Some(KEY)).1["status"], "cancelled");
}

#[test]
fn a_cancelled_round_ends_at_once_and_is_never_run_again() {
    let (_dir, server) = server();
    // Its second round would run for minutes, past its 60 s budget.
    let code = "w = await get_weather(city='a')\nn = 0\nfor i in range(2_000_000_000):\n    n += i % 7\nprint(n)\n";
    let (status, paused) = server.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools(), "timeout": 60_000}),
    );
    assert_eq!(status, 200, "{paused}");
    let inspect = format!(
        "/executions/{}",
        paused["execution_id"].as_str().unwrap_or_default()
    );
    let (reply, cancelled) = std::thread::scope(|scope| {
        let client = scope.spawn(|| continue_with_id(&server, &paused, "long-round"));
        while server.get(&inspect, Some(KEY)).1["status"] != "running" {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let cancelled = cancel(&server, "long-round", KEY);
        (
            client
                .join()
                .unwrap_or_else(|_| panic!("the client failed")),
            cancelled,
        )
    });
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        (reply.0, &reply.1["status"], &reply.1["error"]),
        (200, &json!("error"), &json!("Execution was cancelled")),
        "{}",
        reply.1
    );
    // The round ran once, in its parked child: its death was not taken for
    // a lost child and replayed in a fresh one.
    assert_eq!(counter(&server, "baton_cold_resumes_total"), 0.0);
    assert_eq!(counter(&server, "baton_executions_cancelled_total"), 1.0);
    assert_eq!(server.get(&inspect, Some(KEY)).1["status"], "cancelled");
}

#[test]
fn a_cancel_that_comes_first_is_applied_to_its_request() {
    let (_dir, server) = server();
    let body = cancel(&server, "early-1", KEY);
    assert_eq!(body["status"], "pending", "{body}");
    let reply = start_with_id(&server, "print('ran')\n", Some("early-1"), KEY);
    assert_eq!(reply["status"], "error", "{reply}");
    assert_eq!(reply["error"], "Execution was cancelled");
    assert_eq!(reply["stdout"], "", "the code ran: {reply}");
    // Once used, the early cancel is gone: the same id runs.
    let reply = start_with_id(&server, "print('ran')\n", Some("early-1"), KEY);
    assert_eq!(reply["stdout"], "ran\n", "{reply}");
    // Before a continuation too.
    let paused = start(&server, THREE_ROUNDS);
    cancel(&server, "early-2", KEY);
    let (status, reply) = continue_with_id(&server, &paused, "early-2");
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["error"], "Execution was cancelled", "{reply}");
}

#[test]
fn a_cancel_of_an_ended_execution_says_it_had_ended() {
    let (_dir, server) = server();
    let done = start_with_id(&server, "print(1)\n", Some("done-1"), KEY);
    assert_eq!(done["status"], "completed");
    let body = cancel(&server, "done-1", KEY);
    assert_eq!(body["status"], "ended", "{body}");
    assert_eq!(body["execution_status"], "completed", "{body}");
    let failed = start_with_id(&server, "1 / 0\n", Some("failed-1"), KEY);
    assert_eq!(failed["status"], "error");
    let body = cancel(&server, "failed-1", KEY);
    assert_eq!(
        (body["status"].clone(), body["execution_status"].clone()),
        (json!("ended"), json!("failed"))
    );
}

#[test]
fn request_ids_are_scoped_to_the_key() {
    let (_dir, server) = server();
    let paused = start_with_id(&server, THREE_ROUNDS, Some("shared-id"), KEY);
    // Another key's cancel with the same id touches nothing of this key.
    let body = cancel(&server, "shared-id", OTHER_KEY);
    assert_eq!(body["status"], "pending", "{body}");
    let (reply, rounds) = continue_until_done(paused, |p| continue_(&server, p, answers(p)));
    assert_eq!(reply["status"], "completed", "{reply}");
    assert_eq!(rounds, 3);
    // The other key may use the id for its own request: it is cancelled on
    // arrival (its own early cancel), not this key's execution.
    let reply = start_with_id(&server, "print(2)\n", Some("shared-id"), OTHER_KEY);
    assert_eq!(reply["error"], "Execution was cancelled", "{reply}");
}

#[test]
fn a_second_request_in_flight_with_the_same_id_is_refused() {
    let (_dir, server) = server();
    let slow = "n = 0\nfor i in range(4_000_000):\n    n += i\nprint(n)\n";
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            server.post_raw(
                "/exec/programmatic",
                &json!({"code": slow, "tools": []}).to_string(),
                Some(("x-api-key", KEY)),
                &[("X-LibreChat-Code-Request-ID", "twice")],
            )
        });
        std::thread::sleep(std::time::Duration::from_millis(150));
        let second = server.post_raw(
            "/exec/programmatic",
            &json!({"code": "print(1)", "tools": []}).to_string(),
            Some(("x-api-key", KEY)),
            &[("X-LibreChat-Code-Request-ID", "twice")],
        );
        (first.join(), second)
    });
    let first = first.unwrap_or_else(|_| panic!("client thread panicked"));
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(first.1["status"], "completed");
    assert_eq!(second.0, 409, "{}", second.1);
    let error = second.1["error"].as_str().unwrap_or_default();
    assert!(error.contains("already in progress"), "{error}");
    // Not a leak: once the first is done, the id is free again.
    let reply = start_with_id(&server, "print(3)\n", Some("twice"), KEY);
    assert_eq!(reply["stdout"], "3\n");
}
