//! baton's shell (`lang: "bash"`, `stdlib_shims/baton_shell.py`) against
//! real GNU bash and coreutils: the corpus of `tests/shell/corpus.json`
//! (LibreChat's own commands exactly as it builds them, and what models
//! type) run by `tests/shell/oracle.py` in fresh directories, once by bash
//! and once by the shell, comparing stdout, stderr, the exit status and the
//! files left. In process (the shell under CPython on a real directory) and
//! through a real server (the shell in the sandbox, over the virtual
//! `/mnt/data`, files uploaded and read back over HTTP).

mod common;

use std::process::Command;

use common::root;
use common::server::{KEY, Server};
use serde_json::Value;

/// Cases whose answer through the sandbox differs from bash for a reason
/// outside the shell, with the reason.
const SANDBOX_DIFFERS: &[(&str, &str)] = &[(
    "python_file_traceback",
    "RustPython's traceback marks a call that spans its whole line with carets (`~^^`); CPython 3.11 does not (the interpreter's own texts, issue 32)",
)];

/// Runs the oracle with `args`; the cases that differ, with their diffs.
fn differing(args: &[&str]) -> Vec<Value> {
    let output = Command::new("python3")
        .arg(root().join("tests/shell/oracle.py"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    assert!(
        reports.len() >= 150,
        "the oracle reported {} cases\n{stdout}\n{}",
        reports.len(),
        String::from_utf8_lossy(&output.stderr)
    );
    reports.into_iter().filter(|r| r["ok"] != true).collect()
}

#[test]
fn the_shell_answers_as_bash_does() {
    let failed = differing(&[]);
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn the_shell_in_the_sandbox_answers_as_bash_does() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let failed: Vec<Value> = differing(&["--server", &server.base, "--key", KEY])
        .into_iter()
        .filter(|r| !SANDBOX_DIFFERS.iter().any(|(name, _)| r["name"] == *name))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}
