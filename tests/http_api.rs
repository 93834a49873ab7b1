//! The service over real HTTP against a real `baton serve` process: every
//! row of the contract's error table, response fields, tokens, restarts.

mod common;

use std::time::Duration;

use base64::Engine as _;
use baton::token::{SigningKey, SigningKeys, key_identity};
use common::server::{
    KEY, OTHER_KEY, SIGNING, Server, answers, continue_, continue_across_restarts, counter,
    run_program, weather_tools,
};
use serde_json::{Value, json};

fn server(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), extra);
    (dir, server)
}

fn start(server: &Server, code: &str) -> Value {
    let (status, reply) = server.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools()}),
    );
    assert_eq!(status, 200, "{reply}");
    reply
}

const TWO_ROUNDS: &str = "\
import asyncio
a, b, c = await asyncio.gather(get_weather(city='Paris'), get_weather(city='Rome'), _1st_tool())
print(a['temp'], b['temp'], c)
try:
    await class_tool(x=1)
except Exception as e:
    print('caught:', e)
";

#[test]
fn full_round_trip_over_http() {
    let (_dir, server) = server(&[]);
    let (status, health) = server.get("/health", None);
    assert_eq!((status, &health["status"]), (200, &json!("ok")));
    let reply = start(&server, TWO_ROUNDS);
    assert_eq!(reply["status"], "tool_call_required");
    assert!(
        reply["session_id"].as_str().is_some_and(|s| s.len() == 21),
        "a session id has LibreChat's 21 characters: {reply}"
    );
    assert!(
        reply["continuation_token"]
            .as_str()
            .is_some_and(|t| t.len() > 40)
    );
    let calls = reply["tool_calls"].as_array().cloned().unwrap_or_default();
    assert_eq!(calls.len(), 3, "gather is one round: {reply}");
    assert_eq!(calls[0]["name"], "get-weather");
    assert_eq!(calls[0]["input"], json!({"city": "Paris"}));
    assert_eq!(calls[2]["name"], "1st tool!");
    assert!(
        calls
            .iter()
            .all(|c| c["id"].as_str().is_some_and(|id| id.starts_with("call_")))
    );
    let (status, second) = continue_(&server, &reply, answers(&reply));
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["tool_calls"][0]["name"], "class");
    assert_eq!(second["session_id"], reply["session_id"]);
    let (status, done) = continue_(&server, &second, answers(&second));
    assert_eq!(status, 200);
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["stdout"],
        "15 14 1st tool!\ncaught: class tool is down\n"
    );
    assert_eq!(done["stderr"], "");
    assert_eq!(done["files"], json!([]));
    assert_eq!(done["session_id"], reply["session_id"]);
}

/// The steps whose spans closed in `log` (lines `...step: close time.busy=...`).
fn closed_steps(log: &[String]) -> std::collections::BTreeSet<String> {
    log.iter()
        .filter(|line| line.contains(": close time.busy="))
        .filter_map(|line| {
            let context = line.split(": close time.busy=").next()?;
            let innermost = context.rsplit([':', ' ']).next()?;
            Some(innermost.to_owned())
        })
        .collect()
}

