//! Helpers shared by the integration tests: an engine with real children,
//! the CPython oracle, and small conveniences.

#![allow(dead_code)]

pub(crate) mod files;
pub(crate) mod librechat;
pub(crate) mod postgres;
pub(crate) mod server;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use baton::engine::{ClockSource, Engine, EngineConfig, ExecutionSpec, Step};
use baton::journal::{CallResult, ExecutionRecord};
use baton::tools::{ToolDef, WireTool};
use serde_json::Value;

/// The repository root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fixed clock the oracle uses too.
pub(crate) const WALL0: f64 = 1_767_225_600.0;
/// Seconds between rounds on the fixed clock.
pub(crate) const STEP: f64 = 2.5;

/// An engine whose children come from the built binary, on the fixed clock.
pub(crate) fn engine() -> Arc<Engine> {
    engine_with(|_| {})
}

/// A runtime for tests that drive the engine from synchronous code (a
/// proptest body), and an engine made inside it.
pub(crate) fn runtime_with_engine() -> (tokio::runtime::Runtime, Arc<Engine>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let engine = runtime.block_on(async { engine() });
    (runtime, engine)
}

/// An engine with adjusted configuration.
pub(crate) fn engine_with(adjust: impl FnOnce(&mut EngineConfig)) -> Arc<Engine> {
    let mut config = EngineConfig::new(PathBuf::from(env!("CARGO_BIN_EXE_baton")));
    config.pool_size = 2;
    config.clock = ClockSource::Fixed {
        wall0: WALL0,
        step: STEP,
    };
    adjust(&mut config);
    Engine::new(config).unwrap_or_else(|e| panic!("engine: {e}"))
}

/// Tools from request-style JSON.
pub(crate) fn tools(json: &str) -> Vec<ToolDef> {
    let wire: Vec<WireTool> = serde_json::from_str(json).unwrap_or_else(|e| panic!("tools: {e}"));
    wire.into_iter().map(Into::into).collect()
}

/// The corpus tool set.
pub(crate) fn corpus_tools() -> Vec<ToolDef> {
    let text = std::fs::read_to_string(root().join("tests/oracle/tools.json"))
        .unwrap_or_else(|e| panic!("tools.json: {e}"));
    tools(&text)
}

/// A spec with a fixed seed.
pub(crate) fn spec(source: &str, tools: Vec<ToolDef>, timeout_ms: u64) -> ExecutionSpec {
    ExecutionSpec {
        source: source.to_owned(),
        tools,
        timeout_ms,
        session_id: "test".into(),
        seed: Some([42; 32]),
        files: Vec::new(),
        argv: Vec::new(),
        policy: Default::default(),
        lang: Default::default(),
        read_only: Vec::new(),
        directories: Vec::new(),
    }
}

/// A value result.
pub(crate) fn value(json: Value) -> CallResult {
    CallResult::Value(json.to_string())
}

/// Runs to the end answering every call with `answer(tool, input)`;
/// `cold(round)` says whether to evict the child before resuming that round.
pub(crate) async fn run_to_end(
    engine: &Engine,
    record: &mut ExecutionRecord,
    mut answer: impl FnMut(usize, &str, &Value) -> CallResult,
    cold: impl Fn(usize) -> bool,
) -> (Step, Vec<Vec<(String, Value)>>) {
    let mut step = engine
        .start(record)
        .await
        .unwrap_or_else(|e| panic!("start: {e}"));
    let mut rounds = Vec::new();
    while let Step::Paused(calls) = &step {
        let round = rounds.len();
        let seen: Vec<(String, Value)> = calls
            .iter()
            .map(|c| {
                (
                    c.tool.clone(),
                    serde_json::from_str(&c.input).unwrap_or(Value::Null),
                )
            })
            .collect();
        let results = seen
            .iter()
            .map(|(tool, input)| answer(round, tool, input))
            .collect();
        rounds.push(seen);
        if cold(round) {
            engine.evict(&record.id);
        }
        step = engine
            .resume(record, results)
            .await
            .unwrap_or_else(|e| panic!("resume: {e}"))
            .0;
        assert!(rounds.len() < 200, "runaway program: {:?}", &rounds[190..]);
    }
    (step, rounds)
}

