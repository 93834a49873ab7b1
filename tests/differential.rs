//! The differential replay fuzzer.
//!
//! Random LLM-style programs with random tool answers (`differential/
//! generator.rs`) run three ways: under CPython 3.11 straight through with
//! the answers given inline (the oracle harness), and under baton resumed
//! hot at every pause, and replayed cold at every pause with the child
//! killed between rounds. All three must give the same stdout, the same
//! tool calls (name and input, round by round) and the same final status
//! and error line.
//!
//! In the normal suite it runs `BATON_DIFFERENTIAL_CASES` cases (default
//! 256) from a fixed seed, so CI is reproducible. As the long-running
//! fuzzer:
//!
//! ```text
//! BATON_DIFFERENTIAL_CASES=100000 BATON_DIFFERENTIAL_SEED=random \
//!   cargo nextest run --ignore-rust-version --test differential --no-capture
//! ```
//!
//! A failure prints the shrunk program and its answers.

mod common;

#[path = "differential/generator.rs"]
mod generator;

use std::sync::Arc;

use baton::engine::Engine;
use baton::journal::CallResult;
use baton::program::{Program, ProgramLimits};
use common::{OracleMode, final_error, oracle_answering, run_to_end, spec, tools};
use generator::{Answer, Case, TOOLS};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use serde_json::Value;

const ENTROPY_SEED: [u8; 32] = [42; 32];
const DEFAULT_CASES: u32 = 256;
const DEFAULT_SEED: u64 = 0x6261_746f_6e21;

/// What a run produced, in the terms all three ways share.
#[derive(Debug, PartialEq)]
struct Outcome {
    calls: Vec<Vec<(String, Value)>>,
    stdout: String,
    error: Option<String>,
}

fn answer_of(answers: &[Answer], index: usize) -> CallResult {
    match &answers[index % answers.len()] {
        Answer::Value(value) => CallResult::Value(value.to_string()),
        Answer::Error(message) => CallResult::Error(message.clone()),
    }
}

fn oracle_outcome(case: &Case, program: &str) -> Outcome {
    let table = case.table();
    let mode = if case.is_valid_cpython() {
        OracleMode::Native
    } else {
        OracleMode::Runtime
    };
    let run = oracle_answering(program, ENTROPY_SEED, Some(&table), mode);
    Outcome {
        calls: run.calls(),
        stdout: run.stdout,
        error: run.error,
    }
}

async fn baton_outcome(
    engine: &Engine,
    case: &Case,
    source: &str,
    kill_between_rounds: bool,
) -> Outcome {
    let mut record = engine
        .prepare(spec(source, tools(TOOLS), 60_000))
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    let mut made = 0;
    let answer = |_round: usize, _tool: &str, _input: &Value| {
        made += 1;
        answer_of(&case.answers, made - 1)
    };
    let (step, calls) = run_to_end(engine, &mut record, answer, |_| kill_between_rounds).await;
    Outcome {
        calls,
        stdout: record.stdout.clone(),
        error: final_error(step),
    }
}

/// What the cases did, reported at the end (shows the generator exercises
/// pauses, batches and failures, not only trivial programs).
#[derive(Default)]
struct Tally {
    cases: usize,
    rounds: usize,
    calls: usize,
    batched_rounds: usize,
    failed: usize,
}

impl Tally {
    fn summary(&self) -> String {
        format!(
            "{} cases agreed: {} rounds ({} batched), {} calls, {} ended with an uncaught error",
            self.cases, self.rounds, self.batched_rounds, self.calls, self.failed
        )
    }
}

fn check(
    runtime: &tokio::runtime::Runtime,
    engine: &Arc<Engine>,
    case: &Case,
    tally: &mut Tally,
) -> Result<(), TestCaseError> {
    let source = case.source();
    let program = Program::build(&source, &tools(TOOLS), ProgramLimits::default(), &[], &[])
        .map_err(|(error, _)| TestCaseError::fail(format!("the rewrite refused: {error}")))?
        .to_json();
    let oracle = oracle_outcome(case, &program);
    let hot = runtime.block_on(baton_outcome(engine, case, &source, false));
    let cold = runtime.block_on(baton_outcome(engine, case, &source, true));
    let explain = |way: &str, got: &Outcome| {
        format!(
            "{way} differs from the CPython oracle\n--- oracle\n{oracle:#?}\n--- {way}\n{got:#?}"
        )
    };
    if hot != oracle {
        return Err(TestCaseError::fail(explain("hot resume", &hot)));
    }
    if cold != oracle {
        return Err(TestCaseError::fail(explain("cold replay", &cold)));
    }
    tally.cases += 1;
    tally.rounds += oracle.calls.len();
    tally.calls += oracle.calls.iter().map(Vec::len).sum::<usize>();
    tally.batched_rounds += oracle.calls.iter().filter(|r| r.len() > 1).count();
    tally.failed += usize::from(oracle.error.is_some());
    if tally.cases.is_multiple_of(500) {
        eprintln!("differential: {}", tally.summary());
    }
    Ok(())
}

fn setting<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn seed() -> u64 {
    match std::env::var("BATON_DIFFERENTIAL_SEED").as_deref() {
        Ok("random") => rand::random(),
        _ => setting("BATON_DIFFERENTIAL_SEED").unwrap_or(DEFAULT_SEED),
    }
}

#[test]
fn programs_agree_with_the_oracle_hot_and_cold() {
    let cases = setting("BATON_DIFFERENTIAL_CASES").unwrap_or(DEFAULT_CASES);
    let seed = seed();
    eprintln!("differential: {cases} cases from seed {seed}");
    let (runtime, engine) = common::runtime_with_engine();
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 400,
        ..Config::default()
    };
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let started = std::time::Instant::now();
    let tally = std::cell::RefCell::new(Tally::default());
    let result = runner.run(&generator::case(), |case| {
        check(&runtime, &engine, &case, &mut tally.borrow_mut())
    });
    let tally = tally.into_inner();
    eprintln!(
        "differential: {} in {:.1} s",
        tally.summary(),
        started.elapsed().as_secs_f64()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => panic!(
            "seed {seed}: {reason}\n--- program\n{}--- answers\n{}",
            case.source(),
            case.table()
        ),
        Err(TestError::Abort(reason)) => panic!("seed {seed}: aborted: {reason}"),
    }
}
