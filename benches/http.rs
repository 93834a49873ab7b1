//! HTTP benchmark (not a test): what a client sees. A real `baton serve` on
//! loopback with sled on disk (every pause flushed before its token), driven
//! by keep-alive clients on the same two cores.
//!
//! It measures, as issue #15 states them:
//! - alone (one client, `BATON_BENCH_GAP_MS`, default 30 ms, between
//!   requests): start → first pause, continue → next pause and continue →
//!   completed of the 2-call program with 9 tools; a tool-free `print(1)`
//!   through `/exec/programmatic` and through `/exec`; the whole of a
//!   20-round loop (its rounds back to back); the 2-call program among 30
//!   tools with typed schemas (each call's arguments checked) and with the
//!   same tools untyped, alternately;
//! - rounds per second (a round is one request that runs the program to
//!   its next pause or end) with 1, 8 and 32 clients running the 2-call
//!   program back to back;
//! - a 20-round execution whose tool results are 1 MB each: the time of
//!   each continue and the bytes the server wrote (`/proc/<pid>/io`) for
//!   it, at rounds 2, 10 and 20;
//! - a 32 MiB session file uploaded and downloaded: the time of each and
//!   the growth of the server's peak memory (`VmHWM`).
//!
//! `BATON_BENCH_POSTGRES=1` adds this build (and the earlier one, with
//! `BATON_BENCH_BEFORE`) on a PostgreSQL server that the bench starts
//! (`--store`), beside the embedded store, and a cluster of three nodes on
//! one database (`--advertise`), each request sent to the next node as a
//! load balancer without affinity would: two continuations in three are
//! forwarded to the node that holds the child. The cluster runs the
//! alone figures and the throughput, not the typed-tool and 1 MB rows.
//! `BATON_BENCH_ONLY=throughput` runs only the rounds/s rows (1, 8 and 32
//! clients); `BATON_BENCH_ONLY=load` runs only the 32-client throughput, for
//! `BATON_BENCH_LOAD_SECONDS` (default 3), e.g. under a profiler;
//! `BATON_BENCH_ONLY=files` only the session file rows.
//!
//! Each figure is the median of three runs' medians. With
//! `BATON_BENCH_BEFORE=<path of an earlier baton>` it drives that build and
//! this one alternately in the same session and prints them side by side.
//!
//! Run: `cargo bench --ignore-rust-version --bench http`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../tests/common/postgres.rs"]
mod postgres_server;
#[path = "../tests/common/server.rs"]
mod server;

use server::{KEY, Server};

const TWO_CALL: &str =
    "city = await get_city()\nw = await get_weather(city=city)\nprint(city, w['t'])\n";
const LOOP_20: &str = "total = 0\nfor i in range(20):\n    w = await get_weather(city=str(i))\n    total += w['t']\nprint(total)\n";
const LARGE_20: &str =
    "n = 0\nfor i in range(20):\n    blob = await fetch(i=i)\n    n += len(blob)\nprint(n)\n";
/// A 10-line data script with no tools.
const DATA_SCRIPT: &str = "\
import json, statistics, collections
rows = [{'city': c, 'temp': (i * 7) % 31, 'day': i % 7} for i, c in enumerate(['Bern', 'Oslo', 'Lima', 'Rome', 'Kyiv'] * 20)]
by_city = collections.defaultdict(list)
for r in rows:
    by_city[r['city']].append(r['temp'])
summary = {c: {'mean': statistics.mean(t), 'max': max(t)} for c, t in by_city.items()}
hot = sorted(summary, key=lambda c: summary[c]['mean'], reverse=True)
report = [f\"{c}: {summary[c]['mean']:.1f} (max {summary[c]['max']})\" for c in hot]
print('\\n'.join(report))
print(json.dumps({'cities': len(summary), 'rows': len(rows)}))
";
const DATA_SCRIPT_ENDS: &str = "{\"cities\": 5, \"rows\": 100}\n";
const RUNS: usize = 3;
const ALONE_ITERATIONS: usize = 40;
const THROUGHPUT_SECONDS: f64 = 3.0;

/// The nine tools of the 2-call program (two used).
fn nine_tools() -> Value {
    let names = [
        "get_city",
        "get_weather",
        "get_time",
        "search_web",
        "send_email",
        "read_calendar",
        "create_event",
        "translate",
        "convert_currency",
    ];
    let tools: Vec<Value> = names
        .iter()
        .map(|name| {
            json!({"name": name, "description": format!("{name} tool"),
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}})
        })
        .collect();
    Value::Array(tools)
}

