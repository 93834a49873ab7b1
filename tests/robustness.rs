//! No request can take the server down, and the server comes back at once
//! after a `kill -9`: against a real `baton serve` on loopback.
//!
//! - Sources nested as deep as the source cap allows (unary chains,
//!   parentheses, attribute chains, 100,000-term sums, nested lists, dicts,
//!   lambdas, conditionals, f-strings), alone and several in one program,
//!   and the same built at run time for `exec`/`eval`: each request gets
//!   CPython's answer, the server stays healthy and answers the next
//!   ordinary request, and its pid is the same.
//! - A restart right after `SIGKILL` always opens the store (the lock of the
//!   dead process is waited for), and the paused execution continues.
//! - A second server on the same data directory fails with a sentence that
//!   names `--data-dir`.
//! - An answer given before the request's body was read (401, 404, 405)
//!   says `connection: close` and the connection is closed; any other
//!   answer leaves it open for the next request.

mod common;

use std::time::{Duration, Instant};

use common::server::{KEY, Server, answers, continue_, weather_tools};
use serde_json::{Value, json};

fn server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let server = Server::start(dir.path(), &[]);
    (dir, server)
}

fn start(server: &Server, code: &str) -> (u16, Value) {
    server.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools()}),
    )
}

const RECURSION: &str = "RecursionError: maximum recursion depth exceeded during compilation";
const PARENTHESES: &str = "SyntaxError: too many nested parentheses";

/// (name, source, the error line's start)
fn deep_sources() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "unary minus",
            format!("x = {}1\n", "-".repeat(100_000)),
            RECURSION,
        ),
        (
            "not",
            format!("x = {}1\n", "not ".repeat(50_000)),
            RECURSION,
        ),
        (
            "parentheses",
            format!("x = {}1{}\n", "(".repeat(100_000), ")".repeat(100_000)),
            PARENTHESES,
        ),
        (
            "attributes",
            format!("x = a{}\n", ".b".repeat(100_000)),
            RECURSION,
        ),
        (
            "sum",
            format!("x = {}\n", vec!["1"; 100_000].join("+")),
            RECURSION,
        ),
        (
            "calls",
            format!("x = f{}\n", "()".repeat(100_000)),
            RECURSION,
        ),
        (
            "lists",
            format!("x = {}{}\n", "[".repeat(60_000), "]".repeat(60_000)),
            PARENTHESES,
        ),
        (
            "dicts",
            format!("x = {}1{}\n", "{1: ".repeat(40_000), "}".repeat(40_000)),
            PARENTHESES,
        ),
        (
            "lambdas",
            format!("x = {}1\n", "lambda: ".repeat(30_000)),
            RECURSION,
        ),
        (
            "conditionals",
            format!("x = {}1\n", "1 if x else ".repeat(20_000)),
            RECURSION,
        ),
        (
            "powers",
            format!("x = {}2\n", "2 ** ".repeat(50_000)),
            RECURSION,
        ),
        (
            "f-strings",
            format!("x = {}1{}\n", "f'{".repeat(2_000), "}'".repeat(2_000)),
            "SyntaxError",
        ),
        (
            "exec of a deep string",
            "exec('x = ' + '-' * 500_000 + '1')\n".to_owned(),
            RECURSION,
        ),
        (
            "eval of a deep string",
            "eval('(' * 300_000 + '1' + ')' * 300_000)\n".to_owned(),
            PARENTHESES,
        ),
        (
            "compile of a deep string",
            "compile('1' + ' + 1' * 200_000, 'x', 'eval')\n".to_owned(),
            RECURSION,
        ),
    ]
}

/// The server answers an ordinary request after each hostile one.
fn assert_healthy(server: &Server, pid: u32, after: &str) {
    let (status, health) = server.get("/health", None);
    assert_eq!(
        (status, &health["status"]),
        (200, &json!("ok")),
        "after {after}"
    );
    assert_eq!(
        server.pid(),
        Some(pid),
        "after {after}: the server process changed"
    );
    let (status, reply) = start(server, "print(sum(range(10)))\n");
    assert_eq!(status, 200, "after {after}: {reply}");
    assert_eq!(reply["stdout"], "45\n", "after {after}: {reply}");
}

#[test]
fn deep_sources_get_cpythons_answer_and_the_server_stays_up() {
    let (_dir, server) = server();
    let pid = server.pid().unwrap_or_else(|| panic!("no server pid"));
    for (name, source, error) in deep_sources() {
        let (status, reply) = start(&server, &source);
        assert_eq!(status, 200, "{name}: {reply}");
        assert_eq!(reply["status"], "error", "{name}: {reply}");
        let line = reply["error"].as_str().unwrap_or_default();
        assert!(line.starts_with(error), "{name}: {line}");
        assert_healthy(&server, pid, name);
    }
}

