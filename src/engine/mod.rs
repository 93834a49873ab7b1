//! The execution lifecycle: start a program in a child, pause it at tool
//! calls, resume it hot (the parked child) or cold (a fresh child replaying
//! the journal), enforce the run-time budget.
//!
//! The engine works on an [`ExecutionRecord`] the caller owns: every step
//! updates the record in place (output, rounds, the pending round, run time
//! used), so that after a step the caller can persist the record and it holds
//! everything a cold resume needs.
//!
//! Invariants:
//! - A parked child belongs to exactly one execution and is used for at most
//!   one resume; any failure to use it falls back to a cold resume.
//! - Run time is charged only for live stretches (the child measures them);
//!   the server's hard deadline is the remaining budget plus a grace period
//!   (plus, for a cold resume, an allowance for the replay).
//! - Output in the record never exceeds the caps, whatever a child sends.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::journal::{
    CallRecord, CallResult, ClockBase, ExecutionRecord, FrameSummary, PendingRound, Round,
    WorkspaceFile,
};
use crate::rewrite;
use crate::sandbox::limits::ChildRlimits;
use crate::sandbox::pool::{ChildProc, Pool};
use crate::sandbox::protocol::{
    ChildLimits, ChildOutcome, FrameError, FromChild, PendingCall, StartJob, ToChild, nonblocking,
};
use crate::sandbox::zygote::Supervisor;
use crate::tools::ToolDef;

mod parking;
pub mod program;

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

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            stdout_cap: 1 << 20,
            stderr_cap: 1 << 20,
            max_input_bytes: 1 << 20,
            recursion_limit: 1000,
            max_source_bytes: 256 << 10,
            grace_ms: 500,
            workspace_bytes: 32 << 20,
            workspace_files: 1000,
        }
    }
}

/// Configuration of an [`Engine`].
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
}

impl EngineConfig {
    /// Defaults, starting children from `exe`.
    pub fn new(exe: PathBuf) -> Self {
        EngineConfig {
            exe,
            pool_size: 4,
            max_parked: 256,
            max_parked_bytes: 1 << 30,
            limits: ExecLimits::default(),
            rlimits: ChildRlimits::default(),
            clock: ClockSource::Real,
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
}

/// Where an execution stands after a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Waiting on these calls (also in `record.pending`).
    Paused(Vec<CallRecord>),
    /// Ran to the end.
    Completed,
    /// Ended with this one-line error.
    Failed(String),
}

/// Failures of the engine itself (not of the user's code).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request cannot run (name collision, oversized source...).
    #[error("{0}")]
    BadRequest(String),
    /// The execution is not paused, or results do not match its calls.
    #[error("{0}")]
    NotPaused(String),
    /// The sandbox failed (zygote gone, fork failed).
    #[error("sandbox failure: {0}")]
    Sandbox(String),
}

/// Checks a batch a child reports: every call names a tool of the request
/// and carries a JSON object. The runtime guarantees both; a program that
/// calls the native bridge itself does not.
fn check_calls(record: &ExecutionRecord, calls: &[PendingCall]) -> Result<(), String> {
    for call in calls {
        if !record.tools.iter().any(|t| t.name == call.tool) {
            return Err(format!("Invalid tool call: no tool named {:?}", call.tool));
        }
        let is_object =
            serde_json::from_str::<serde_json::Value>(&call.input).is_ok_and(|v| v.is_object());
        if !is_object {
            return Err(format!(
                "Invalid tool call to {:?}: the input is not a JSON object",
                call.tool
            ));
        }
    }
    Ok(())
}

/// How the error of an execution whose child died begins.
const CRASHED: &str = "Execution crashed:";

/// The engine: a zygote, its pool of children and the parked executions.
pub struct Engine {
    config: EngineConfig,
    pool: Arc<Pool>,
    parked: Arc<parking::Parking>,
    running: Mutex<HashMap<[u8; 16], i32>>,
    supervisor: Arc<Supervisor>,
}

