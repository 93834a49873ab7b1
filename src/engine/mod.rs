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

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::Instrument;

use crate::failure::Failure;
use crate::journal::{
    CallRecord, CallResult, ClockBase, EndedCell, ExecutionRecord, FrameSummary, PendingRound,
    Round, SessionCell, StoredExtent,
};
use crate::program::{CannotRun, HASH_SEED, Lang, Program};
use crate::rewrite;
use crate::sandbox::cgroups::ChildGroups;
use crate::sandbox::pool::{ChildProc, Pool, RequestHold};
use crate::sandbox::protocol::{
    ChildLimits, ChildOutcome, EarlierCell, FrameError, FromChild, PendingCall, StartJob, ToChild,
    nonblocking,
};
use crate::sandbox::zygote::{Launch, Supervisor};
use crate::timing::step;

mod config;
mod parking;
mod reports;
mod running;

pub use config::{ClockSource, EngineConfig, ExecLimits, ExecutionSpec};

/// Where an execution stands after a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Waiting on these calls (also in `record.pending`).
    Paused(Vec<CallRecord>),
    /// Ran to the end.
    Completed,
    /// Ended with this failure.
    Failed(Failure),
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
    /// A session's cell must run in a fresh child, which needs the
    /// session's earlier cells: call again with them.
    #[error("the session's earlier cells are needed")]
    HistoryNeeded,
}

/// The engine: a zygote, its pool of children and the parked executions.
pub struct Engine {
    config: EngineConfig,
    pool: Arc<Pool>,
    parked: Arc<parking::Parking>,
    running: Mutex<running::Running>,
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

impl ResumeKind {
    /// How a session's cell found its namespace, as its answer says it:
    /// `new` for a first cell, `hot` when the child held it, else `cold`.
    pub fn of_cell(self, index: u32) -> &'static str {
        match self {
            _ if index <= 1 => "new",
            ResumeKind::Hot => "hot",
            ResumeKind::Cold => "cold",
        }
    }
}

/// A stretch of running, as the server times it.
#[derive(Clone, Copy)]
struct Stretch {
    /// When the job or the results were sent.
    started: Instant,
    /// What a replay before the live part may take (cold resumes only).
    allowance: Duration,
}

/// The children's control groups where the kernel and this process's
/// rights allow them; said in the log either way.
fn child_groups(memory_mb: u64) -> Option<Arc<ChildGroups>> {
    let owner = crate::sandbox::isolation::zygote_ids();
    match ChildGroups::prepare(owner) {
        Ok(groups) => {
            tracing::info!("sandbox: {}", groups.describe(memory_mb));
            Some(groups)
        }
        Err(reason) => {
            tracing::warn!(
                "sandbox: NO control group per child ({reason}); memory is bounded by each child's address-space limit, parked memory read from /proc"
            );
            None
        }
    }
}

impl Engine {
    /// Starts the zygote and fills the pool.
    pub fn new(config: EngineConfig) -> Result<Arc<Engine>, EngineError> {
        let groups = if config.child_cgroups {
            child_groups(config.rlimits.memory_mb)
        } else {
            tracing::info!("sandbox: no control group per child (--child-cgroups false)");
            None
        };
        let supervisor = Supervisor::start(Launch {
            exe: config.exe.clone(),
            limits: config.rlimits.clone(),
            groups: groups.clone(),
        })
        .map_err(|e| EngineError::Sandbox(format!("cannot start the zygote: {e}")))?;
        let pool = Pool::new(supervisor.clone(), config.pool_size);
        pool.refill();
        let parked = parking::Parking::new(config.max_parked, config.max_parked_bytes, groups);
        Ok(Arc::new(Engine {
            config,
            pool,
            parked,
            running: Mutex::new(running::Running::default()),
            supervisor,
        }))
    }

    /// Whether the sandbox can serve now: its current zygote has produced a
    /// ready child (false at start, and after a zygote's death until its
    /// replacement's first child is ready).
    pub fn sandbox_ready(&self) -> bool {
        self.pool.is_ready()
    }

