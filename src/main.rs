//! The `baton` binary: `baton serve` runs the HTTP service; `baton run` runs
//! a Python file through the same engine without a server; `baton zygote` is
//! the sandbox process the server starts itself; `baton program` shows the
//! program a child would run (the rewrite and its sites; used by the oracle).

use std::io::Read;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use baton::sandbox::limits::ChildRlimits;

#[derive(Parser)]
#[command(
    name = "baton",
    version,
    about = "Durable programmatic tool calling for LLM-written Python"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service.
    Serve(Box<baton::config::ServeArgs>),
    /// Run a Python file through the engine and sandbox, without a server;
    /// tool calls are answered by --answer CMD or, on a terminal, by you.
    Run(Box<baton::run_file::RunArgs>),
    /// Internal: the sandbox zygote (started by `serve`, reads fork requests on stdin).
    #[command(hide = true)]
    Zygote {
        #[arg(long, default_value_t = 256)]
        memory_mb: u64,
        #[arg(long, default_value_t = 330)]
        cpu_seconds: u64,
        #[arg(long, default_value_t = 64)]
        open_files: u64,
        /// A server's control group to put each child in (repeated: one per
        /// hierarchy).
        #[arg(long = "cgroup")]
        cgroups: Vec<std::path::PathBuf>,
    },
    /// Internal: confines a child as the zygote does and attempts raw system
    /// calls against the targets (JSON: file, victim_pid, tcp_port,
    /// abstract_socket); prints what each returned. Used by the tests.
    #[command(hide = true)]
    SandboxProbe {
        #[arg(long)]
        targets: String,
        /// Leaves the system-call filter out, to test the other layers alone.
        #[arg(long)]
        without_seccomp: bool,
    },
    /// Print the program a child would run for the source on stdin, as JSON.
    Program {
        /// JSON array of tool definitions (`{"name", "parameters"}`).
        #[arg(long, default_value = "[]")]
        tools: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Zygote {
            memory_mb,
            cpu_seconds,
            open_files,
            cgroups,
        } => baton::vm::zygote_main(
            ChildRlimits {
                memory_mb,
                cpu_seconds,
                open_files,
            },
            cgroups,
        ),
        Command::Program { tools } => program_command(&tools),
        Command::SandboxProbe {
            targets,
            without_seccomp,
        } => match serde_json::from_str(&targets) {
            Ok(targets) => {
                ExitCode::from(baton::sandbox::probe::run(targets, !without_seccomp) as u8)
            }
            Err(error) => {
                eprintln!("baton sandbox-probe: --targets: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Serve(args) => baton::server::run(*args),
        Command::Run(args) => baton::run_file::run(*args),
    }
}

fn program_command(tools: &str) -> ExitCode {
    let mut source = String::new();
    if std::io::stdin().read_to_string(&mut source).is_err() {
        eprintln!("baton program: stdin is not UTF-8");
        return ExitCode::FAILURE;
    }
    let tools: Vec<baton::tools::WireTool> = match serde_json::from_str(tools) {
        Ok(tools) => tools,
        Err(error) => {
            eprintln!("baton program: --tools: {error}");
            return ExitCode::FAILURE;
        }
    };
    let tools: Vec<_> = tools.into_iter().map(Into::into).collect();
    let limits = baton::program::ProgramLimits::default();
    match baton::program::Program::build(&source, &tools, limits, &[], &[]) {
        Ok(program) => {
            println!("{}", program.to_json());
            ExitCode::SUCCESS
        }
        Err((error, report)) => {
            eprint!("{report}");
            eprintln!("baton program: {error}");
            ExitCode::FAILURE
        }
    }
}
