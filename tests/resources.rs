//! Every resource bound of the server, against a real `baton serve` with
//! real clients, asserting the effect on the host (bytes on disk, the
//! server's memory, children parked), not only the answer:
//!
//! - a key's stored bytes are capped: over the cap its requests get `429`
//!   `rate_limited` with the delay, another key is served, a request alone
//!   over the cap gets `413`, the count survives a `kill -9`, and ending
//!   executions frees the key;
//! - a record superseded by the next pause, and an ended or swept one, give
//!   their disk space back at once;
//! - the file sweeper and listings never hold the files' contents;
//! - parked children stay within their memory budget, and the evicted ones
//!   resume cold with the same output.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::server::{KEY, OTHER_KEY, Server, answers};
use serde_json::{Value, json};

const MIB: usize = 1 << 20;

fn tools() -> Value {
    json!([{"name": "fetch", "parameters": {"type": "object", "properties": {"i": {"type": "integer"}}}}])
}

fn start(server: &Server, code: &str, key: &str, request_id: &str) -> (u16, Value) {
    server.post_raw(
        "/exec/programmatic",
        &json!({"code": code, "tools": tools()}).to_string(),
        Some(("x-api-key", key)),
        &[("X-LibreChat-Code-Request-ID", request_id)],
    )
}

/// The continuation of every call of `reply` with a result carrying
/// `size` bytes.
fn big_results(reply: &Value, size: usize) -> Value {
    let results: Vec<Value> = reply["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|call| json!({"call_id": call["id"], "result": {"blob": "x".repeat(size)}}))
                .collect()
        })
        .unwrap_or_default();
    json!({"continuation_token": reply["continuation_token"], "tool_results": results})
}

/// Continues every call of `reply` with a result carrying `size` bytes.
fn continue_big(server: &Server, reply: &Value, size: usize, key: &str) -> (u16, Value) {
    server.post_as(
        "/exec/programmatic",
        &big_results(reply, size),
        Some(("x-api-key", key)),
    )
}

/// The status, `error` and `Retry-After` of a continuation with results of
/// `size` bytes.
fn refused_continuation(server: &Server, reply: &Value, size: usize) -> (u16, Value, Option<u64>) {
    let (status, body, header) = server.post_reading_header(
        "/exec/programmatic",
        &big_results(reply, size),
        KEY,
        "retry-after",
    );
    (status, body, header.and_then(|h| h.parse().ok()))
}

/// Bytes the files under `path` occupy on disk (allocated blocks).
fn disk_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_bytes(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// A field of `/proc/<pid>/status`, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn metric(server: &Server, name: &str) -> f64 {
    server
        .get_text("/metrics")
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

const LOOP: &str =
    "n = 0\nfor i in range(40):\n    r = await fetch(i=i)\n    n += len(r['blob'])\nprint(n)\n";

#[test]
fn a_key_over_its_storage_cap_waits_and_other_keys_do_not() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &["--max-key-storage-mb", "1"]);
    let (status, mut reply) = start(&server, LOOP, KEY, "first");
    assert_eq!(status, 200, "{reply}");
    let mut refused = None;
    for _ in 0..10 {
        let (status, next) = continue_big(&server, &reply, 300_000, KEY);
        if status == 429 {
            refused = Some(next);
            break;
        }
        assert_eq!(status, 200, "{next}");
        reply = next;
    }
    let refused = refused.unwrap_or_else(|| panic!("1 MiB cap never reached"));
    assert_eq!(refused["error"], "rate_limited", "{refused}");
    let retry = refused["retry_after_seconds"].as_u64().unwrap_or(0);
    assert!((1..=3600).contains(&retry), "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-key-storage-mb"), "{message}");

    // Retried, it is refused again, with the delay in the header too; the
    // other key is served.
    let (status, body, header) = refused_continuation(&server, &reply, 300_000);
    assert_eq!(
        (status, &body["error"]),
        (429, &json!("rate_limited")),
        "{body}"
    );
    assert!(
        header.is_some_and(|s| (1..=3600).contains(&s)),
        "{header:?}"
    );
    let (status, other) = start(&server, "print('other')", OTHER_KEY, "other");
    assert_eq!(status, 200, "{other}");
    assert_eq!(other["stdout"], "other\n");

    // A file alone over the cap can never be stored: 413, not 429.
    let big = "y".repeat(MIB + 1);
    let (status, body) =
        server.post_multipart("/upload", &[("file", Some("big.txt"), &big)], OTHER_KEY);
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("per-key storage limit")),
        "{body}"
    );

    // The count is rebuilt from the store after a kill -9.
    server.kill();
    server.restart();
    let (status, body, _) = refused_continuation(&server, &reply, 300_000);
    assert_eq!(
        status, 429,
        "the key's bytes were forgotten by the restart: {body}"
    );

    // Ending the paused execution frees the key: the refused round had
    // stayed paused (the cancel finds it), and a new execution of this key
    // takes results of that size again.
    let (status, cancelled) =
        server.post("/exec/programmatic/cancel", &json!({"request_id": "first"}));
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let (status, fresh) = start(&server, LOOP, KEY, "freed");
    assert_eq!(status, 200, "{fresh}");
    let (status, next) = continue_big(&server, &fresh, 300_000, KEY);
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["status"], "tool_call_required", "{next}");
}