    /// At the server's end: stops the zygote (its children die with it)
    /// and removes the children's control groups.
    pub fn shutdown(&self) {
        self.supervisor.stop();
        if let Some(groups) = self.supervisor.groups() {
            groups.remove_all(Duration::from_secs(2));
        }
    }

    /// How many zygotes have died since the start.
    pub fn zygote_deaths(&self) -> u64 {
        self.supervisor.deaths()
    }

    /// The current zygote's pid (tests kill it).
    pub fn zygote_pid(&self) -> Option<u32> {
        self.supervisor.current().ok().map(|z| z.pid())
    }

    /// Marks a request in flight until the hold is dropped: the pool's
    /// refills wait for the requests in flight to end before they fork.
    pub fn hold_for_request(&self) -> RequestHold {
        self.pool.hold_for_request()
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
        rewrite::python_names(&spec.tools).map_err(|e| EngineError::BadRequest(e.to_string()))?;
        crate::contract::admit(&spec.tools).map_err(EngineError::BadRequest)?;
        let clock0 = self.clock_at(0, None);
        Ok(ExecutionRecord {
            id: rand::random(),
            session_id: spec.session_id,
            source: spec.source,
            tools: spec.tools,
            timeout_ms: spec.timeout_ms,
            used_ms: 0,
            seed: spec.seed.unwrap_or_else(rand::random),
            hash_seed: HASH_SEED,
            clock0,
            rounds: Vec::new(),
            pending: None,
            stdout: String::new(),
            stderr: String::new(),
            files: spec.files,
            argv: spec.argv,
            produced: Vec::new(),
            removed: Vec::new(),
            stored: StoredExtent::default(),
            direct_only: spec.policy.direct_only,
            include_history: spec.policy.include_history,
            read_only: spec.read_only,
            lang: spec.lang,
            directories: spec.directories,
            directories_left: Vec::new(),
            contracts: Default::default(),
            owner: [0; 8],
            round_times: Default::default(),
            cell: None,
            names: Vec::new(),
        })
    }

    /// Makes `record` the cell `cell` of a session: its program is built
    /// for the cell's sites and marker, and its clock goes on from
    /// `previous` (the first cell's start clock and the last clock the
    /// previous cell saw), so `time.monotonic()` never goes back.
    pub fn place_cell(
        &self,
        record: &mut ExecutionRecord,
        cell: SessionCell,
        previous: Option<(ClockBase, ClockBase)>,
    ) {
        if let Some((first, last)) = previous {
            record.clock0 = match self.config.clock {
                ClockSource::Fixed { step, .. } => ClockBase {
                    wall: last.wall + step,
                    mono: last.mono + step,
                },
                ClockSource::Real => self.clock_at(1, Some((first, last))),
            };
        }
        record.cell = Some(cell);
    }

    /// Runs a new execution to its first pause or its end.
    pub async fn start(&self, record: &mut ExecutionRecord) -> Result<Step, EngineError> {
        self.start_cell(record, Some(&[]))
            .await
            .map(|(step, _)| step)
    }

