//! LibreChat as it is deployed today (>= 0.8.6), against a real `baton
//! serve` configured as an operator configures it: `CODEAPI_AUTH_PROVIDER=
//! librechat-jwt`, `CODEAPI_JWT_PUBLIC_KEY`, `CODEAPI_JWT_KID`, and no API
//! key on LibreChat's side.
//!
//! - `tests/librechat/run.mjs`: the real client (`@librechat/agents`,
//!   pinned in `tests/librechat/package.json`) with `authHeaders` carrying
//!   the token LibreChat mints: its programmatic tool through the scenarios
//!   of its own tool description (gather without import, an error caught, a
//!   tool name normalised, code with no tools, cancel during a start and
//!   during a continuation) and its `execute_code` tool.
//! - `tests/librechat/server.mjs`: LibreChat's server side (its uploads,
//!   batch uploads of skills, liveness probes, downloads of outputs,
//!   deletes, its own shell commands for `read_file`, image reads and
//!   writes, the prewarm, stateful runtime sessions) with three users, two
//!   of one tenant and one of another.
//!
//! The packages are installed when missing (`npm ci`); what each scenario
//! checks is in the scripts.

mod common;

use common::librechat::{KID, install_harness, jwt_env, key_file, pairs, run_harness};
use common::server::Server;
use serde_json::Value;

/// Every scenario `run.mjs` has; each must be reported, and pass.
const CLIENT_SCENARIOS: &[&str] = &[
    "gather without import",
    "error caught",
    "name normalisation",
    "no tools (tool_manifest=[])",
    "no tools (no manifest)",
    "execute_code",
    "cancel during start",
    "cancel during continuation",
];

/// Every scenario `server.mjs` has.
const SERVER_SCENARIOS: &[&str] = &[
    "attachment upload and liveness",
    "execute_code reads the attachment and its output is harvested",
    "agent files are shared within the tenant only",
    "skill files in a read-only batch",
    "read_file, write and image reads through the shell",
    "run_tools_with_code with a token",
    "stateful runtime session keeps /mnt/data and Python names",
    "delete as LibreChat deletes",
    "unsupported languages are permanent",
    "tokens are reused",
];

fn assert_all_passed(expected: &[&str], reports: &[Value], output: &str, success: bool) {
    for scenario in expected {
        let report = reports
            .iter()
            .find(|r| r["scenario"] == *scenario)
            .unwrap_or_else(|| panic!("{scenario}: not reported\n{output}"));
        assert_eq!(report["ok"], true, "{scenario}: {report:#}");
    }
    assert!(success, "{output}");
}

fn lc_key_env() -> Vec<(&'static str, String)> {
    vec![
        (
            "LC_JWT_PRIVATE_KEY_FILE",
            key_file("ed25519.pem").display().to_string(),
        ),
        ("LC_JWT_KID", KID.to_owned()),
    ]
}

/// Runs `script` of the harness against a server that takes LibreChat's
/// tokens only; every scenario of `expected` must pass.
fn passes(script: &str, expected: &[&str]) {
    let harness = install_harness();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let env = jwt_env("librechat-jwt");
    let server = Server::start_with_env(dir.path(), &[], &pairs(&env));
    let client = lc_key_env();
    let (reports, output, success) = run_harness(&harness, script, &server.base, &pairs(&client));
    assert_all_passed(expected, &reports, &output, success);
}

#[test]
fn librechat_client_scenarios_pass_with_its_tokens() {
    passes("run.mjs", CLIENT_SCENARIOS);
}

#[test]
fn librechat_server_side_works_end_to_end() {
    passes("server.mjs", SERVER_SCENARIOS);
}
