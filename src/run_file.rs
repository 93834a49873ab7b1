//! `baton run FILE.py`: runs a program through the same engine and sandbox
//! as the server, without a server or a store. Tool calls are answered by
//! a command (`--answer CMD`: the call as JSON on its stdin, the result as
//! JSON on its stdout, a non-zero exit a tool error with its stderr as the
//! message) or, on a terminal, by asking. The program's output is printed
//! as it comes (stdout to stdout, stderr to stderr), the rounds with `-v`.
//!
//! Invariants:
//! - The exit status says how the program ended: 0 completed, 1 failed (its
//!   error line on stderr), 2 `baton run` itself could not run it (a bad
//!   flag, an unreadable file, a tool call nobody can answer).
//! - Nothing is stored: a pause lives only in its parked child.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use clap::Args;
use serde_json::value::RawValue;

use crate::config::defaults;
use crate::engine::{Engine, EngineConfig, ExecutionSpec, Step};
use crate::journal::{CallRecord, CallResult, ExecutionRecord};
use crate::tools::{ToolDef, WireTool};

/// Flags of `baton run`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// The Python file to run (`-` for stdin).
    pub file: PathBuf,
    /// A JSON file with the tools the code may call (an array of
    /// `{"name", "description", "parameters"}`, as in a start request).
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// A shell command that answers each tool call: it gets
    /// `{"id", "name", "input"}` on stdin and prints the result as JSON; a
    /// non-zero exit is a tool error, with its stderr as the message.
    #[arg(long)]
    pub answer: Option<String>,
    /// Print each round's calls and results on stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// Run-time budget over all rounds, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub timeout_ms: u64,
    /// Memory the program may allocate, in MiB.
    #[arg(long, default_value_t = defaults::MEMORY_MB)]
    pub memory_mb: u64,
    /// Arguments for the program (`sys.argv[1:]`), after `--`.
    #[arg(last = true)]
    pub argv: Vec<String>,
}

/// Why `baton run` could not run a program (exit status 2).
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error("{0}")]
    Setup(String),
    #[error("{tool} was called, but there is no --answer command and no terminal to ask")]
    NobodyToAsk { tool: String },
    #[error("--answer for {tool}: {problem}")]
    Answer { tool: String, problem: String },
}

/// Runs `baton run`.
pub fn run(args: RunArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return setup_failed(&RunError::Setup(error.to_string())),
    };
    match runtime.block_on(run_program(&args)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(untold)) => {
            if let Some(error_line) = untold {
                eprintln!("{error_line}");
            }
            ExitCode::from(1)
        }
        Err(error) => setup_failed(&error),
    }
}

fn setup_failed(error: &RunError) -> ExitCode {
    eprintln!("baton run: {error}");
    ExitCode::from(2)
}

/// Runs the program to its end; the inner error is its error line when its
/// stderr (a traceback) did not already end with it.
async fn run_program(args: &RunArgs) -> Result<Result<(), Option<String>>, RunError> {
    let source = read_source(&args.file)?;
    let tools = read_tools(args.tools.as_ref())?;
    let exe = std::env::current_exe()
        .map_err(|e| RunError::Setup(format!("cannot find my own binary: {e}")))?;
    let mut config = EngineConfig::new(exe);
    config.pool_size = 1;
    config.rlimits.memory_mb = args.memory_mb;
    let engine = Engine::new(config).map_err(|e| RunError::Setup(e.to_string()))?;
    let mut record = engine
        .prepare(ExecutionSpec {
            source,
            tools,
            timeout_ms: args.timeout_ms,
            session_id: "baton-run".into(),
            seed: None,
            files: Vec::new(),
            argv: args.argv.clone(),
            policy: Default::default(),
            lang: Default::default(),
            read_only: Vec::new(),
            directories: Vec::new(),
        })
        .map_err(|e| RunError::Setup(e.to_string()))?;
    let mut printed = Printed::default();
    let mut step = engine
        .start(&mut record)
        .await
        .map_err(|e| RunError::Setup(e.to_string()))?;
    let mut round = 0;
    loop {
        printed.catch_up(&record);
        match step {
            Step::Completed => return Ok(Ok(())),
            Step::Failed(failure) => {
                let line = failure.to_string();
                let told = record.stderr.trim_end().ends_with(&line);
                return Ok(Err((!told).then_some(line)));
            }
            Step::Paused(calls) => {
                round += 1;
                let results = answer_all(args, round, &calls)?;
                step = engine
                    .resume(&mut record, results)
                    .await
                    .map_err(|e| RunError::Setup(e.to_string()))?
                    .0;
            }
        }
    }
}

/// How much of the program's output is printed.
#[derive(Default)]
struct Printed {
    stdout: usize,
    stderr: usize,
}