    /// [`Engine::start`] for a session's cell: in the child that holds the
    /// session's namespace when one is parked here (hot), else in a fresh
    /// child that first runs the session's `earlier` cells again (all of
    /// them, in order; [`EngineError::HistoryNeeded`] without them).
    pub async fn start_cell(
        &self,
        record: &mut ExecutionRecord,
        earlier: Option<&[EndedCell]>,
    ) -> Result<(Step, ResumeKind), EngineError> {
        // Positions count the listed cells (a compaction's base first);
        // a parked child is found by its key (`SessionCell::hot_key`).
        let index = record.cell.as_ref().map_or(1, |cell| cell.index as usize);
        let held = record.cell.as_ref().is_some_and(|cell| {
            cell.hot_key()
                .is_some_and(|key| self.parked.holds(&cell.session, key))
        });
        if !held && earlier.is_none_or(|earlier| earlier.len() + 1 != index) {
            // Cold, and the caller must read the earlier cells first: the
            // program is built once, when it can run.
            return Err(EngineError::HistoryNeeded);
        }
        let program = match step!("rewrite").in_scope(|| self.program_json(record)) {
            Ok(program) => program,
            Err(step) => return Ok((self.fail_early(record, step), ResumeKind::Cold)),
        };
        if let Some(step) = self.start_hot(record, &program).await {
            return Ok((step, ResumeKind::Hot));
        }
        match earlier {
            Some(earlier) if earlier.len() + 1 == index => Ok((
                self.run_fresh(record, program, earlier).await?,
                ResumeKind::Cold,
            )),
            _ => Err(EngineError::HistoryNeeded),
        }
    }

    /// Runs a session's cell in the child parked with the session's
    /// namespace (its earlier cells all run there), if there is one; `None`
    /// when there is none, or it died before answering (the cell then runs
    /// cold, as if it had not been tried).
    async fn start_hot(&self, record: &mut ExecutionRecord, program: &str) -> Option<Step> {
        let cell = record.cell.as_ref()?;
        let mut child = self.parked.take(&cell.session, cell.hot_key()?)?;
        let next = crate::sandbox::protocol::NextCell {
            program_json: program.to_owned(),
            seed: record.seed,
            clock0: record.clock0,
            files: record.files.clone(),
            limits: child_limits(record, &self.config.limits),
        };
        let message = ToChild::Cell(Box::new(next));
        nonblocking::write_frame(&mut child.stream, &message)
            .await
            .ok()?;
        let step = self
            .await_child(record, child, Duration::ZERO)
            .instrument(step!("child"))
            .await;
        if matches!(&step, Step::Failed(Failure::Crashed(_))) {
            tracing::warn!(execution = %record.id_hex(), "a session's parked child died; running the cell cold");
            record.stdout.clear();
            record.stderr.clear();
            record.used_ms = 0;
            return None;
        }
        Some(step)
    }

    /// Continues a paused execution with one result per pending call, hot if
    /// its child is parked here, else cold. Returns the step and how it resumed.
    pub async fn resume(
        &self,
        record: &mut ExecutionRecord,
        results: Vec<CallResult>,
    ) -> Result<(Step, ResumeKind), EngineError> {
        self.answer(record, results)?;
        self.resume_answered(record).await
    }

    /// Runs the round `record` was last answered in ([`Engine::answer`]) to
    /// the next pause or the end, hot if the child that paused it is parked
    /// here, else cold by replay; a record with no rounds runs from its
    /// start. The round's results and clock are the record's, so a round
    /// run again after a crash sees what it saw the first time.
    pub async fn resume_answered(
        &self,
        record: &mut ExecutionRecord,
    ) -> Result<(Step, ResumeKind), EngineError> {
        self.resume_answered_with(record, None).await
    }

