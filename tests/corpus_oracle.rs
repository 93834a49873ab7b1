//! The differential corpus: every program in `tests/corpus/` runs under
//! CPython 3.11 (the oracle, tools answered by `tests/oracle/answers.py`)
//! and under baton three ways: hot resume at every pause, cold replay at
//! every pause (the child evicted between rounds), and mixed. Calls round by
//! round, stdout, the error line and the traceback's frames must all equal
//! the oracle's.
//!
//! The oracle runs the program as written, with CPython's own compiler and
//! asyncio and every tool a coroutine function (`OracleMode::Native`): so
//! baton must make exactly CPython's calls in CPython's rounds. A program
//! that uses baton's extension (calls without `await`, which CPython cannot
//! run) says `# oracle: runtime` and is compared with the same rewrite and
//! runtime under CPython instead.
//! Every program must agree with CPython: there is no list of accepted
//! differences (the README lists what RustPython does differently, and no
//! corpus program depends on it).

mod common;

use std::path::PathBuf;

use baton::engine::Engine;
use baton::program::{Program, ProgramLimits};
use common::{
    Compared, OracleMode, OracleRun, corpus_programs, corpus_tools, engine, final_error, oracle,
    run_to_end, spec,
};
use serde_json::Value;

const SEED: [u8; 32] = [42; 32];

#[derive(Clone, Copy, Debug)]
enum Mode {
    Hot,
    Cold,
    Mixed,
}

impl Mode {
    fn evicts(self, round: usize) -> bool {
        match self {
            Mode::Hot => false,
            Mode::Cold => true,
            Mode::Mixed => round % 2 == 1,
        }
    }
}

fn expected(run: &OracleRun) -> Compared {
    Compared::of_oracle(run)
}

async fn run_baton(engine: &Engine, source: &str, oracle_run: &OracleRun, mode: Mode) -> Compared {
    let mut record = engine
        .prepare(spec(source, corpus_tools(), 60_000))
        .unwrap_or_else(|e| panic!("prepare: {e}"));
    let mut used: Vec<(usize, usize)> = Vec::new();
    let answer = |round: usize, tool: &str, input: &Value| {
        oracle_run.result_of(round, tool, input, &mut used)
    };
    let (step, calls) = run_to_end(engine, &mut record, answer, |round| mode.evicts(round)).await;
    Compared::new(calls, &record.stdout, final_error(step), &record.stderr)
}

/// Checks one program; returns what differed.
async fn check(engine: &Engine, path: &PathBuf) -> Vec<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!("corpus: {name}");
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let program = Program::build(&source, &corpus_tools(), ProgramLimits::default(), &[], &[])
        .unwrap_or_else(|(error, _)| panic!("{name}: {error}"))
        .to_json();
    let oracle_run = oracle(&program, SEED, OracleMode::of_source(&source));
    let mut problems = Vec::new();
    let hot = run_baton(engine, &source, &oracle_run, Mode::Hot).await;
    if hot != expected(&oracle_run) {
        problems.push(format!(
            "{name}: hot run differs from CPython\n  cpython: {:?}\n  baton:   {hot:?}",
            expected(&oracle_run)
        ));
    }
    for mode in [Mode::Cold, Mode::Mixed] {
        let other = run_baton(engine, &source, &oracle_run, mode).await;
        if other != hot {
            problems.push(format!(
                "{name}: {mode:?} run differs from hot\n  hot:   {hot:?}\n  {mode:?}: {other:?}"
            ));
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_matches_cpython_hot_cold_and_mixed() {
    let programs = corpus_programs();
    let filtered = std::env::var("BATON_CORPUS_ONLY").is_ok();
    assert!(
        filtered || programs.len() >= 60,
        "the corpus has only {} programs",
        programs.len()
    );
    let engine = engine();
    let mut problems = Vec::new();
    for path in &programs {
        problems.extend(check(&engine, path).await);
    }
    assert!(
        problems.is_empty(),
        "{} differences over {} programs:\n{}",
        problems.len(),
        programs.len(),
        problems.join("\n")
    );
}