/// Counts of what the engine did, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResumeKind {
    /// The parked child continued.
    #[default]
    Hot,
    /// A fresh child replayed the journal.
    Cold,
}

impl Engine {
    /// Starts the zygote and fills the pool.
    pub fn new(config: EngineConfig) -> Result<Arc<Engine>, EngineError> {
        let supervisor = Supervisor::start(config.exe.clone(), config.rlimits.clone())
            .map_err(|e| EngineError::Sandbox(format!("cannot start the zygote: {e}")))?;
        let pool = Pool::new(supervisor.clone(), config.pool_size);
        pool.refill();
        let parked = parking::Parking::new(config.max_parked, config.max_parked_bytes);
        Ok(Arc::new(Engine {
            config,
            pool,
            parked,
            running: Mutex::new(HashMap::new()),
            supervisor,
        }))
    }

    /// Whether the sandbox can serve now: its current zygote has produced a
    /// ready child (false at start, and after a zygote's death until its
    /// replacement's first child is ready).
    pub fn sandbox_ready(&self) -> bool {
        self.pool.is_ready()
    }

    /// How many zygotes have died since the start.
    pub fn zygote_deaths(&self) -> u64 {
        self.supervisor.deaths()
    }

    /// The current zygote's pid (tests kill it).
    pub fn zygote_pid(&self) -> Option<u32> {
        self.supervisor.current().ok().map(|z| z.pid())
    }