    /// [`Engine::resume_answered`]; a session's cell resumed cold needs its
    /// session's `earlier` cells ([`EngineError::HistoryNeeded`] without
    /// them; a hot resume never reads them).
    pub async fn resume_answered_with(
        &self,
        record: &mut ExecutionRecord,
        earlier: Option<&[EndedCell]>,
    ) -> Result<(Step, ResumeKind), EngineError> {
        if self.running().has_ended(&record.id) {
            // Cancelled after its round was claimed: not run at all.
            self.evict(&record.id);
            return Ok((Step::Failed(Failure::Cancelled), ResumeKind::Hot));
        }
        if remaining_ms(record) == 0 {
            self.evict(&record.id);
            return Ok((Step::Failed(Failure::TimeLimit), ResumeKind::Hot));
        }
        let parked = match (record.rounds.len().checked_sub(1), record.rounds.last()) {
            (Some(paused_after), Some(round)) => self
                .parked
                .take(&record.id, paused_after)
                .map(|child| (child, round.results.clone(), round.resume_clock)),
            _ => None,
        };
        if let Some((mut child, results, clock)) = parked {
            let message = ToChild::Resume {
                results,
                clock,
                budget_ms: remaining_ms(record),
            };
            if nonblocking::write_frame(&mut child.stream, &message)
                .await
                .is_ok()
            {
                let step = self
                    .await_child(record, child, Duration::ZERO)
                    .instrument(step!("child"))
                    .await;
                // A child that died before answering (killed or OOM-killed
                // while parked, or dying then) left the record untouched:
                // replay instead, as when the frame cannot even be written.
                // (One a cancel killed answers `Cancelled`: not replayed.)
                if !matches!(&step, Step::Failed(Failure::Crashed(_))) {
                    return Ok((step, ResumeKind::Hot));
                }
                tracing::warn!(execution = %record.id_hex(), "parked child died; resuming cold");
            }
        }
        let earlier = match (&record.cell, earlier) {
            (Some(cell), Some(earlier)) if cell.index as usize == earlier.len() + 1 => earlier,
            (Some(cell), _) if cell.index > 1 => return Err(EngineError::HistoryNeeded),
            _ => &[],
        };
        let program = match step!("rewrite").in_scope(|| self.program_json(record)) {
            Ok(program) => program,
            Err(step) => return Ok((self.fail_early(record, step), ResumeKind::Cold)),
        };
        Ok((
            self.run_fresh(record, program, earlier).await?,
            ResumeKind::Cold,
        ))
    }

    /// Drops the parked child of an execution (it will resume cold).
    pub fn evict(&self, id: &[u8; 16]) -> bool {
        self.parked.evict(id)
    }

    /// Kills the child of an execution that ended (was cancelled, or is
    /// gone), running or parked; the step it was running is not run again,
    /// and no step of it starts here afterwards (`running`). Returns
    /// whether there was a child.
    pub fn kill(&self, id: &[u8; 16]) -> bool {
        let running = self.running().end(*id, Instant::now());
        if let Some(killer) = &running {
            killer.end_execution();
        }
        self.evict(id) || running.is_some()
    }

    /// The children running now, by execution, and the executions ended.
    /// A poisoned table is still whole (each use is one insert, remove or
    /// read), so it is used as it is: a cancel must always find the child
    /// to kill.
    fn running(&self) -> std::sync::MutexGuard<'_, running::Running> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    /// Answers the pending round of `record` with one result per pending
    /// call (in their order): the round joins the record's rounds, with the
    /// clock the code resumes at. Nothing runs ([`Engine::resume_answered`]).
    pub fn answer(
        &self,
        record: &mut ExecutionRecord,
        results: Vec<CallResult>,
    ) -> Result<(), EngineError> {
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
        Ok(())
    }

    fn clock_at(&self, round: usize, history: Option<(ClockBase, ClockBase)>) -> ClockBase {
        match self.config.clock {
            ClockSource::Fixed { wall0, step } => ClockBase {
                wall: wall0 + step * round as f64,
                mono: crate::journal::MONOTONIC_ORIGIN + step * round as f64,
            },
            ClockSource::Real => {
                let wall = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                match history {
                    None => ClockBase {
                        wall,
                        mono: crate::journal::MONOTONIC_ORIGIN,
                    },
                    Some((start, previous)) => ClockBase {
                        wall,
                        mono: (start.mono + (wall - start.wall)).max(previous.mono + 0.001),
                    },
                }
            }
        }
    }

    fn program_json(&self, record: &ExecutionRecord) -> Result<String, CannotRun> {
        let limits = self.config.limits.program_limits();
        let program = match (record.lang, &record.cell) {
            (Lang::Python, Some(cell)) => Program::build_cell(
                &record.source,
                &record.tools,
                limits,
                &record.direct_only,
                cell,
            )?,
            (Lang::Python, None) => Program::build(
                &record.source,
                &record.tools,
                limits,
                &record.argv,
                &record.direct_only,
            )?,
            (Lang::Bash, _) => Program::shell(&record.source, limits, &record.argv),
        };
        Ok(program
            .with_workspace(&record.read_only, &record.directories)
            .to_json())
    }

