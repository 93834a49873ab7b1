//! The state of one execution inside a child: its socket to the server, the
//! journal it replays, the virtual clock, the entropy stream, the captured
//! output and the run-time watchdog.
//!
//! Invariants:
//! - While replay rounds remain, a pause is answered from the journal and is
//!   first checked against it (site, tool and input of every call, and the
//!   output so far); the first difference is sticky: every later pause and the
//!   final outcome report it.
//! - The watchdog is armed only while code runs live; a pause disarms it, so
//!   time spent waiting for the client never counts.
//! - Output already reported to the server (or recorded in the journal) is
//!   never sent again: the server gets deltas.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::journal::{CallResult, ClockBase, Round, WorkspaceFile};
use crate::sandbox::protocol::{
    ChildLimits, ChildOutcome, FromChild, PendingCall, StartJob, ToChild, read_frame, write_frame,
};

/// The contract's error for an execution over its run-time budget.
const TIME_LIMIT: &str = "Time limit exceeded";

/// Captured output, shared with the watchdog so a hard kill still reports it.
#[derive(Default)]
pub struct Output {
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
    /// Bytes of stdout the server already has.
    pub reported_out: usize,
    /// Bytes of stderr the server already has.
    pub reported_err: usize,
}

impl Output {
    /// Takes the unreported parts and marks them reported.
    pub fn take_deltas(&mut self) -> (String, String) {
        let out = self.stdout[self.reported_out..].to_owned();
        let err = self.stderr[self.reported_err..].to_owned();
        self.reported_out = self.stdout.len();
        self.reported_err = self.stderr.len();
        (out, err)
    }
}

/// What the watchdog is waiting for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Watch {
    Idle,
    Armed { soft: Instant, hard: Instant },
    Fired { hard: Instant },
}

/// State shared between the interpreter thread and the watchdog thread.
pub struct Shared {
    /// Captured output.
    pub output: Mutex<Output>,
    /// The write half of the socket (frames are written whole under this lock).
    pub writer: Mutex<UnixStream>,
    watch: Mutex<Watch>,
    wake: Condvar,
    /// Set when the soft time limit fired: however the code handled the
    /// interrupt (a bare `except`, a thread that swallows it), the
    /// execution's outcome is `Time limit exceeded`.
    timed_out: AtomicBool,
}

impl Shared {
    /// The state shared with the watchdog, writing frames to `writer`.
    pub fn new(writer: UnixStream) -> Arc<Shared> {
        Arc::new(Shared {
            output: Mutex::new(Output::default()),
            writer: Mutex::new(writer),
            watch: Mutex::new(Watch::Idle),
            wake: Condvar::new(),
            timed_out: AtomicBool::new(false),
        })
    }
}

/// The virtual clock: deterministic, advanced by reads and sleeps.
#[derive(Clone, Copy)]
pub struct Clock {
    base: ClockBase,
    reads: u64,
    slept: f64,
}

impl Clock {
    /// A clock starting at `base`.
    pub fn new(base: ClockBase) -> Self {
        Clock {
            base,
            reads: 0,
            slept: 0.0,
        }
    }

    /// Reads wall (`kind == 0`) or monotonic time; every read advances 1 µs.
    pub fn read(&mut self, kind: i32) -> f64 {
        self.reads += 1;
        let base = if kind == 0 {
            self.base.wall
        } else {
            self.base.mono
        };
        base + self.reads as f64 * 1e-6 + self.slept
    }

    /// Moves the clock forward by a sleep.
    pub fn advance(&mut self, secs: f64) {
        self.slept += secs;
    }

    /// The clock after a pause: from `base`, but never behind what the code
    /// has already seen (a sleep before the pause may have carried the
    /// virtual time past the server's base).
    pub fn resumed(&self, base: ClockBase) -> Self {
        let seen = |start: f64| start + self.reads as f64 * 1e-6 + self.slept;
        Clock::new(ClockBase {
            wall: base.wall.max(seen(self.base.wall)),
            mono: base.mono.max(seen(self.base.mono)),
        })
    }
}