/// What the oracle printed.
pub(crate) struct OracleRun {
    pub stdout: String,
    pub stderr: String,
    pub error: Option<String>,
    pub rounds: Vec<Vec<OracleCall>>,
}

impl OracleRun {
    /// The oracle's result for the call `tool(input)` in round `round`;
    /// each of the oracle's calls answers once (`used` keeps the ones
    /// taken). A call the oracle did not make gets an error result.
    pub(crate) fn result_of(
        &self,
        round: usize,
        tool: &str,
        input: &Value,
        used: &mut Vec<(usize, usize)>,
    ) -> CallResult {
        let calls = self.rounds.get(round).map(Vec::as_slice).unwrap_or(&[]);
        let found = calls.iter().enumerate().position(|(index, call)| {
            call.tool == tool && &call.input == input && !used.contains(&(round, index))
        });
        match found {
            Some(index) => {
                used.push((round, index));
                calls[index].result.clone()
            }
            None => CallResult::Error(format!("the oracle made no call {tool} {input} here")),
        }
    }

    /// The calls of every round: tool name and input.
    pub(crate) fn calls(&self) -> Vec<Vec<(String, Value)>> {
        self.rounds
            .iter()
            .map(|round| {
                round
                    .iter()
                    .map(|c| (c.tool.clone(), c.input.clone()))
                    .collect()
            })
            .collect()
    }
}

/// How a run that ended at `step` ended: `None` when completed, else its
/// error line.
pub(crate) fn final_error(step: Step) -> Option<String> {
    match step {
        Step::Completed => None,
        Step::Failed(error) => Some(error.to_string()),
        Step::Paused(_) => Some("still paused".into()),
    }
}

/// One call the oracle answered.
pub(crate) struct OracleCall {
    pub tool: String,
    pub input: Value,
    pub result: CallResult,
}

/// How the CPython oracle runs a program (see `tests/oracle/harness.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OracleMode {
    /// The source as written, CPython's own asyncio, tools as coroutine
    /// functions: what CPython does with the program.
    Native,
    /// The program as a baton child runs it (rewrite and runtime), for
    /// programs that use baton's extensions (calls without `await`).
    Runtime,
}

impl OracleMode {
    /// The mode a corpus program asks for: `Runtime` when a line of it is
    /// `# oracle: runtime`.
    pub(crate) fn of_source(source: &str) -> OracleMode {
        if source
            .lines()
            .any(|line| line.starts_with("# oracle: runtime"))
        {
            OracleMode::Runtime
        } else {
            OracleMode::Native
        }
    }

    fn name(self) -> &'static str {
        match self {
            OracleMode::Native => "native",
            OracleMode::Runtime => "runtime",
        }
    }
}

/// Runs a program under CPython with the same seed and clock, tools
/// answered by `tests/oracle/answers.py`.
pub(crate) fn oracle(program_json: &str, seed: [u8; 32], mode: OracleMode) -> OracleRun {
    oracle_answering(program_json, seed, None, mode)
}

/// Runs a program under CPython; with `table`, the n-th call gets entry n
/// modulo its length (`{"ok", "value", "message"}`, see the harness).
pub(crate) fn oracle_answering(
    program_json: &str,
    seed: [u8; 32],
    table: Option<&Value>,
    mode: OracleMode,
) -> OracleRun {
    let mut request = serde_json::json!({
        "program": serde_json::from_str::<Value>(program_json).unwrap_or(Value::Null),
        "seed": hex::encode(seed),
        "wall0": WALL0,
        "step": STEP,
        "mode": mode.name(),
    });
    if let Some(table) = table {
        request["answer_table"] = table.clone();
    }
    OracleRun::from_report(&run_harness(&request))
}

