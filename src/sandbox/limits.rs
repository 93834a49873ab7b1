//! OS-level limits applied to every child right after the fork.
//!
//! Invariants:
//! - A child's address space is capped at its size when forked plus the
//!   configured memory budget, so a memory bomb fails inside the child
//!   (MemoryError, or an abort reported as `Out of memory`), never the server.
//! - A child holds no descriptor of the zygote or the server but its own
//!   socket and the standard streams (stdin is `/dev/null`).
//! - CPU time is capped as a backstop to the run-time watchdog.

use std::io;

use serde::{Deserialize, Serialize};

/// The per-child limits the zygote applies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildRlimits {
    /// Memory a child may add to what it inherits, in MiB.
    pub memory_mb: u64,
    /// CPU seconds over the child's whole life.
    pub cpu_seconds: u64,
    /// Open file descriptors.
    pub open_files: u64,
}

impl Default for ChildRlimits {
    fn default() -> Self {
        ChildRlimits {
            memory_mb: 256,
            cpu_seconds: 330,
            open_files: 64,
        }
    }
}

/// Applies the limits to the calling (child) process; keeps only `keep_fd`.
pub fn confine_child(limits: &ChildRlimits, keep_fd: i32) -> io::Result<()> {
    close_inherited_fds(keep_fd)?;
    let inherited = address_space_bytes().unwrap_or(512 << 20);
    let cap = inherited.saturating_add(limits.memory_mb.saturating_mul(1 << 20));
    set_limit(libc::RLIMIT_AS, cap)?;
    set_limit(libc::RLIMIT_CPU, limits.cpu_seconds)?;
    set_limit(libc::RLIMIT_NOFILE, limits.open_files)?;
    set_limit(libc::RLIMIT_CORE, 0)?;
    Ok(())
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: plain syscall with a valid pointer.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The process's current virtual size, from `/proc/self/statm`.
fn address_space_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

fn close_inherited_fds(keep_fd: i32) -> io::Result<()> {
    // SAFETY: opening /dev/null and duplicating it over stdin.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null >= 0 {
            libc::dup2(null, 0);
            if null != 0 {
                libc::close(null);
            }
        }
    }
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let name = entry?.file_name();
        if let Some(fd) = name.to_str().and_then(|n| n.parse::<i32>().ok()) {
            fds.push(fd);
        }
    }
    for fd in fds {
        if fd > 2 && fd != keep_fd {
            // SAFETY: closing descriptors this process no longer needs.
            unsafe {
                libc::close(fd);
            }
        }
    }
    Ok(())
}
