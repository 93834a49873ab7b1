//! The state of one execution inside a child: its socket to the server, the
//! journal it replays (compared by `replay.rs`), the virtual clock and
//! entropy (`clock.rs`), the captured output and the watchdog's deadlines
//! (`watchdog.rs`), and the end of the program.
//!
//! Invariants:
//! - While replay rounds remain, a pause is answered from the journal and is
//!   first checked against it (site, tool and input of every call, and the
//!   output so far); the first difference is sticky: every later pause and the
//!   final outcome report it.
//! - Output already reported to the server (or recorded in the journal) is
//!   never sent again: the server gets deltas.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::failure::{Failure, Stream};
use crate::journal::{CallResult, FrameSummary, NameInfo, Round, WorkspaceFile};
use crate::sandbox::protocol::{
    ChildLimits, ChildOutcome, EarlierCell, FromChild, NextCell, PendingCall, StartJob, ToChild,
    read_frame, write_frame,
};
use crate::vm::clock::{Clock, Entropy};
use crate::vm::exit::exit_now;
use crate::vm::replay::{compare_calls, describe_output_difference, prefix};
use crate::vm::watchdog::{Shared, Watch};

/// Why a write was refused.
pub enum WriteRefused {
    /// The stream is over its cap.
    OverCap(Failure),
}

/// One execution's state in the child.
pub struct Host {
    reader: UnixStream,
    /// Shared with the watchdog.
    pub shared: Arc<Shared>,
    replay: VecDeque<Round>,
    replayed: usize,
    recorded_stdout: String,
    recorded_stderr: String,
    /// The virtual clock.
    pub clock: Clock,
    /// The entropy stream.
    pub entropy: Entropy,
    limits: ChildLimits,
    /// Sticky non-determinism report.
    pub divergence: Option<Failure>,
    /// Sticky output-cap report: the stream over its cap.
    pub over_cap: Option<Stream>,
    stretch_started: Instant,
    /// The workspace the code starts with (taken by the runtime once).
    pub files: Vec<WorkspaceFile>,
    /// Files the code created or changed, reported by the runtime at its end.
    pub produced: Vec<WorkspaceFile>,
    /// Names of the request's files the code removed.
    pub removed: Vec<String>,
    /// Directories the code left empty, reported at its end.
    pub directories: Vec<String>,
    /// A session's cell: the names its globals hold, reported at its end.
    pub names: Vec<NameInfo>,
    /// While an earlier cell of a session runs again: its number (from 1)
    /// and how it ended; the current cell's own job waits in `current`.
    earlier: Option<(usize, Option<Failure>)>,
    /// The current cell's replay, output, clock, entropy and files, kept
    /// aside while the earlier cells run.
    current: Option<CellJob>,
    /// A session's cell: ended by itself, the child waits for the next.
    session_cell: bool,
}

/// What one cell (or a whole execution) runs from: the part of a job that
/// differs between a session's cells.
struct CellJob {
    replay: Vec<Round>,
    recorded_stdout: String,
    recorded_stderr: String,
    clock0: crate::journal::ClockBase,
    seed: [u8; 32],
    files: Vec<WorkspaceFile>,
}

impl Host {
    /// Reads the start job from the socket and sets up the execution.
    /// Returns the host, the program, and the earlier cells of a session
    /// to run before it ([`Host::begin_earlier`]).
    pub fn from_socket(
        reader: UnixStream,
        shared: Arc<Shared>,
    ) -> Result<(Host, String, Vec<EarlierCell>), String> {
        let mut reader = reader;
        let job = match read_frame::<ToChild>(&mut reader) {
            Ok(ToChild::Start(job)) => job,
            Ok(_) => return Err("expected a start job".into()),
            Err(e) => return Err(e.to_string()),
        };
        let StartJob {
            program_json,
            seed,
            clock0,
            replay,
            recorded_stdout,
            recorded_stderr,
            limits,
            files,
            earlier,
            session_cell,
        } = *job;
        let mut host = Host {
            reader,
            shared,
            replay: VecDeque::new(),
            replayed: 0,
            recorded_stdout: String::new(),
            recorded_stderr: String::new(),
            clock: Clock::new(clock0),
            entropy: Entropy::new(seed),
            limits,
            divergence: None,
            over_cap: None,
            stretch_started: Instant::now(),
            files: Vec::new(),
            produced: Vec::new(),
            removed: Vec::new(),
            directories: Vec::new(),
            names: Vec::new(),
            earlier: None,
            current: None,
            session_cell,
        };
        let job = CellJob {
            replay,
            recorded_stdout,
            recorded_stderr,
            clock0,
            seed,
            files,
        };
        // A session's earlier cells run first; the job waits for them.
        if earlier.is_empty() {
            host.load(job);
        } else {
            host.current = Some(job);
        }
        Ok((host, program_json, earlier))
    }

