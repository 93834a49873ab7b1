//! Several baton nodes on one PostgreSQL database (`--store` with
//! `--advertise`): real `baton serve` processes on loopback ports, a real
//! PostgreSQL server started for this suite (`common/postgres.rs`), real
//! `SIGKILL`s.
//!
//! - Any node continues any execution: a continuation that reaches a node
//!   other than the one whose child is parked is forwarded there and
//!   resumed hot; every output equals CPython's with the same answers.
//! - A node killed with `SIGKILL` loses only its parked children: its
//!   paused executions resume cold on the others, and a round it was
//!   running when it died is run again by the node the client reached.
//! - The same continuation sent to two nodes at once runs its round once.
//! - A node the others cannot reach is replaced where the continuation
//!   arrives (cold), and the child it still holds is never resumed; the
//!   upkeep ends that child, forgets dead nodes' addresses and pauses
//!   their rounds again with no client asking.
//! - A cancel made on one node ends the round another node runs.
//! - The differential corpus runs across the nodes, hot where the owner
//!   is alive and cold where it is not, and agrees with CPython.

mod common;

use std::path::Path;

use common::postgres::{Postgres, free_port};
use common::server::{
    PROGRAMS, Server, answers, continue_, counter, cpython_stdout, eventually, weather_tools,
};
use serde_json::{Value, json};

/// Nodes sharing one database, each with its data directory.
struct Cluster {
    nodes: Vec<Server>,
    _dirs: Vec<tempfile::TempDir>,
    url: String,
    _postgres: Postgres,
}

/// What a node gives as `--advertise`.
#[derive(Clone, Copy)]
enum Advertise {
    /// Its own address.
    Own,
    /// An address where nothing listens (a node the others cannot reach).
    Unreachable,
}

/// Starts a node on `url` listening on a port of its own, with `extra`
/// flags.
fn node(url: &str, dir: &Path, advertise: Advertise, extra: &[&str]) -> Server {
    let listen = format!("127.0.0.1:{}", free_port());
    let address = match advertise {
        Advertise::Own => format!("http://{listen}"),
        Advertise::Unreachable => "http://127.0.0.1:9".to_owned(),
    };
    let mut args = vec!["--store", url, "--listen", &listen, "--advertise", &address];
    args.extend(extra);
    Server::start(dir, &args)
}

impl Cluster {
    /// One node per entry of `advertised` on a fresh database.
    fn start(advertised: &[Advertise]) -> Cluster {
        Self::start_with(advertised, &[])
    }

    /// [`Cluster::start`], every node with `extra` flags.
    fn start_with(advertised: &[Advertise], extra: &[&str]) -> Cluster {
        let postgres = Postgres::start();
        let url = postgres.database("cluster");
        let dirs: Vec<tempfile::TempDir> = advertised
            .iter()
            .map(|_| tempfile::tempdir().unwrap())
            .collect();
        let nodes = advertised
            .iter()
            .zip(&dirs)
            .map(|(advertise, dir)| node(&url, dir.path(), *advertise, extra))
            .collect();
        Cluster {
            nodes,
            _dirs: dirs,
            url,
            _postgres: postgres,
        }
    }

    /// The sum over the nodes still running of a counter (`name` with its
    /// labels, as `/metrics` prints it).
    fn counter(&self, name: &str) -> f64 {
        self.nodes
            .iter()
            .filter(|node| node.pid().is_some())
            .map(|node| counter(node, name))
            .sum()
    }
}

const FORWARDED: &str = "baton_forwarded_continuations_total{outcome=\"answered\"}";
const SERVED_HERE: &str = "baton_forwarded_continuations_total{outcome=\"served_here\"}";
const COLD: &str = "baton_cold_resumes_total";

fn start(node: &Server, code: &str) -> Value {
    let (status, reply) = node.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools()}),
    );
    assert_eq!(status, 200, "{reply}");
    reply
}

