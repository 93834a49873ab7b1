//! baton on PostgreSQL (`--store postgres://…`), against a real PostgreSQL
//! server started for this suite (`common/postgres.rs`), a fresh database
//! per test.
//!
//! - The store's contract is one test body run on the embedded store and on
//!   PostgreSQL: both must give the same answers (the class, not the
//!   example: compare-and-swap in every combination, guarded batches,
//!   scans across pages, prefixes ending in 0xff, heads, large values).
//! - Over HTTP, a server on PostgreSQL killed with `SIGKILL` after every
//!   pause resumes each execution cold from the database, and prints what
//!   CPython prints with the same tool answers.
//! - Every pause handed out survives a crash of PostgreSQL itself (an
//!   immediate shutdown, with the log writer held off): writes commit
//!   asynchronously, and a pause's own write commits synchronously, which
//!   puts it and every write before it on disk.
//! - Session files larger than a stored chunk round-trip over HTTP, across
//!   a `SIGKILL` of the server (`common/files.rs`, also run on sled).
//! - A schema newer than the build is refused with a sentence. (Several
//!   servers on one database: `tests/cluster.rs`.)

mod common;

use std::sync::OnceLock;

use baton::store::{CasConflict, PostgresStore, SledStore, Store, scan_heads, scan_prefix};
use common::postgres::Postgres;
use common::server::{
    PROGRAMS, Server, answers, continue_, continue_across_restarts, cpython_stdout, weather_tools,
};
use serde_json::json;

fn postgres() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(Postgres::start)
}