    /// Makes `job` the one the code runs from.
    fn load(&mut self, job: CellJob) {
        self.replay = job.replay.into();
        self.replayed = 0;
        self.recorded_stdout = job.recorded_stdout;
        self.recorded_stderr = job.recorded_stderr;
        self.clock = Clock::new(job.clock0);
        self.entropy = Entropy::new(job.seed);
        self.files = job.files;
    }

    /// Before the earlier cell number `number` of a session runs again: its
    /// journal, output, clock, entropy and files replace the current cell's
    /// (kept aside until [`Host::begin_current`]).
    pub fn begin_earlier(&mut self, number: usize, cell: EarlierCell) {
        self.earlier = Some((number, cell.ended));
        self.load(CellJob {
            replay: cell.replay,
            recorded_stdout: cell.stdout,
            recorded_stderr: cell.stderr,
            clock0: cell.clock0,
            seed: cell.seed,
            files: cell.files,
        });
    }

    /// After an earlier cell ran again: it must have made every call of its
    /// journal, ended as it did, and written what it wrote; its output is
    /// then dropped (the client had it). The first difference is the
    /// execution's failure.
    pub fn end_earlier(&mut self, error: Option<Failure>) -> Result<(), Failure> {
        let Some((number, ended)) = self.earlier.take() else {
            return Ok(());
        };
        if let Some(divergence) = &self.divergence {
            return Err(divergence.clone());
        }
        let error = match self.over_cap {
            Some(stream) => Some(Failure::OutputCap(stream)),
            None => error,
        };
        let difference = if !self.replay.is_empty() {
            Some(format!(
                "it ended with {} rounds of its journal left",
                self.replay.len()
            ))
        } else if error != ended {
            Some(format!(
                "it ended with {error:?}, its journal says {ended:?}"
            ))
        } else {
            self.compare_whole_output().err()
        };
        if let Some(difference) = difference {
            return Err(Failure::NonDeterminism(format!(
                "Non-deterministic replay of session cell {number}: {difference}"
            )));
        }
        if let Ok(mut output) = self.shared.output.lock() {
            *output = Default::default();
        }
        self.produced.clear();
        self.removed.clear();
        self.directories.clear();
        self.names.clear();
        Ok(())
    }

    /// After the earlier cells: the current cell's job back in place.
    pub fn begin_current(&mut self) {
        if let Some(job) = self.current.take() {
            self.load(job);
        }
    }

    fn compare_whole_output(&self) -> Result<(), String> {
        let Ok(output) = self.shared.output.lock() else {
            return Ok(());
        };
        if output.stdout != self.recorded_stdout {
            return Err(describe_output_difference(
                "stdout",
                &self.recorded_stdout,
                &output.stdout,
            ));
        }
        if output.stderr != self.recorded_stderr {
            return Err(describe_output_difference(
                "stderr",
                &self.recorded_stderr,
                &output.stderr,
            ));
        }
        Ok(())
    }

    /// True while journal rounds remain to be replayed, and all through an
    /// earlier cell of a session (its sleeps stay virtual).
    pub fn replaying(&self) -> bool {
        !self.replay.is_empty() || self.earlier.is_some()
    }

    /// Starts the live part if there is nothing to replay.
    pub fn begin(&mut self) {
        if !self.replaying() {
            self.go_live(self.limits.budget_ms);
        }
    }

    fn go_live(&mut self, budget_ms: u64) {
        self.stretch_started = Instant::now();
        let soft = self.stretch_started + Duration::from_millis(budget_ms);
        let hard = soft + Duration::from_millis(self.limits.grace_ms);
        self.shared.set_watch(Watch::Armed { soft, hard });
    }