#[test]
fn request_steps_are_timed_only_when_asked() {
    let (_dir, quiet) = server(&[]);
    let reply = start(&quiet, TWO_ROUNDS);
    let _ = continue_(&quiet, &reply, answers(&reply));
    assert!(closed_steps(&quiet.log_lines()).is_empty());
    let (_dir, traced) = server(&["--trace-requests"]);
    let reply = start(&traced, TWO_ROUNDS);
    let (status, second) = continue_(&traced, &reply, answers(&reply));
    assert_eq!(status, 200, "{second}");
    let (status, done) = continue_(&traced, &second, answers(&second));
    assert_eq!(done["status"], "completed", "{status} {done}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let expected = [
        "auth",
        "decode",
        "start",
        "prepare",
        "store_state",
        "run",
        "rewrite",
        "take_child",
        "send_job",
        "child",
        "settle",
        "encode",
        "store_write",
        "flush",
        "continue",
        "verify",
        "load_record",
        "claim",
        "resume",
        "respond",
    ];
    loop {
        let seen = closed_steps(&traced.log_lines());
        let missing: Vec<&str> = expected
            .iter()
            .copied()
            .filter(|name| !seen.contains(*name))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "steps never timed: {missing:?}; seen {seen:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn auth_styles_prefixes_and_401() {
    let (_dir, server) = server(&[]);
    let body = json!({"code": "print(1)"});
    for auth in [
        ("x-api-key", KEY.to_owned()),
        ("authorization", format!("Bearer {KEY}")),
        ("authorization", format!("ApiKey {KEY}")),
    ] {
        for path in ["/exec/programmatic", "/v1/exec/programmatic"] {
            let (status, reply) = server.post_as(path, &body, Some((auth.0, &auth.1)));
            assert_eq!(
                (status, &reply["stdout"]),
                (200, &json!("1\n")),
                "{auth:?} {path}"
            );
        }
    }
    for auth in [
        None,
        Some(("x-api-key", "wrong")),
        Some(("authorization", "Bearer nope")),
    ] {
        let (status, reply) = server.post_as("/exec/programmatic", &body, auth);
        assert_eq!(status, 401);
        assert_eq!(reply["status"], "error");
        assert!(
            reply["error"]
                .as_str()
                .is_some_and(|e| e.contains("credentials")),
            "{reply}"
        );
    }
}

#[test]
fn request_errors_follow_the_contract() {
    let (_dir, server) = server(&["--body-limit", "20000"]);
    let cases = [
        ("{not json".to_owned(), 400, "invalid request body"),
        (json!({"tools": []}).to_string(), 400, "code is required"),
        (
            json!({"code": "pass", "timeout": 999}).to_string(),
            400,
            "timeout",
        ),
        (
            json!({"code": "pass", "timeout": 300_001}).to_string(),
            400,
            "timeout",
        ),
        (
            json!({"code": "pass", "tools": [{"name": "get-weather"}, {"name": "get_weather"}]})
                .to_string(),
            400,
            "\"get-weather\" and \"get_weather\"",
        ),
        (
            json!({"continuation_token": "garbage", "tool_results": []}).to_string(),
            400,
            "Invalid continuation token",
        ),
        (
            json!({"code": "x".repeat(30_000)}).to_string(),
            413,
            "too large",
        ),
    ];
    for (body, status, text) in cases {
        let (got, reply) =
            server.post_raw("/exec/programmatic", &body, Some(("x-api-key", KEY)), &[]);
        assert_eq!(got, status, "{reply}");
        assert_eq!(reply["status"], "error", "{reply}");
        let error = reply["error"].as_str().unwrap_or_default();
        assert!(error.contains(text), "{error:?} should contain {text:?}");
    }
}

#[test]
fn python_failures_answer_200_with_traceback() {
    let (_dir, server) = server(&[]);
    let (reply, _) = run_program(&server, "print('before')\nx = {}\nx['k']\n");
    assert_eq!(reply["status"], "error");
    assert_eq!(reply["error"], "KeyError: 'k'");
    assert_eq!(reply["stdout"], "before\n");
    let stderr = reply["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains("line 3, in <module>\n    x['k']\n"),
        "{stderr}"
    );
    let (reply, _) = run_program(&server, "def f(:\n  pass\n");
    assert_eq!(reply["status"], "error");
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("SyntaxError")),
        "{reply}"
    );
    let (status, reply) = server.post(
        "/exec/programmatic",
        &json!({"code": "while True: pass\n", "tools": [], "timeout": 1000}),
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["error"], "Time limit exceeded", "{reply}");
}

/// The signing keys the test servers use, to mint tokens.
fn test_signing_keys() -> SigningKeys {
    let (id, secret) = SIGNING.split_once(':').unwrap_or_default();
    SigningKeys::new(
        SigningKey {
            id: id.into(),
            secret: hex::decode(secret).unwrap_or_default(),
        },
        vec![],
    )
    .unwrap_or_else(|e| panic!("{e:?}"))
}

fn flip_token(token: &str) -> String {
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut bytes = engine.decode(token).unwrap_or_default();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    engine.encode(bytes)
}