    fn fail_early(&self, record: &mut ExecutionRecord, (error, stderr): (String, String)) -> Step {
        self.append_output(record, "", &stderr);
        Step::Failed(Failure::Unrunnable(error))
    }

    async fn run_fresh(
        &self,
        record: &mut ExecutionRecord,
        program_json: String,
        earlier: &[EndedCell],
    ) -> Result<Step, EngineError> {
        // What this child replays: the earlier cells, and this record's
        // rounds when it has some.
        let mut replayed = earlier
            .iter()
            .map(|cell| &cell.record)
            .chain((!record.rounds.is_empty()).then_some(&*record));
        if let Some(other) = replayed.find(|r| r.hash_seed != HASH_SEED) {
            // Another build hashed strings differently: a replay would not
            // iterate sets in the first run's order.
            return Ok(Step::Failed(Failure::replay_seed_differs(
                other.hash_seed,
                HASH_SEED,
            )));
        }
        let mut job = start_job(record, program_json, &self.config.limits);
        job.earlier = match self.earlier_cells(earlier) {
            Ok(cells) => cells,
            Err(step) => return Ok(self.fail_early(record, step)),
        };
        let replay_allowance = replay_allowance(record, earlier);
        let message = ToChild::Start(Box::new(job));
        for _attempt in 0..2 {
            let mut child = self
                .pool
                .take()
                .instrument(step!("take_child"))
                .await
                .map_err(|e| EngineError::Sandbox(e.to_string()))?;
            if nonblocking::write_frame(&mut child.stream, &message)
                .instrument(step!("send_job"))
                .await
                .is_ok()
            {
                let step = self
                    .await_child(record, child, replay_allowance)
                    .instrument(step!("child"))
                    .await;
                // Refill after the answer: a fork (copying the zygote's page
                // tables) competes for the CPU with the child's run.
                self.pool.refill();
                return Ok(step);
            }
        }
        Err(EngineError::Sandbox("no child accepted the job".into()))
    }

    /// What a fresh child runs before a session's cell: each earlier cell's
    /// program (built as when it ran), journal and ending.
    fn earlier_cells(&self, earlier: &[EndedCell]) -> Result<Vec<EarlierCell>, CannotRun> {
        earlier
            .iter()
            .map(|cell| {
                let record = &cell.record;
                Ok(EarlierCell {
                    program_json: self.program_json(record)?,
                    seed: record.seed,
                    clock0: record.clock0,
                    replay: record.rounds.clone(),
                    stdout: record.stdout.clone(),
                    stderr: record.stderr.clone(),
                    files: record.files.clone(),
                    ended: cell.ended.clone(),
                })
            })
            .collect()
    }

    /// Waits for the child's answer to a start or resume and applies it.
    async fn await_child(
        &self,
        record: &mut ExecutionRecord,
        mut child: ChildProc,
        allowance: Duration,
    ) -> Step {
        let started = Instant::now();
        match self.read_answer(record, &mut child, allowance).await {
            Some(Ok(message)) => {
                let stretch = Stretch { started, allowance };
                self.apply_answer(record, child, message, stretch)
            }
            Some(Err(error)) => lost_child(record, &child, error),
            None => {
                child.kill();
                record.used_ms = record.timeout_ms;
                Step::Failed(Failure::TimeLimit)
            }
        }
    }

