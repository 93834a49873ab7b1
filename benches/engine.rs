//! Engine benchmark (not a test): start to first pause, hot resume, cold
//! resume of a 20-round loop, and the private memory of a parked child.
//!
//! Run: `cargo bench --ignore-rust-version --bench engine` (release), or with
//! `--profile dev` to reuse the test build. Prints medians and p90s.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use baton::engine::{ClockSource, Engine, EngineConfig, ExecutionSpec, Step};
use baton::journal::CallResult;
use baton::tools::{ToolDef, WireTool};

/// The binary children come from: `BATON_BIN`, or the one built with
/// this bench (so two builds can be measured side by side in one run).
fn exe() -> PathBuf {
    std::env::var_os("BATON_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_baton")))
}

fn tools() -> Vec<ToolDef> {
    let wire: Vec<WireTool> = serde_json::from_str(
        r#"[{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {}}}}]"#,
    )
    .unwrap_or_default();
    wire.into_iter().map(Into::into).collect()
}

fn spec(source: &str) -> ExecutionSpec {
    ExecutionSpec {
        source: source.into(),
        tools: tools(),
        timeout_ms: 60_000,
        session_id: "bench".into(),
        seed: None,
        files: Vec::new(),
        argv: Vec::new(),
        policy: Default::default(),
        lang: Default::default(),
        read_only: Vec::new(),
        directories: Vec::new(),
    }
}

fn answer() -> Vec<CallResult> {
    vec![CallResult::Value(r#"{"temp": 21}"#.into())]
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "{name:<34} median {:>9.3} ms   p90 {:>9.3} ms   (n={})",
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.9).as_secs_f64() * 1e3,
        samples.len()
    );
}

fn private_kb(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some(field("Private_Clean:") + field("Private_Dirty:"))
}

/// Pause between iterations so the pool refills and the machine is quiet
/// again (a new child forks and rehearses in 4 to 10 ms of CPU);
/// `BATON_BENCH_SETTLE_MS` overrides it.
fn settle_ms() -> u64 {
    std::env::var("BATON_BENCH_SETTLE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

const LOOP20: &str = "total = 0\nfor i in range(20):\n    w = await get_weather(city=str(i))\n    total += w['temp']\nprint(total)\n";

#[tokio::main]
async fn main() {
    let mut config = EngineConfig::new(exe());
    config.pool_size = 4;
    config.clock = ClockSource::Real;
    let engine = Engine::new(config).unwrap_or_else(|e| panic!("engine: {e}"));
    // Warm: the zygote builds its interpreter before the first fork answers.
    let mut warm = engine
        .prepare(spec("pass"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = engine.start(&mut warm).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Starts alone: start, evict, let the pool refill. Each source is a row.
    for (name, source) in [
        ("start to first pause (20-round loop)", LOOP20),
        (
            "start to first pause, one await",
            "w = await get_weather(city='x')",
        ),
        (
            "start to first pause, call without await",
            "w = get_weather(city='x')\nprint(w['temp'])",
        ),
        ("start to end, `pass`", "pass"),
    ] {
        let mut samples = Vec::new();
        for _ in 0..100 {
            let mut record = engine
                .prepare(spec(source))
                .unwrap_or_else(|e| panic!("{e}"));
            let began = Instant::now();
            let _ = engine.start(&mut record).await;
            samples.push(began.elapsed());
            engine.evict(&record.id);
            tokio::time::sleep(Duration::from_millis(settle_ms())).await;
        }
        summary(name, samples);
    }

    // Hot resumes of a parked child, after the pool has settled.
    let mut hot = Vec::new();
    for _ in 0..100 {
        let mut record = engine
            .prepare(spec(LOOP20))
            .unwrap_or_else(|e| panic!("{e}"));
        let step = engine
            .start(&mut record)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(step, Step::Paused(_)));
        tokio::time::sleep(Duration::from_millis(settle_ms())).await;
        for _ in 0..3 {
            let began = Instant::now();
            let _ = engine.resume(&mut record, answer()).await;
            hot.push(began.elapsed());
        }
        engine.evict(&record.id);
        tokio::time::sleep(Duration::from_millis(settle_ms())).await;
    }
    summary("hot resume", hot);

    let mut cold = Vec::new();
    for _ in 0..30 {
        let mut record = engine
            .prepare(spec(LOOP20))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut step = engine
            .start(&mut record)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..19 {
            step = engine
                .resume(&mut record, answer())
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .0;
        }
        assert!(matches!(step, Step::Paused(_)));
        engine.evict(&record.id);
        let began = Instant::now();
        let (step, _) = engine
            .resume(&mut record, answer())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        cold.push(began.elapsed());
        assert_eq!(step, Step::Completed, "{}", record.stderr);
    }
    summary("cold resume, 20-round loop", cold);

    let mut parked = Vec::new();
    for _ in 0..20 {
        let mut record = engine
            .prepare(spec(LOOP20))
            .unwrap_or_else(|e| panic!("{e}"));
        let _ = engine.start(&mut record).await;
        let _ = engine.resume(&mut record, answer()).await;
        parked.push(record.id);
    }
    let mut kb: Vec<u64> = parked
        .iter()
        .filter_map(|id| engine.parked_pid(id))
        .filter_map(private_kb)
        .collect();
    kb.sort();
    if let Some(median) = kb.get(kb.len() / 2) {
        println!(
            "parked child private memory        median {:>9.2} MB   max {:.2} MB (n={})",
            *median as f64 / 1024.0,
            kb.last().copied().unwrap_or(0) as f64 / 1024.0,
            kb.len()
        );
    }
}