#[test]
fn tokens_forged_replayed_raced_and_cross_key() {
    let (_dir, server) = server(&[]);
    let reply = start(
        &server,
        "w = await get_weather(city='a')\nv = await get_weather(city='b')\nprint(w, v)\n",
    );
    let token = reply["continuation_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let results = answers(&reply);
    let forged = json!({"continuation_token": flip_token(&token), "tool_results": results});
    let (status, body) = server.post("/exec/programmatic", &forged);
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("Invalid continuation token"))
    );
    let truncated =
        json!({"continuation_token": &token[..token.len() - 5], "tool_results": results});
    let (status, body) = server.post("/exec/programmatic", &truncated);
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("Invalid continuation token"))
    );
    let other = json!({"continuation_token": token, "tool_results": results});
    let (status, body) =
        server.post_as("/exec/programmatic", &other, Some(("x-api-key", OTHER_KEY)));
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("Invalid continuation token"))
    );
    // Two concurrent continuations with different results: exactly one
    // wins, the other is refused (a retry of the winner would get its answer).
    let mut changed = results.clone();
    changed[0]["result"] = json!({"temp": -1});
    let changed = json!({"continuation_token": token, "tool_results": changed});
    let outcomes: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let racers: Vec<_> = [&other, &changed]
            .into_iter()
            .map(|body| scope.spawn(|| server.post("/exec/programmatic", body)))
            .collect();
        racers.into_iter().filter_map(|r| r.join().ok()).collect()
    });
    let mut statuses: Vec<u16> = outcomes.iter().map(|(s, _)| *s).collect();
    statuses.sort();
    assert_eq!(statuses, vec![200, 409], "{outcomes:?}");
    // The loser's results again: refused, and the execution is untouched.
    let loser = if outcomes[0].0 == 409 {
        [&other, &changed][0]
    } else {
        [&other, &changed][1]
    };
    let (status, body) = server.post("/exec/programmatic", loser);
    assert_eq!(status, 409, "{body}");
    let winner = outcomes
        .iter()
        .find(|(s, _)| *s == 200)
        .map(|(_, b)| b.clone())
        .unwrap_or_default();
    let (status, done) = continue_(&server, &winner, answers(&winner));
    assert_eq!(status, 200);
    assert_eq!(done["status"], "completed", "{done}");
}

#[test]
fn expired_and_unknown_executions() {
    let (_dir, server) = server(&["--paused-ttl-secs", "1", "--sweep-secs", "1"]);
    let reply = start(&server, "await get_weather(city='a')\n");
    let inspect = format!(
        "/executions/{}",
        reply["execution_id"].as_str().unwrap_or_default()
    );
    assert_eq!(server.get(&inspect, Some(KEY)).0, 200);
    std::thread::sleep(Duration::from_millis(2100));
    let (status, body) = continue_(&server, &reply, answers(&reply));
    assert_eq!((status, &body["error"]), (400, &json!("Execution expired")));
    // The sweeper deletes the expired execution and frees its parked child.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(server.get(&inspect, Some(KEY)).0, 404);
    assert_eq!(server.get("/health", None).1["parked"], 0);
    // A validly signed token for an execution that does not exist.
    let keys = test_signing_keys();
    let far = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 3600;
    let token = keys.sign([9; 16], 1, key_identity(KEY), far);
    let (status, body) = server.post(
        "/exec/programmatic",
        &json!({"continuation_token": token, "tool_results": []}),
    );
    assert_eq!(
        (status, &body["error"]),
        (404, &json!("Execution not found or expired"))
    );
}

#[test]
fn bad_results_leave_the_round_paused() {
    let (_dir, server) = server(&[]);
    let reply = start(
        &server,
        "import asyncio\nr = await asyncio.gather(get_weather(city='a'), get_weather(city='b'))\nprint(len(r))\n",
    );
    let good = answers(&reply);
    let first = good[0].clone();
    let mut unknown = first.clone();
    unknown["call_id"] = json!("call_nope");
    for (results, text) in [
        (vec![first.clone()], "missing results for call ids"),
        (vec![first.clone(), first.clone()], "duplicate results"),
        (
            vec![first.clone(), good[1].clone(), unknown],
            "unknown call ids: call_nope",
        ),
    ] {
        let (status, body) = continue_(&server, &reply, results);
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"].as_str().is_some_and(|e| e.contains(text)),
            "{body}"
        );
    }
    let (status, done) = continue_(&server, &reply, good);
    assert_eq!((status, &done["stdout"]), (200, &json!("2\n")), "{done}");
}

#[test]
fn round_limit_is_enforced() {
    let (_dir, server) = server(&["--max-rounds", "3"]);
    let mut reply = start(
        &server,
        "for i in range(10):\n    await get_weather(city=str(i))\n",
    );
    for _ in 0..2 {
        let (status, next) = continue_(&server, &reply, answers(&reply));
        assert_eq!(status, 200, "{next}");
        reply = next;
    }
    let (status, body) = continue_(&server, &reply, answers(&reply));
    assert_eq!(
        (status, &body["error"]),
        (400, &json!("Exceeded maximum round trips (3)"))
    );
}

