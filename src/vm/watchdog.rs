//! The run-time watchdog of a child: a thread that raises the time limit
//! in the interpreter at the soft deadline and, if the code does not stop,
//! reports the time-out itself and ends the process at the hard deadline;
//! and the state it shares with the interpreter's thread (the captured
//! output and the socket's write half).
//!
//! Invariant: the watchdog is armed only while code runs live; a pause
//! disarms it, so time spent waiting for the client never counts.
//! Invariant: the watchdog thread is woken only when a deadline comes
//! earlier than the moment it already sleeps until: disarming, and arming
//! for a later deadline (every resume after a pause), leave it asleep, and
//! when it wakes it reads the current watch. A round costs its thread no
//! wake-up.

use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::failure::Failure;
use crate::sandbox::protocol::{ChildOutcome, FromChild, write_frame};
use crate::vm::exit::exit_now;

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
pub enum Watch {
    /// Nothing: the code is not running live.
    Idle,
    /// The code runs; interrupt it at `soft`, end it at `hard`.
    Armed {
        /// The soft deadline.
        soft: Instant,
        /// The hard deadline.
        hard: Instant,
    },
    /// The interrupt was raised; end the process at `hard`.
    Fired {
        /// The hard deadline.
        hard: Instant,
    },
}

impl Watch {
    /// The next moment the watchdog has something to do, if any.
    fn next_deadline(self) -> Option<Instant> {
        match self {
            Watch::Idle => None,
            Watch::Armed { soft, .. } => Some(soft),
            Watch::Fired { hard } => Some(hard),
        }
    }
}

/// The watch and when the watchdog thread will next look at it by itself
/// (`None`: not before it is woken).
struct Watching {
    watch: Watch,
    wakes_at: Option<Instant>,
}

/// State shared between the interpreter thread and the watchdog thread.
pub struct Shared {
    /// Captured output.
    pub output: Mutex<Output>,
    /// The write half of the socket (frames are written whole under this lock).
    pub writer: Mutex<UnixStream>,
    watch: Mutex<Watching>,
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
            watch: Mutex::new(Watching {
                watch: Watch::Idle,
                wakes_at: None,
            }),
            wake: Condvar::new(),
            timed_out: AtomicBool::new(false),
        })
    }

    /// Arms, disarms or re-arms the watchdog; wakes its thread only when the
    /// new deadline comes before the moment it sleeps until.
    pub fn set_watch(&self, watch: Watch) {
        if let Ok(mut current) = self.watch.lock() {
            current.watch = watch;
            let sooner = match (watch.next_deadline(), current.wakes_at) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(deadline), Some(wakes_at)) => deadline < wakes_at,
            };
            if sooner {
                self.wake.notify_all();
            }
        }
    }

    /// Whether the soft time limit fired.
    pub fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::SeqCst)
    }
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
    let Ok(mut watching) = shared.watch.lock() else {
        return;
    };
    loop {
        let now = Instant::now();
        let wait = match watching.watch {
            Watch::Idle => None,
            Watch::Armed { soft, hard } if now >= soft => {
                watching.watch = Watch::Fired { hard };
                shared.timed_out.store(true, Ordering::SeqCst);
                interrupt();
                Some(hard.saturating_duration_since(now))
            }
            Watch::Armed { soft, .. } => Some(soft - now),
            Watch::Fired { hard } if now >= hard => {
                drop(watching);
                hard_timeout(shared);
            }
            Watch::Fired { hard } => Some(hard - now),
        };
        watching.wakes_at = wait.map(|duration| now + duration);
        watching = match wait {
            None => match shared.wake.wait(watching) {
                Ok(guard) => guard,
                Err(_) => return,
            },
            Some(duration) => match shared.wake.wait_timeout(watching, duration) {
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
        outcome: ChildOutcome::Failed(Failure::TimeLimit),
        files: Vec::new(),
        removed: Vec::new(),
        directories: Vec::new(),
        stdout,
        stderr,
        run_us: 0,
        names: Vec::new(),
    };
    if let Ok(mut writer) = shared.writer.try_lock() {
        let _ = write_frame(&mut *writer, &message);
    }
    exit_now()
}