/// The store contract, asserted on `store` (empty).
async fn exercise(store: &dyn Store) {
    let conflict = |current: Option<&[u8]>| {
        Err(CasConflict {
            current: current.map(<[u8]>::to_vec),
        })
    };
    // Point reads and writes.
    assert_eq!(store.get(b"s/1").await.unwrap(), None);
    store.put(b"s/1", b"paused").await.unwrap();
    store.put(b"s/1", b"paused again").await.unwrap();
    assert_eq!(
        store.get(b"s/1").await.unwrap(),
        Some(b"paused again".to_vec())
    );
    store.delete(b"s/1").await.unwrap();
    store.delete(b"s/1").await.unwrap();
    assert_eq!(store.get(b"s/1").await.unwrap(), None);
    // Compare-and-swap, each combination, won and lost.
    let cas = async |expected: Option<&[u8]>, new: Option<&[u8]>| {
        store.compare_and_swap(b"c/1", expected, new).await.unwrap()
    };
    assert_eq!(cas(None, None).await, Ok(()), "absent as expected");
    assert_eq!(cas(Some(b"x"), Some(b"y")).await, conflict(None));
    assert_eq!(cas(None, Some(b"a")).await, Ok(()));
    assert_eq!(cas(None, Some(b"b")).await, conflict(Some(b"a")));
    assert_eq!(cas(None, None).await, conflict(Some(b"a")));
    assert_eq!(cas(Some(b"a"), Some(b"b")).await, Ok(()));
    assert_eq!(cas(Some(b"a"), Some(b"c")).await, conflict(Some(b"b")));
    assert_eq!(cas(Some(b"z"), None).await, conflict(Some(b"b")));
    assert_eq!(cas(Some(b"b"), None).await, Ok(()));
    assert_eq!(store.get(b"c/1").await.unwrap(), None);
    // Batches, guarded and not.
    let big = vec![7u8; 1 << 20];
    store
        .apply_batch(&[(b"r/1", &big), (b"g/1", b"running")], &[b"nothing"])
        .await
        .unwrap();
    assert_eq!(store.get(b"r/1").await.unwrap(), Some(big.clone()));
    let refused = store
        .apply_batch_if((b"g/1", b"paused"), &[(b"r/2", b"2")], &[b"r/1"])
        .await
        .unwrap();
    assert_eq!(refused, conflict(Some(b"running")));
    assert_eq!(store.get(b"r/2").await.unwrap(), None, "nothing written");
    assert_eq!(
        store.get(b"r/1").await.unwrap(),
        Some(big.clone()),
        "nothing deleted"
    );
    let absent_guard = store
        .apply_batch_if((b"g/none", b"x"), &[(b"r/2", b"2")], &[])
        .await
        .unwrap();
    assert_eq!(absent_guard, conflict(None));
    let applied = store
        .apply_batch_if(
            (b"g/1", b"running"),
            &[(b"r/2", b"2"), (b"g/1", b"paused")],
            &[b"r/1"],
        )
        .await
        .unwrap();
    assert_eq!(applied, Ok(()));
    assert_eq!(store.get(b"r/1").await.unwrap(), None);
    assert_eq!(store.get(b"g/1").await.unwrap(), Some(b"paused".to_vec()));
    // A batch applies as its puts and then its deletes, in order: a key put
    // twice keeps its last value, a key put and deleted is gone, guarded or
    // not, and the guard's own key may be among the puts.
    store
        .apply_batch(
            &[
                (b"b/1", b"first"),
                (b"b/2", b"kept"),
                (b"b/1", b"last"),
                (b"b/3", b"put"),
            ],
            &[b"b/3"],
        )
        .await
        .unwrap();
    let batch_keys = [b"b/1", b"b/2", b"b/3"];
    let mut seen = Vec::new();
    for key in batch_keys {
        seen.push(store.get(key).await.unwrap());
    }
    assert_eq!(seen, [Some(b"last".to_vec()), Some(b"kept".to_vec()), None]);
    let applied = store
        .apply_batch_if(
            (b"g/1", b"paused"),
            &[
                (b"g/1", b"running"),
                (b"b/2", b"again"),
                (b"g/1", b"ended"),
                (b"b/1", b"x"),
            ],
            &[b"b/1", b"nothing"],
        )
        .await
        .unwrap();
    assert_eq!(applied, Ok(()));
    let mut seen = Vec::new();
    for key in [&b"g/1"[..], b"b/1", b"b/2"] {
        seen.push(store.get(key).await.unwrap());
    }
    assert_eq!(
        seen,
        [Some(b"ended".to_vec()), None, Some(b"again".to_vec())]
    );
    store
        .put_all(&[(b"b/4", &big), (b"b/5", b"small"), (b"b/4", b"small again")])
        .await
        .unwrap();
    assert_eq!(
        store.get(b"b/4").await.unwrap(),
        Some(b"small again".to_vec())
    );
    let swapped = store
        .put_then_swap(&[(b"b/6", b"part")], b"g/1", b"ended", b"paused")
        .await
        .unwrap();
    assert_eq!(swapped, Ok(()));
    assert_eq!(store.get(b"b/6").await.unwrap(), Some(b"part".to_vec()));
    let stale = store
        .put_then_swap(&[(b"b/7", b"part")], b"g/1", b"ended", b"paused")
        .await
        .unwrap();
    assert_eq!(stale, conflict(Some(b"paused")));
    let claimed = store
        .swap_then_put(b"g/1", b"paused", b"running", &[(b"b/8", b"claim")])
        .await
        .unwrap();
    assert_eq!(claimed, Ok(()));
    assert_eq!(store.get(b"b/8").await.unwrap(), Some(b"claim".to_vec()));
    let refused = store
        .swap_then_put(b"g/1", b"paused", b"running", &[(b"b/9", b"claim")])
        .await
        .unwrap();
    assert_eq!(refused, conflict(Some(b"running")));
    assert_eq!(store.get(b"b/9").await.unwrap(), None);
    // Scans: more keys than a page, prefixes that are prefixes of others,
    // keys with 0xff bytes, in byte order.
    let mut keys: Vec<Vec<u8>> = (0..700u32)
        .map(|i| format!("x/{i:04}").into_bytes())
        .collect();
    keys.push(b"x/\xff".to_vec());
    keys.push(b"x/\xff\xff\x00".to_vec());
    keys.push(b"x\xff".to_vec());
    keys.push(b"y/0".to_vec());
    for key in &keys {
        let value = vec![b'v'; key.len() * 3];
        store.put(key, &value).await.unwrap();
    }
    let keys_of =
        |pairs: Vec<(Vec<u8>, Vec<u8>)>| pairs.into_iter().map(|p| p.0).collect::<Vec<_>>();
    let scanned = keys_of(scan_prefix(store, b"x/").all().await.unwrap());
    let mut expected: Vec<Vec<u8>> = keys
        .iter()
        .filter(|k| k.starts_with(b"x/"))
        .cloned()
        .collect();
    expected.sort();
    assert_eq!(scanned, expected);
    let ff = keys_of(scan_prefix(store, b"x/\xff").all().await.unwrap());
    assert_eq!(ff, vec![b"x/\xff".to_vec(), b"x/\xff\xff\x00".to_vec()]);
    let heads: Vec<_> = scan_heads(store, b"x/00", 4)
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.key, h.head, h.len))
        .collect();
    assert_eq!(heads.len(), 100);
    assert_eq!(heads[0], (b"x/0000".to_vec(), b"vvvv".to_vec(), 18));
    let sizes: Vec<u64> = scan_heads(store, b"r/", 0)
        .all()
        .await
        .unwrap()
        .iter()
        .map(|h| h.len)
        .collect();
    assert_eq!(sizes, vec![1]);
    store.put(b"r/big", &big).await.unwrap();
    let head = scan_heads(store, b"r/big", 3)
        .next()
        .await
        .unwrap()
        .unwrap();
    assert_eq!((head.head, head.len), (b"\x07\x07\x07".to_vec(), 1 << 20));
    store.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_contract_holds_on_postgres_as_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&SledStore::open(dir.path()).unwrap()).await;
    // The suite's PostgreSQL is driven synchronously: off the runtime.
    let url = tokio::task::block_in_place(|| postgres().database("contract"));
    exercise(&PostgresStore::open(&url).await.unwrap()).await;
}