/// The execution's entropy: SHA-256 of (seed, block counter), in order.
pub struct Entropy {
    seed: [u8; 32],
    counter: u64,
    pending: Vec<u8>,
}

impl Entropy {
    /// The stream of `seed`.
    pub fn new(seed: [u8; 32]) -> Self {
        Entropy {
            seed,
            counter: 0,
            pending: Vec::new(),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if self.pending.is_empty() {
                let mut hasher = Sha256::new();
                hasher.update(self.seed);
                hasher.update(self.counter.to_le_bytes());
                self.counter += 1;
                self.pending = hasher.finalize().to_vec();
                self.pending.reverse();
            }
            let want = n - out.len();
            let take = want.min(self.pending.len());
            for _ in 0..take {
                if let Some(byte) = self.pending.pop() {
                    out.push(byte);
                }
            }
        }
        out
    }
}

/// Why a write was refused.
pub enum WriteRefused {
    /// The stream is over its cap; the text is the contract's error.
    OverCap(&'static str),
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
    pub divergence: Option<String>,
    /// Sticky output-cap report.
    pub over_cap: Option<&'static str>,
    stretch_started: Instant,
    /// The workspace the code starts with (taken by the runtime once).
    pub files: Vec<WorkspaceFile>,
    /// Files the code created or changed, reported by the runtime at its end.
    pub produced: Vec<WorkspaceFile>,
    /// Names of the request's files the code removed.
    pub removed: Vec<String>,
}

impl Host {
    /// Reads the start job from the socket and sets up the execution.
    pub fn from_socket(reader: UnixStream, shared: Arc<Shared>) -> Result<(Host, String), String> {
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
        } = *job;
        let host = Host {
            reader,
            shared,
            replay: replay.into(),
            replayed: 0,
            recorded_stdout,
            recorded_stderr,
            clock: Clock::new(clock0),
            entropy: Entropy::new(seed),
            limits,
            divergence: None,
            over_cap: None,
            stretch_started: Instant::now(),
            files,
            produced: Vec::new(),
            removed: Vec::new(),
        };
        Ok((host, program_json))
    }

    /// True while journal rounds remain to be replayed.
    pub fn replaying(&self) -> bool {
        !self.replay.is_empty()
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
        self.set_watch(Watch::Armed { soft, hard });
    }

    fn set_watch(&self, watch: Watch) {
        if let Ok(mut current) = self.shared.watch.lock() {
            *current = watch;
            self.shared.wake.notify_all();
        }
    }