#[test]
fn several_deep_sources_at_once_in_one_program_and_in_parallel() {
    let (_dir, server) = server();
    let pid = server.pid().unwrap_or_else(|| panic!("no server pid"));
    let sources = deep_sources();
    // One program made of every shape (each on its own line; the first
    // refused line is the answer).
    let together: String = sources
        .iter()
        .filter(|(name, _, _)| !name.contains("string"))
        .map(|(_, source, _)| source.as_str())
        .collect();
    let cap = 256 << 10;
    let together = &together[..together.len().min(cap)];
    let together = &together[..together.rfind('\n').map_or(0, |i| i + 1)];
    let (status, reply) = start(&server, together);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["status"], "error", "{reply}");
    assert_healthy(&server, pid, "all shapes in one program");
    // Every shape at the same time, from concurrent clients.
    let replies: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .iter()
            .map(|(_, source, _)| scope.spawn(|| start(&server, source)))
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    assert_eq!(replies.len(), sources.len());
    for ((name, _, error), (status, reply)) in sources.iter().zip(&replies) {
        assert_eq!(*status, 200, "{name}: {reply}");
        let line = reply["error"].as_str().unwrap_or_default();
        assert!(line.starts_with(error), "{name} in parallel: {line}");
    }
    assert_healthy(&server, pid, "all shapes in parallel");
}

#[test]
fn a_restart_right_after_sigkill_always_opens_the_store() {
    let (_dir, mut server) = server();
    let mut reply = start(
        &server,
        "for i in range(30):\n    await get_weather(city=str(i))\nprint('done')\n",
    )
    .1;
    for round in 0..12 {
        assert_eq!(
            reply["status"], "tool_call_required",
            "round {round}: {reply}"
        );
        // The supervisor's way: kill -9, start again at once.
        server.restart();
        let (status, next) = continue_(&server, &reply, answers(&reply));
        assert_eq!(status, 200, "round {round}: {next}");
        reply = next;
    }
}