impl Printed {
    /// Prints what the program wrote since the last call.
    fn catch_up(&mut self, record: &ExecutionRecord) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&record.stdout.as_bytes()[self.stdout.min(record.stdout.len())..]);
        let _ = out.flush();
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(&record.stderr.as_bytes()[self.stderr.min(record.stderr.len())..]);
        let _ = err.flush();
        self.stdout = record.stdout.len();
        self.stderr = record.stderr.len();
    }
}

fn read_source(file: &PathBuf) -> Result<String, RunError> {
    if file.as_os_str() == "-" {
        let mut source = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut source)
            .map_err(|e| RunError::Setup(format!("cannot read the program from stdin: {e}")))?;
        return Ok(source);
    }
    std::fs::read_to_string(file)
        .map_err(|e| RunError::Setup(format!("cannot read {}: {e}", file.display())))
}

fn read_tools(file: Option<&PathBuf>) -> Result<Vec<ToolDef>, RunError> {
    let Some(file) = file else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| RunError::Setup(format!("--tools {}: {e}", file.display())))?;
    let tools: Vec<WireTool> = serde_json::from_str(&text).map_err(|e| {
        RunError::Setup(format!(
            "--tools {}: not a JSON array of tools: {e}",
            file.display()
        ))
    })?;
    Ok(tools.into_iter().map(Into::into).collect())
}

/// The results of one round's calls, in their order.
fn answer_all(
    args: &RunArgs,
    round: usize,
    calls: &[CallRecord],
) -> Result<Vec<CallResult>, RunError> {
    calls
        .iter()
        .map(|call| {
            let input = RawValue::from_string(call.input.clone())
                .unwrap_or_else(|_| RawValue::NULL.to_owned());
            let result = match &args.answer {
                Some(command) => answer_by_command(command, call, &input)?,
                None => answer_by_asking(call, &input)?,
            };
            if args.verbose {
                let shown = match &result {
                    CallResult::Value(value) => value.clone(),
                    CallResult::Error(message) => format!("error: {message}"),
                };
                eprintln!("round {round}: {}({input}) -> {shown}", call.tool);
            }
            Ok(result)
        })
        .collect()
}

/// Runs `command` with the call on stdin.
fn answer_by_command(
    command: &str,
    call: &CallRecord,
    input: &RawValue,
) -> Result<CallResult, RunError> {
    let problem = |problem: String| RunError::Answer {
        tool: call.tool.clone(),
        problem,
    };
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| problem(format!("cannot start it: {e}")))?;
    // Serialised from a struct, not through a tree: the input keeps its text.
    #[derive(serde::Serialize)]
    struct Call<'a> {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    }
    let call_json = serde_json::to_string(&Call {
        id: &call.id,
        name: &call.tool,
        input,
    })
    .map_err(|e| problem(format!("cannot write its call: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(call_json.as_bytes());
    }
    let output = child
        .wait_with_output()
        .map_err(|e| problem(format!("it did not finish: {e}")))?;
    if !output.status.success() {
        let message = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        return Ok(CallResult::Error(if message.is_empty() {
            format!("the tool failed ({})", output.status)
        } else {
            message
        }));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let text = text.trim();
    if text.is_empty() {
        return Ok(CallResult::Value("null".into()));
    }
    json_text(text)
        .map(CallResult::Value)
        .map_err(|e| problem(format!("its output is not JSON ({e}): {text:.200}")))
}

/// `text` as compact JSON text, of any depth (as a client's results are
/// read: [`crate::deep_json`]).
fn json_text(text: &str) -> Result<String, serde_json::Error> {
    let value: Box<RawValue> = serde_json::from_str(text)?;
    Ok(crate::deep_json::compact(value.get()))
}

/// Asks on the terminal for a call's result (a JSON value, or `!message`
/// for a tool error).
fn answer_by_asking(call: &CallRecord, input: &RawValue) -> Result<CallResult, RunError> {
    let nobody = || RunError::NobodyToAsk {
        tool: call.tool.clone(),
    };
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|_| nobody())?;
    let mut writer = tty.try_clone().map_err(|_| nobody())?;
    let mut lines = std::io::BufReader::new(tty).lines();
    loop {
        let _ = write!(
            writer,
            "{}({input}) = ? (JSON, or !message for an error) ",
            call.tool
        );
        let _ = writer.flush();
        let Some(Ok(line)) = lines.next() else {
            return Err(nobody());
        };
        if let Some(message) = line.strip_prefix('!') {
            return Ok(CallResult::Error(message.trim().to_owned()));
        }
        match json_text(line.trim()) {
            Ok(value) => return Ok(CallResult::Value(value)),
            Err(error) => {
                let _ = writeln!(writer, "not JSON: {error}");
            }
        }
    }
}
