//! The server's handle on the zygote process, supervised.
//!
//! The server starts `baton zygote` with one end of a socket pair as its
//! stdin. A fork request is one byte; the answer carries the new child's pid
//! and the server's end of the child's socket.
//!
//! A [`Supervisor`] owns the current zygote and a thread that waits for its
//! end: when a zygote dies (killed, crashed), the death is logged at once, a
//! new one is started (retried every [`RESPAWN_DELAY`] while that fails),
//! and its generation number moves on, so the pool drops the children of
//! the dead one and refills.
//!
//! Invariants:
//! - Requests to one zygote are serialized by a mutex, so answers match
//!   requests.
//! - When the server dies the control socket closes and the zygote exits,
//!   taking its children with it (they have `PR_SET_PDEATHSIG`).
//! - A zygote is never respawned after [`Supervisor::stop`].
//! - A zygote is marked dead before its death is counted, so whoever sees
//!   the count sees the mark (the pool then hands out none of its children
//!   and is not ready while the next one starts).

use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::sandbox::cgroups::ChildGroups;
use crate::sandbox::fdpass::{ReceivedChild, recv_child};
use crate::sandbox::limits::ChildRlimits;

/// Wait between attempts to start a zygote after one failed.
pub const RESPAWN_DELAY: Duration = Duration::from_millis(500);

/// A forked child, as the server sees it.
pub type ForkedChild = ReceivedChild;

/// A running zygote.
pub struct Zygote {
    control: Mutex<UnixStream>,
    pid: u32,
    /// Its number: the first is 1, each replacement one more.
    pub generation: u64,
    /// Set by the supervisor as soon as it sees the process end.
    dead: AtomicBool,
}

/// How a zygote is started.
pub struct Launch {
    /// The binary to start it from.
    pub exe: PathBuf,
    /// The limits of its children.
    pub limits: ChildRlimits,
    /// The control groups of its children, where the kernel offers them.
    pub groups: Option<Arc<ChildGroups>>,
}

impl Zygote {
    /// Starts a zygote; returns it and its process.
    fn spawn(launch: &Launch, generation: u64) -> io::Result<(Zygote, Child)> {
        let (server_end, zygote_end) = UnixStream::pair()?;
        let limits = &launch.limits;
        let mut command = Command::new(&launch.exe);
        command
            .arg("zygote")
            .arg("--memory-mb")
            .arg(limits.memory_mb.to_string())
            .arg("--cpu-seconds")
            .arg(limits.cpu_seconds.to_string())
            .arg("--open-files")
            .arg(limits.open_files.to_string());
        for dir in launch.groups.iter().flat_map(|g| g.dirs()) {
            command.arg("--cgroup").arg(dir);
        }
        let mut process = command
            .stdin(Stdio::from(OwnedFd::from(zygote_end)))
            .stdout(Stdio::null())
            .env_clear()
            .env("TZ", "UTC")
            .env("LANG", "C.UTF-8")
            .spawn()?;
        if let Some(groups) = &launch.groups
            && let Err(error) = groups.adopt_zygote(process.id())
        {
            let _gone = process.kill();
            let _reaped = process.wait();
            return Err(io::Error::other(format!(
                "cannot move the zygote into its control group: {error}"
            )));
        }
        let zygote = Zygote {
            control: Mutex::new(server_end),
            pid: process.id(),
            generation,
            dead: AtomicBool::new(false),
        };
        Ok((zygote, process))
    }

    /// Whether its process has ended (its children ended with it).
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Forks a new child (blocking, about a millisecond).
    pub fn fork(&self) -> io::Result<ForkedChild> {
        let control = self
            .control
            .lock()
            .map_err(|_| io::Error::other("zygote lock poisoned"))?;
        (&*control).write_all(b"F")?;
        recv_child(&control)
    }

    /// The zygote's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// Keeps a zygote running.
pub struct Supervisor {
    launch: Launch,
    current: Mutex<Arc<Zygote>>,
    stopping: AtomicBool,
    deaths: AtomicU64,
}

impl Supervisor {
    /// Starts the first zygote and the thread that watches it.
    pub fn start(launch: Launch) -> io::Result<Arc<Supervisor>> {
        let (zygote, process) = Zygote::spawn(&launch, 1)?;
        let supervisor = Arc::new(Supervisor {
            launch,
            current: Mutex::new(Arc::new(zygote)),
            stopping: AtomicBool::new(false),
            deaths: AtomicU64::new(0),
        });
        let watcher = Arc::downgrade(&supervisor);
        std::thread::Builder::new()
            .name("zygote-supervisor".into())
            .spawn(move || watch(watcher, process))?;
        Ok(supervisor)
    }

    /// The zygote to fork from now.
    pub fn current(&self) -> io::Result<Arc<Zygote>> {
        self.current
            .lock()
            .map(|zygote| zygote.clone())
            .map_err(|_| io::Error::other("zygote supervisor lock poisoned"))
    }

    /// The children's control groups, if they have them.
    pub fn groups(&self) -> Option<Arc<ChildGroups>> {
        self.launch.groups.clone()
    }

    /// How many zygotes have died.
    pub fn deaths(&self) -> u64 {
        self.deaths.load(Ordering::Relaxed)
    }

    /// Ends the current zygote for good (the server is shutting down).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Ok(zygote) = self.current() {
            // The zygote is this supervisor's child: its pid stays its own
            // until the supervisor's wait thread reaps it.
            let _gone = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(zygote.pid() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// After a zygote's death: counts it and starts the next (retrying);
    /// `None` once stopped.
    fn replace(&self, status: io::Result<std::process::ExitStatus>) -> Option<Child> {
        if self.stopping.load(Ordering::SeqCst) {
            return None;
        }
        // Before it is counted: from then on no child of it is handed out
        // and the pool is not ready until the next zygote's child is.
        if let Ok(dead) = self.current() {
            dead.dead.store(true, Ordering::Release);
        }
        self.deaths.fetch_add(1, Ordering::Relaxed);
        let generation = self.current().map_or(0, |z| z.generation);
        tracing::error!(
            generation,
            status = ?status.ok(),
            "the sandbox zygote died; starting a new one (paused executions resume by replay)"
        );
        loop {
            match Zygote::spawn(&self.launch, generation + 1) {
                Ok((zygote, process)) => {
                    if let Ok(mut current) = self.current.lock() {
                        *current = Arc::new(zygote);
                    }
                    tracing::info!(generation = generation + 1, "a new sandbox zygote started");
                    return Some(process);
                }
                Err(error) => {
                    tracing::error!(%error, "cannot start a new sandbox zygote; retrying");
                    std::thread::sleep(RESPAWN_DELAY);
                }
            }
            if self.stopping.load(Ordering::SeqCst) {
                return None;
            }
        }
    }
}

/// The supervisor's thread: waits for each zygote's end and has the next
/// started, until the supervisor is stopped or gone.
fn watch(supervisor: Weak<Supervisor>, mut process: Child) {
    loop {
        let status = process.wait();
        let Some(supervisor) = supervisor.upgrade() else {
            return;
        };
        match supervisor.replace(status) {
            Some(next) => process = next,
            None => return,
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}
