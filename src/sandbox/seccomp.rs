//! The system-call filter of a child: the last wall if code escapes the
//! Python-level restrictions.
//!
//! A child's work after its rehearsal is pure computation on memory plus
//! reads and writes on the one socket it already holds. The filter denies,
//! with `EPERM`, every system call that would reach beyond that: opening or
//! changing files, listing directories, creating sockets, starting processes
//! or threads, executing programs, signalling any process but itself,
//! tracing, namespaces, mounts, kernel modules, BPF, keyrings, identity
//! changes and clock changes; metadata of a path (`stat` of anything but an
//! open descriptor). Everything else (memory, time, the socket,
//! `exit`) stays allowed.
//!
//! Invariants:
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

/// System calls denied outright, on every architecture.
const DENIED: &[i64] = &[
    // Files: opening, creating, changing, listing.
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_unlinkat,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_mkdirat,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_fchmodat,
    libc::SYS_fchmod,
    libc::SYS_fchownat,
    libc::SYS_fchown,
    libc::SYS_truncate,
    libc::SYS_ftruncate,
    libc::SYS_utimensat,
    libc::SYS_mknodat,
    libc::SYS_getdents64,
    libc::SYS_readlinkat,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_chroot,
    libc::SYS_memfd_create,
    libc::SYS_inotify_init1,
    libc::SYS_fanotify_init,
    // Network.
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
    // Processes and threads.
    libc::SYS_clone,
    libc::SYS_clone3,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_getfd,
    libc::SYS_pidfd_send_signal,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    // The system.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_personality,
    libc::SYS_setuid,
    libc::SYS_setgid,
    libc::SYS_setreuid,
    libc::SYS_setregid,
    libc::SYS_setresuid,
    libc::SYS_setresgid,
    libc::SYS_setgroups,
    libc::SYS_setfsuid,
    libc::SYS_setfsgid,
    libc::SYS_capset,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
];

/// The legacy calls x86-64 still has (aarch64 only has the `*at` forms).
#[cfg(target_arch = "x86_64")]
const DENIED_LEGACY: &[i64] = &[
    libc::SYS_open,
    libc::SYS_creat,
    libc::SYS_unlink,
    libc::SYS_rename,
    libc::SYS_mkdir,
    libc::SYS_rmdir,
    libc::SYS_link,
    libc::SYS_symlink,
    libc::SYS_chmod,
    libc::SYS_chown,
    libc::SYS_lchown,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_futimesat,
    libc::SYS_mknod,
    libc::SYS_getdents,
    libc::SYS_readlink,
    libc::SYS_access,
    libc::SYS_stat,
    libc::SYS_lstat,
    libc::SYS_fork,
    libc::SYS_vfork,
    libc::SYS_inotify_init,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_modify_ldt,
    libc::SYS_uselib,
];

#[cfg(not(target_arch = "x86_64"))]
const DENIED_LEGACY: &[i64] = &[];

/// Signals: allowed only towards this process itself (`abort()` raises
/// `SIGABRT` on itself).
const SIGNALS: &[i64] = &[libc::SYS_kill, libc::SYS_tkill, libc::SYS_tgkill];

/// Path lookups of metadata: allowed only on a descriptor (`AT_EMPTY_PATH`,
/// how `fstat` is made), so no path of the host can be probed. Each entry is
/// the call and the index of its flags argument.
const STAT_BY_PATH: &[(i64, u8)] = &[(libc::SYS_newfstatat, 3), (libc::SYS_statx, 2)];

/// Builds the filter for a child whose pid is `own_pid`.
pub fn child_filter(own_pid: i32) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .chain(DENIED_LEGACY)
        .map(|&call| (call, Vec::new()))
        .collect();
    for &call in SIGNALS {
        // kill(pid, sig) and tgkill(tgid, tid, sig) name the process in
        // argument 0; tkill(tid, sig) names a thread, whose id equals the pid
        // only for the main thread.
        let other =
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, own_pid as u64)
                .map_err(|e| e.to_string())?;
        rules.insert(
            call,
            vec![SeccompRule::new(vec![other]).map_err(|e| e.to_string())?],
        );
    }
    for &(call, flags_arg) in STAT_BY_PATH {
        let by_path = SeccompCondition::new(
            flags_arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(libc::AT_EMPTY_PATH as u64),
            0,
        )
        .map_err(|e| e.to_string())?;
        rules.insert(
            call,
            vec![SeccompRule::new(vec![by_path]).map_err(|e| e.to_string())?],
        );
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

/// Installs the filter on every thread of this process.
pub fn lock_down(own_pid: i32) -> Result<(), String> {
    let program = child_filter(own_pid)?;
    seccompiler::apply_filter_all_threads(&program).map_err(|e| e.to_string())
}
