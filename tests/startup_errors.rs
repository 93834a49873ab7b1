//! Startup errors of a real `baton serve`: each is a sentence on stderr
//! that names the flag, the process exits non-zero, and a port in use is
//! found before anything is written to the data directory. A host name in
//! `--listen` is accepted.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

/// Runs `baton serve` with `args` to its exit.
fn serve(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("serve")
        .args(args)
        .env("BATON_LOG", "warn")
        .output()
        .unwrap_or_else(|e| panic!("baton: {e}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_port_in_use_is_named_before_a_key_is_generated() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let address = taken
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = dir.path().join("data");
    let output = serve(&["--listen", &address, "--data-dir", &data.to_string_lossy()]);
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(
        text.contains(&format!("cannot listen on {address} (--listen")),
        "{text}"
    );
    assert!(text.contains("already in use"), "{text}");
    assert!(
        !data.exists(),
        "the data directory was created (a key generated) before the port was checked"
    );
}

#[test]
fn a_data_dir_that_is_a_file_is_named() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap_or_else(|e| panic!("{e}"));
    let output = serve(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &file.to_string_lossy(),
    ]);
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("--data-dir"), "{text}");
    assert!(text.contains("is a file, not a directory"), "{text}");
    assert_eq!(std::fs::read_to_string(&file).ok().as_deref(), Some("x"));
}

#[test]
fn a_listen_address_that_is_not_one_is_explained() {
    let output = serve(&["--listen", "not an address"]);
    assert!(!output.status.success());
    let text = stderr(&output);
    assert!(text.contains("--listen"), "{text}");
    assert!(text.contains("give host:port"), "{text}");
}

#[test]
fn a_host_name_in_listen_is_accepted() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "serve",
            "--listen",
            "localhost:0",
            "--api-key",
            "k-local",
            "--data-dir",
        ])
        .arg(dir.path())
        .env("BATON_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("baton: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let listening = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("baton: listening on ").map(str::to_owned));
    let _ = child.kill();
    let _ = child.wait();
    let address = listening.unwrap_or_else(|| panic!("baton did not listen"));
    assert!(
        address.starts_with("http://127.0.0.1:") || address.starts_with("http://[::1]:"),
        "{address}"
    );
}
