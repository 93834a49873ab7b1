//! The real LibreChat client (`@librechat/agents`, pinned in
//! `tests/librechat/package.json`) driving a real `baton serve`: its
//! programmatic tool through the scenarios of its own tool description
//! (gather without import, an error caught, a tool name normalised, code
//! with no tools, cancel during a start and during a continuation) and its
//! `execute_code` tool. The scenarios and what each must return are in
//! `tests/librechat/run.mjs`; this test installs the package when it is
//! missing (`npm ci`), runs it, and checks every scenario passed.

mod common;

use std::path::Path;
use std::process::Command;

use common::root;
use common::server::{KEY, Server};
use serde_json::Value;

/// Every scenario `run.mjs` has; each must be reported, and pass.
const SCENARIOS: &[&str] = &[
    "gather without import",
    "error caught",
    "name normalisation",
    "no tools (tool_manifest=[])",
    "no tools (no manifest)",
    "execute_code",
    "cancel during start",
    "cancel during continuation",
];

fn install(harness: &Path) {
    if harness.join("node_modules/@librechat/agents").is_dir() {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(harness)
        .status()
        .unwrap_or_else(|e| panic!("npm is needed to install LibreChat's client: {e}"));
    assert!(status.success(), "npm ci in {} failed", harness.display());
}

#[test]
fn librechat_client_scenarios_pass_against_a_real_server() {
    let harness = root().join("tests/librechat");
    install(&harness);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let server = Server::start(dir.path(), &[]);
    let output = Command::new("node")
        .arg("run.mjs")
        .current_dir(&harness)
        .env("BATON_URL", &server.base)
        .env("BATON_KEY", KEY)
        .output()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    for scenario in SCENARIOS {
        let report = reports
            .iter()
            .find(|r| r["scenario"] == *scenario)
            .unwrap_or_else(|| {
                panic!(
                    "{scenario}: not reported\n{stdout}\n{}",
                    String::from_utf8_lossy(&output.stderr)
                )
            });
        assert_eq!(report["ok"], true, "{scenario}: {report:#}");
    }
    assert!(output.status.success(), "{stdout}");
}