    /// Tops the pool up (after a zygote's death the refill that noticed it
    /// may have stopped).
    pub fn refill(&self) {
        self.pool.refill();
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Checks a spec and makes the record of a new execution.
    pub fn prepare(&self, spec: ExecutionSpec) -> Result<ExecutionRecord, EngineError> {
        if spec.source.len() > self.config.limits.max_source_bytes {
            return Err(EngineError::BadRequest(format!(
                "code is {} bytes, over the limit of {}",
                spec.source.len(),
                self.config.limits.max_source_bytes
            )));
        }
        rewrite::bind_tools(&spec.tools).map_err(|e| EngineError::BadRequest(e.to_string()))?;
        let clock0 = self.clock_at(0, None);
        Ok(ExecutionRecord {
            id: rand::random(),
            session_id: spec.session_id,
            source: spec.source,
            tools: spec.tools,
            timeout_ms: spec.timeout_ms,
            used_ms: 0,
            seed: spec.seed.unwrap_or_else(rand::random),
            hash_seed: crate::vm::HASH_SEED,
            clock0,
            rounds: Vec::new(),
            pending: None,
            stdout: String::new(),
            stderr: String::new(),
            files: spec.files,
            argv: spec.argv,
            produced: Vec::new(),
            removed: Vec::new(),
        })
    }

    /// Runs a new execution to its first pause or its end.
    pub async fn start(&self, record: &mut ExecutionRecord) -> Result<Step, EngineError> {
        let program = match self.program_json(record) {
            Ok(program) => program,
            Err(step) => return Ok(self.fail_early(record, step)),
        };
        self.run_fresh(record, program).await
    }

    /// Continues a paused execution with one result per pending call, hot if
    /// its child is parked here, else cold. Returns the step and how it resumed.
    pub async fn resume(
        &self,
        record: &mut ExecutionRecord,
        results: Vec<CallResult>,
    ) -> Result<(Step, ResumeKind), EngineError> {
        let clock = self.accept_results(record, results)?;
        if remaining_ms(record) == 0 {
            self.evict(&record.id);
            return Ok((Step::Failed("Time limit exceeded".into()), ResumeKind::Hot));
        }
        if let Some(mut child) = self.parked.take(&record.id) {
            let results = record
                .rounds
                .last()
                .map(|r| r.results.clone())
                .unwrap_or_default();
            let message = ToChild::Resume {
                results,
                clock,
                budget_ms: remaining_ms(record),
            };
            if nonblocking::write_frame(&mut child.stream, &message)
                .await
                .is_ok()
            {
                let step = self.await_child(record, child, Duration::ZERO).await;
                // A child that died before answering (killed or OOM-killed
                // while parked, or dying then) left the record untouched:
                // replay instead, as when the frame cannot even be written.
                if !matches!(&step, Step::Failed(error) if error.starts_with(CRASHED)) {
                    return Ok((step, ResumeKind::Hot));
                }
                tracing::warn!(execution = %record.id_hex(), "parked child died; resuming cold");
            }
        }
        let program = match self.program_json(record) {
            Ok(program) => program,
            Err(step) => return Ok((self.fail_early(record, step), ResumeKind::Cold)),
        };
        Ok((self.run_fresh(record, program).await?, ResumeKind::Cold))
    }

    /// Drops the parked child of an execution (it will resume cold).
    pub fn evict(&self, id: &[u8; 16]) -> bool {
        self.parked.evict(id)
    }

    /// Kills the child of an execution, running or parked. Returns whether
    /// there was one.
    pub fn kill(&self, id: &[u8; 16]) -> bool {
        let running = self.running.lock().ok().and_then(|r| r.get(id).copied());
        if let Some(pid) = running {
            // SAFETY: sending a signal to a child this engine forked.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        self.evict(id) || running.is_some()
    }

    /// The limits executions run under.
    pub fn limits(&self) -> &ExecLimits {
        &self.config.limits
    }

    /// Number of parked children.
    pub fn parked_count(&self) -> usize {
        self.parked.count()
    }

    /// Private memory of the parked children, bytes (as measured).
    pub fn parked_bytes(&self) -> u64 {
        self.parked.bytes()
    }

    /// Number of idle pre-forked children.
    pub fn idle_count(&self) -> usize {
        self.pool.idle_count()
    }

    /// The pid of the child parked for an execution (tests kill it).
    pub fn parked_pid(&self, id: &[u8; 16]) -> Option<i32> {
        self.parked.pid(id)
    }

    fn accept_results(
        &self,
        record: &mut ExecutionRecord,
        results: Vec<CallResult>,
    ) -> Result<ClockBase, EngineError> {
        let Some(pending) = record.pending.take() else {
            return Err(EngineError::NotPaused("the execution is not paused".into()));
        };
        if pending.calls.len() != results.len() {
            let count = pending.calls.len();
            record.pending = Some(pending);
            return Err(EngineError::NotPaused(format!(
                "expected {count} results, got {}",
                results.len()
            )));
        }
        let previous = record
            .rounds
            .last()
            .map_or(record.clock0, |r| r.resume_clock);
        let clock = self.clock_at(record.rounds.len() + 1, Some((record.clock0, previous)));
        record.rounds.push(Round {
            calls: pending.calls,
            results,
            stdout_len: pending.stdout_len,
            stderr_len: pending.stderr_len,
            frame: pending.frame,
            resume_clock: clock,
        });
        Ok(clock)
    }

    fn clock_at(&self, round: usize, history: Option<(ClockBase, ClockBase)>) -> ClockBase {
        match self.config.clock {
            ClockSource::Fixed { wall0, step } => ClockBase {
                wall: wall0 + step * round as f64,
                mono: 1000.0 + step * round as f64,
            },
            ClockSource::Real => {
                let wall = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                match history {
                    None => ClockBase { wall, mono: 1000.0 },
                    Some((start, previous)) => ClockBase {
                        wall,
                        mono: (start.mono + (wall - start.wall)).max(previous.mono + 0.001),
                    },
                }
            }
        }
    }

    fn program_json(&self, record: &ExecutionRecord) -> Result<String, (String, String)> {
        program::program_json_with(
            &record.source,
            &record.tools,
            &self.config.limits,
            &record.argv,
        )
    }

    fn fail_early(&self, record: &mut ExecutionRecord, (error, stderr): (String, String)) -> Step {
        self.append_output(record, "", &stderr);
        Step::Failed(error)
    }

    async fn run_fresh(
        &self,
        record: &mut ExecutionRecord,
        program_json: String,
    ) -> Result<Step, EngineError> {
        let job = start_job(record, program_json, &self.config.limits);
        let replay_allowance = if record.rounds.is_empty() {
            Duration::ZERO
        } else {
            Duration::from_millis(record.used_ms.saturating_mul(2).saturating_add(2000))
        };
        let message = ToChild::Start(Box::new(job));
        for _attempt in 0..2 {
            let mut child = self
                .pool
                .take()
                .await
                .map_err(|e| EngineError::Sandbox(e.to_string()))?;
            if nonblocking::write_frame(&mut child.stream, &message)
                .await
                .is_ok()
            {
                let step = self.await_child(record, child, replay_allowance).await;
                // Refill after the answer: a fork (copying the zygote's page
                // tables) competes for the CPU with the child's run.
                self.pool.refill();
                return Ok(step);
            }
        }
        Err(EngineError::Sandbox("no child accepted the job".into()))
    }

    /// Waits for the child's answer to a start or resume and applies it.
    async fn await_child(
        &self,
        record: &mut ExecutionRecord,
        mut child: ChildProc,
        allowance: Duration,
    ) -> Step {
        let deadline = Duration::from_millis(
            remaining_ms(record)
                .saturating_add(self.config.limits.grace_ms)
                .saturating_add(250),
        ) + allowance;
        let started = Instant::now();
        if let Ok(mut running) = self.running.lock() {
            running.insert(record.id, child.pid);
        }
        let reply = tokio::time::timeout(
            deadline,
            nonblocking::read_frame::<FromChild>(&mut child.stream),
        )
        .await;
        if let Ok(mut running) = self.running.lock() {
            running.remove(&record.id);
        }
        match reply {
            Err(_elapsed) => {
                child.kill();
                record.used_ms = record.timeout_ms;
                Step::Failed("Time limit exceeded".into())
            }
            Ok(Ok(FromChild::Paused {
                calls,
                frame_json,
                stdout,
                stderr,
                run_us,
            })) => {
                self.charge(record, run_us, started);
                self.append_output(record, &stdout, &stderr);
                if let Err(error) = check_calls(record, &calls) {
                    child.kill();
                    return Step::Failed(error);
                }
                let calls = self.pend(record, calls, &frame_json);
                self.park(record.id, child);
                Step::Paused(calls)
            }
            Ok(Ok(FromChild::Finished {
                outcome,
                files,
                removed,
                stdout,
                stderr,
                run_us,
            })) => {
                self.charge(record, run_us, started);
                self.append_output(record, &stdout, &stderr);
                if let Err(error) = self.check_produced(&files) {
                    return Step::Failed(error);
                }
                if let Some(bad) = removed
                    .iter()
                    .find(|name| !record.files.iter().any(|f| &f.name == *name))
                {
                    return Step::Failed(format!(
                        "Invalid workspace report: {bad:?} was not a file of the request"
                    ));
                }
                record.produced = files;
                record.removed = removed;
                match outcome {
                    ChildOutcome::Completed => Step::Completed,
                    ChildOutcome::Failed(error) => Step::Failed(error),
                }
            }
            Ok(Ok(FromChild::Ready)) => {
                child.kill();
                Step::Failed(format!(
                    "{CRASHED} the interpreter sent an unexpected message"
                ))
            }
            Ok(Ok(FromChild::OutOfMemory)) => {
                child.kill();
                Step::Failed("Out of memory".into())
            }
            Ok(Err(FrameError::Closed)) => {
                // Killed, or ended by an interpreter panic (src/vm/panics.rs).
                tracing::warn!(execution = %record.id_hex(), "the interpreter process died");
                Step::Failed(format!("{CRASHED} the interpreter process died"))
            }
            Ok(Err(error)) => {
                child.kill();
                Step::Failed(format!("{CRASHED} {error}"))
            }
        }
    }

    fn charge(&self, record: &mut ExecutionRecord, run_us: u64, started: Instant) {
        let measured = if run_us == 0 {
            started.elapsed().as_micros() as u64
        } else {
            run_us
        };
        record.used_ms = record
            .used_ms
            .saturating_add(measured.div_ceil(1000))
            .min(record.timeout_ms);
    }

    fn append_output(&self, record: &mut ExecutionRecord, stdout: &str, stderr: &str) {
        append_capped(&mut record.stdout, stdout, self.config.limits.stdout_cap);
        append_capped(&mut record.stderr, stderr, self.config.limits.stderr_cap);
    }

    /// Checks what a child reports as files it produced.
    fn check_produced(&self, files: &[WorkspaceFile]) -> Result<(), String> {
        let limits = &self.config.limits;
        let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        if total > limits.workspace_bytes || files.len() as u64 > limits.workspace_files {
            return Err("Workspace limit exceeded".into());
        }
        match files
            .iter()
            .find(|f| crate::workspace::check_name(&f.name).is_err())
        {
            Some(bad) => Err(format!("Invalid workspace file name {:?}", bad.name)),
            None => Ok(()),
        }
    }

    fn pend(
        &self,
        record: &mut ExecutionRecord,
        calls: Vec<PendingCall>,
        frame_json: &str,
    ) -> Vec<CallRecord> {
        let round = record.rounds.len() + 1;
        let prefix = &record.id_hex()[..8];
        let calls: Vec<CallRecord> = calls
            .into_iter()
            .enumerate()
            .map(|(index, call)| CallRecord {
                id: format!("call_{prefix}_{round}_{index}"),
                site: call.site,
                tool: call.tool,
                input: call.input,
                line: call.line,
            })
            .collect();
        record.pending = Some(PendingRound {
            calls: calls.clone(),
            stdout_len: record.stdout.len() as u64,
            stderr_len: record.stderr.len() as u64,
            frame: parse_frame(frame_json),
        });
        calls
    }

    fn park(&self, id: [u8; 16], child: ChildProc) {
        let zygote = self.supervisor.current().ok().map(|z| z.pid() as i32);
        self.parked.park(id, child, zygote);
    }
}

fn append_capped(target: &mut String, text: &str, cap: u64) {
    let room = (cap as usize).saturating_sub(target.len());
    let mut cut = text.len().min(room);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    target.push_str(&text[..cut]);
}

fn parse_frame(frame_json: &str) -> FrameSummary {
    let value: serde_json::Value = serde_json::from_str(frame_json).unwrap_or_default();
    FrameSummary {
        function: value["function"].as_str().unwrap_or_default().to_owned(),
        line: value["line"].as_u64().unwrap_or(0) as u32,
        locals: value["locals"].as_str().unwrap_or("{}").to_owned(),
    }
}

/// Run time left to an execution, milliseconds.
fn remaining_ms(record: &ExecutionRecord) -> u64 {
    record.timeout_ms.saturating_sub(record.used_ms)
}

/// The job a fresh child gets for `record`: its program, and the journal to
/// replay before going live (empty for a first run).
pub fn start_job(record: &ExecutionRecord, program_json: String, limits: &ExecLimits) -> StartJob {
    StartJob {
        program_json,
        seed: record.seed,
        clock0: record.clock0,
        replay: record.rounds.clone(),
        recorded_stdout: record.stdout.clone(),
        recorded_stderr: record.stderr.clone(),
        files: record.files.clone(),
        limits: ChildLimits {
            budget_ms: remaining_ms(record),
            grace_ms: limits.grace_ms,
            stdout_cap: limits.stdout_cap,
            stderr_cap: limits.stderr_cap,
            max_input_bytes: limits.max_input_bytes,
        },
    }
}