const THREE_ROUNDS: &str = "\
import random
total = 0
for city in ['Oslo', 'Lima', 'Kyiv']:
    w = await get_weather(city=city)
    total += w['temp']
    print(city, w['temp'], random.randint(0, 10**6))
print('total', total)
";

#[test]
fn sigkill_between_rounds_loses_nothing() {
    let (_dir, mut server) = server(&[]);
    let (uninterrupted, _) = run_program(&server, THREE_ROUNDS);
    assert_eq!(uninterrupted["status"], "completed");
    let paused = start(&server, THREE_ROUNDS);
    let (reply, rounds) = continue_across_restarts(&mut server, paused);
    assert_eq!(rounds, 3);
    assert_eq!(reply["status"], "completed", "{reply}");
    let lines = |v: &Value| -> Vec<String> {
        v["stdout"]
            .as_str()
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(lines(&reply), lines(&uninterrupted));
}

/// Each round's call depends on the seeded random numbers and on the
/// round before, and each round prints the next call's city. A round
/// sleeps before its call, so that the flush its claim began is over
/// before its pause is written (the flush takes every write made before it
/// runs: one that started late would take the pause too).
const CHAINED_ROUNDS: &str = "\
import random, time
city = 'Oslo'
for i in range(3):
    time.sleep(0.5)
    w = await get_weather(city=city)
    city = f\"{w['city'][:4]}-{random.randint(0, 10**6)}\"
    print(i, city)
";

/// The city of a paused reply's one call.
fn called_city(reply: &Value) -> String {
    reply["tool_calls"][0]["input"]["city"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The next pause is written before its reply but flushed only with the
/// next flush: the reply waits for the round's results, stored with the
/// claim. A SIGKILL right after the reply loses the pause, and the round is
/// run again by replay to the same pause (same call ids, same inputs from
/// the seeded random numbers), for a retry of the continuation and for the
/// token handed out before the kill alike.
#[test]
fn a_pause_lost_with_its_server_is_reached_again_by_running_its_round_again() {
    let (_dir, mut server) = server(&[]);
    // Once with a retry of the continuation before the kill first, once
    // with only the token handed out before the kill.
    for retry_first in [true, false] {
        let first = start(&server, CHAINED_ROUNDS);
        let (status, second) = continue_(&server, &first, answers(&first));
        assert_eq!(status, 200, "{second}");
        server.restart();
        let id = second["execution_id"].as_str().unwrap_or_default();
        let (status, view) = server.get(&format!("/executions/{id}"), Some(KEY));
        assert_eq!(status, 200, "{view}");
        assert_eq!(
            view["status"], "running",
            "the pause went with the server, the round's claim stayed: {view}"
        );
        if retry_first {
            let (status, retried) = continue_(&server, &first, answers(&first));
            assert_eq!(status, 200, "{retried}");
            assert_eq!(retried["tool_calls"], second["tool_calls"]);
            assert!(retried["continuation_token"].is_string(), "{retried}");
        }
        // Two at once with the token handed out before the kill: one runs
        // the lost round again and claims the next, the other waits for
        // it and gets the same answer.
        let (one, two) = std::thread::scope(|scope| {
            let send = || scope.spawn(|| continue_(&server, &second, answers(&second)));
            let (one, two) = (send(), send());
            (one.join(), two.join())
        });
        let ((status_one, third), (status_two, same)) = (
            one.unwrap_or_else(|_| panic!("a client panicked")),
            two.unwrap_or_else(|_| panic!("a client panicked")),
        );
        assert_eq!((status_one, status_two), (200, 200), "{third} {same}");
        assert_eq!(third["tool_calls"], same["tool_calls"]);
        assert_eq!(counter(&server, "baton_rounds_run_again_total"), 1.0);
        let (status, done) = continue_(&server, &third, answers(&third));
        assert_eq!(status, 200, "{done}");
        assert_eq!(done["status"], "completed", "{done}");
        let stdout = done["stdout"].as_str().unwrap_or_default();
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{stdout}");
        assert_eq!(lines[0], format!("0 {}", called_city(&second)));
        assert_eq!(lines[1], format!("1 {}", called_city(&third)));
    }
}

/// A round left by a dead server, to be run again, is not kept forever: if
/// no client comes for it, the sweep deletes it once the token of the
/// pause it leads to has expired (its budget, the watchdog's grace and the
/// pause's time to live after its claim).
#[test]
fn a_round_left_to_run_again_expires_like_a_pause() {
    let flags = ["--paused-ttl-secs", "1", "--sweep-secs", "1"];
    let (_dir, mut server) = server(&flags);
    let (status, first) = server.post(
        "/exec/programmatic",
        &json!({"code": CHAINED_ROUNDS, "tools": weather_tools(), "timeout": 2000}),
    );
    assert_eq!(status, 200, "{first}");
    let (status, second) = continue_(&server, &first, answers(&first));
    assert_eq!(status, 200, "{second}");
    let claimed = std::time::Instant::now();
    server.restart();
    let id = second["execution_id"].as_str().unwrap_or_default();
    let inspect = format!("/executions/{id}");
    let status = || server.get(&inspect, Some(KEY)).0;
    assert_eq!(server.get(&inspect, Some(KEY)).1["status"], "running");
    // Kept while the token of the lost pause may be held...
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(status(), 200, "swept before the lost pause's token expired");
    // ...and gone within a sweep of that (about 1 + 10 + 1 s after the claim).
    while status() == 200 {
        assert!(
            claimed.elapsed() < Duration::from_secs(40),
            "a round left to run again was never swept"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(status(), 404);
    assert!(
        claimed.elapsed() >= Duration::from_secs(10),
        "{:?}",
        claimed.elapsed()
    );
}

#[test]
fn sigkill_during_a_run_keeps_the_last_pause() {
    let (_dir, mut server) = server(&[]);
    let code = "w = await get_weather(city='a')\nimport time\nx = 0\nfor i in range(20_000_000):\n    x += i\nprint(w['temp'], x)\n";
    let reply = start(&server, code);
    let base = server.base.clone();
    let body =
        json!({"continuation_token": reply["continuation_token"], "tool_results": answers(&reply)});
    let in_flight = std::thread::spawn(move || {
        ureq::post(&format!("{base}/exec/programmatic"))
            .set("x-api-key", KEY)
            .send_json(body)
            .is_ok()
    });
    std::thread::sleep(Duration::from_millis(300));
    server.restart();
    assert!(
        !in_flight.join().unwrap_or(true),
        "the killed request cannot have succeeded"
    );
    let (status, done) = continue_(&server, &reply, answers(&reply));
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["stdout"],
        format!("11 {}\n", (0..20_000_000u64).sum::<u64>()),
        "{done}"
    );
}

#[test]
fn cancel_stops_an_execution() {
    let (_dir, server) = server(&[]);
    let (status, reply) = server.post_raw(
        "/exec/programmatic",
        &json!({"code": "await get_weather(city='a')\nprint('never')\n", "tools": weather_tools()})
            .to_string(),
        Some(("x-api-key", KEY)),
        &[("X-LibreChat-Code-Request-ID", "req-77")],
    );
    assert_eq!(status, 200);
    let (status, body) = server.post(
        "/exec/programmatic/cancel",
        &json!({"request_id": "req-77"}),
    );
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("cancelled")),
        "{body}"
    );
    let (status, body) = continue_(&server, &reply, answers(&reply));
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("Execution was cancelled"))
    );
    // An id no request carried yet: remembered, not an error.
    let (status, body) = server.post(
        "/v1/exec/programmatic/cancel",
        &json!({"request_id": "unknown"}),
    );
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("pending")),
        "{body}"
    );
}