/// Thirty tools of four parameters each, the 2-call program's two among
/// them: with typed schemas (`typed`: a string, an integer, an enum and a
/// closed nested object, all checked at each call), or with the same
/// parameters untyped (nothing to check).
fn thirty_tools(typed: bool) -> Value {
    let check = |schema: Value| if typed { schema } else { json!({}) };
    let tools: Vec<Value> = (0..30)
        .map(|i| {
            let name = match i {
                0 => "get_city".to_owned(),
                1 => "get_weather".to_owned(),
                _ => format!("tool_{i}"),
            };
            json!({"name": name, "description": format!("{name} tool"),
            "parameters": {"type": "object", "properties": {
                "city": check(json!({"type": "string"})),
                "limit": check(json!({"type": "integer"})),
                "unit": check(json!({"enum": ["C", "F"]})),
                "window": check(json!({"type": "object", "additionalProperties": false,
                    "properties": {"from": {"type": "string"}, "to": {"type": "string"}}})),
            }}})
        })
        .collect();
    Value::Array(tools)
}

/// One keep-alive client; with several bases (the nodes of a cluster),
/// each request goes to the next, as through a load balancer without
/// affinity.
struct Client {
    agent: ureq::Agent,
    bases: Vec<String>,
    next: std::cell::Cell<usize>,
}