/// Starts, on `node`, a program whose second round loops `iterations`
/// times (30 million take seconds), with the longest run-time budget; its
/// code and first pause.
fn start_long(node: &Server, iterations: u64) -> (String, Value) {
    start_long_within(node, iterations, 300_000)
}

/// [`start_long`] with a run-time budget of `timeout_ms`.
fn start_long_within(node: &Server, iterations: u64, timeout_ms: u64) -> (String, Value) {
    let code = format!(
        "w = await get_weather(city='abc')\nn = 0\nfor i in range({iterations}):\n    n += i % 7\nprint(w['temp'], n)\n"
    );
    let (status, paused) = node.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools(), "timeout": timeout_ms}),
    );
    assert_eq!(status, 200, "{paused}");
    (code, paused)
}

/// Continues `reply` to its end, round `r` on the node `pick(r)`.
fn finish(cluster: &Cluster, mut reply: Value, pick: impl Fn(usize) -> usize) -> (Value, usize) {
    let mut rounds = 0;
    while reply["status"] == "tool_call_required" {
        let (status, next) = continue_(&cluster.nodes[pick(rounds)], &reply, answers(&reply));
        assert_eq!(status, 200, "round {rounds}: {next}");
        reply = next;
        rounds += 1;
    }
    (reply, rounds)
}

#[test]
fn any_node_continues_any_execution_hot_at_the_node_that_holds_its_child() {
    let cluster = Cluster::start(&[Advertise::Own; 3]);
    let mut elsewhere = 0;
    for (index, code) in PROGRAMS.iter().enumerate() {
        let owner = index % 3;
        let paused = start(&cluster.nodes[owner], code);
        let pick = |round: usize| (owner + 1 + round) % 3;
        let (reply, rounds) = finish(&cluster, paused, pick);
        assert_eq!(reply["status"], "completed", "{reply}");
        assert_eq!(reply["stdout"], cpython_stdout(code), "{code}");
        elsewhere += (0..rounds).filter(|r| pick(*r) != owner).count();
    }
    // Every continuation that reached another node went to the owner, and
    // nothing was replayed.
    assert!(elsewhere >= 4, "{elsewhere}");
    assert_eq!(cluster.counter(FORWARDED), elsewhere as f64);
    assert_eq!(cluster.counter(SERVED_HERE), 0.0);
    assert_eq!(cluster.counter(COLD), 0.0);

    // A client that marks its continuation as forwarded only makes it run
    // where it arrives (cold), never forwarded on.
    let paused = start(&cluster.nodes[0], PROGRAMS[0]);
    let body = json!({"continuation_token": paused["continuation_token"], "tool_results": answers(&paused)});
    let (status, next) = cluster.nodes[1].post_raw(
        "/exec/programmatic",
        &body.to_string(),
        Some(("x-api-key", common::server::KEY)),
        &[("x-baton-forwarded", "1")],
    );
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["tool_calls"][0]["input"]["city"], "bb", "{next}");
    assert_eq!(cluster.counter(FORWARDED), elsewhere as f64);
    assert_eq!(cluster.counter(COLD), 1.0);
}

