//! The system-call filter of a child: an allow list.
//!
//! After its rehearsal a child only computes on memory and talks over the
//! one socket it holds. The filter admits exactly what that needs
//! (measured with `strace -f` over the whole corpus: after the filter, the
//! children made only `futex`, `recvfrom`, `sendto`, `mprotect`,
//! `clock_nanosleep` and `exit_group`; with the filter in log mode, the
//! watchdog thread's start added `rseq`, `set_robust_list` and `prctl`; the
//! rest of the list covers memory growth, time, `abort()` and an
//! out-of-memory report), with
//! arguments checked where a call could reach beyond the child: reads and
//! writes only on the child's own socket (and writes on the standard
//! streams, which are `/dev/null`); `fcntl` only to read flags, never to set
//! an owner or asynchronous signals; no executable memory; signals only to
//! itself; metadata only of an open descriptor; resource limits only read.
//! Every other call fails with `EPERM`: files, sockets, processes and
//! threads, `ioctl`, scheduling and priority, limits of others, namespaces,
//! mounts, System V and POSIX IPC, keyrings, BPF, clocks' settings...
//!
//! Invariants:
//! - Deny by default: a call absent from [`allow_list`] is refused, on any
//!   architecture and ABI (an x32 call number, with its high bit, matches
//!   no entry; a foreign architecture is refused by the filter's own check).
//! - The filter is installed on every thread of the child at once (TSYNC),
//!   with `no_new_privs`, after the watchdog thread exists and before the job
//!   is read; a filter cannot be removed, only narrowed.
//! - Denials return an error (the code sees `PermissionError`) rather than
//!   killing the child, so a probe of the sandbox fails like a refused call.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What the child's filter must know of it.
#[derive(Clone, Copy, Debug)]
pub struct ChildIdentity {
    /// The child's pid, as it sees itself (1 in its own pid namespace).
    pub pid: i32,
    /// The descriptors of its socket to the server (the reading end and
    /// the writer's duplicate).
    pub socket_fds: [i32; 2],
}

/// The calls allowed without conditions, each with why the child needs it.
const UNCONDITIONAL: &[(i64, &str)] = &[
    // Memory: the allocator grows and returns memory.
    (libc::SYS_brk, "the allocator's heap"),
    (libc::SYS_munmap, "returning memory"),
    (libc::SYS_mremap, "growing large allocations"),
    (libc::SYS_madvise, "returning pages of freed memory"),
    // Waiting: the interpreter and the watchdog thread.
    (
        libc::SYS_futex,
        "locks and condition variables (the watchdog)",
    ),
    (libc::SYS_sched_yield, "spin locks yielding"),
    // Time: the watchdog's deadlines (the program's clock is virtual).
    (
        libc::SYS_clock_gettime,
        "the watchdog's clock (when not the vDSO)",
    ),
    (libc::SYS_clock_getres, "clock resolution queries"),
    (libc::SYS_gettimeofday, "libc time (when not the vDSO)"),
    (libc::SYS_clock_nanosleep, "the watchdog's timed waits"),
    (libc::SYS_nanosleep, "short sleeps in libc"),
    (
        libc::SYS_restart_syscall,
        "a sleep restarted after a signal",
    ),
    // Signals: abort() and the interpreter's handlers, on itself only.
    (
        libc::SYS_rt_sigaction,
        "installing handlers (abort resets SIGABRT)",
    ),
    (libc::SYS_rt_sigprocmask, "masking signals (abort)"),
    (libc::SYS_rt_sigreturn, "returning from a handler"),
    (libc::SYS_sigaltstack, "the stack for signal handlers"),
    // The watchdog thread's start (it is spawned just before the filter,
    // and may still be starting when the filter reaches it): glibc
    // registers the thread's restartable sequences and robust futex list.
    (
        libc::SYS_rseq,
        "a new thread's restartable sequences (glibc)",
    ),
    (
        libc::SYS_set_robust_list,
        "a new thread's robust futex list (glibc)",
    ),
    // Identity of itself: harmless inside its own namespaces.
    (libc::SYS_getpid, "its own pid (1 in its pid namespace)"),
    (libc::SYS_gettid, "its own thread ids"),
    (
        libc::SYS_getuid,
        "its own uid (unprivileged, in its user namespace)",
    ),
    (libc::SYS_geteuid, "its own effective uid"),
    (libc::SYS_getgid, "its own gid"),
    (libc::SYS_getegid, "its own effective gid"),
    // Entropy for hash maps of the runtime (the program's is seeded).
    (libc::SYS_getrandom, "hash-map keys of native code"),
    // Its descriptors: closing and seeking are harmless on what it holds.
    (libc::SYS_close, "closing its own descriptors"),
    (libc::SYS_lseek, "seeking its own descriptors"),
    (
        libc::SYS_sched_getaffinity,
        "the number of CPUs, read by native code",
    ),
    // The end.
    (libc::SYS_exit, "a thread ending"),
    (libc::SYS_exit_group, "the process ending"),
];