    /// Appends output, enforcing the caps.
    pub fn write(&mut self, fd: i32, text: &str) -> Result<(), WriteRefused> {
        if let Some(stream) = self.over_cap {
            return Err(WriteRefused::OverCap(Failure::OutputCap(stream)));
        }
        let Ok(mut output) = self.shared.output.lock() else {
            return Ok(());
        };
        let (buffer, cap, stream) = if fd == 2 {
            (&mut output.stderr, self.limits.stderr_cap, Stream::Stderr)
        } else {
            (&mut output.stdout, self.limits.stdout_cap, Stream::Stdout)
        };
        let room = (cap as usize).saturating_sub(buffer.len());
        if text.len() <= room {
            buffer.push_str(text);
            return Ok(());
        }
        let mut cut = room;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        buffer.push_str(&text[..cut]);
        self.over_cap = Some(stream);
        Err(WriteRefused::OverCap(Failure::OutputCap(stream)))
    }

    /// Sleeps live time (capped by the watchdog), or only advances the clock in replay.
    pub fn sleep(&mut self, secs: f64) {
        let secs = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
        self.clock.advance(secs);
        if !self.replaying() {
            let capped = secs.min(24.0 * 3600.0);
            std::thread::sleep(Duration::from_secs_f64(capped));
        }
    }

    /// A pause: answered from the journal while replaying, else by the server.
    pub fn pause(
        &mut self,
        calls: Vec<PendingCall>,
        frame: FrameSummary,
    ) -> Result<Vec<CallResult>, Failure> {
        if let Some(divergence) = &self.divergence {
            return Err(divergence.clone());
        }
        match self.replay.pop_front() {
            Some(round) => self.replay_pause(calls, round),
            None if self.earlier.is_some() => {
                let line = calls.first().map_or(0, |c| c.line);
                let failure = Failure::replay_differs(
                    self.replayed + 1,
                    line,
                    "an earlier cell of the session made calls its journal lacks",
                );
                self.divergence = Some(failure.clone());
                Err(failure)
            }
            None => self.live_pause(calls, frame),
        }
    }

    fn replay_pause(
        &mut self,
        calls: Vec<PendingCall>,
        round: Round,
    ) -> Result<Vec<CallResult>, Failure> {
        self.replayed += 1;
        let step = self.replayed;
        if let Err(difference) =
            compare_calls(&round, &calls).and_then(|()| self.compare_output(&round))
        {
            let line = calls.first().map_or(0, |c| c.line);
            let failure = Failure::replay_differs(step, line, &difference);
            self.divergence = Some(failure.clone());
            return Err(failure);
        }
        self.clock = self.clock.resumed(round.resume_clock);
        if !self.replaying() {
            if let Ok(mut output) = self.shared.output.lock() {
                output.reported_out = output.stdout.len();
                output.reported_err = output.stderr.len();
            }
            self.go_live(self.limits.budget_ms);
        }
        Ok(round.results)
    }

    fn compare_output(&self, round: &Round) -> Result<(), String> {
        let Ok(output) = self.shared.output.lock() else {
            return Ok(());
        };
        let expected_out = prefix(&self.recorded_stdout, round.stdout_len);
        let expected_err = prefix(&self.recorded_stderr, round.stderr_len);
        if output.stdout != expected_out {
            return Err(describe_output_difference(
                "stdout",
                expected_out,
                &output.stdout,
            ));
        }
        if output.stderr != expected_err {
            return Err(describe_output_difference(
                "stderr",
                expected_err,
                &output.stderr,
            ));
        }
        Ok(())
    }

    fn live_pause(
        &mut self,
        calls: Vec<PendingCall>,
        frame: FrameSummary,
    ) -> Result<Vec<CallResult>, Failure> {
        if self.shared.timed_out() {
            // The code caught the interrupt and went on to call a tool.
            self.finish(None)
        }
        self.shared.set_watch(Watch::Idle);
        let expected = calls.len();
        let run_us = self.stretch_us();
        let (stdout, stderr) = self.take_deltas();
        let message = FromChild::Paused {
            calls,
            frame,
            stdout,
            stderr,
            run_us,
        };
        self.send(&message);
        match read_frame::<ToChild>(&mut self.reader) {
            Ok(ToChild::Resume {
                results,
                clock,
                budget_ms,
            }) if results.len() == expected => {
                self.clock = self.clock.resumed(clock);
                self.go_live(budget_ms);
                Ok(results)
            }
            _ => exit_now(),
        }
    }