/// Starts `code`, then inspects its execution as its owner: its id and view.
fn started_and_inspected(server: &Server, code: &str) -> (String, Value) {
    let reply = start(server, code);
    let id = reply["execution_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (status, view) = server.get(&format!("/executions/{id}"), Some(KEY));
    assert_eq!(status, 200, "{view}");
    (id, view)
}

/// What the paused frame shows of a local whose JSON runs past 200
/// characters: its first 197 and `...`, as the full text cut there would
/// give (the runtime encodes only the start of it, so a local holding
/// megabytes costs a pause what a small one does).
#[test]
fn inspect_shows_the_start_of_a_large_local() {
    let (_dir, server) = server(&[]);
    let code = "rows = ['x' * 300000, 'y' * 5]\nnested = {'k': list(range(100000))}\naccents = 'é' * 1000\nfaces = '\\U0001F600' * 300\nsmall = [1, 2.5, None, True]\nprint(await get_weather(city='Bern'))\n";
    let (_, view) = started_and_inspected(&server, code);
    let cut = |value: serde_json::Value| {
        let text = value.to_string();
        format!("{}...", text.chars().take(197).collect::<String>())
    };
    let expected = json!({
        "rows": cut(json!(["x".repeat(300_000), "yyyyy"])),
        "nested": cut(json!({"k": (0..100_000).collect::<Vec<u32>>()})),
        "accents": cut(json!("é".repeat(1000))),
        "faces": cut(json!("\u{1F600}".repeat(300))),
        "small": [1, 2.5, null, true],
    });
    assert_eq!(view["frame"]["locals"], expected);
}

#[test]
fn inspect_shows_the_paused_frame_to_its_owner_only() {
    let (_dir, server) = server(&[]);
    let code = "def lookup(city):\n    count = 3\n    label = 'x' * 5\n    return get_weather(city=city)\nprint(await lookup('Bern'))\n";
    let (id, view) = started_and_inspected(&server, code);
    assert_eq!(view["status"], "paused");
    assert_eq!(view["round"], 1);
    assert_eq!(view["pending_calls"][0]["name"], "get-weather");
    assert_eq!(view["frame"]["function"], "lookup");
    assert_eq!(view["frame"]["line"], 4);
    assert_eq!(
        view["frame"]["locals"],
        json!({"city": "Bern", "count": 3, "label": "xxxxx"})
    );
    let (status, _) = server.get(&format!("/v1/executions/{id}"), Some(OTHER_KEY));
    assert_eq!(status, 404);
    let (status, _) = server.get("/executions/00", Some(KEY));
    assert_eq!(status, 404);
    let metrics = server.get_text("/metrics");
    assert_metrics_are_described(&metrics);
    for gauge in [
        "baton_parked_children 1",
        "baton_idle_children ",
        "baton_executions_started_total 1",
        "baton_pause_durable_seconds_count 1",
        "baton_pause_durable_seconds_bucket{le=\"+Inf\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(gauge)),
            "{gauge}: {metrics}"
        );
    }
}

