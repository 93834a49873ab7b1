//! Pre-forked idle children, so a start does not wait for a fork.
//!
//! Invariants:
//! - A [`ChildProc`] is killed when dropped: a child nobody holds cannot
//!   linger, whatever path dropped it.
//! - At most one refill runs at a time; it forks until `target` children are
//!   idle.
//! - An idle child of a zygote that has since died is never handed out: each
//!   child carries its zygote's generation, and a fork that fails on a dead
//!   zygote waits for the supervisor's next one. Nor is an idle child that
//!   has exited on its own.
//! - The pool is ready when a child of the current zygote has reported
//!   `Ready`: before that (at start, after a zygote's death) `/health` says
//!   the service is degraded.
//! - A refill does not compete with requests while the pool has children
//!   to spare: while any [`RequestHold`] is held (a request between its
//!   arrival and its reply) and at least half the target is idle, a refill
//!   waits before each fork, for at most [`MAX_REFILL_DEFERRAL`]. A pool
//!   below half (sustained load) refills at once: a start that finds no
//!   idle child forks and rehearses one on its own path.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::sandbox::cgroups::ChildGroups;
use crate::sandbox::protocol::{FromChild, nonblocking};
use crate::sandbox::zygote::{ForkedChild, Supervisor};

/// How long a new child may take to rehearse.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Failed forks in a row after which a refill gives up (the next request or
/// health check starts another).
const MAX_REFILL_FAILURES: u32 = 40;

/// The longest a refill waits for the requests in flight to end before it
/// forks anyway (under sustained load there is no quiet moment).
const MAX_REFILL_DEFERRAL: Duration = Duration::from_millis(50);

/// How long a fork waits for a new zygote after the current one died.
const ZYGOTE_WAIT: Duration = Duration::from_secs(10);

/// What can end a child: its pidfd, which names this child and no other
/// process even after the child died and its pid was reused; on a kernel
/// without pidfds, its pid.
pub struct ChildKiller {
    pid: i32,
    pidfd: Option<OwnedFd>,
    /// Set when the child was killed because its execution ended (a
    /// cancel): what it was running must not be run again elsewhere.
    ended: AtomicBool,
    /// Its control groups, removed once it is gone.
    groups: Option<Arc<ChildGroups>>,
}

impl Drop for ChildKiller {
    fn drop(&mut self) {
        // The last handle on the child: its `ChildProc` killed it.
        if let Some(groups) = &self.groups {
            groups.release(self.pid);
        }
    }
}

impl ChildKiller {
    /// Kills the child because its execution ended (was cancelled): a
    /// step that finds it dead does not run it again.
    pub fn end_execution(&self) {
        self.ended.store(true, Ordering::Release);
        self.kill();
    }

