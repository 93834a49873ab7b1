//! Thread pools and asyncio's executors, over a real server, compared with
//! CPython 3.11 running the same program with real threads and a real
//! event loop: a child has no OS threads, so baton runs each piece of
//! work at once, in submission order, and must print what CPython prints
//! (the corpus compares the same programs round by round with the oracle,
//! which runs baton's pool too).

mod common;

use common::server::{Server, cpython_stdout, run_program};

const POOL: &str = include_str!("corpus/97_thread_pool_executor.py");
const TO_THREAD: &str = include_str!("corpus/98_to_thread_and_run_in_executor.py");

#[test]
fn pools_and_executors_print_what_cpython_prints_with_real_threads() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    for code in [POOL, TO_THREAD] {
        let (done, _) = run_program(&server, code);
        assert_eq!(done["status"], "completed", "{done}");
        let expected = cpython_stdout(code);
        assert!(expected.lines().count() >= 2, "{expected}");
        assert_eq!(done["stdout"].as_str(), Some(expected.as_str()), "{code}");
    }
}