/// Every metric `/metrics` shows has its `# HELP` and `# TYPE` lines, and
/// durations are histograms (buckets), not summaries.
fn assert_metrics_are_described(metrics: &str) {
    let names: std::collections::BTreeSet<&str> = metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(|name| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name)
        })
        .collect();
    assert!(names.len() >= 5, "{metrics}");
    for name in names {
        for kind in ["# HELP", "# TYPE"] {
            assert!(
                metrics
                    .lines()
                    .any(|l| l.starts_with(&format!("{kind} {name} "))),
                "{kind} {name} missing: {metrics}"
            );
        }
        if name.ends_with("_seconds") {
            assert!(
                metrics.contains(&format!("# TYPE {name} histogram")),
                "{name} is not a histogram: {metrics}"
            );
        }
    }
}

#[test]
fn signing_key_rotation_keeps_tokens_in_flight() {
    let (_dir, mut server) = server(&[]);
    let code = "a = await get_weather(city='a')\nb = await get_weather(city='bb')\nc = await get_weather(city='ccc')\nprint(a['temp'], b['temp'], c['temp'])\n";
    let first = start(&server, code);
    let new_key = "t2:ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
    let both = format!("{new_key},{SIGNING}");
    server.restart_with(&["--signing-key", &both]);
    let (status, second) = continue_(&server, &first, answers(&first));
    assert_eq!(
        status, 200,
        "a token of the old key must still verify: {second}"
    );
    assert_eq!(second["status"], "tool_call_required");
    server.restart_with(&["--signing-key", new_key]);
    let (status, third) = continue_(&server, &second, answers(&second));
    assert_eq!(status, 200, "the new key signed the second token: {third}");
    let (status, done) = continue_(&server, &third, answers(&third));
    assert_eq!(
        (status, done["stdout"].as_str()),
        (200, Some("11 12 13\n")),
        "{done}"
    );
    let retired = start(&server, code);
    server.restart_with(&["--signing-key", SIGNING]);
    let (status, refused) = continue_(&server, &retired, answers(&retired));
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"], "Invalid continuation token");
}