#[test]
fn superseded_ended_and_swept_records_give_their_disk_space_back() {
    const ROUND: usize = 2 * MIB;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let store = dir.path().join("store");
    let baseline = disk_bytes(&store);
    let code =
        "n = 0\nfor i in range(12):\n    r = await fetch(i=i)\n    n += len(r['blob'])\nprint(n)\n";
    let (status, mut reply) = start(&server, code, KEY, "grow");
    assert_eq!(status, 200, "{reply}");
    let mut rounds = 0u64;
    // sled's own files for the small values.
    let slack = 6 * MIB as u64;
    while reply["status"] == "tool_call_required" {
        let (status, next) = continue_big(&server, &reply, ROUND, KEY);
        assert_eq!(status, 200, "{next}");
        reply = next;
        rounds += 1;
        // Only the live record is on disk: earlier versions are gone.
        let on_disk = disk_bytes(&store);
        assert!(
            on_disk <= baseline + rounds * ROUND as u64 + slack,
            "after {rounds} rounds of {ROUND} bytes the store holds {on_disk} bytes"
        );
    }
    assert_eq!(reply["stdout"], format!("{}\n", 12 * ROUND), "{reply}");
    // An end is flushed right after its reply; its rounds' files go with
    // that flush.
    let deadline = Instant::now() + Duration::from_secs(5);
    while disk_bytes(&store) > baseline + slack && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = disk_bytes(&store);
    assert!(
        ended <= baseline + slack,
        "the ended execution left {ended} bytes (baseline {baseline})"
    );

    // A paused execution past its time is swept, and its space comes back.
    drop(server);
    let server = Server::start(dir.path(), &["--paused-ttl-secs", "3", "--sweep-secs", "1"]);
    let (status, mut reply) = start(&server, code, KEY, "left");
    assert_eq!(status, 200, "{reply}");
    for _ in 0..6 {
        let (status, next) = continue_big(&server, &reply, ROUND, KEY);
        assert_eq!(status, 200, "{next}");
        reply = next;
    }
    let paused = disk_bytes(&store);
    assert!(paused >= baseline + 4 * ROUND as u64, "{paused}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while disk_bytes(&store) > baseline + slack && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let swept = disk_bytes(&store);
    assert!(
        swept <= baseline + slack,
        "swept execution left {swept} bytes"
    );
    let (status, body) = continue_big(&server, &reply, 10, KEY);
    assert!(
        [400, 404].contains(&status),
        "the swept execution answered {status}: {body}"
    );
}

#[test]
fn the_file_sweeper_and_listings_never_hold_file_contents() {
    const FILES: usize = 24;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &[]);
    let content = "z".repeat(3 * MIB);
    for i in 0..FILES {
        let name = format!("part{i}.txt");
        let (status, body) = server.post_multipart(
            "/upload",
            &[
                ("session_id", None, "sweep"),
                ("file", Some(&name), &content),
            ],
            KEY,
        );
        assert_eq!(status, 200, "{body}");
    }
    // A listing reads only the files' heads, and still says their sizes.
    let (status, listing) = server.get("/files/sweep", Some(KEY));
    assert_eq!(status, 200, "{listing}");
    let files = listing["files"].as_array().cloned().unwrap_or_default();
    assert_eq!(files.len(), FILES, "{listing}");
    assert!(files.iter().all(|f| f["size"] == 3 * MIB), "{listing}");
    // A fresh process: its peak memory starts low; it lists the session,
    // then sweeps every file, and its peak stays far below the files' sum.
    server.kill();
    server.restart_with(&["--file-ttl-secs", "1", "--sweep-secs", "1"]);
    let pid = server.pid().unwrap_or_else(|| panic!("no server"));
    let before = status_bytes(pid, "VmHWM:");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let on_disk = disk_bytes(&dir.path().join("store"));
        if on_disk < (3 * MIB) as u64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "files not swept: {on_disk} bytes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = status_bytes(pid, "VmHWM:");
    let total = (FILES * 3 * MIB) as u64;
    assert!(
        after.saturating_sub(before) < total / 4,
        "sweeping {total} bytes of files raised the server's peak memory from {before} to {after}"
    );
}