    fn stretch_us(&self) -> u64 {
        self.stretch_started.elapsed().as_micros() as u64
    }

    fn take_deltas(&self) -> (String, String) {
        match self.shared.output.lock() {
            Ok(mut output) => output.take_deltas(),
            Err(_) => (String::new(), String::new()),
        }
    }

    fn send(&self, message: &FromChild) {
        let sent = match self.shared.writer.lock() {
            Ok(mut writer) => write_frame(&mut *writer, message).is_ok(),
            Err(_) => false,
        };
        if !sent {
            exit_now();
        }
    }

    /// Reports the end of the program and exits the process.
    pub fn finish(&mut self, error: Option<Failure>) -> ! {
        self.report_end(error);
        exit_now()
    }

    /// Reports the end of a cell. A session's cell that ended by itself
    /// keeps the process and its globals for the session's next cell:
    /// the child waits (idle) for it and returns its program, set up as
    /// [`Host::begin_cell`] says; anything else ends the process.
    pub fn end_cell(&mut self, error: Option<Failure>) -> String {
        let ended = self.report_end(error);
        if !self.session_cell || !ended.as_ref().is_none_or(Failure::is_the_codes_own) {
            exit_now()
        }
        match read_frame::<ToChild>(&mut self.reader) {
            Ok(ToChild::Cell(next)) => self.begin_cell(*next),
            _ => exit_now(),
        }
    }

    /// Sets up a session's next cell in this child: its clock, entropy,
    /// files and limits; fresh output and reports; its run time armed.
    fn begin_cell(&mut self, next: NextCell) -> String {
        let NextCell {
            program_json,
            seed,
            clock0,
            files,
            limits,
        } = next;
        self.load(CellJob {
            replay: Vec::new(),
            recorded_stdout: String::new(),
            recorded_stderr: String::new(),
            clock0,
            seed,
            files,
        });
        self.limits = limits;
        self.divergence = None;
        self.over_cap = None;
        if let Ok(mut output) = self.shared.output.lock() {
            *output = Default::default();
        }
        self.go_live(self.limits.budget_ms);
        program_json
    }

    /// Sends `Finished` (the failure that ends the code, its output and,
    /// when it ended by itself, its files and names); returns the failure.
    fn report_end(&mut self, error: Option<Failure>) -> Option<Failure> {
        self.shared.set_watch(Watch::Idle);
        let error = self.final_error(error);
        let run_us = self.stretch_us();
        let (stdout, stderr) = self.take_deltas();
        // What the code did to its files stands when it ended itself
        // (completed, raised, exited); not when it was stopped.
        let keeps_files = error.as_ref().is_none_or(Failure::is_the_codes_own);
        let (files, removed, directories) = if keeps_files {
            (
                std::mem::take(&mut self.produced),
                std::mem::take(&mut self.removed),
                std::mem::take(&mut self.directories),
            )
        } else {
            (Vec::new(), Vec::new(), Vec::new())
        };
        let outcome = match &error {
            Some(error) => ChildOutcome::Failed(error.clone()),
            None => ChildOutcome::Completed,
        };
        let names = std::mem::take(&mut self.names);
        self.send(&FromChild::Finished {
            outcome,
            files,
            removed,
            directories,
            stdout,
            stderr,
            run_us,
            names,
        });
        error
    }

    fn final_error(&self, error: Option<Failure>) -> Option<Failure> {
        if let Some(divergence) = &self.divergence {
            return Some(divergence.clone());
        }
        if self.shared.timed_out() {
            return Some(Failure::TimeLimit);
        }
        if self.replaying() {
            return Some(Failure::replay_ended_early(
                self.replayed,
                self.replay.len(),
            ));
        }
        if let Some(stream) = self.over_cap {
            return Some(Failure::OutputCap(stream));
        }
        error
    }
}