/// Runs `tests/oracle/harness.py` on `request`; its JSON answer.
pub(crate) fn run_harness(request: &Value) -> Value {
    let mut child = Command::new("python3")
        .arg(root().join("tests/oracle/harness.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(request.to_string().as_bytes());
    }
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle output is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

impl OracleRun {
    /// A run as the harness reports it (a program's, or one cell's).
    pub(crate) fn from_report(report: &Value) -> OracleRun {
        let rounds = report["rounds"]
            .as_array()
            .map(|rounds| {
                rounds
                    .iter()
                    .map(|round| {
                        round
                            .as_array()
                            .map(|calls| calls.iter().map(oracle_call).collect())
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default();
        OracleRun {
            stdout: report["stdout"].as_str().unwrap_or_default().to_owned(),
            stderr: report["stderr"].as_str().unwrap_or_default().to_owned(),
            error: report["error"].as_str().map(str::to_owned),
            rounds,
        }
    }

    /// The oracle's answer to `call` (a `tool_calls` entry of a paused
    /// reply) in round `round`, as a `tool_results` entry (see
    /// [`OracleRun::result_of`]).
    pub(crate) fn tool_result(
        &self,
        round: usize,
        call: &Value,
        used: &mut Vec<(usize, usize)>,
    ) -> Value {
        let tool = call["name"].as_str().unwrap_or_default();
        match self.result_of(round, tool, &call["input"], used) {
            CallResult::Value(text) => serde_json::json!({"call_id": call["id"],
                "result": serde_json::from_str::<Value>(&text)
                    .unwrap_or_else(|e| panic!("the oracle's answer {text}: {e}")),
                "is_error": false}),
            CallResult::Error(message) => serde_json::json!({"call_id": call["id"],
                "result": null, "is_error": true, "error_message": message}),
        }
    }
}

fn oracle_call(call: &Value) -> OracleCall {
    let payload = call["payload"].as_str().unwrap_or_default().to_owned();
    OracleCall {
        tool: call["tool"].as_str().unwrap_or_default().to_owned(),
        input: serde_json::from_str(call["input"].as_str().unwrap_or("null"))
            .unwrap_or(Value::Null),
        result: if call["ok"].as_bool().unwrap_or(false) {
            CallResult::Value(payload)
        } else {
            CallResult::Error(payload)
        },
    }
}

/// The corpus programs; `BATON_CORPUS_ONLY=<part of a file name>` keeps the
/// matching ones (for debugging one program).
pub(crate) fn corpus_programs() -> Vec<PathBuf> {
    programs_in("tests/corpus", "BATON_CORPUS_ONLY")
}

/// The `.py` files of `folder` (from the repository root), sorted; the
/// variable `only`, when set, keeps the names that contain it.
pub(crate) fn programs_in(folder: &str, only: &str) -> Vec<PathBuf> {
    let only = std::env::var(only).unwrap_or_default();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(folder))
        .unwrap_or_else(|e| panic!("{folder}: {e}"))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "py"))
        .filter(|path| path.to_string_lossy().contains(only.as_str()))
        .collect();
    paths.sort();
    paths
}

/// What a run did, as baton's and CPython's are compared: the calls of
/// each round (in a canonical order), stdout, the error line, the
/// traceback's frames.
#[derive(Debug, PartialEq)]
pub(crate) struct Compared {
    pub calls: Vec<Vec<(String, Value)>>,
    pub stdout: String,
    pub error: Option<String>,
    pub frames: Vec<String>,
}

impl Compared {
    /// A run of `calls`, `stdout`, `error` and `stderr`.
    pub(crate) fn new(
        calls: Vec<Vec<(String, Value)>>,
        stdout: &str,
        error: Option<String>,
        stderr: &str,
    ) -> Compared {
        Compared {
            calls: canonical(calls),
            stdout: stdout.to_owned(),
            error,
            frames: frames(stderr),
        }
    }

    /// What the oracle's run did.
    pub(crate) fn of_oracle(run: &OracleRun) -> Compared {
        Compared::new(run.calls(), &run.stdout, run.error.clone(), &run.stderr)
    }
}

/// The traceback lines that must match: frames and the final line.
pub(crate) fn frames(stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let mut kept: Vec<String> = lines
        .iter()
        .filter(|l| l.starts_with("  File "))
        .map(|l| (*l).to_owned())
        .collect();
    if let Some(last) = lines.last() {
        kept.push((*last).to_owned());
    }
    kept
}

/// The calls of each round in a canonical order: a round's calls are made
/// together (the client runs them in parallel), and CPython's order within
/// one can depend on set iteration (`as_completed`).
pub(crate) fn canonical(mut rounds: Vec<Vec<(String, Value)>>) -> Vec<Vec<(String, Value)>> {
    for round in &mut rounds {
        round.sort_by_key(|(tool, input)| format!("{tool}\u{0}{input}"));
    }
    rounds
}