/// Sends `head` (request line and headers) then `body` on a raw
/// connection, and reads the whole answer.
fn raw_exchange(base: &str, head: &str, body: &[u8], pause: Duration) -> String {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap_or_else(|e| panic!("{e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap_or_else(|e| panic!("{e}"));
    stream
        .write_all(head.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(pause);
    // A server that answered early may have closed: the rest is not ours to
    // insist on.
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn head(content_length: usize, key: Option<&str>) -> String {
    let auth = key
        .map(|k| format!("x-api-key: {k}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /exec/programmatic HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{auth}content-length: {content_length}\r\nconnection: close\r\n\r\n"
    )
}

#[test]
fn bodies_are_refused_readably_and_never_read_without_a_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(
        dir.path(),
        &["--body-limit", "1048576", "--body-timeout-secs", "1"],
    );
    // No key, 100 MB announced, nothing sent: answered at once, unread.
    let started = Instant::now();
    let answer = raw_exchange(&server.base, &head(100 << 20, None), b"", Duration::ZERO);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited for a body"
    );
    // With the key, over the limit: the whole body sent, a readable 413.
    let big = vec![b' '; 3 << 20];
    let answer = raw_exchange(
        &server.base,
        &head(big.len(), Some(KEY)),
        &big,
        Duration::ZERO,
    );
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "{}",
        &answer[..answer.len().min(300)]
    );
    assert!(
        answer.contains("Request body too large (limit 1048576 bytes)"),
        "{answer}"
    );
    // A body that stops arriving: 408 after the body timeout.
    let answer = raw_exchange(
        &server.base,
        &head(1000, Some(KEY)),
        b"{\"code\":",
        Duration::ZERO,
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("Request body not received within 1 s"),
        "{answer}"
    );
    // Many slow connections without a key hold nothing: each is answered.
    let answers: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..64)
            .map(|_| {
                scope.spawn(|| {
                    raw_exchange(&server.base, &head(4 << 20, None), b"{", Duration::ZERO)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.starts_with("HTTP/1.1 401"))
            .count(),
        64
    );
    assert_eq!(server.get("/health", None).0, 200);
}

/// The pid of the server's zygote (its child running `baton zygote`).
/// The processes whose parent is `pid`, as `ps` lists them (for messages).
fn children_of(pid: u32) -> String {
    std::process::Command::new("ps")
        .args(["-o", "pid,ppid,user,stat,cmd", "--ppid", &pid.to_string()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[test]
fn a_killed_zygote_is_noticed_and_replaced() {
    let (_dir, server) = server();
    let pid = server.pid().unwrap_or_else(|| panic!("no server pid"));
    let paused = start(
        &server,
        "w = await get_weather(city='x')\nprint(w['temp'])\n",
    )
    .1;
    assert_eq!(
        paused["status"],
        "tool_call_required",
        "{paused}\nserver log:\n{}",
        server.log_lines().join("\n")
    );
    let first = server.zygote_pid().unwrap_or_else(|| {
        panic!(
            "no zygote under {pid}:\n{}\nserver log:\n{}",
            children_of(pid),
            server.log_lines().join("\n")
        )
    });
    // SAFETY: killing the zygote of the server this test started.
    unsafe { libc::kill(first, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let health = loop {
        let (status, health) = server.get("/health", None);
        if status == 200 && health["zygote_restarts"] == 1 {
            break health;
        }
        assert!(Instant::now() < deadline, "not healed: {status} {health}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(health["status"], "ok");
    let second = server
        .zygote_pid()
        .unwrap_or_else(|| panic!("no new zygote under {pid}:\n{}", children_of(pid)));
    assert_ne!(first, second);
    for n in 0..20 {
        let (status, reply) = start(&server, &format!("print({n} * 2)\n"));
        assert_eq!(status, 200, "execution {n}: {reply}");
        assert_eq!(
            reply["stdout"],
            format!("{}\n", n * 2),
            "execution {n}: {reply}"
        );
    }
    // The paused execution's child died with the zygote: it resumes by replay.
    let (status, done) = continue_(&server, &paused, answers(&paused));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["stdout"], "11\n", "{done}");
    assert_eq!(server.pid(), Some(pid), "the server itself was replaced");
}

#[test]
fn a_second_server_on_the_same_data_directory_names_the_flag() {
    let (dir, _server) = server();
    let started = Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            KEY,
            "--data-dir",
        ])
        .arg(dir.path())
        .env("BATON_LOG", "info")
        .output()
        .unwrap_or_else(|e| panic!("baton: {e}"));
    assert!(!output.status.success(), "a second server started");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = String::from_utf8_lossy(&output.stdout);
    assert!(stderr.contains("--data-dir"), "{stderr}");
    assert!(stderr.contains("another baton may be running"), "{stderr}");
    assert!(
        log.contains("waiting up to"),
        "no log line while waiting: {log}"
    );
    // It waited for the lock before giving up, and not for ever.
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(4), "gave up after {waited:?}");
    assert!(waited < Duration::from_secs(30), "waited {waited:?}");
}

/// Reads one HTTP/1.1 answer (its head and its `content-length` body)
/// from `stream`: (status line and headers in lower case, body).
fn read_one_answer(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    use std::io::Read;
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => bytes.push(byte[0]),
            other => panic!("the answer's head ended early ({other:?}): {bytes:?}"),
        }
    }
    let head = String::from_utf8_lossy(&bytes).to_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no content-length: {head}"));
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .unwrap_or_else(|e| panic!("{e}"));
    (head, body)
}

/// Whether `stream` was closed by the server (a read gives end of file or
/// a reset within the timeout).
fn closed_by_server(stream: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0) | Err(_))
}

#[test]
fn an_answer_given_before_the_body_was_read_says_the_connection_closes() {
    use std::io::Write;
    let (_dir, server) = server();
    let address = server.base.trim_start_matches("http://").to_owned();
    let auth = format!("x-api-key: {KEY}\r\n");
    let program = br#"{"lang": "py", "code": "print(6 * 7)"}"#;
    // (request line, headers, expected status, whether the handler reads the body)
    let cases = [
        ("POST /exec/programmatic", "", "401", false),
        ("POST /no/such/route", auth.as_str(), "404", false),
        ("POST /health", "", "405", false),
        ("POST /exec", auth.as_str(), "200", true),
    ];
    for (line, headers, status, reads_body) in cases {
        let mut stream = std::net::TcpStream::connect(&address).unwrap_or_else(|e| panic!("{e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap_or_else(|e| panic!("{e}"));
        let head = format!(
            "{line} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\n\r\n",
            program.len()
        );
        stream
            .write_all(head.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        // The body comes late: a handler that does not read it answers first.
        std::thread::sleep(Duration::from_millis(200));
        let _ = stream.write_all(program);
        let (answer, body) = read_one_answer(&mut stream);
        assert!(
            answer.starts_with(&format!("http/1.1 {status}")),
            "{line}: {answer}"
        );
        let says_close = answer.contains("\r\nconnection: close\r\n");
        if reads_body {
            assert!(!says_close, "{line}: a read body closed: {answer}");
            assert!(String::from_utf8_lossy(&body).contains("42"), "{line}");
        }
        if says_close {
            assert!(
                closed_by_server(&mut stream),
                "{line}: said close, kept open"
            );
            continue;
        }
        // Not said: the connection must carry the next request.
        let next = "GET /health HTTP/1.1\r\nhost: x\r\n\r\n";
        stream
            .write_all(next.as_bytes())
            .unwrap_or_else(|e| panic!("{line}: the next request: {e}"));
        let (answer, _) = read_one_answer(&mut stream);
        assert!(answer.starts_with("http/1.1 200"), "{line}, then: {answer}");
    }
}
