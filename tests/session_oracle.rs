//! Python sessions against CPython: every program of `tests/sessions/` is
//! a list of cells (split at `# %% cell` lines). CPython 3.11 runs them as
//! one process would (one globals dict, one event loop, top-level await,
//! tools as coroutine functions answered by `tests/oracle/answers.py`;
//! `tests/oracle/harness.py`), and a real `baton serve` runs them as cells
//! of one session over HTTP, answering every call with the oracle's
//! answer, four ways: without a kill; with `kill -9` of the server
//! between every two cells; with `kill -9` at every pause of every cell;
//! and with `kill -9` between every two cells on a server that compacts a
//! session at two cells (every cell from the third first folds the earlier
//! ones into a base: what a compaction cannot carry is named in `lost`,
//! and only the programs of `LOSE_NAMES` may lose any).
//! Per cell, the calls of each round, stdout, the error line and the
//! traceback's frames must equal CPython's, and the answer must say where
//! the namespace came from: `new` for the first cell, `hot` when the child
//! that ran the last cell held it, `cold` after a restart (rebuilt by
//! replaying the earlier cells).
//!
//! `BATON_SESSIONS_ONLY=<part of a name>` keeps matching programs. The
//! whole corpus, all three ways, takes about 30 s (one server, restarted
//! at each kill), in CI too.

mod common;

use std::path::PathBuf;

use baton::program::{Program, ProgramLimits};
use common::server::Server;
use common::{Compared, OracleRun, corpus_tools, programs_in, root, run_harness};
use serde_json::{Value, json};

/// How the server is killed while a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kills {
    Never,
    BetweenCells,
    AtEveryPause,
    /// Between every two cells, on a server that compacts a session at
    /// two cells (from the third cell on, every cell folds the earlier
    /// ones into a base first).
    BetweenCompactedCells,
}

/// Programs that keep across cells what no compaction can carry (a task,
/// a generator): named in `lost`, and not compared after.
const LOSE_NAMES: [&str; 2] = ["s04_task_lives_on.py", "s06_files_between_cells.py"];

fn session_programs() -> Vec<PathBuf> {
    programs_in("tests/sessions", "BATON_SESSIONS_ONLY")
}

fn cells_of(source: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    for line in source.split_inclusive('\n') {
        if line.trim_end() == "# %% cell" {
            cells.push(String::new());
        } else if let Some(cell) = cells.last_mut() {
            cell.push_str(line);
        }
    }
    cells
}

/// Runs the cells under CPython as one session: one run per cell.
fn oracle(cells: &[String]) -> Vec<OracleRun> {
    let programs: Vec<Value> = cells
        .iter()
        .map(|cell| {
            let program = Program::build(cell, &corpus_tools(), ProgramLimits::default(), &[], &[])
                .unwrap_or_else(|(error, _)| panic!("{error}"));
            serde_json::from_str(&program.to_json()).unwrap_or(Value::Null)
        })
        .collect();
    let seeds: Vec<String> = (0..cells.len())
        .map(|k| hex::encode([k as u8; 32]))
        .collect();
    let request =
        json!({"cells": programs, "seeds": seeds, "seed": seeds[0], "wall0": 1.0e9, "step": 1.0});
    let reply = run_harness(&request);
    reply["cells"]
        .as_array()
        .unwrap_or_else(|| panic!("no cells: {reply}"))
        .iter()
        .map(OracleRun::from_report)
        .collect()
}

