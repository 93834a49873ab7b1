//! The server's handle on the zygote process.
//!
//! The server starts `baton zygote` with one end of a socket pair as its
//! stdin. A fork request is one byte; the answer carries the new child's pid
//! and the server's end of the child's socket.
//!
//! Invariants:
//! - Requests are serialized by a mutex, so answers match requests.
//! - When the server dies the control socket closes and the zygote exits,
//!   taking its children with it (they have `PR_SET_PDEATHSIG`).

use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use crate::sandbox::fdpass::recv_fd;
use crate::sandbox::limits::ChildRlimits;

/// A forked child, as the server sees it.
pub struct ForkedChild {
    /// The child's process id.
    pub pid: i32,
    /// The server's end of the child's socket.
    pub socket: OwnedFd,
}

/// A running zygote.
pub struct Zygote {
    control: Mutex<UnixStream>,
    process: Mutex<Child>,
}

impl Zygote {
    /// Starts the zygote from `exe` (normally the running binary).
    pub fn spawn(exe: PathBuf, limits: &ChildRlimits) -> io::Result<Zygote> {
        let (server_end, zygote_end) = UnixStream::pair()?;
        let process = Command::new(exe)
            .arg("zygote")
            .arg("--memory-mb")
            .arg(limits.memory_mb.to_string())
            .arg("--cpu-seconds")
            .arg(limits.cpu_seconds.to_string())
            .arg("--open-files")
            .arg(limits.open_files.to_string())
            .stdin(Stdio::from(OwnedFd::from(zygote_end)))
            .stdout(Stdio::null())
            .env_clear()
            .env("TZ", "UTC")
            .env("LANG", "C.UTF-8")
            .spawn()?;
        Ok(Zygote {
            control: Mutex::new(server_end),
            process: Mutex::new(process),
        })
    }

    /// Forks a new child (blocking, about a millisecond).
    pub fn fork(&self) -> io::Result<ForkedChild> {
        let control = self
            .control
            .lock()
            .map_err(|_| io::Error::other("zygote lock poisoned"))?;
        (&*control).write_all(b"F")?;
        let (socket, pid) = recv_fd(&control)?;
        Ok(ForkedChild { pid, socket })
    }

    /// The zygote's pid.
    pub fn pid(&self) -> Option<u32> {
        self.process.lock().ok().map(|p| p.id())
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        if let Ok(mut process) = self.process.lock() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}
