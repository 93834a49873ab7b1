//! Python sessions against CPython: every program of `tests/sessions/` is
//! a list of cells (split at `# %% cell` lines). CPython 3.11 runs them as
//! one process would (one globals dict, one event loop, top-level await,
//! tools as coroutine functions answered by `tests/oracle/answers.py`;
//! `tests/oracle/harness.py`), and a real `baton serve` runs them as cells
//! of one session over HTTP, answering every call with the oracle's
//! answer, three ways: without a kill; with `kill -9` of the server
//! between every two cells; with `kill -9` at every pause of every cell.
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

use baton::journal::CallResult;
use baton::program::{Program, ProgramLimits};
use common::server::Server;
use common::{OracleCall, canonical, corpus_tools, frames, root};
use serde_json::{Value, json};

/// How the server is killed while a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kills {
    Never,
    BetweenCells,
    AtEveryPause,
}

/// What one cell did.
#[derive(Debug, PartialEq)]
struct CellRun {
    calls: Vec<Vec<(String, Value)>>,
    stdout: String,
    error: Option<String>,
    frames: Vec<String>,
}

/// The oracle's report of one cell.
struct OracleCell {
    run: CellRun,
    rounds: Vec<Vec<OracleCall>>,
}

fn session_programs() -> Vec<PathBuf> {
    let only = std::env::var("BATON_SESSIONS_ONLY").unwrap_or_default();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("tests/sessions"))
        .unwrap_or_else(|e| panic!("tests/sessions: {e}"))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "py"))
        .filter(|path| path.to_string_lossy().contains(only.as_str()))
        .collect();
    paths.sort();
    paths
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

/// Runs the cells under CPython as one session.
fn oracle(cells: &[String]) -> Vec<OracleCell> {
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
    let mut child = std::process::Command::new("python3")
        .arg(root().join("tests/oracle/harness.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(request.to_string().as_bytes());
    }
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let reply: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle output is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    reply["cells"]
        .as_array()
        .unwrap_or_else(|| panic!("no cells: {reply}"))
        .iter()
        .map(|cell| {
            let rounds: Vec<Vec<OracleCall>> = cell["rounds"]
                .as_array()
                .map(|rounds| {
                    rounds
                        .iter()
                        .map(|r| r.as_array().map(|c| c.iter().map(oracle_call).collect()))
                        .map(Option::unwrap_or_default)
                        .collect()
                })
                .unwrap_or_default();
            let calls = rounds
                .iter()
                .map(|round| {
                    round
                        .iter()
                        .map(|c| (c.tool.clone(), c.input.clone()))
                        .collect()
                })
                .collect();
            OracleCell {
                run: CellRun {
                    calls: canonical(calls),
                    stdout: cell["stdout"].as_str().unwrap_or_default().to_owned(),
                    error: cell["error"].as_str().map(str::to_owned),
                    frames: frames(cell["stderr"].as_str().unwrap_or_default()),
                },
                rounds,
            }
        })
        .collect()
}

fn tools_json() -> Value {
    let text = std::fs::read_to_string(root().join("tests/oracle/tools.json"))
        .unwrap_or_else(|e| panic!("tools.json: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("tools.json: {e}"))
}

/// The oracle's result for one call of a paused reply (each of the
/// oracle's calls answers once).
fn result_for(
    call: &Value,
    rounds: &[Vec<OracleCall>],
    round: usize,
    used: &mut Vec<(usize, usize)>,
) -> Value {
    let tool = call["name"].as_str().unwrap_or_default();
    let calls = rounds.get(round).map(Vec::as_slice).unwrap_or(&[]);
    let found = calls.iter().enumerate().position(|(index, c)| {
        c.tool == tool && c.input == call["input"] && !used.contains(&(round, index))
    });
    let result = found.map(|index| {
        used.push((round, index));
        calls[index].result.clone()
    });
    match result {
        Some(CallResult::Value(text)) => {
            json!({"call_id": call["id"], "result": serde_json::from_str::<Value>(&text).unwrap_or(Value::Null)})
        }
        Some(CallResult::Error(message)) => {
            json!({"call_id": call["id"], "result": null, "is_error": true, "error_message": message})
        }
        None => json!({"call_id": call["id"], "result": null, "is_error": true,
            "error_message": format!("the oracle made no call {tool} {} here", call["input"])}),
    }
}

/// Runs the cells as one session of `server`, killing it as `kills` says.
fn run_session(
    server: &mut Server,
    cells: &[String],
    oracle: &[OracleCell],
    kills: Kills,
) -> (Vec<CellRun>, Vec<String>) {
    let (status, created) = server.post("/sessions", &json!({}));
    assert_eq!(status, 201, "{created}");
    let id = created["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut runs = Vec::new();
    let mut resumed = Vec::new();
    for (index, code) in cells.iter().enumerate() {
        if kills == Kills::BetweenCells && index > 0 {
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
                .map(|c| result_for(c, &oracle[index].rounds, round, &mut used))
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
        runs.push(CellRun {
            calls: canonical(calls),
            stdout: reply["stdout"].as_str().unwrap_or_default().to_owned(),
            error: reply["error"].as_str().map(str::to_owned),
            frames: frames(reply["stderr"].as_str().unwrap_or_default()),
        });
    }
    let (status, view) = server.get(&format!("/sessions/{id}"), Some(common::server::KEY));
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        view["cells"],
        cells.len(),
        "every cell ended by itself: {view}"
    );
    (runs, resumed)
}

fn check(server: &mut Server, path: &PathBuf, kills: Kills) -> Vec<String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!("session corpus: {name} ({kills:?})");
    let source = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let cells = cells_of(&source);
    let expected = oracle(&cells);
    let (runs, resumed) = run_session(server, &cells, &expected, kills);
    let mut problems = Vec::new();
    for (index, (run, want)) in runs.iter().zip(&expected).enumerate() {
        if run != &want.run {
            problems.push(format!(
                "{name} ({kills:?}) cell {}:\n  cpython: {:?}\n  baton:   {run:?}",
                index + 1,
                want.run
            ));
        }
    }
    // After a restart the namespace is rebuilt (cold); else the child that
    // ran the last cell (or the last stretch of it, after a restart inside
    // its pause) holds it (hot).
    let later = if kills == Kills::BetweenCells {
        "cold"
    } else {
        "hot"
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
    let mut problems = Vec::new();
    for path in &programs {
        problems.extend(check(&mut server, path, Kills::Never));
        problems.extend(check(&mut server, path, Kills::BetweenCells));
        problems.extend(check(&mut server, path, Kills::AtEveryPause));
    }
    assert!(
        problems.is_empty(),
        "{} differences over {} programs:\n{}",
        problems.len(),
        programs.len(),
        problems.join("\n")
    );
}