/// x86-64's old calls of the same kind (aarch64 has only the new ones).
#[cfg(target_arch = "x86_64")]
const UNCONDITIONAL_LEGACY: &[(i64, &str)] = &[(libc::SYS_fstat, "metadata of an open descriptor")];

#[cfg(not(target_arch = "x86_64"))]
const UNCONDITIONAL_LEGACY: &[(i64, &str)] = &[];

/// Reads: only from the child's socket.
const READS: &[i64] = &[
    libc::SYS_read,
    libc::SYS_readv,
    libc::SYS_recvfrom,
    libc::SYS_recvmsg,
];

/// Writes: to the socket, and to the standard streams (`/dev/null`, where a
/// panic's one line goes).
const WRITES: &[i64] = &[
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_sendto,
    libc::SYS_sendmsg,
];

/// `fcntl` commands that only read a descriptor's flags.
const FCNTL_READS: &[u64] = &[
    libc::F_GETFD as u64,
    libc::F_SETFD as u64,
    libc::F_GETFL as u64,
];

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// Rules admitting `call` when argument `arg` equals one of `values`.
fn one_of(arg: u8, values: &[u64]) -> Result<Vec<SeccompRule>, String> {
    values
        .iter()
        .map(|&value| rule(vec![condition(arg, SeccompCmpOp::Eq, value)?]))
        .collect()
}

/// The allow list: every admitted call, with the conditions on its
/// arguments (an empty list of rules admits the call whatever its
/// arguments).
pub fn allow_list(child: ChildIdentity) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = UNCONDITIONAL
        .iter()
        .chain(UNCONDITIONAL_LEGACY)
        .map(|&(call, _why)| (call, Vec::new()))
        .collect();
    let [reader, writer] = child.socket_fds.map(|fd| fd as u64);
    for &call in READS {
        rules.insert(call, one_of(0, &[reader, writer])?);
    }
    for &call in WRITES {
        rules.insert(call, one_of(0, &[reader, writer, 1, 2])?);
    }
    rules.insert(libc::SYS_fcntl, one_of(1, FCNTL_READS)?);
    // prctl: only a thread naming itself (Rust names a new thread).
    rules.insert(
        libc::SYS_prctl,
        one_of(0, &[libc::PR_SET_NAME as u64, libc::PR_GET_NAME as u64])?,
    );
    // Memory that is never executable: no code can be written and run.
    let no_exec = || condition(2, SeccompCmpOp::MaskedEq(libc::PROT_EXEC as u64), 0);
    rules.insert(libc::SYS_mmap, vec![rule(vec![no_exec()?])?]);
    rules.insert(libc::SYS_mprotect, vec![rule(vec![no_exec()?])?]);
    // Signals to itself only: kill(pid), tgkill(tgid, tid) name the process
    // in argument 0; tkill(tid) a thread, which equals the pid for the main
    // thread (abort).
    for call in [libc::SYS_kill, libc::SYS_tkill, libc::SYS_tgkill] {
        rules.insert(call, one_of(0, &[child.pid as u64])?);
    }
    // Metadata of an open descriptor only (`AT_EMPTY_PATH`, how `fstat` is
    // made), never of a path.
    let empty_path = libc::AT_EMPTY_PATH as u64;
    for (call, flags_arg) in [(libc::SYS_newfstatat, 3u8), (libc::SYS_statx, 2u8)] {
        let by_descriptor = condition(flags_arg, SeccompCmpOp::MaskedEq(empty_path), empty_path)?;
        rules.insert(call, vec![rule(vec![by_descriptor])?]);
    }
    // Resource limits: reading its own (pid 0, no new limit), never setting.
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![
            condition(0, SeccompCmpOp::Eq, 0)?,
            condition(2, SeccompCmpOp::Eq, 0)?,
        ])?],
    );
    Ok(rules)
}

/// The calls the filter admits unconditionally, with why (for SECURITY.md
/// and the tests).
pub fn unconditional_calls() -> impl Iterator<Item = (i64, &'static str)> {
    UNCONDITIONAL.iter().chain(UNCONDITIONAL_LEGACY).copied()
}

/// Builds the filter for `child`.
pub fn child_filter(child: ChildIdentity) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        allow_list(child)?,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

/// Installs the filter on every thread of this process.
pub fn lock_down(child: ChildIdentity) -> Result<(), String> {
    let program = child_filter(child)?;
    seccompiler::apply_filter_all_threads(&program).map_err(|e| e.to_string())
}