#[test]
fn a_server_on_postgres_killed_after_every_pause_resumes_cold_and_agrees_with_cpython() {
    let url = postgres().database("cold");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--store", &url]);
    for code in PROGRAMS {
        let (status, paused) = server.post(
            "/exec/programmatic",
            &json!({"code": code, "tools": weather_tools()}),
        );
        assert_eq!(status, 200, "{paused}");
        let (reply, rounds) = continue_across_restarts(&mut server, paused);
        assert_eq!(reply["status"], "completed", "{reply}");
        assert!(rounds >= 2, "{code}");
        assert_eq!(reply["stdout"], cpython_stdout(code), "{code}");
    }
    // Nothing was kept in the data directory: the database has it all.
    assert!(!dir.path().join("store").exists());
}

#[test]
fn session_files_of_several_chunks_round_trip_on_postgres() {
    let url = postgres().database("files");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--store", &url, "--body-limit", "16000000"]);
    common::files::check_large_files(&mut server);
    assert!(!dir.path().join("store").exists());
}

#[test]
fn every_pause_handed_out_survives_a_crash_of_the_database() {
    // PostgreSQL's log writer would write asynchronous commits within
    // 10 s: only the flush before each token can have put them on disk.
    let mut postgres = Postgres::start_with(&["wal_writer_delay=10000ms"]);
    let url = postgres.database("crash");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--store", &url]);
    for code in &PROGRAMS[..2] {
        let (status, mut reply) = server.post(
            "/exec/programmatic",
            &json!({"code": code, "tools": weather_tools()}),
        );
        let mut rounds = 0;
        while reply["status"] == "tool_call_required" {
            assert_eq!(status, 200, "{reply}");
            // Nothing may write after the token: the server is killed
            // first, then the database crashes and recovers.
            server.kill();
            postgres.crash_and_restart();
            server.restart();
            let (status, next) = continue_(&server, &reply, answers(&reply));
            assert_eq!(status, 200, "round {rounds} of {code}: {next}");
            reply = next;
            rounds += 1;
        }
        assert_eq!(reply["status"], "completed", "{reply}");
        assert!(rounds >= 2, "{code}");
        assert_eq!(reply["stdout"], cpython_stdout(code), "{code}");
    }
}

/// The keys of the rows the nodes' flushes write.
fn flush_rows(url: &str) -> Vec<Vec<u8>> {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client
        .query("SELECT key FROM baton_kv ORDER BY key", &[])
        .unwrap()
        .iter()
        .map(|row| row.get::<_, Vec<u8>>(0))
        .filter(|key| key.starts_with(b"\x00baton/flush/"))
        .collect()
}

/// Waits until PostgreSQL has let go of every advisory lock in the
/// database of `url` (a killed node's, once its backend noticed the
/// closed connection: a node that starts before that still sees it alive).
fn wait_until_no_node_holds_a_lock(url: &str) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let held: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = \
                 (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[],
            )
            .unwrap()
            .get(0);
        if held == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "PostgreSQL still holds {held} advisory locks of a killed node after 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Makes `server` flush: an upload is durable when it is answered (a
/// pause is too, but its write commits synchronously and needs no flush).
fn flush_on(server: &Server) {
    let (status, reply) = server.post_multipart(
        "/upload",
        &[("file", Some("f.txt"), "flushed")],
        common::server::KEY,
    );
    assert_eq!(status, 200, "{reply}");
}

#[test]
fn a_killed_nodes_flush_row_is_deleted_by_the_next_node_that_starts() {
    let url = postgres().database("flushrows");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--store", &url]);
    flush_on(&server);
    let first = flush_rows(&url);
    assert_eq!(first.len(), 1, "{first:?}");
    server.kill();
    wait_until_no_node_holds_a_lock(&url);
    server.restart();
    flush_on(&server);
    let second = flush_rows(&url);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(first, second);
}