    /// The child's next message, read within the remaining budget plus the
    /// grace period and `allowance`; `None` past that deadline. While it
    /// runs, a cancel can kill it; an execution ended before the child was
    /// registered gets its child killed at once (read as `Closed`).
    async fn read_answer(
        &self,
        record: &ExecutionRecord,
        child: &mut ChildProc,
        allowance: Duration,
    ) -> Option<Result<FromChild, FrameError>> {
        let deadline = Duration::from_millis(
            remaining_ms(record)
                .saturating_add(self.config.limits.grace_ms)
                .saturating_add(250),
        ) + allowance;
        if !self.running().register(record.id, child.killer.clone()) {
            // The execution ended between the claim of this step and now.
            child.killer.end_execution();
            return Some(Err(FrameError::Closed));
        }
        let answer = tokio::time::timeout(
            deadline,
            nonblocking::read_frame::<FromChild>(&mut child.stream),
        )
        .await;
        self.running().unregister(&record.id);
        answer.ok()
    }

    /// Applies what the child answered: a pause parks it, an end records
    /// its files; a report no honest runtime makes fails the execution.
    fn apply_answer(
        &self,
        record: &mut ExecutionRecord,
        child: ChildProc,
        message: FromChild,
        stretch: Stretch,
    ) -> Step {
        match message {
            FromChild::Paused {
                calls,
                frame,
                stdout,
                stderr,
                run_us,
            } => {
                self.charge(record, run_us, stretch);
                self.append_output(record, &stdout, &stderr);
                let checked = reports::off_the_workers(reports::input_bytes(&calls), || {
                    reports::check_calls(record, &self.config.limits, &calls)
                });
                if let Err(error) = checked {
                    child.kill();
                    return Step::Failed(Failure::InvalidReport(error));
                }
                let calls = self.pend(record, calls, frame);
                self.park(record, child);
                Step::Paused(calls)
            }
            FromChild::Finished {
                outcome,
                files,
                removed,
                directories,
                stdout,
                stderr,
                run_us,
                names,
            } => {
                self.charge(record, run_us, stretch);
                self.append_output(record, &stdout, &stderr);
                if record.cell.is_some() {
                    // What the child says is cut again: the runtime's
                    // bounds are not believed.
                    record.names = names
                        .into_iter()
                        .take(crate::journal::MAX_NAMES)
                        .map(|n| crate::journal::NameInfo::cut(n.name, n.ty, n.repr))
                        .collect();
                }
                if let ChildOutcome::Failed(failure) = &outcome
                    && let Err(error) = reports::check_failure(failure)
                {
                    child.kill();
                    return Step::Failed(Failure::InvalidReport(error));
                }
                let reported = reports::Workspace {
                    files: &files,
                    removed: &removed,
                    directories: &directories,
                };
                if let Err(error) = reports::check_workspace(record, &self.config.limits, &reported)
                {
                    return Step::Failed(Failure::InvalidReport(error));
                }
                record.produced = files;
                record.removed = removed;
                record.directories_left = directories;
                let step = match outcome {
                    ChildOutcome::Completed => Step::Completed,
                    ChildOutcome::Failed(failure) => Step::Failed(failure),
                };
                // A session's cell that ended by itself: its child holds
                // the namespace for the next cell.
                // (Not a compaction's snapshot: its child is done.)
                if let (
                    Some(cell),
                    Step::Completed | Step::Failed(Failure::Exception(_) | Failure::Exit(_)),
                ) = (&record.cell, &step)
                    && !cell.snapshot
                {
                    let place = parking::Place {
                        id: cell.session,
                        owner: record.owner,
                        rounds: cell.park_key(),
                        session: true,
                    };
                    self.park_at(place, child);
                }
                step
            }
            FromChild::Ready => {
                child.kill();
                Step::Failed(Failure::Crashed(
                    "the interpreter sent an unexpected message".into(),
                ))
            }
            FromChild::OutOfMemory => {
                child.kill();
                Step::Failed(Failure::OutOfMemory)
            }
        }
    }

