//! The Python client library (`clients/python`) against a real
//! `baton serve`: its unittest suite runs with the server's URL and key.

mod common;

use common::server::{KEY, Server};

#[test]
fn the_python_client_drives_a_real_server() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let tests = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python/tests");
    let output = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-v", "-s", tests])
        .env("BATON_URL", &server.base)
        .env("BATON_API_KEY", KEY)
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    assert!(report.contains("Ran 12 tests"), "{report}");
    assert!(!report.contains("skipped"), "{report}");
}
