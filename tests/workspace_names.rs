//! The child and the server agree on `/mnt/data` names: a real child tries
//! to create files under generated names (control characters, backslashes,
//! bidirectional controls, dots and full-width dots, long parts, ordinary
//! names), and every name it accepted must pass the server's rule
//! (`workspace::check_name`), every name it refused must fail it, and the
//! execution must complete with the accepted files (the engine never
//! refuses what the child let the code write).

mod common;

use baton::engine::Step;
use baton::workspace::check_name;
use common::{runtime_with_engine, spec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Pieces names are made of: each class of character the rules treat.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9_-]{1,6}",
        1 => Just(".".to_owned()),
        1 => Just("..".to_owned()),
        1 => Just("．．".to_owned()),
        1 => Just("．".to_owned()),
        1 => Just("\t".to_owned()),
        1 => Just("\\".to_owned()),
        1 => Just("\u{202e}".to_owned()),
        1 => Just("\u{2066}".to_owned()),
        1 => Just("\u{7f}".to_owned()),
        1 => Just("é".to_owned()),
        1 => Just(" ".to_owned()),
        1 => Just("x".repeat(256)),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 1..4).prop_map(|pieces| pieces.concat())
}

/// A program that tries to create `/mnt/data/<name>` for each name (making
/// its directories first) and prints, per name, whether it could.
fn program(names: &[String]) -> String {
    let list = hex::encode(serde_json::to_string(names).unwrap_or_default());
    format!(
        "import os\nnames = json.loads(bytes.fromhex('{list}').decode())\nfor name in names:\n    path = '/mnt/data/' + name\n    try:\n        os.makedirs(os.path.dirname(path), exist_ok=True)\n        with open(path, 'w') as f:\n            f.write('x')\n        print('ok')\n    except OSError as e:\n        print('refused', e.errno)\n"
    )
}

#[test]
fn child_and_server_never_disagree_on_names() {
    let (runtime, engine) = runtime_with_engine();
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(name(), 1..12), |names| {
        let mut record = engine
            .prepare(spec(&program(&names), Vec::new(), 10_000))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let step = runtime
            .block_on(engine.start(&mut record))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&step, &Step::Completed, "stderr: {}", record.stderr);
        let verdicts: Vec<&str> = record.stdout.lines().collect();
        prop_assert_eq!(verdicts.len(), names.len(), "{}", record.stdout);
        for (name, verdict) in names.iter().zip(verdicts) {
            let server = check_name(name).is_ok();
            prop_assert_eq!(
                verdict == "ok",
                server,
                "name {:?}: the child said {}, the server rule says {}",
                name,
                verdict,
                if server { "valid" } else { "invalid" }
            );
        }
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}

#[test]
fn each_refused_class_has_its_reason() {
    for (name, why) in [
        ("a\tb", "control characters"),
        ("a\\b", "backslashes"),
        ("．．", "only of dots"),
        ("dir/．/x", "only of dots"),
        ("..", "only of dots"),
        ("evil\u{202e}txt", "bidirectional"),
        ("a//b", "empty path parts"),
    ] {
        let error = check_name(name)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains(why), "{name:?}: {error}");
    }
    for name in [
        "report.csv",
        "out/2026/q1.json",
        "été.txt",
        "a.b.c",
        ".hidden",
    ] {
        assert!(check_name(name).is_ok(), "{name:?} refused");
    }
}