    /// Charges a stretch of running to the execution's budget by the
    /// server's own clock: the time from the job or the results sent to the
    /// answer read, less what a cold resume's replay may take (its
    /// allowance). The child's own figure (`run_us`) is only ever a floor:
    /// a child cannot buy itself time by saying it ran less.
    fn charge(&self, record: &mut ExecutionRecord, run_us: u64, stretch: Stretch) {
        let wall = stretch.started.elapsed().saturating_sub(stretch.allowance);
        let measured = u64::try_from(wall.as_micros())
            .unwrap_or(u64::MAX)
            .max(run_us);
        record.used_ms = record
            .used_ms
            .saturating_add(measured.div_ceil(1000))
            .min(record.timeout_ms);
    }

    fn append_output(&self, record: &mut ExecutionRecord, stdout: &str, stderr: &str) {
        append_capped(&mut record.stdout, stdout, self.config.limits.stdout_cap);
        append_capped(&mut record.stderr, stderr, self.config.limits.stderr_cap);
    }

    fn pend(
        &self,
        record: &mut ExecutionRecord,
        calls: Vec<PendingCall>,
        frame: FrameSummary,
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
            frame,
        });
        calls
    }

    /// Parks the child of `record`'s execution, paused after the rounds it
    /// completed, for its owner.
    fn park(&self, record: &ExecutionRecord, child: ChildProc) {
        let place = parking::Place {
            id: record.id,
            owner: record.owner,
            rounds: record.rounds.len(),
            session: false,
        };
        self.park_at(place, child);
    }

    fn park_at(&self, place: parking::Place, child: ChildProc) {
        let zygote = self.supervisor.current().ok().map(|z| z.pid() as i32);
        self.parked.park(place, child, zygote);
    }

    /// The sessions whose namespaces children parked here hold: the
    /// session, its principal, and the key of the last cell the child ran
    /// (`SessionCell::park_key`).
    pub fn parked_sessions(&self) -> Vec<([u8; 16], [u8; 8], usize)> {
        self.parked.sessions()
    }

    /// The executions whose children are parked here.
    pub fn parked_ids(&self) -> Vec<[u8; 16]> {
        self.parked.ids()
    }

    /// The executions whose children run here now.
    pub fn running_ids(&self) -> Vec<[u8; 16]> {
        self.running().ids()
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

/// The failure of an execution whose child's socket failed: it died
/// (killed, or ended by an interpreter panic, `src/vm/panics.rs`), or sent
/// what is not a frame. `Cancelled` when a cancel killed it
/// ([`Engine::kill`]): the step is not run again.
fn lost_child(record: &ExecutionRecord, child: &ChildProc, error: FrameError) -> Step {
    if child.killer.execution_ended() {
        return Step::Failed(Failure::Cancelled);
    }
    if let FrameError::Closed = error {
        tracing::warn!(execution = %record.id_hex(), "the interpreter process died");
        return Step::Failed(Failure::Crashed("the interpreter process died".into()));
    }
    child.kill();
    Step::Failed(Failure::Crashed(error.to_string()))
}

/// The limits a child enforces on itself for `record`'s next stretch.
fn child_limits(record: &ExecutionRecord, limits: &ExecLimits) -> ChildLimits {
    ChildLimits {
        budget_ms: remaining_ms(record),
        grace_ms: limits.grace_ms,
        stdout_cap: limits.stdout_cap,
        stderr_cap: limits.stderr_cap,
        max_input_bytes: limits.max_input_bytes,
    }
}

/// What replaying before the live part may take: the run time the
/// journal's rounds and the earlier cells took, twice, and two seconds;
/// nothing for a first run with nothing before it.
fn replay_allowance(record: &ExecutionRecord, earlier: &[EndedCell]) -> Duration {
    if record.rounds.is_empty() && earlier.is_empty() {
        return Duration::ZERO;
    }
    let used = earlier
        .iter()
        .map(|cell| cell.record.used_ms)
        .fold(record.used_ms, u64::saturating_add);
    Duration::from_millis(used.saturating_mul(2).saturating_add(2000))
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
        limits: child_limits(record, limits),
        earlier: Vec::new(),
        session_cell: record.cell.is_some(),
    }
}