#[test]
fn a_killed_nodes_flush_row_is_deleted_by_the_sweeper_of_a_node_that_stays() {
    let url = postgres().database("flushsweep");
    let (stays_dir, killed_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let stays = Server::start(stays_dir.path(), &["--store", &url, "--sweep-secs", "1"]);
    let mut killed = Server::start(
        killed_dir.path(),
        &["--store", &url, "--sweep-secs", "3600"],
    );
    flush_on(&stays);
    let own = flush_rows(&url);
    assert_eq!(own.len(), 1, "{own:?}");
    flush_on(&killed);
    assert_eq!(flush_rows(&url).len(), 2);
    killed.kill();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while flush_rows(&url) != own {
        assert!(
            std::time::Instant::now() < deadline,
            "the killed node's flush row is still there after 20 s: {:?}",
            flush_rows(&url)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_continuation_sent_twice_at_once_runs_once_on_postgres() {
    let url = postgres().database("race");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--store", &url]);
    for _ in 0..20 {
        let (_, first) = server.post(
            "/exec/programmatic",
            &json!({"code": PROGRAMS[0], "tools": weather_tools()}),
        );
        let replies: Vec<(u16, serde_json::Value)> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..2)
                .map(|_| scope.spawn(|| continue_(&server, &first, answers(&first))))
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        // One ran the round; the other waited for its answer (a retry gets
        // the same pause) or was refused while it ran: never two runs.
        let won: Vec<&serde_json::Value> = replies
            .iter()
            .filter(|(status, _)| *status == 200)
            .map(|(_, reply)| reply)
            .collect();
        assert!(!won.is_empty(), "{replies:?}");
        assert!(
            replies.iter().all(|(s, _)| *s == 200 || *s == 409),
            "{replies:?}"
        );
        for reply in &won {
            assert_eq!(reply["tool_calls"], won[0]["tool_calls"], "{replies:?}");
            assert!(reply["continuation_token"].is_string());
        }
        // The execution goes on from that one pause.
        let (status, next) = continue_(&server, won[0], answers(won[0]));
        assert_eq!(status, 200, "{next}");
        assert_eq!(next["tool_calls"][0]["input"]["city"], "ccc", "{next}");
    }
}

#[test]
fn health_reports_the_database() {
    let own = Postgres::start();
    let url = own.database("health");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--store", &url]);
    let (status, health) = server.get("/health", None);
    assert_eq!((status, &health["store"]), (200, &json!("ok")), "{health}");
    drop(own);
    let (status, health) = server.get("/health", None);
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["status"], "degraded");
    let store = health["store"].as_str().unwrap_or_default();
    assert!(
        store.contains("cannot connect to the PostgreSQL database: error connecting to server"),
        "the sentence the README gives, with PostgreSQL's cause: {health}"
    );
}

fn serve_refused(url: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            url,
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success(), "it started");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let url = postgres().database("refusals");
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--store", &url]);
    let (status, paused) = server.post(
        "/exec/programmatic",
        &json!({"code": PROGRAMS[0], "tools": weather_tools()}),
    );
    assert_eq!(status, 200, "{paused}");
    drop(server);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut count = || -> i64 {
        client
            .query_one("SELECT count(*) FROM baton_kv", &[])
            .unwrap()
            .get(0)
    };
    let before = count();
    assert!(before > 0, "the pause is in the database");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute("UPDATE baton_schema SET version = 99")
        .unwrap();
    let newer = serve_refused(&url);
    assert!(
        newer.contains("schema is version 99, newer than this build knows"),
        "{newer}"
    );
    assert_eq!(count(), before, "the refused server changed nothing");
}

#[test]
fn bad_store_urls_are_refused_with_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["serve", "--store", "mysql://x", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("--store takes a PostgreSQL URL"),
        "{stderr}"
    );
    let unreachable = serve_refused("postgres://baton@127.0.0.1:1/none");
    assert!(
        unreachable.contains("cannot connect to the PostgreSQL database"),
        "{unreachable}"
    );
}

#[test]
fn a_server_on_postgres_stops_cleanly_on_sigterm() {
    let url = postgres().database("sigterm");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--store", &url, "--sweep-secs", "1"]);
    let (status, paused) = server.post(
        "/exec/programmatic",
        &json!({"code": PROGRAMS[0], "tools": weather_tools()}),
    );
    assert_eq!(status, 200, "{paused}");
    // Past a sweep (its turn's connection closed on a runtime thread).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(server.terminate(), "the server did not exit with success");
}
