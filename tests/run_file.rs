//! `baton run FILE.py` as a user runs it: a real process, the real engine
//! and sandbox, tool calls answered by a real `--answer` command (here a
//! Python script), the exit status saying how the program ended.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const PROGRAM: &str = "\
import sys
a = await get_weather(city='Bern')
b, c = await asyncio.gather(get_weather(city='Zurich'), get_weather(city='Chur'))
print(a['temp'], b['temp'], c['temp'], sys.argv[1:])
try:
    await get_weather(city='fail')
except ToolError as e:
    print('caught', e)
";

const TOOLS: &str = r#"[{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]"#;

/// Answers a call with the city's length as its temperature; `fail` is a
/// tool error.
const ANSWER: &str = "\
import json, sys
call = json.load(sys.stdin)
assert call['name'] == 'get_weather' and call['id'].startswith('call_'), call
city = call['input']['city']
if city == 'fail':
    print('weather service down', file=sys.stderr)
    sys.exit(3)
print(json.dumps({'temp': len(city)}))
";

struct Files {
    _dir: tempfile::TempDir,
    program: PathBuf,
    tools: PathBuf,
    answer: PathBuf,
}

fn files(program: &str) -> Files {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        path
    };
    Files {
        program: write("program.py", program),
        tools: write("tools.json", TOOLS),
        answer: write("answer.py", ANSWER),
        _dir: dir,
    }
}

/// Runs `baton run` in a session of its own: no controlling terminal, so
/// nothing is asked on the terminal of whoever runs the tests.
fn baton_run(args: &[&str], program: &Path) -> Output {
    Command::new("setsid")
        .args(["--wait", env!("CARGO_BIN_EXE_baton"), "run"])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("baton run: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_program_runs_with_its_tools_answered_by_a_command() {
    let files = files(PROGRAM);
    let answer = format!("python3 {}", files.answer.display());
    let tools = files.tools.to_string_lossy().into_owned();
    let output = baton_run(
        &["--tools", &tools, "--answer", &answer, "-v", "--", "x", "y"],
        &files.program,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "4 6 4 ['x', 'y']\ncaught weather service down\n"
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(r#"round 1: get_weather({"city":"Bern"}) -> {"temp":4}"#),
        "{stderr}"
    );
    assert!(
        stderr.contains("round 2: get_weather({\"city\":\"Zurich\"})"),
        "{stderr}"
    );
    assert!(
        stderr.contains("round 2: get_weather({\"city\":\"Chur\"})"),
        "{stderr}"
    );
    assert!(
        stderr.contains("round 3: get_weather({\"city\":\"fail\"}) -> error: weather service down"),
        "{stderr}"
    );
}

#[test]
fn a_failing_program_exits_1_with_its_traceback_once() {
    let files = files("print('before')\n1 / 0\n");
    let output = baton_run(&[], &files.program);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(text(&output.stdout), "before\n");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("Traceback (most recent call last)"),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("ZeroDivisionError: division by zero")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn the_sandbox_holds_under_baton_run() {
    let files = files("import os\nprint(os.listdir('/'))\nopen('/etc/passwd').read()\n");
    let output = baton_run(&[], &files.program);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(!stdout.contains("etc"), "the host's / is visible: {stdout}");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("Error"), "{stderr}");
    assert!(!stderr.contains("root:x:0:0"), "{stderr}");
}

#[test]
fn a_call_nobody_can_answer_and_bad_flags_exit_2() {
    let files = files(PROGRAM);
    let tools = files.tools.to_string_lossy().into_owned();
    let output = baton_run(&["--tools", &tools], &files.program);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("no --answer command and no terminal"),
        "{}",
        text(&output.stderr)
    );
    let output = baton_run(&[], Path::new("/no/such/program.py"));
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("cannot read /no/such/program.py"));
    let output = baton_run(&["--tools", "/no/such/tools.json"], &files.program);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("--tools /no/such/tools.json"));
    let output = baton_run(
        &["--tools", &tools, "--answer", "echo not-json"],
        &files.program,
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("its output is not JSON"),
        "{}",
        text(&output.stderr)
    );
}

/// On a terminal (a real pseudo-terminal, made by util-linux's `script`),
/// each call is asked for: an answer that is not JSON is asked again,
/// `!message` is a tool error.
#[test]
fn on_a_terminal_each_call_is_asked_for() {
    let files = files(
        "a = await get_weather(city='Bern')\ntry:\n    await get_weather(city='fail')\nexcept ToolError as e:\n    print('caught', e)\nprint('temp', a['temp'])\n",
    );
    let command = format!(
        "{} run {} --tools {}",
        env!("CARGO_BIN_EXE_baton"),
        files.program.display(),
        files.tools.display()
    );
    let mut script = Command::new("script")
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("script (util-linux): {e}"));
    if let Some(mut stdin) = script.stdin.take() {
        use std::io::Write;
        let typed = "sunny\n{\"temp\": 21}\n!station offline\n";
        stdin
            .write_all(typed.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let output = script.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let seen = text(&output.stdout).replace("\r\n", "\n");
    assert!(output.status.success(), "{seen}{}", text(&output.stderr));
    let asked = r#"get_weather({"city":"Bern"}) = ? (JSON, or !message for an error)"#;
    assert_eq!(
        seen.matches(asked).count(),
        2,
        "asked again after `sunny`: {seen}"
    );
    assert!(seen.contains("not JSON: "), "{seen}");
    assert!(
        seen.contains(r#"get_weather({"city":"fail"}) = ?"#),
        "{seen}"
    );
    // The program's output follows the last prompt.
    assert!(
        seen.ends_with("caught station offline\ntemp 21\n"),
        "{seen}"
    );
}