impl Client {
    fn new(bases: &[String]) -> Client {
        Client {
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(120))
                .build(),
            bases: bases.to_vec(),
            next: std::cell::Cell::new(0),
        }
    }

    /// The base of the next request.
    fn base(&self) -> &str {
        let next = self.next.get();
        self.next.set(next + 1);
        &self.bases[next % self.bases.len()]
    }

    fn post(&self, path: &str, body: &Value) -> (Value, Duration) {
        let text = body.to_string();
        let url = format!("{}{path}", self.base());
        let began = Instant::now();
        let reply: Value = self
            .agent
            .post(&url)
            .set("x-api-key", KEY)
            .set("content-type", "application/json")
            .send_string(&text)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .into_json()
            .unwrap_or_else(|e| panic!("{e}"));
        (reply, began.elapsed())
    }

    /// Answers every pending call of `reply` with `result`.
    fn answer(&self, reply: &Value, result: &Value) -> (Value, Duration) {
        let results: Vec<Value> = reply["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| json!({"call_id": c["id"], "result": result, "is_error": false}))
                    .collect()
            })
            .unwrap_or_default();
        self.post(
            "/exec/programmatic",
            &json!({"continuation_token": reply["continuation_token"], "tool_results": results}),
        )
    }

    /// The 2-call program: (start → pause, continue → pause, continue → end).
    fn two_call(&self, tools: &Value, gap: Duration) -> [Duration; 3] {
        let (first, start) = self.post(
            "/exec/programmatic",
            &json!({"code": TWO_CALL, "tools": tools}),
        );
        std::thread::sleep(gap);
        let (second, to_pause) = self.answer(&first, &json!("SF"));
        std::thread::sleep(gap);
        let (end, to_end) = self.answer(&second, &json!({"t": 21}));
        assert_eq!(end["stdout"], "SF 21\n", "{end}");
        [start, to_pause, to_end]
    }

    /// A tool-free run of `code` through `path` (`/exec` or
    /// `/exec/programmatic`), whose stdout must end with `ends`; its time in
    /// milliseconds.
    fn tool_free(&self, path: &str, code: &str, ends: &str) -> f64 {
        let body = if path == "/exec" {
            json!({"lang": "py", "code": code})
        } else {
            json!({"code": code})
        };
        let (reply, took) = self.post(path, &body);
        let stdout = reply["stdout"].as_str().unwrap_or_default();
        assert!(stdout.ends_with(ends), "{path}: {reply}");
        ms(took)
    }

    /// A whole execution of `code`, its rounds back to back; returns the
    /// time and the number of requests.
    fn whole(&self, code: &str, tools: &Value, result: &Value) -> (Duration, usize, Value) {
        let began = Instant::now();
        let (mut reply, _) =
            self.post("/exec/programmatic", &json!({"code": code, "tools": tools}));
        let mut requests = 1;
        while reply["status"] == "tool_call_required" {
            reply = self.answer(&reply, result).0;
            requests += 1;
        }
        (began.elapsed(), requests, reply)
    }
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(index).copied().unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Bytes the process wrote to storage so far (`write_bytes`).
fn written_bytes(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("write_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(f64::NAN)
}

/// One run's figures, by name.
type Figures = Vec<(&'static str, f64)>;

fn alone(client: &Client, figures: &mut Figures) {
    let gap = Duration::from_millis(
        std::env::var("BATON_BENCH_GAP_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30),
    );
    let tools = nine_tools();
    let (mut starts, mut to_pause, mut to_end) = (Vec::new(), Vec::new(), Vec::new());
    let (mut print_programmatic, mut print_exec, mut loops) = (Vec::new(), Vec::new(), Vec::new());
    let (mut data_programmatic, mut data_exec) = (Vec::new(), Vec::new());
    for _ in 0..ALONE_ITERATIONS {
        std::thread::sleep(gap);
        let [s, p, e] = client.two_call(&tools, gap);
        starts.push(ms(s));
        to_pause.push(ms(p));
        to_end.push(ms(e));
        for (code, ends, programmatic, exec) in [
            ("print(1)", "1\n", &mut print_programmatic, &mut print_exec),
            (
                DATA_SCRIPT,
                DATA_SCRIPT_ENDS,
                &mut data_programmatic,
                &mut data_exec,
            ),
        ] {
            std::thread::sleep(gap);
            programmatic.push(client.tool_free("/exec/programmatic", code, ends));
            std::thread::sleep(gap);
            exec.push(client.tool_free("/exec", code, ends));
        }
    }
    for _ in 0..ALONE_ITERATIONS / 2 {
        std::thread::sleep(gap);
        let (took, _, reply) = client.whole(LOOP_20, &tools, &json!({"t": 1}));
        assert_eq!(reply["stdout"], "20\n", "{reply}");
        loops.push(ms(took));
    }
    figures.push(("start → first pause, median", median(&mut starts)));
    figures.push(("start → first pause, p99", percentile(&mut starts, 0.99)));
    figures.push(("continue → next pause, median", median(&mut to_pause)));
    figures.push(("continue → completed, median", median(&mut to_end)));
    figures.push((
        "print(1), /exec/programmatic, median",
        median(&mut print_programmatic),
    ));
    figures.push(("print(1), /exec, median", median(&mut print_exec)));
    figures.push(("print(1), /exec, p99", percentile(&mut print_exec, 0.99)));
    figures.push((
        "10-line data script, /exec/programmatic, median",
        median(&mut data_programmatic),
    ));
    figures.push((
        "10-line data script, /exec/programmatic, p99",
        percentile(&mut data_programmatic, 0.99),
    ));
    figures.push(("10-line data script, /exec, median", median(&mut data_exec)));
    figures.push((
        "10-line data script, /exec, p99",
        percentile(&mut data_exec, 0.99),
    ));
    figures.push(("20-round loop, whole execution, median", median(&mut loops)));
}

/// The 2-call program with thirty tools, typed and untyped alternately:
/// what the argument checks cost a start and a continue.
fn checked_tools(client: &Client, figures: &mut Figures) {
    let gap = Duration::from_millis(30);
    let mut samples: [Vec<f64>; 4] = Default::default();
    for _ in 0..ALONE_ITERATIONS {
        for (slot, typed) in [(0, true), (2, false)] {
            std::thread::sleep(gap);
            let [start, to_pause, _] = client.two_call(&thirty_tools(typed), gap);
            samples[slot].push(ms(start));
            samples[slot + 1].push(ms(to_pause));
        }
    }
    let [typed_start, typed_continue, untyped_start, untyped_continue] = &mut samples;
    figures.push((
        "30 typed tools: start → first pause, median",
        median(typed_start),
    ));
    figures.push((
        "30 typed tools: continue → next pause, median",
        median(typed_continue),
    ));
    figures.push((
        "30 untyped tools: start → first pause, median",
        median(untyped_start),
    ));
    figures.push((
        "30 untyped tools: continue → next pause, median",
        median(untyped_continue),
    ));
}

/// Rounds per second with `clients` clients running the 2-call program
/// back to back for a fixed time.
/// How long each throughput measure runs (`BATON_BENCH_LOAD_SECONDS`).
fn throughput_seconds() -> f64 {
    std::env::var("BATON_BENCH_LOAD_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(THROUGHPUT_SECONDS)
}

fn rounds_per_second(bases: &[String], clients: usize) -> f64 {
    let tools = nine_tools();
    let began = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|index| {
            let client = Client::new(bases);
            // Clients start at different nodes.
            client.next.set(index);
            let tools = tools.clone();
            std::thread::spawn(move || {
                let mut rounds = 0usize;
                while began.elapsed().as_secs_f64() < throughput_seconds() {
                    client.two_call(&tools, Duration::ZERO);
                    rounds += 3;
                }
                rounds
            })
        })
        .collect();
    let rounds: usize = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    rounds as f64 / began.elapsed().as_secs_f64()
}

/// A 20-round execution with 1 MB results: each continue's time and bytes
/// written, at rounds 2, 10 and 20.
fn large_rounds(client: &Client, pid: u32, figures: &mut Figures) {
    let tools = json!([{"name": "fetch", "parameters": {"type": "object", "properties": {"i": {"type": "integer"}}}}]);
    let blob = json!("x".repeat(1 << 20));
    let (mut reply, _) = client.post(
        "/exec/programmatic",
        &json!({"code": LARGE_20, "tools": tools}),
    );
    let mut continues = 0;
    while reply["status"] == "tool_call_required" {
        continues += 1;
        let written = written_bytes(pid);
        let (next, took) = client.answer(&reply, &blob);
        let bytes = written_bytes(pid) - written;
        let (time_name, bytes_name) = match continues {
            1 => (
                "1 MB results: continue → pause 2, ms",
                "1 MB results: MB written for pause 2",
            ),
            10 => (
                "1 MB results: continue → pause 11, ms",
                "1 MB results: MB written for pause 11",
            ),
            19 => (
                "1 MB results: continue → pause 20, ms",
                "1 MB results: MB written for pause 20",
            ),
            _ => ("", ""),
        };
        if !time_name.is_empty() {
            figures.push((time_name, ms(took)));
            figures.push((bytes_name, bytes / 1e6));
        }
        reply = next;
    }
    assert_eq!(reply["stdout"], format!("{}\n", 20 << 20), "{reply}");
}

/// The server's peak resident memory (`VmHWM`), MiB.
fn peak_memory_mib(server: &Server) -> f64 {
    server
        .peak_memory()
        .map_or(f64::NAN, |bytes| bytes as f64 / 1_048_576.0)
}

/// A 32 MiB session file uploaded and downloaded: the time of each and how
/// much the server's peak memory grew (run first, before anything else
/// raises it).
fn session_files(server: &Server, figures: &mut Figures) {
    let file: Vec<u8> = (0..32u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let peak = peak_memory_mib(server);
    let began = Instant::now();
    let (status, reply) = server.post_multipart_bytes(
        "/upload",
        &[
            ("session_id", None, b"bench"),
            ("file", Some("big.bin"), &file),
        ],
        KEY,
    );
    let uploaded = began.elapsed();
    assert_eq!(status, 200, "{reply}");
    let id = reply["files"][0]["id"].as_str().unwrap_or_default();
    let began = Instant::now();
    let (status, bytes) = server.get_bytes(&format!("/download/bench/{id}"), KEY);
    let downloaded = began.elapsed();
    assert!(status == 200 && bytes == file, "the download differs");
    figures.push(("32 MiB session file: upload, ms", ms(uploaded)));
    figures.push(("32 MiB session file: download, ms", ms(downloaded)));
    figures.push((
        "32 MiB session file: server's peak memory grew by, MiB",
        peak_memory_mib(server) - peak,
    ));
}

/// Where a run keeps its executions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Store {
    /// The embedded store in a fresh data directory.
    Embedded,
    /// A fresh PostgreSQL database, one node.
    Postgres,
    /// A fresh PostgreSQL database shared by [`CLUSTER_NODES`] nodes, each
    /// request to the next node.
    Cluster,
}

/// Nodes of a cluster run.
const CLUSTER_NODES: usize = 3;

/// One run against `binary`: fresh servers and data directories (and a
/// fresh database, `url`, on PostgreSQL).
fn run(binary: &Path, store: Store, url: Option<&str>) -> Figures {
    let nodes = if store == Store::Cluster {
        CLUSTER_NODES
    } else {
        1
    };
    let dirs: Vec<tempfile::TempDir> = (0..nodes)
        .map(|_| tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let servers: Vec<Server> = dirs
        .iter()
        .map(|dir| {
            let listen = format!("127.0.0.1:{}", postgres_server::free_port());
            let advertise = format!("http://{listen}");
            let mut flags = vec![
                "--pool-size",
                "4",
                "--listen",
                &listen,
                "--body-limit",
                "100000000",
            ];
            if let Some(url) = url {
                flags.extend(["--store", url]);
            }
            if store == Store::Cluster {
                flags.extend(["--advertise", &advertise]);
            }
            Server::start_binary(binary, dir.path(), &flags)
        })
        .collect();
    let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
    let client = Client::new(&bases);
    client.two_call(&nine_tools(), Duration::ZERO);
    let mut figures = Figures::new();
    let only = std::env::var("BATON_BENCH_ONLY").ok();
    if store != Store::Cluster && matches!(only.as_deref(), None | Some("files")) {
        session_files(&servers[0], &mut figures);
    }
    if only.as_deref() == Some("files") {
        return figures;
    }
    if only.as_deref() == Some("load") {
        figures.push(("rounds/s, 32 clients", rounds_per_second(&bases, 32)));
        return figures;
    }
    if only.as_deref() != Some("throughput") {
        alone(&client, &mut figures);
        if store != Store::Cluster {
            checked_tools(&client, &mut figures);
        }
    }
    for (clients, name) in [
        (1, "rounds/s, 1 client"),
        (8, "rounds/s, 8 clients"),
        (32, "rounds/s, 32 clients"),
    ] {
        figures.push((name, rounds_per_second(&bases, clients)));
        std::thread::sleep(Duration::from_millis(300));
    }
    if only.as_deref() == Some("throughput") {
        return figures;
    }
    if store != Store::Cluster {
        let pid = servers[0].pid().unwrap_or_else(|| panic!("no server pid"));
        large_rounds(&client, pid, &mut figures);
    }
    figures
}

fn main() {
    let this = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    let before = std::env::var_os("BATON_BENCH_BEFORE").map(PathBuf::from);
    // With BATON_BENCH_POSTGRES=1: this build on sled and on a PostgreSQL
    // server started here (`tests/common/postgres.rs`), side by side.
    let postgres =
        std::env::var_os("BATON_BENCH_POSTGRES").map(|_| postgres_server::Postgres::start());
    let mut builds: Vec<(&str, PathBuf, Store)> = Vec::new();
    if let Some(before) = &before {
        builds.push(("before", before.clone(), Store::Embedded));
    }
    builds.push(("this build", this.clone(), Store::Embedded));
    if postgres.is_some() {
        if let Some(before) = before {
            builds.push(("before on PostgreSQL", before, Store::Postgres));
        }
        builds.push(("this build on PostgreSQL", this.clone(), Store::Postgres));
        builds.push(("3 nodes on PostgreSQL", this, Store::Cluster));
    }
    let mut runs: Vec<Vec<Figures>> = vec![Vec::new(); builds.len()];
    for index in 0..RUNS {
        for (slot, (label, binary, store)) in builds.iter().enumerate() {
            let url = postgres
                .as_ref()
                .filter(|_| *store != Store::Embedded)
                .map(|server| server.database(&format!("bench_{index}_{slot}")));
            let figures = run(binary, *store, url.as_deref());
            eprintln!("run {} of {RUNS}, {label}: {figures:?}", index + 1);
            runs[slot].push(figures);
        }
    }
    let header: Vec<&str> = builds.iter().map(|(label, _, _)| *label).collect();
    println!("| measure | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(builds.len()));
    let names: Vec<&'static str> = runs[0][0].iter().map(|(name, _)| *name).collect();
    for name in names {
        let cells: Vec<String> = runs
            .iter()
            .map(|build_runs| {
                let mut values: Vec<f64> = build_runs
                    .iter()
                    .filter_map(|f| f.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
                    .collect();
                let value = median(&mut values);
                if value.is_nan() {
                    "—".to_owned()
                } else {
                    format!("{value:.2}")
                }
            })
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}