#[test]
fn a_killed_node_loses_only_its_children_and_a_round_it_ran_runs_again() {
    let mut cluster = Cluster::start(&[Advertise::Own; 3]);
    // Paused on node 1, which is then killed.
    let paused: Vec<Value> = PROGRAMS
        .iter()
        .map(|code| start(&cluster.nodes[1], code))
        .collect();
    cluster.nodes[1].kill();
    for (code, reply) in PROGRAMS.iter().zip(paused) {
        let (reply, rounds) = finish(&cluster, reply, |round| if round % 2 == 0 { 0 } else { 2 });
        assert_eq!(reply["status"], "completed", "{reply}");
        assert_eq!(reply["stdout"], cpython_stdout(code), "{code}");
        assert!(rounds >= 2);
    }
    assert!(
        cluster.counter(COLD) >= 3.0,
        "each resumed cold once at least"
    );

    // A round that node 2 runs when it is killed: the client sent it to
    // node 0, which forwarded it; node 0 runs it again, cold.
    let (code, paused) = start_long(&cluster.nodes[2], 30_000_000);
    let served_here = counter(&cluster.nodes[0], SERVED_HERE);
    let reply = std::thread::scope(|scope| {
        let client = scope.spawn(|| continue_(&cluster.nodes[0], &paused, answers(&paused)));
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert!(
            !client.is_finished(),
            "the round ended before the kill: make it longer"
        );
        // SAFETY: a plain kill(2) of the child process we started.
        unsafe {
            libc::kill(cluster.nodes[2].pid().unwrap() as i32, libc::SIGKILL);
        }
        client.join().unwrap()
    });
    cluster.nodes[2].kill();
    assert_eq!(reply.0, 200, "{}", reply.1);
    assert_eq!(reply.1["stdout"], cpython_stdout(&code), "{}", reply.1);
    assert_eq!(counter(&cluster.nodes[0], SERVED_HERE), served_here + 1.0);
}

/// Sends the continuation of `first` to `nodes` at once; asserts that
/// the answers are 200 or 409 only, at least one 200, every 200 the same
/// pause; returns that pause.
fn race(cluster: &Cluster, first: &Value, nodes: [usize; 2]) -> Value {
    let replies: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let racers: Vec<_> = nodes
            .iter()
            .map(|node| {
                scope.spawn(move || continue_(&cluster.nodes[*node], first, answers(first)))
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert!(
        replies.iter().all(|(s, _)| *s == 200 || *s == 409),
        "{replies:?}"
    );
    let won: Vec<&Value> = replies
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, reply)| reply)
        .collect();
    assert!(!won.is_empty(), "{replies:?}");
    for reply in &won {
        assert_eq!(reply["tool_calls"], won[0]["tool_calls"], "{replies:?}");
    }
    assert_eq!(
        won[0]["tool_calls"][0]["input"]["city"], "bb",
        "{replies:?}"
    );
    won[0].clone()
}

#[test]
fn the_same_continuation_sent_to_two_nodes_at_once_runs_once() {
    let mut cluster = Cluster::start(&[Advertise::Own; 3]);
    // The owner alive: both forward to it; it goes on from the one pause.
    for _ in 0..10 {
        let first = start(&cluster.nodes[0], PROGRAMS[0]);
        let won = race(&cluster, &first, [1, 2]);
        let (status, next) = continue_(&cluster.nodes[0], &won, answers(&won));
        assert_eq!(status, 200, "{next}");
        assert_eq!(next["tool_calls"][0]["input"]["city"], "ccc", "{next}");
    }
    // The owner gone: both resume cold, and the claim decides.
    let paused: Vec<Value> = (0..5)
        .map(|_| start(&cluster.nodes[0], PROGRAMS[0]))
        .collect();
    cluster.nodes[0].kill();
    for first in paused {
        let won = race(&cluster, &first, [1, 2]);
        let (status, next) = continue_(&cluster.nodes[2], &won, answers(&won));
        assert_eq!(status, 200, "{next}");
        assert_eq!(next["tool_calls"][0]["input"]["city"], "ccc", "{next}");
    }
}

#[test]
fn a_node_that_cannot_be_reached_is_replaced_and_its_stale_child_never_resumed() {
    // Nobody can reach anybody: each continuation runs where it arrives.
    let cluster = Cluster::start(&[Advertise::Unreachable; 2]);
    for code in PROGRAMS {
        // Started on node 0 (its child parked there), continued on 1, 0,
        // 1, …: node 0 still holds the child of the first pause when the
        // third round reaches it, and must not resume it.
        let paused = start(&cluster.nodes[0], code);
        let (reply, rounds) = finish(&cluster, paused, |round| (round + 1) % 2);
        assert_eq!(reply["status"], "completed", "{reply}");
        assert_eq!(reply["stdout"], cpython_stdout(code), "{code}");
        assert!(rounds >= 2);
    }
    assert_eq!(cluster.counter(FORWARDED), 0.0);
    assert!(cluster.counter(SERVED_HERE) >= 3.0);
}