    /// Appends output, enforcing the caps.
    pub fn write(&mut self, fd: i32, text: &str) -> Result<(), WriteRefused> {
        if let Some(error) = self.over_cap {
            return Err(WriteRefused::OverCap(error));
        }
        let Ok(mut output) = self.shared.output.lock() else {
            return Ok(());
        };
        let (buffer, cap, error) = if fd == 2 {
            (
                &mut output.stderr,
                self.limits.stderr_cap,
                "stderr length exceeded",
            )
        } else {
            (
                &mut output.stdout,
                self.limits.stdout_cap,
                "stdout length exceeded",
            )
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
        self.over_cap = Some(error);
        Err(WriteRefused::OverCap(error))
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
        frame_json: String,
    ) -> Result<Vec<CallResult>, String> {
        if let Some(divergence) = &self.divergence {
            return Err(divergence.clone());
        }
        match self.replay.pop_front() {
            Some(round) => self.replay_pause(calls, round),
            None => self.live_pause(calls, frame_json),
        }
    }

    fn replay_pause(
        &mut self,
        calls: Vec<PendingCall>,
        round: Round,
    ) -> Result<Vec<CallResult>, String> {
        self.replayed += 1;
        let step = self.replayed;
        if let Err(difference) =
            compare_calls(&round, &calls).and_then(|()| self.compare_output(&round))
        {
            let line = calls.first().map_or(0, |c| c.line);
            let message =
                format!("Non-deterministic replay at round {step} (line {line}): {difference}");
            self.divergence = Some(message.clone());
            return Err(message);
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
        frame_json: String,
    ) -> Result<Vec<CallResult>, String> {
        if self.shared.timed_out.load(Ordering::SeqCst) {
            // The code caught the interrupt and went on to call a tool.
            self.finish(None)
        }
        self.set_watch(Watch::Idle);
        let expected = calls.len();
        let run_us = self.stretch_us();
        let (stdout, stderr) = self.take_deltas();
        let message = FromChild::Paused {
            calls,
            frame_json,
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
    pub fn finish(&mut self, error: Option<String>) -> ! {
        self.set_watch(Watch::Idle);
        let error = self.final_error(error);
        let run_us = self.stretch_us();
        let (stdout, stderr) = self.take_deltas();
        let (outcome, files, removed) = match error {
            Some(error) => (ChildOutcome::Failed(error), Vec::new(), Vec::new()),
            None => (
                ChildOutcome::Completed,
                std::mem::take(&mut self.produced),
                std::mem::take(&mut self.removed),
            ),
        };
        self.send(&FromChild::Finished {
            outcome,
            files,
            removed,
            stdout,
            stderr,
            run_us,
        });
        exit_now()
    }

    fn final_error(&self, error: Option<String>) -> Option<String> {
        if let Some(divergence) = &self.divergence {
            return Some(divergence.clone());
        }
        if self.shared.timed_out.load(Ordering::SeqCst) {
            return Some(TIME_LIMIT.to_owned());
        }
        if self.replaying() {
            return Some(format!(
                "Non-deterministic replay: the program ended after round {} but the journal has {} more",
                self.replayed,
                self.replay.len()
            ));
        }
        if let Some(error) = self.over_cap {
            return Some(error.to_owned());
        }
        error
    }
}

fn prefix(text: &str, len: u64) -> &str {
    text.get(..len as usize).unwrap_or(text)
}

fn compare_calls(round: &Round, calls: &[PendingCall]) -> Result<(), String> {
    if round.calls.len() != calls.len() {
        return Err(format!(
            "the journal has {} call(s) here, the program made {}: {}",
            round.calls.len(),
            calls.len(),
            calls
                .iter()
                .map(describe_call)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (index, (recorded, made)) in round.calls.iter().zip(calls).enumerate() {
        let same_input = json_equal(&recorded.input, &made.input);
        if recorded.site != made.site || recorded.tool != made.tool || !same_input {
            return Err(format!(
                "call {} was {}({}) at site {}, now {} at site {}",
                index + 1,
                recorded.tool,
                recorded.input,
                recorded.site,
                describe_call(made),
                made.site
            ));
        }
    }
    Ok(())
}

fn describe_call(call: &PendingCall) -> String {
    format!("{}({})", call.tool, call.input)
}

fn json_equal(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn describe_output_difference(stream: &str, expected: &str, got: &str) -> String {
    let at = expected
        .char_indices()
        .zip(got.chars())
        .find(|((_, a), b)| a != b)
        .map_or(expected.len().min(got.len()), |((i, _), _)| i);
    let show = |s: &str| {
        let tail: String = s.get(at..).unwrap_or("").chars().take(40).collect();
        format!("{tail:?}")
    };
    format!(
        "{stream} differs from the recorded run at byte {at}: recorded {}, now {}",
        show(expected),
        show(got)
    )
}

/// Ends the child at once: no destructors, no interpreter finalization.
pub fn exit_now() -> ! {
    exit_with(0)
}

/// Ends the process at once with `status`, like [`exit_now`].
pub fn exit_with(status: i32) -> ! {
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(status) }
}

/// Starts the watchdog thread of this child. `interrupt` raises the time-limit
/// exception inside the interpreter; at the hard deadline the watchdog reports
/// the time-out itself and ends the process.
pub fn spawn_watchdog(shared: Arc<Shared>, interrupt: impl Fn() + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("watchdog".into())
        .stack_size(64 * 1024)
        .spawn(move || watchdog_loop(&shared, &interrupt));
    if spawned.is_err() {
        exit_now();
    }
}

fn watchdog_loop(shared: &Shared, interrupt: &dyn Fn()) {
    let Ok(mut watch) = shared.watch.lock() else {
        return;
    };
    loop {
        let now = Instant::now();
        let wait = match *watch {
            Watch::Idle => None,
            Watch::Armed { soft, hard } if now >= soft => {
                *watch = Watch::Fired { hard };
                shared.timed_out.store(true, Ordering::SeqCst);
                interrupt();
                Some(hard.saturating_duration_since(now))
            }
            Watch::Armed { soft, .. } => Some(soft - now),
            Watch::Fired { hard } if now >= hard => {
                drop(watch);
                hard_timeout(shared);
            }
            Watch::Fired { hard } => Some(hard - now),
        };
        watch = match wait {
            None => match shared.wake.wait(watch) {
                Ok(guard) => guard,
                Err(_) => return,
            },
            Some(duration) => match shared.wake.wait_timeout(watch, duration) {
                Ok((guard, _)) => guard,
                Err(_) => return,
            },
        };
    }
}

/// The code ignored the soft interrupt (or is stuck in native code): report
/// the time-out with the output so far and end the process.
fn hard_timeout(shared: &Shared) -> ! {
    let deadline = Instant::now() + Duration::from_millis(50);
    let (stdout, stderr) = loop {
        if let Ok(mut output) = shared.output.try_lock() {
            break output.take_deltas();
        }
        if Instant::now() >= deadline {
            break (String::new(), String::new());
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let message = FromChild::Finished {
        outcome: ChildOutcome::Failed(TIME_LIMIT.into()),
        files: Vec::new(),
        removed: Vec::new(),
        stdout,
        stderr,
        run_us: 0,
    };
    if let Ok(mut writer) = shared.writer.try_lock() {
        let _ = write_frame(&mut *writer, &message);
    }
    exit_now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_never_moves_the_clock_back() {
        let mut clock = Clock::new(ClockBase {
            wall: 100.0,
            mono: 10.0,
        });
        clock.advance(5.0);
        let before = clock.read(1);
        let mut resumed = clock.resumed(ClockBase {
            wall: 102.5,
            mono: 12.5,
        });
        assert!(resumed.read(1) > before);
        let mut later = clock.resumed(ClockBase {
            wall: 200.0,
            mono: 50.0,
        });
        assert_eq!(later.read(0), 200.0 + 1e-6);
    }

    #[test]
    fn entropy_is_a_pure_function_of_the_seed() {
        let mut a = Entropy::new([3; 32]);
        let mut b = Entropy::new([3; 32]);
        let mut c = Entropy::new([4; 32]);
        let first = a.take(5);
        let rest = a.take(40);
        let whole = b.take(45);
        assert_eq!([first, rest].concat(), whole);
        assert_ne!(whole, c.take(45));
        let mut hasher = Sha256::new();
        hasher.update([3u8; 32]);
        hasher.update(0u64.to_le_bytes());
        assert_eq!(whole[..32], hasher.finalize()[..]);
    }

    #[test]
    fn clock_advances_by_reads_and_sleeps() {
        let mut clock = Clock::new(ClockBase {
            wall: 100.0,
            mono: 5.0,
        });
        assert_eq!(clock.read(0), 100.000001);
        clock.advance(2.0);
        assert!((clock.read(1) - 7.000002).abs() < 1e-9);
    }
}