#[test]
fn a_corrupt_record_is_reported_as_corrupt_not_missing() {
    use baton::state::{ExecState, Status};
    use baton::store::SledStore;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = [7u8; 16];
    let far = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 3600;
    {
        let store = SledStore::open(&dir.path().join("store")).unwrap_or_else(|e| panic!("{e}"));
        let state = ExecState {
            status: Status::Paused,
            round: 1,
            owner: key_identity(KEY),
            expires_at: far,
            answered: None,
            node: 0,
        };
        let state_bytes = state.encode();
        store
            .put(&[b"s/".as_slice(), &id].concat(), &state_bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .put(
                &[b"r/".as_slice(), &id].concat(),
                &[
                    b"BATN".as_slice(),
                    &baton::journal::FORMAT_VERSION.to_le_bytes(),
                    b" not bincode",
                ]
                .concat(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        store.flush().unwrap_or_else(|e| panic!("{e}"));
    }
    let server = Server::start(dir.path(), &[]);
    let keys = test_signing_keys();
    let token = keys.sign(id, 1, key_identity(KEY), far);
    let (status, body) = server.post(
        "/exec/programmatic",
        &json!({"continuation_token": token, "tool_results": []}),
    );
    assert_eq!(status, 500, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("execution record is corrupt"), "{body}");
    let (status, body) = server.get(&format!("/executions/{}", hex::encode(id)), Some(KEY));
    assert_eq!(status, 500, "{body}");
}

#[test]
fn a_record_over_its_limit_ends_the_execution() {
    let (_dir, server) = server(&["--max-record-bytes", "4096"]);
    let reply = start(
        &server,
        "print('x' * 10000)\nw = await get_weather(city='a')\nprint(w)\n",
    );
    assert_eq!(reply["status"], "error", "{reply}");
    let error = reply["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("Execution record too large"), "{reply}");
    assert_eq!(
        reply["stdout"].as_str().map(str::len),
        Some(10001),
        "partial output is kept"
    );
    let small = start(
        &server,
        "w = await get_weather(city='a')\nprint(w['temp'])\n",
    );
    assert_eq!(small["status"], "tool_call_required", "{small}");
}

#[test]
fn limits_follow_their_settings() {
    let (_dir, server) = server(&[
        "--recursion-limit",
        "100",
        "--max-tool-input-bytes",
        "100",
        "--workspace-bytes",
        "1000",
    ]);
    let code = "import sys\nprint(sys.getrecursionlimit())\ntry:\n    get_weather(city='x' * 200)\nexcept ValueError as e:\n    print('input', 'exceeds the limit of 100' in str(e))\ntry:\n    with open('a.bin', 'wb') as f:\n        f.write(b'x' * 2000)\nexcept OSError as e:\n    print('workspace', e.errno)\n";
    let (reply, rounds) = run_program(&server, code);
    assert_eq!(rounds, 0);
    assert_eq!(
        reply["stdout"], "100\ninput True\nworkspace 28\n",
        "{reply}"
    );
}

#[test]
fn openapi_describes_every_route_and_needs_no_key() {
    let (_dir, server) = server(&[]);
    let (status, document) = server.get("/openapi.json", None);
    assert_eq!(status, 200, "{document}");
    assert_eq!(document["openapi"], "3.1.0");
    let mut paths: Vec<&str> = document["paths"]
        .as_object()
        .map(|paths| paths.keys().map(String::as_str).collect())
        .unwrap_or_default();
    paths.sort_unstable();
    let protocol = [
        "/download/{session_id}/{file_id}",
        "/exec",
        "/exec/programmatic",
        "/exec/programmatic/cancel",
        "/executions",
        "/executions/{id}",
        "/executions/{id}/cancel",
        "/files/{session_id}",
        "/files/{session_id}/{file_id}",
        "/sessions",
        "/sessions/{session_id}",
        "/sessions/{session_id}/exec",
        "/sessions/{session_id}/objects/{file_id}",
        "/tools/stubs",
        "/upload",
        "/upload/batch",
    ];
    let mut expected: Vec<String> = protocol
        .iter()
        .flat_map(|p| [(*p).to_owned(), format!("/v1{p}")])
        .chain(["/health", "/metrics", "/openapi.json"].map(str::to_owned))
        .collect();
    expected.sort_unstable();
    assert_eq!(paths, expected);
    let exec = &document["paths"]["/v1/exec/programmatic"]["post"];
    assert_eq!(exec["operationId"], "v1_exec");
    for status in ["200", "400", "401", "409", "413"] {
        assert!(
            exec["responses"].get(status).is_some(),
            "exec lacks {status}"
        );
    }
    let reply = &document["components"]["schemas"]["ExecReply"];
    assert_eq!(reply["oneOf"].as_array().map(Vec::len), Some(3), "{reply}");
    let schemes = &document["components"]["securitySchemes"];
    assert_eq!(schemes["api_key"]["name"], "x-api-key");
}

#[test]
fn inspect_keeps_an_ended_execution_and_names_an_expired_pause() {
    // A pause expires at a whole second at least `--paused-ttl-secs` after
    // it: with 2 s, it is still paused for a second after it was made.
    let (_dir, server) = server(&["--paused-ttl-secs", "2", "--sweep-secs", "3600"]);
    let (status, done) = server.post(
        "/exec/programmatic",
        &json!({"code": "open('/mnt/data/out.txt', 'w').write('hi')\nprint('wrote')\n", "tools": weather_tools()}),
    );
    assert_eq!(
        (status, &done["status"]),
        (200, &json!("completed")),
        "{done}"
    );
    let id = done["execution_id"].as_str().unwrap_or_default().to_owned();
    let (status, view) = server.get(&format!("/executions/{id}"), Some(KEY));
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "completed", "{view}");
    assert_eq!(view["stdout"], "wrote\n");
    assert_eq!(view["error"], Value::Null);
    assert_eq!(view["files"][0]["name"], "out.txt", "{view}");
    assert_eq!(view["files"][0]["id"], done["files"][0]["id"], "{view}");
    assert_eq!(view["deleted_files"], json!([]), "{view}");

    let paused = start(&server, "w = await get_weather(city='a')\nprint(w)\n");
    let id = paused["execution_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (_, view) = server.get(&format!("/executions/{id}"), Some(KEY));
    assert_eq!(view["status"], "paused", "{view}");
    std::thread::sleep(Duration::from_millis(3100));
    let (status, view) = server.get(&format!("/executions/{id}"), Some(KEY));
    assert_eq!(
        (status, &view["status"]),
        (200, &json!("expired")),
        "{view}"
    );
    let (status, refused) = continue_(&server, &paused, answers(&paused));
    assert_eq!(status, 400, "{refused}");
}

#[test]
fn executions_are_listed_newest_first_in_pages_per_key() {
    let (_dir, server) = server(&[]);
    let (_, done) = server.post(
        "/exec/programmatic",
        &json!({"code": "print('a')", "tools": weather_tools()}),
    );
    let first_pause = start(&server, "w = await get_weather(city='b')\nprint(w)\n");
    let second_pause = start(&server, "w = await get_weather(city='c')\nprint(w)\n");
    let (_, other) = server.post_as(
        "/exec/programmatic",
        &json!({"code": "print('other')", "tools": weather_tools()}),
        Some(("x-api-key", OTHER_KEY)),
    );
    let id = |v: &Value| v["execution_id"].clone();
    let ids = |page: &Value| -> Vec<Value> {
        page["executions"]
            .as_array()
            .map(|all| all.iter().map(|e| e["execution_id"].clone()).collect())
            .unwrap_or_default()
    };
    let (status, all) = server.get("/executions", Some(KEY));
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        ids(&all),
        vec![id(&second_pause), id(&first_pause), id(&done)]
    );
    assert_eq!(all["executions"][0]["status"], "paused");
    assert_eq!(all["executions"][0]["round"], 1);
    assert_eq!(all["executions"][2]["status"], "completed");
    assert!(
        all["executions"][0]["started"]
            .as_u64()
            .is_some_and(|s| s > 1_700_000_000)
    );
    assert_eq!(all["next_cursor"], Value::Null);
    assert!(
        !ids(&all).contains(&id(&other)),
        "another key's execution listed"
    );

    let (status, page) = server.get("/v1/executions?limit=2", Some(KEY));
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), vec![id(&second_pause), id(&first_pause)]);
    let cursor = page["next_cursor"].as_str().unwrap_or_default().to_owned();
    assert!(!cursor.is_empty(), "{page}");
    let (status, rest) = server.get(&format!("/executions?limit=2&cursor={cursor}"), Some(KEY));
    assert_eq!(status, 200, "{rest}");
    assert_eq!(ids(&rest), vec![id(&done)]);
    assert_eq!(rest["next_cursor"], Value::Null);

    let (_, completed) = server.get("/executions?status=completed", Some(KEY));
    assert_eq!(ids(&completed), vec![id(&done)]);
    let (_, theirs) = server.get("/executions", Some(OTHER_KEY));
    assert_eq!(ids(&theirs), vec![id(&other)]);
    for (query, needle) in [
        ("status=sleeping", "status must be one of"),
        ("limit=0", "limit must be from 1 to 500"),
        ("limit=many", "invalid query"),
        ("cursor=zz", "cursor is not one this server gave"),
    ] {
        let (status, body) = server.get(&format!("/executions?{query}"), Some(KEY));
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| e.contains(needle)),
            "{query}: {body}"
        );
    }
    let (status, _) = server.get("/executions", None);
    assert_eq!(status, 401);
}
