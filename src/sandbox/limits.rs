//! OS-level limits applied to every child right after the fork.
//!
//! Invariants:
//! - A child's address space is capped at its size when forked plus the
//!   configured memory budget, so a memory bomb fails inside the child
//!   (MemoryError, or an abort reported as `Out of memory`), never the server.
//! - A child holds no descriptor of the zygote or the server but its own
//!   socket and the standard streams (stdin is `/dev/null`).
//! - CPU time is capped as a backstop to the run-time watchdog.
//! - A child's root and working directory are an empty directory that no
//!   longer has a name (created and removed by the zygote, entered by its
//!   descriptor): nothing is there to read, and nothing can be created in it.
//!   Changing the root needs privilege; without it the child still works
//!   from that directory and the system-call filter does the refusing.
//! - Standard input, output and error are `/dev/null`: a child talks only
//!   over its socket, and cannot write into the server's logs.

use std::io;

use crate::config::defaults;
use nix::sys::resource::{Resource, setrlimit};
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
            memory_mb: defaults::MEMORY_MB,
            cpu_seconds: defaults::CPU_SECONDS,
            open_files: defaults::OPEN_FILES,
        }
    }
}

/// Applies the limits to the calling (child) process; keeps only `keep_fd`,
/// and enters the empty root held open as `root_fd`.
pub fn confine_child(limits: &ChildRlimits, keep_fd: i32, root_fd: i32) -> io::Result<()> {
    // Read /proc before the root changes.
    let inherited = address_space_bytes().unwrap_or(512 << 20);
    let fds = open_fds()?;
    silence_standard_streams();
    enter_empty_root(root_fd)?;
    for fd in fds {
        if fd > 2 && fd != keep_fd {
            // SAFETY: closing descriptors this process no longer needs.
            unsafe {
                libc::close(fd);
            }
        }
    }
    let cap = inherited.saturating_add(limits.memory_mb.saturating_mul(1 << 20));
    set_limit(Resource::RLIMIT_AS, cap)?;
    set_limit(Resource::RLIMIT_CPU, limits.cpu_seconds)?;
    set_limit(Resource::RLIMIT_NOFILE, limits.open_files)?;
    set_limit(Resource::RLIMIT_CORE, 0)?;
    Ok(())
}

/// Creates an empty directory, opens it, and removes its name: the
/// descriptor is a root in which nothing exists or can be created.
pub fn make_empty_root() -> io::Result<i32> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = std::env::temp_dir().join(format!("baton-root-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&path)?;
    let opened = std::fs::File::open(&path);
    let removed = std::fs::remove_dir(&path);
    let dir = opened?;
    removed?;
    Ok(std::os::fd::IntoRawFd::into_raw_fd(dir))
}

fn enter_empty_root(root_fd: i32) -> io::Result<()> {
    // SAFETY: `root_fd` is the zygote's open descriptor of the empty root,
    // inherited by this child and open for its whole life.
    let root = unsafe { std::os::fd::BorrowedFd::borrow_raw(root_fd) };
    nix::unistd::fchdir(root)?;
    // Needs CAP_SYS_CHROOT; without it the working directory stays the
    // empty one and the seccomp filter refuses file access.
    if nix::unistd::chroot(".").is_ok() {
        nix::unistd::chdir("/")?;
    }
    Ok(())
}

fn set_limit(resource: Resource, value: u64) -> io::Result<()> {
    setrlimit(resource, value, value)?;
    Ok(())
}

/// The process's current virtual size, from `/proc/self/statm`.
fn address_space_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok()??;
    Some(pages * u64::try_from(page).ok()?)
}

/// Points stdin, stdout and stderr at `/dev/null`.
fn silence_standard_streams() {
    // SAFETY: opening /dev/null and duplicating it over the standard streams.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..=2 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// The descriptors open in this process.
fn open_fds() -> io::Result<Vec<i32>> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let name = entry?.file_name();
        if let Some(fd) = name.to_str().and_then(|n| n.parse::<i32>().ok()) {
            fds.push(fd);
        }
    }
    Ok(fds)
}