fn parked(node: &Server) -> u64 {
    node.get("/health", None).1["parked"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

#[test]
fn upkeep_ends_stale_children_forgets_dead_nodes_and_pauses_their_rounds_again() {
    let mut cluster = Cluster::start_with(&[Advertise::Unreachable; 3], &["--sweep-secs", "1"]);
    // Node 0's child is stale once node 1 ran the next round.
    let paused = start(&cluster.nodes[0], PROGRAMS[0]);
    assert_eq!(parked(&cluster.nodes[0]), 1);
    let (status, next) = continue_(&cluster.nodes[1], &paused, answers(&paused));
    assert_eq!(status, 200, "{next}");
    assert!(
        eventually(|| parked(&cluster.nodes[0]) == 0),
        "node 0 kept its stale child"
    );
    assert_eq!(parked(&cluster.nodes[1]), 1);

    // A node killed while it runs a round: the round is paused again by
    // the others' upkeep, with no client asking (a claim on PostgreSQL
    // does not store the results: `Store::flush_while_running`), and its
    // address is forgotten.
    let (code, paused) = start_long(&cluster.nodes[2], 30_000_000);
    let id = paused["execution_id"].as_str().unwrap().to_owned();
    std::thread::scope(|scope| {
        let node = &cluster.nodes[2];
        let paused = &paused;
        scope.spawn(move || {
            let _ = std::panic::catch_unwind(|| continue_(node, paused, answers(paused)));
        });
        let inspect = format!("/executions/{id}");
        let status =
            || cluster.nodes[0].get(&inspect, Some(common::server::KEY)).1["status"].clone();
        assert!(eventually(|| status() == "running"), "{}", status());
        // SAFETY: a plain kill(2) of the child process we started.
        unsafe {
            libc::kill(cluster.nodes[2].pid().unwrap() as i32, libc::SIGKILL);
        }
        assert!(eventually(|| status() == "paused"), "{}", status());
    });
    cluster.nodes[2].kill();
    let mut database = postgres::Client::connect(&cluster.url, postgres::NoTls).unwrap();
    let mut addresses = || -> i64 {
        database
            .query_one(
                "SELECT count(*) FROM baton_kv WHERE key >= 'n/'::bytea AND key < 'n0'::bytea",
                &[],
            )
            .unwrap()
            .get(0)
    };
    assert!(eventually(|| addresses() == 2), "{}", addresses());
    // And it goes on from that pause, on a survivor.
    let (status, done) = continue_(&cluster.nodes[1], &paused, answers(&paused));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["stdout"], cpython_stdout(&code), "{done}");
}

/// A node started with no keys given (`--api-key`, `--signing-key`):
/// the process, its base URL, and the API key it printed, if any.
fn keyless_node(url: &str, dir: &Path) -> (std::process::Child, String, Option<String>) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--pool-size",
            "1",
            "--store",
            url,
        ])
        .arg("--data-dir")
        .arg(dir)
        .env("BATON_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut key = None;
    let base = loop {
        let line = lines
            .next()
            .and_then(Result::ok)
            .expect("baton exited before listening");
        if let Some(generated) = line.strip_prefix("baton: generated API key ") {
            key = Some(generated.trim().to_owned());
        }
        if let Some(address) = line.strip_prefix("baton: listening on ") {
            break address.trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (child, base, key)
}

#[test]
fn nodes_started_without_keys_share_the_keys_the_first_one_generated() {
    let postgres = Postgres::start();
    let url = postgres.database("keys");
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let (mut first, first_base, key) = keyless_node(&url, dirs[0].path());
    let (mut second, second_base, second_key) = keyless_node(&url, dirs[1].path());
    let key = key.expect("the first node printed the key it generated");
    assert_eq!(second_key, None, "the second node generated another key");
    // Nothing secret was written to the data directories.
    for dir in &dirs {
        assert!(!dir.path().join("api_key").exists());
        assert!(!dir.path().join("signing_key").exists());
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(std::time::Duration::from_secs(30))
        .build();
    let post = |base: &str, body: Value| -> Value {
        for _ in 0..300 {
            match agent
                .post(&format!("{base}/exec/programmatic"))
                .set("x-api-key", &key)
                .send_json(body.clone())
            {
                Ok(response) => return response.into_json().unwrap(),
                // Not ready yet (the sandbox is starting).
                Err(ureq::Error::Status(503, _)) => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(error) => panic!("{error}"),
            }
        }
        panic!("{base} never served");
    };
    let paused = post(
        &first_base,
        json!({"code": PROGRAMS[0], "tools": weather_tools()}),
    );
    assert_eq!(paused["status"], "tool_call_required", "{paused}");
    // The token the first node signed is good at the second.
    let next = post(
        &second_base,
        json!({"continuation_token": paused["continuation_token"], "tool_results": answers(&paused)}),
    );
    assert_eq!(next["status"], "tool_call_required", "{next}");
    assert_eq!(next["tool_calls"][0]["input"]["city"], "bb", "{next}");
    for child in [&mut first, &mut second] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// What one corpus program did over HTTP: its calls round by round
/// (canonical order), stdout, error line and traceback.
type Observed = (
    Vec<Vec<(String, Value)>>,
    String,
    Option<String>,
    Vec<String>,
);

/// Runs a corpus program across the cluster: started on `nodes[0]`, round
/// `r` continued on `nodes[(r + 1) % 3]`, each call answered as the
/// oracle's was. With `kill_owner`, the node it started on is killed
/// (`SIGKILL`) and started again before the first continuation.
fn run_across(
    cluster: &mut Cluster,
    source: &str,
    oracle: &common::OracleRun,
    nodes: [usize; 3],
    kill_owner: bool,
) -> Observed {
    let tools: Value = serde_json::from_str(
        &std::fs::read_to_string(common::root().join("tests/oracle/tools.json")).unwrap(),
    )
    .unwrap();
    let (status, mut reply) = cluster.nodes[nodes[0]].post(
        "/exec/programmatic",
        &json!({"code": source, "tools": tools}),
    );
    assert_eq!(status, 200, "{reply}");
    if kill_owner && reply["status"] == "tool_call_required" {
        cluster.nodes[nodes[0]].restart();
    }
    let (mut rounds, mut used) = (Vec::new(), Vec::new());
    while reply["status"] == "tool_call_required" {
        let round = rounds.len();
        let calls = reply["tool_calls"].as_array().cloned().unwrap_or_default();
        let mut seen = Vec::new();
        let results: Vec<Value> = calls
            .iter()
            .map(|call| {
                let tool = call["name"].as_str().unwrap_or_default().to_owned();
                seen.push((tool, call["input"].clone()));
                oracle.tool_result(round, call, &mut used)
            })
            .collect();
        rounds.push(seen);
        let node = &cluster.nodes[nodes[(round + 1) % 3]];
        let (status, next) = node.post(
            "/exec/programmatic",
            &json!({"continuation_token": reply["continuation_token"], "tool_results": results}),
        );
        assert_eq!(status, 200, "round {round}: {next}");
        reply = next;
        assert!(rounds.len() < 200, "runaway program");
    }
    let text = |field: &str| reply[field].as_str().unwrap_or_default().to_owned();
    let error = (reply["status"] == "error").then(|| text("error"));
    (
        common::canonical(rounds),
        text("stdout"),
        error,
        common::frames(&text("stderr")),
    )
}

/// Whether a corpus program's output may depend on the seed or the clock
/// (which the oracle fixes and an HTTP start does not).
fn depends_on_seed_or_clock(source: &str) -> bool {
    ["random", "time", "uuid", "secrets", "hash(", "id("]
        .iter()
        .any(|word| source.contains(word))
}

#[test]
fn the_corpus_agrees_with_cpython_across_nodes_hot_and_cold() {
    // Node 2 cannot be reached: what it holds resumes cold elsewhere; what
    // nodes 0 and 1 hold is forwarded to them and resumes hot, unless the
    // node was killed.
    let mut cluster = Cluster::start(&[Advertise::Own, Advertise::Own, Advertise::Unreachable]);
    let programs = common::corpus_programs();
    let mut problems = Vec::new();
    let mut compared = 0;
    for (index, path) in programs.iter().enumerate() {
        let source = std::fs::read_to_string(path).unwrap();
        if depends_on_seed_or_clock(&source) {
            continue;
        }
        let program = baton::program::Program::build(
            &source,
            &common::corpus_tools(),
            baton::program::ProgramLimits::default(),
            &[],
            &[],
        )
        .unwrap_or_else(|(error, _)| panic!("{}: {error}", path.display()))
        .to_json();
        let oracle = common::oracle(&program, [42; 32], common::OracleMode::of_source(&source));
        let expected = (
            common::canonical(oracle.calls()),
            oracle.stdout.clone(),
            oracle.error.clone(),
            common::frames(&oracle.stderr),
        );
        let nodes = [[0, 1, 2], [1, 2, 0], [2, 0, 1]][index % 3];
        // One program in five loses the node that holds its child before
        // its first continuation: it resumes cold on another.
        let observed = run_across(&mut cluster, &source, &oracle, nodes, index % 5 == 1);
        compared += 1;
        if observed != expected {
            problems.push(format!(
                "{}: differs from CPython\n  cpython: {expected:?}\n  baton:   {observed:?}",
                path.display()
            ));
        }
    }
    let filtered = std::env::var("BATON_CORPUS_ONLY").is_ok();
    assert!(
        filtered || compared >= 100,
        "only {compared} programs compared"
    );
    assert!(
        problems.is_empty(),
        "{} of {compared}:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(cluster.counter(FORWARDED) > 0.0 && cluster.counter(COLD) > 0.0);
}

#[test]
fn a_cancel_on_one_node_ends_the_round_running_on_another() {
    let cluster = Cluster::start_with(&[Advertise::Own; 2], &["--sweep-secs", "1"]);
    // A round that would run for minutes.
    let (_, paused) = start_long(&cluster.nodes[0], 2_000_000_000);
    let id = paused["execution_id"].as_str().unwrap().to_owned();
    let inspect = format!("/executions/{id}");
    let began = std::time::Instant::now();
    let (reply, cancel) = std::thread::scope(|scope| {
        let client = scope.spawn(|| continue_(&cluster.nodes[0], &paused, answers(&paused)));
        let status =
            || cluster.nodes[1].get(&inspect, Some(common::server::KEY)).1["status"].clone();
        assert!(eventually(|| status() == "running"), "{}", status());
        let cancel = cluster.nodes[1].post(&format!("{inspect}/cancel"), &json!({}));
        (client.join().unwrap(), cancel)
    });
    assert_eq!(cancel.0, 200, "{}", cancel.1);
    // Node 0 ended its child at its next upkeep, long before the loop's end.
    assert!(
        began.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(
        (reply.0, &reply.1["status"]),
        (200, &json!("error")),
        "{}",
        reply.1
    );
    assert_eq!(reply.1["error"], "Execution was cancelled", "{}", reply.1);
    let (_, shown) = cluster.nodes[0].get(&inspect, Some(common::server::KEY));
    assert_eq!(shown["status"], "cancelled", "{shown}");
}

const CANCELS_DELIVERED: &str = "baton_forwarded_cancels_total{outcome=\"delivered\"}";

#[test]
fn a_cancel_forwarded_to_the_node_running_the_round_ends_it_at_once() {
    // No upkeep in the test's time: only the forwarded cancel can end the
    // round, which would otherwise run into its 60 s budget.
    let cluster = Cluster::start_with(&[Advertise::Own; 2], &["--sweep-secs", "3600"]);
    let (_, paused) = start_long_within(&cluster.nodes[0], 2_000_000_000, 60_000);
    let id = paused["execution_id"].as_str().unwrap().to_owned();
    let inspect = format!("/executions/{id}");
    let body = json!({"continuation_token": paused["continuation_token"],
        "tool_results": answers(&paused)});
    let (reply, cancel) = std::thread::scope(|scope| {
        let client = scope.spawn(|| {
            cluster.nodes[0].post_raw(
                "/exec/programmatic",
                &body.to_string(),
                Some(("x-api-key", common::server::KEY)),
                &[("x-librechat-code-request-id", "round-2-of-the-long-loop")],
            )
        });
        let status =
            || cluster.nodes[1].get(&inspect, Some(common::server::KEY)).1["status"].clone();
        assert!(eventually(|| status() == "running"), "{}", status());
        let cancel = cluster.nodes[1].post(
            "/exec/programmatic/cancel",
            &json!({"request_id": "round-2-of-the-long-loop"}),
        );
        (client.join().unwrap(), cancel)
    });
    assert_eq!(
        (cancel.0, &cancel.1["status"]),
        (200, &json!("cancelled")),
        "{}",
        cancel.1
    );
    assert_eq!(
        (reply.0, &reply.1["status"], &reply.1["error"]),
        (200, &json!("error"), &json!("Execution was cancelled")),
        "{}",
        reply.1
    );
    // Counted when the holder's answer is back (after it ended the child).
    assert!(eventually(
        || counter(&cluster.nodes[1], CANCELS_DELIVERED) == 1.0
    ));
    assert_eq!(parked(&cluster.nodes[0]), 0);
    // Ended, not replayed in a fresh child as if it had been lost.
    assert_eq!(cluster.counter(COLD), 0.0);
}

#[test]
fn a_cancel_forwarded_to_the_node_holding_the_parked_child_ends_it_at_once() {
    let cluster = Cluster::start_with(&[Advertise::Own; 2], &["--sweep-secs", "3600"]);
    let paused = start(
        &cluster.nodes[0],
        "w = await get_weather(city='x')\nprint(w)\n",
    );
    assert_eq!(parked(&cluster.nodes[0]), 1);
    let id = paused["execution_id"].as_str().unwrap().to_owned();
    let (status, shown) = cluster.nodes[1].post(&format!("/executions/{id}/cancel"), &json!({}));
    assert_eq!(
        (status, &shown["status"]),
        (200, &json!("cancelled")),
        "{shown}"
    );
    assert!(
        eventually(|| parked(&cluster.nodes[0]) == 0),
        "{}",
        parked(&cluster.nodes[0])
    );
    // Counted when the holder's answer is back (after it ended the child).
    assert!(eventually(
        || counter(&cluster.nodes[1], CANCELS_DELIVERED) == 1.0
    ));
    // The holder answers the cancelled execution as cancelled, with no
    // child left to resume.
    let (status, refused) = continue_(&cluster.nodes[0], &paused, answers(&paused));
    assert_eq!(status, 409, "{refused}");
    // A cancel that reaches the holder itself is not forwarded anywhere.
    let (status, _) = cluster.nodes[0].post(&format!("/executions/{id}/cancel"), &json!({}));
    assert_eq!(status, 200);
    assert_eq!(counter(&cluster.nodes[0], CANCELS_DELIVERED), 0.0);
}
