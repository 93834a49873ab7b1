//! The engine's configuration: where clocks come from, the limits of each
//! execution, the engine's settings and what a new execution runs. Every
//! default is the configuration's (`crate::config::defaults`).

use std::path::PathBuf;

use crate::config::defaults;
use crate::program::ProgramLimits;
use crate::sandbox::limits::ChildRlimits;
use crate::tools::ToolDef;

/// Where the clock values the code sees come from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClockSource {
    /// The server's real time.
    Real,
    /// A fixed schedule (tests): round `k` starts at `wall0 + k * step`.
    Fixed {
        /// Wall time of the start.
        wall0: f64,
        /// Seconds between rounds.
        step: f64,
    },
}

/// Limits of each execution.
#[derive(Clone, Debug)]
pub struct ExecLimits {
    /// Maximum stdout, bytes.
    pub stdout_cap: u64,
    /// Maximum stderr, bytes.
    pub stderr_cap: u64,
    /// Maximum size of one call's input JSON, bytes.
    pub max_input_bytes: u64,
    /// Python recursion limit.
    pub recursion_limit: u32,
    /// Maximum source size, bytes.
    pub max_source_bytes: usize,
    /// Time between the soft interrupt and the kill, milliseconds.
    pub grace_ms: u64,
    /// Most bytes in the virtual `/mnt/data` (and in a request's files).
    pub workspace_bytes: u64,
    /// Most files in the virtual `/mnt/data`.
    pub workspace_files: u64,
}

impl ExecLimits {
    /// The limits the child's runtime applies.
    pub fn program_limits(&self) -> ProgramLimits {
        ProgramLimits {
            recursion_limit: self.recursion_limit,
            recursion_cap: defaults::RECURSION_CAP,
            max_input_bytes: self.max_input_bytes,
            workspace_bytes: self.workspace_bytes,
            workspace_files: self.workspace_files,
            calls_per_round: defaults::CALLS_PER_ROUND,
            max_source_bytes: self.max_source_bytes,
        }
    }
}

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            stdout_cap: defaults::OUTPUT_CAP,
            stderr_cap: defaults::OUTPUT_CAP,
            max_input_bytes: defaults::MAX_TOOL_INPUT_BYTES,
            recursion_limit: defaults::RECURSION_LIMIT,
            max_source_bytes: defaults::MAX_SOURCE_BYTES,
            grace_ms: defaults::GRACE_MS,
            workspace_bytes: defaults::WORKSPACE_BYTES,
            workspace_files: defaults::WORKSPACE_FILES,
        }
    }
}

/// Configuration of an [`super::Engine`].
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The binary to start the zygote from.
    pub exe: PathBuf,
    /// Idle children kept ready.
    pub pool_size: usize,
    /// Parked children kept; beyond that the oldest is evicted (resumes cold).
    pub max_parked: usize,
    /// Private memory of all parked children together, bytes; beyond it the
    /// least recently parked are evicted (they resume cold).
    pub max_parked_bytes: u64,
    /// Per-execution limits.
    pub limits: ExecLimits,
    /// OS limits of each child.
    pub rlimits: ChildRlimits,
    /// Clock values the code sees.
    pub clock: ClockSource,
    /// Whether children get control groups where the machine allows.
    pub child_cgroups: bool,
}

impl EngineConfig {
    /// Defaults, starting children from `exe`.
    pub fn new(exe: PathBuf) -> Self {
        EngineConfig {
            exe,
            pool_size: defaults::POOL_SIZE,
            max_parked: defaults::MAX_PARKED,
            max_parked_bytes: defaults::MAX_PARKED_MB << 20,
            limits: ExecLimits::default(),
            rlimits: ChildRlimits::default(),
            clock: ClockSource::Real,
            child_cgroups: true,
        }
    }
}

/// What a new execution runs.
#[derive(Clone, Debug)]
pub struct ExecutionSpec {
    /// Python source.
    pub source: String,
    /// Tools of the request.
    pub tools: Vec<ToolDef>,
    /// Run-time budget over all rounds, milliseconds.
    pub timeout_ms: u64,
    /// Session the execution belongs to.
    pub session_id: String,
    /// Seed (random when `None`).
    pub seed: Option<[u8; 32]>,
    /// The workspace the code starts with.
    pub files: Vec<crate::journal::WorkspaceFile>,
    /// Command-line arguments (`sys.argv[1:]`).
    pub argv: Vec<String>,
    /// Tools code may not call; whether the end lists the calls.
    pub policy: crate::tools::CallPolicy,
    /// The language of `source`.
    pub lang: crate::program::Lang,
    /// Names of the files code may read and not change.
    pub read_only: Vec<String>,
    /// Directories under `/mnt/data` beside those of the files.
    pub directories: Vec<String>,
}