fn tools_json() -> Value {
    let text = std::fs::read_to_string(root().join("tests/oracle/tools.json"))
        .unwrap_or_else(|e| panic!("tools.json: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("tools.json: {e}"))
}

/// Runs the cells as one session of `server`, killing it as `kills` says.
fn run_session(
    server: &mut Server,
    cells: &[String],
    oracle: &[OracleRun],
    kills: Kills,
) -> Session {
    let (status, created) = server.post("/sessions", &json!({}));
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut runs = Vec::new();
    let mut resumed = Vec::new();
    let mut lost_at = None;
    for (index, code) in cells.iter().enumerate() {
        if matches!(kills, Kills::BetweenCells | Kills::BetweenCompactedCells) && index > 0 {
            server.restart();
        }
        let (status, mut reply) = server.post(
            &format!("/sessions/{id}/exec"),
            &json!({"code": code, "tools": tools_json()}),
        );
        assert_eq!(status, 200, "cell {}: {reply}", index + 1);
        assert_eq!(reply["session"]["cell"], index + 1, "{reply}");
        resumed.push(
            reply["session"]["resumed"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        if lost_at.is_none()
            && reply["session"]["lost"]
                .as_array()
                .is_some_and(|lost| !lost.is_empty())
        {
            lost_at = Some(index);
        }
        let mut calls = Vec::new();
        let mut used = Vec::new();
        while reply["status"] == "tool_call_required" {
            let round = calls.len();
            let pending = reply["tool_calls"].as_array().cloned().unwrap_or_default();
            calls.push(
                pending
                    .iter()
                    .map(|c| {
                        (
                            c["name"].as_str().unwrap_or_default().to_owned(),
                            c["input"].clone(),
                        )
                    })
                    .collect::<Vec<_>>(),
            );
            assert!(calls.len() < 50, "runaway cell {}", index + 1);
            let results: Vec<Value> = pending
                .iter()
                .map(|c| oracle[index].tool_result(round, c, &mut used))
                .collect();
            if kills == Kills::AtEveryPause {
                server.restart();
            }
            let (status, next) = server.post(
                "/exec/programmatic",
                &json!({"continuation_token": reply["continuation_token"], "tool_results": results}),
            );
            assert_eq!(status, 200, "cell {}: {next}", index + 1);
            assert_eq!(next["session"]["cell"], index + 1, "{next}");
            reply = next;
        }
        runs.push(Compared::new(
            calls,
            reply["stdout"].as_str().unwrap_or_default(),
            reply["error"].as_str().map(str::to_owned),
            reply["stderr"].as_str().unwrap_or_default(),
        ));
    }
    let (status, view) = server.get(&format!("/sessions/{id}"), Some(common::server::KEY));
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        view["cells"],
        cells.len(),
        "every cell ended by itself: {view}"
    );
    Session {
        runs,
        resumed,
        lost_at,
    }
}

/// What a session's cells did under baton.
struct Session {
    runs: Vec<Compared>,
    resumed: Vec<String>,
    /// The first cell whose answer named names a compaction lost.
    lost_at: Option<usize>,
}

fn check(server: &mut Server, path: &PathBuf, kills: Kills) -> Vec<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!("session corpus: {name} ({kills:?})");
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let cells = cells_of(&source);
    let cpython = oracle(&cells);
    let Session {
        runs,
        resumed,
        lost_at,
    } = run_session(server, &cells, &cpython, kills);
    let mut problems = Vec::new();
    let loses = LOSE_NAMES.contains(&name.as_str());
    if lost_at.is_some() != (loses && kills == Kills::BetweenCompactedCells) {
        problems.push(format!(
            "{name} ({kills:?}): names lost at cell {lost_at:?}"
        ));
    }
    let compared = lost_at.unwrap_or(runs.len());
    for (index, (run, want)) in runs.iter().zip(&cpython).take(compared).enumerate() {
        let want = Compared::of_oracle(want);
        if run != &want {
            problems.push(format!(
                "{name} ({kills:?}) cell {}:\n  cpython: {want:?}\n  baton:   {run:?}",
                index + 1,
            ));
        }
    }
    // After a restart the namespace is rebuilt (cold); else the child that
    // ran the last cell (or the last stretch of it, after a restart inside
    // its pause) holds it (hot).
    // A compaction rebuilds it too (cold).
    let later = if kills == Kills::Never || kills == Kills::AtEveryPause {
        "hot"
    } else {
        "cold"
    };
    let expected_resumed: Vec<&str> = (0..cells.len())
        .map(|k| if k == 0 { "new" } else { later })
        .collect();
    if resumed != expected_resumed {
        problems.push(format!("{name} ({kills:?}): resumed {resumed:?}"));
    }
    problems
}

#[test]
fn session_cells_match_cpython_with_and_without_kills() {
    let programs = session_programs();
    let filtered = std::env::var("BATON_SESSIONS_ONLY").is_ok();
    assert!(
        filtered || programs.len() >= 8,
        "only {} session programs",
        programs.len()
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut server = Server::start(dir.path(), &[]);
    let compacting_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut compacting = Server::start(compacting_dir.path(), &["--session-max-cells", "2"]);
    let mut problems = Vec::new();
    for path in &programs {
        problems.extend(check(&mut server, path, Kills::Never));
        problems.extend(check(&mut server, path, Kills::BetweenCells));
        problems.extend(check(&mut server, path, Kills::AtEveryPause));
        problems.extend(check(&mut compacting, path, Kills::BetweenCompactedCells));
    }
    assert!(
        problems.is_empty(),
        "{} differences over {} programs:\n{}",
        problems.len(),
        programs.len(),
        problems.join("\n")
    );
}