    /// Whether [`ChildKiller::end_execution`] killed it.
    pub fn execution_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Kills the child at once (nothing if it is gone).
    pub fn kill(&self) {
        match &self.pidfd {
            // SAFETY: a signal through a pidfd this process owns.
            Some(pidfd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0u32,
                );
            },
            // A kernel without pidfds: the pid of a child we forked (it may
            // in principle have been reused: a kernel older than 5.2).
            None => {
                let _gone = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(self.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// A live child and the server's end of its socket.
pub struct ChildProc {
    /// The socket, as a tokio stream.
    pub stream: tokio::net::UnixStream,
    /// What ends it, shareable with whoever may need to (a cancel).
    pub killer: Arc<ChildKiller>,
}

impl ChildProc {
    /// Whether the child's process has ended (its pidfd is readable);
    /// checked without waiting. Without a pidfd, assumed alive.
    fn has_exited(&self) -> bool {
        let Some(pidfd) = self.killer.pidfd.as_ref() else {
            return false;
        };
        let mut poll = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the length of the call; no wait.
        unsafe { libc::poll(&mut poll, 1, 0) > 0 }
    }

    fn from_forked(forked: ForkedChild, groups: Option<Arc<ChildGroups>>) -> io::Result<ChildProc> {
        let std_stream = std::os::unix::net::UnixStream::from(forked.socket);
        std_stream.set_nonblocking(true)?;
        Ok(ChildProc {
            stream: tokio::net::UnixStream::from_std(std_stream)?,
            killer: Arc::new(ChildKiller {
                pid: forked.pid,
                pidfd: forked.pidfd,
                groups,
                ended: AtomicBool::new(false),
            }),
        })
    }

    /// The child's pid (to read its `/proc` files; signals go through
    /// [`ChildKiller`]).
    pub fn pid(&self) -> i32 {
        self.killer.pid
    }

    /// Kills the child at once.
    pub fn kill(&self) {
        self.killer.kill();
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A request in flight: refills wait until none is (see the module doc).
pub struct RequestHold {
    in_flight: watch::Sender<usize>,
}

impl Drop for RequestHold {
    fn drop(&mut self) {
        self.in_flight.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Idle children ready for a start, each with its zygote's generation.
pub struct Pool {
    supervisor: Arc<Supervisor>,
    /// Requests in flight (see [`RequestHold`]).
    in_flight: watch::Sender<usize>,
    idle: Mutex<VecDeque<(u64, ChildProc)>>,
    target: usize,
    refilling: AtomicBool,
    /// The generation of the zygote whose child last reported `Ready`.
    ready_generation: AtomicU64,
}

impl Pool {
    /// A pool keeping `target` idle children from `supervisor`'s zygote.
    pub fn new(supervisor: Arc<Supervisor>, target: usize) -> Arc<Pool> {
        Arc::new(Pool {
            supervisor,
            in_flight: watch::Sender::new(0),
            idle: Mutex::new(VecDeque::new()),
            target,
            refilling: AtomicBool::new(false),
            ready_generation: AtomicU64::new(0),
        })
    }

    /// The current zygote's generation; 0 while it is dead and the next
    /// one is starting (no child is of generation 0).
    fn generation(&self) -> u64 {
        self.supervisor
            .current()
            .ok()
            .filter(|zygote| !zygote.is_dead())
            .map_or(0, |zygote| zygote.generation)
    }

    /// Whether a child of the current zygote has been ready.
    pub fn is_ready(&self) -> bool {
        self.ready_generation.load(Ordering::Acquire) == self.generation()
    }

    /// An idle child of the current zygote, or a freshly forked one.
    pub async fn take(self: &Arc<Self>) -> io::Result<ChildProc> {
        let generation = self.generation();
        let idle = self.idle.lock().ok().and_then(|mut idle| {
            // Children of a dead zygote died with it; a child may also have
            // been killed alone (the kernel's OOM killer).
            idle.retain(|(born, child)| *born == generation && !child.has_exited());
            idle.pop_front()
        });
        match idle {
            Some((_, child)) => Ok(child),
            None => self.fork().await.map(|(_, child)| child),
        }
    }

    /// Number of idle children of the current zygote now (those of a dead
    /// one are dropped here).
    pub fn idle_count(&self) -> usize {
        let generation = self.generation();
        self.idle
            .lock()
            .map(|mut idle| {
                idle.retain(|(born, _)| *born == generation);
                idle.len()
            })
            .unwrap_or(0)
    }

    /// Forks from the current zygote; when it has died, waits for the next.
    async fn fork_from_a_live_zygote(&self) -> io::Result<(u64, ForkedChild)> {
        let deadline = tokio::time::Instant::now() + ZYGOTE_WAIT;
        loop {
            let zygote = self.supervisor.current()?;
            let generation = zygote.generation;
            let forked = tokio::task::spawn_blocking(move || zygote.fork())
                .await
                .map_err(io::Error::other)?;
            match forked {
                Ok(forked) => return Ok((generation, forked)),
                Err(error) if tokio::time::Instant::now() >= deadline => return Err(error),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Forks a child and waits until it has rehearsed and is ready.
    async fn fork(&self) -> io::Result<(u64, ChildProc)> {
        let (generation, forked) = self.fork_from_a_live_zygote().await?;
        let mut child = ChildProc::from_forked(forked, self.supervisor.groups())?;
        let ready = tokio::time::timeout(
            READY_TIMEOUT,
            nonblocking::read_frame::<FromChild>(&mut child.stream),
        )
        .await;
        match ready {
            Ok(Ok(FromChild::Ready)) => {
                self.ready_generation.store(generation, Ordering::Release);
                Ok((generation, child))
            }
            Ok(Ok(_)) => Err(io::Error::other(
                "a new child sent something before it was ready",
            )),
            Ok(Err(error)) => Err(io::Error::other(format!(
                "a new child failed before it was ready: {error}"
            ))),
            Err(_) => Err(io::Error::other("a new child was not ready in time")),
        }
    }

    /// Marks a request in flight until the hold is dropped.
    pub fn hold_for_request(&self) -> RequestHold {
        self.in_flight.send_modify(|n| *n += 1);
        RequestHold {
            in_flight: self.in_flight.clone(),
        }
    }

    /// Waits until no request is in flight, for at most
    /// [`MAX_REFILL_DEFERRAL`]; not at all when fewer than half the target
    /// are idle.
    async fn wait_for_quiet(&self) {
        let idle = self.idle_count();
        if idle == 0 || idle * 2 < self.target {
            return;
        }
        let mut in_flight = self.in_flight.subscribe();
        let _ = tokio::time::timeout(MAX_REFILL_DEFERRAL, in_flight.wait_for(|n| *n == 0)).await;
    }

    /// Tops the pool up in the background.
    pub fn refill(self: &Arc<Self>) {
        if self.refilling.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = self.clone();
        tokio::spawn(async move {
            let mut failures = 0;
            while pool.idle_count() < pool.target {
                pool.wait_for_quiet().await;
                match pool.fork().await {
                    Ok(born) => {
                        if let Ok(mut idle) = pool.idle.lock() {
                            idle.push_back(born);
                        }
                    }
                    Err(error) => {
                        tracing::error!(%error, "pre-forking a child failed");
                        failures += 1;
                        if failures >= MAX_REFILL_FAILURES {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
            }
            pool.refilling.store(false, Ordering::Release);
        });
    }
}