#[test]
fn parked_children_stay_within_their_memory_budget() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--max-parked-mb", "1"]);
    let code =
        "data = list(range(300000))\nr = await fetch(i=1)\nprint(len(data), len(r['blob']))\n";
    let mut paused = Vec::new();
    for i in 0..3 {
        let (status, reply) = start(&server, code, KEY, &format!("parked-{i}"));
        assert_eq!(status, 200, "{reply}");
        paused.push(reply);
    }
    // Until the one child left is measured too: on a loaded machine the
    // first two can be measured (and evicted) before the third is due.
    let deadline = Instant::now() + Duration::from_secs(20);
    while (metric(&server, "baton_parked_children") > 1.0
        || metric(&server, "baton_parked_bytes") < (4 * MIB) as f64)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(metric(&server, "baton_parked_children"), 1.0);
    assert!(metric(&server, "baton_parked_evictions_total") >= 2.0);
    assert!(metric(&server, "baton_parked_bytes") >= (4 * MIB) as f64);
    for reply in paused {
        assert_eq!(answers(&reply).len(), 1);
        let (status, done) = continue_big(&server, &reply, 5, KEY);
        assert_eq!(status, 200, "{done}");
        assert_eq!(done["stdout"], "300000 5\n", "{done}");
    }
}

/// A start as `request_id` of `code` with a tool that takes a blob.
fn start_storing(server: &Server, code: &str, request_id: &str) -> (u16, Value) {
    let tools = json!([{"name": "store", "parameters": {"type": "object", "properties": {"blob": {"type": "string"}, "i": {"type": "integer"}}}}]);
    server.post_raw(
        "/exec/programmatic",
        &json!({"code": code, "tools": tools}).to_string(),
        Some(("x-api-key", KEY)),
        &[("X-LibreChat-Code-Request-ID", request_id)],
    )
}

/// Pauses on three calls of 1 MB each (a record of about 3 MB: two fit
/// under 8 MiB, three do not).
const THREE_BLOBS: &str = "import asyncio\nblob = 'x' * 1_000_000\nawait asyncio.gather(*[store(blob=blob, i=i) for i in range(3)])\nprint('done')\n";

#[test]
fn pauses_at_once_cannot_together_pass_the_storage_cap() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &["--max-key-storage-mb", "8"]);
    // Six starts at once, each admitted for its small code; their pauses
    // would store about 18 MB. Each pause reserves before it is written:
    // two fit under 8 MiB, the others are answered 429.
    let replies: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let server = &server;
                scope.spawn(move || start_storing(server, THREE_BLOBS, &format!("s{i}")))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("client panicked")))
            .collect()
    });
    let paused: Vec<&Value> = replies
        .iter()
        .filter(|(status, reply)| *status == 200 && reply["status"] == "tool_call_required")
        .map(|(_, reply)| reply)
        .collect();
    let refused = replies
        .iter()
        .filter(|(status, reply)| *status == 429 && reply["error"] == "rate_limited")
        .count();
    assert_eq!(
        (paused.len(), refused),
        (2, 4),
        "{:?}",
        replies
            .iter()
            .map(|(s, r)| (s, &r["error"]))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        metric(&server, "baton_pauses_refused_for_storage_total"),
        4.0
    );

    // A continuation whose next pause would pass the cap gets 429 and its
    // round stays to be continued: the same token, retried once there is
    // room (here: a restart with a larger cap), runs it again.
    let (status, small) = start_storing(
        &server,
        "r = await store(i=0)\nblob = 'y' * 1_000_000\nimport asyncio\nawait asyncio.gather(*[store(blob=blob, i=i) for i in range(3)])\nprint('second')\n",
        "grows",
    );
    assert_eq!(status, 200, "{small}");
    let results = answers_of(&small);
    let continuation =
        json!({"continuation_token": small["continuation_token"], "tool_results": results});
    let (status, refused) = server.post("/exec/programmatic", &continuation);
    assert_eq!(
        (status, &refused["error"]),
        (429, &json!("rate_limited")),
        "{refused}"
    );
    let (status, again) = server.post("/exec/programmatic", &continuation);
    assert_eq!(status, 429, "{again}");
    server.restart_with(&["--max-key-storage-mb", "64"]);
    let (status, resumed) = server.post("/exec/programmatic", &continuation);
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "tool_call_required", "{resumed}");
    assert_eq!(
        resumed["tool_calls"].as_array().map(Vec::len),
        Some(3),
        "{resumed}"
    );
}

/// A result for each call of `reply`.
fn answers_of(reply: &Value) -> Vec<Value> {
    reply["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|call| json!({"call_id": call["id"], "result": 1}))
                .collect()
        })
        .unwrap_or_default()
}
