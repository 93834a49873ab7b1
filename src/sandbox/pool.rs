//! Pre-forked idle children, so a start does not wait for a fork.
//!
//! Invariants:
//! - A [`ChildProc`] is killed when dropped: a child nobody holds cannot
//!   linger, whatever path dropped it.
//! - At most one refill runs at a time; it forks until `target` children are
//!   idle.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::sandbox::protocol::{FromChild, nonblocking};
use crate::sandbox::zygote::{ForkedChild, Zygote};

/// How long a new child may take to rehearse.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A live child and the server's end of its socket.
pub struct ChildProc {
    /// The child's pid.
    pub pid: i32,
    /// The socket, as a tokio stream.
    pub stream: tokio::net::UnixStream,
}

impl ChildProc {
    fn from_forked(forked: ForkedChild) -> io::Result<ChildProc> {
        let std_stream = std::os::unix::net::UnixStream::from(forked.socket);
        std_stream.set_nonblocking(true)?;
        Ok(ChildProc {
            pid: forked.pid,
            stream: tokio::net::UnixStream::from_std(std_stream)?,
        })
    }

    /// Kills the child at once.
    pub fn kill(&self) {
        // SAFETY: sending a signal to a pid we forked.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
        }
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Idle children ready for a start.
pub struct Pool {
    zygote: Arc<Zygote>,
    idle: Mutex<VecDeque<ChildProc>>,
    target: usize,
    refilling: AtomicBool,
}

impl Pool {
    /// A pool keeping `target` idle children.
    pub fn new(zygote: Arc<Zygote>, target: usize) -> Arc<Pool> {
        Arc::new(Pool {
            zygote,
            idle: Mutex::new(VecDeque::new()),
            target,
            refilling: AtomicBool::new(false),
        })
    }

    /// An idle child, or a freshly forked one if none is idle.
    pub async fn take(self: &Arc<Self>) -> io::Result<ChildProc> {
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop_front());
        let child = match idle {
            Some(child) => child,
            None => self.fork().await?,
        };
        Ok(child)
    }

    /// Number of idle children now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|idle| idle.len()).unwrap_or(0)
    }

    /// Forks a child and waits until it has rehearsed and is ready.
    async fn fork(&self) -> io::Result<ChildProc> {
        let zygote = self.zygote.clone();
        let forked = tokio::task::spawn_blocking(move || zygote.fork())
            .await
            .map_err(io::Error::other)??;
        let mut child = ChildProc::from_forked(forked)?;
        let ready = tokio::time::timeout(
            READY_TIMEOUT,
            nonblocking::read_frame::<FromChild>(&mut child.stream),
        )
        .await;
        match ready {
            Ok(Ok(FromChild::Ready)) => Ok(child),
            Ok(Ok(_)) => Err(io::Error::other(
                "a new child sent something before it was ready",
            )),
            Ok(Err(error)) => Err(io::Error::other(format!(
                "a new child failed before it was ready: {error}"
            ))),
            Err(_) => Err(io::Error::other("a new child was not ready in time")),
        }
    }

    /// Tops the pool up in the background.
    pub fn refill(self: &Arc<Self>) {
        if self.refilling.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = self.clone();
        tokio::spawn(async move {
            while pool.idle_count() < pool.target {
                match pool.fork().await {
                    Ok(child) => {
                        if let Ok(mut idle) = pool.idle.lock() {
                            idle.push_back(child);
                        }
                    }
                    Err(error) => {
                        tracing::error!(%error, "pre-forking a child failed");
                        break;
                    }
                }
            }
            pool.refilling.store(false, Ordering::Release);
        });
    }
}
