//! `baton sandbox-probe`: a child confined exactly as the zygote confines
//! one ([`Confinement`], then the system-call filter), which then attempts
//! raw system calls against targets a test names: a host file, a victim
//! process, a TCP listener and an abstract unix socket. It reports what each
//! call returned; the test checks the host (the file's mode and attributes,
//! the victim alive with its nice value, policy and limits, the mount table,
//! System V IPC, the listeners) and so proves each layer holds without the
//! Python fence, and, with `--without-seccomp`, without the filter too.
//!
//! Invariant: the probe shares the child's confinement code; it has none of
//! its own, so it can only pass if the children are confined.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use serde::{Deserialize, Serialize};

use crate::sandbox::isolation::{Cloned, Confinement, Layers};
use crate::sandbox::limits::ChildRlimits;
use crate::sandbox::seccomp::{self, ChildIdentity};

/// What the attacks aim at.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Targets {
    /// A file of the host the attacks try to change.
    pub file: String,
    /// A process of the host the attacks try to signal, trace, slow down.
    pub victim_pid: i32,
    /// A TCP port on 127.0.0.1 of the host the attacks try to reach.
    pub tcp_port: u16,
    /// An abstract unix socket name (without the leading NUL) of the host.
    pub abstract_socket: String,
}

/// One attempt.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attempt {
    /// What was tried.
    pub name: String,
    /// The call's return value (negative: failed).
    pub returned: i64,
    /// `errno` when it failed.
    pub errno: i32,
}

/// The probe's report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The layers this machine gives a child.
    pub layers: Layers,
    /// Whether the system-call filter was installed.
    pub seccomp: bool,
    /// What the child saw of itself: pid, uid, host name, capabilities.
    pub identity: Vec<(String, String)>,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
}

/// Runs the probe: confines a child, attacks, prints the report as JSON.
pub fn run(targets: Targets, with_seccomp: bool) -> i32 {
    let confinement = match Confinement::prepare(ChildRlimits::default()) {
        Ok(confinement) => confinement,
        Err(error) => {
            eprintln!("baton sandbox-probe: {error}");
            return 1;
        }
    };
    let layers = Layers {
        namespaces: confinement.namespaces,
        landlock_abi: crate::sandbox::isolation::landlock_abi(),
    };
    let (mut parent_end, child_end) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(error) => {
            eprintln!("baton sandbox-probe: {error}");
            return 1;
        }
    };
    match confinement.spawn() {
        Ok(Cloned::Child) => {
            drop(parent_end);
            child(&confinement, child_end, &targets, with_seccomp)
        }
        Ok(Cloned::Parent(pid, _)) => {
            drop(child_end);
            let mut text = String::new();
            let _ = parent_end.read_to_string(&mut text);
            let mut status = 0;
            // SAFETY: reaping the child just created.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            match serde_json::from_str::<Report>(&text) {
                Ok(mut report) => {
                    report.layers = layers;
                    println!("{}", serde_json::to_string(&report).unwrap_or_default());
                    0
                }
                Err(error) => {
                    eprintln!("baton sandbox-probe: no report from the child ({error}): {text:?}");
                    1
                }
            }
        }
        Err(error) => {
            eprintln!("baton sandbox-probe: cannot create the child: {error}");
            1
        }
    }
}

fn child(
    confinement: &Confinement,
    stream: UnixStream,
    targets: &Targets,
    with_seccomp: bool,
) -> ! {
    let fd = stream.as_raw_fd();
    if confinement.apply(fd).is_err() {
        exit_now(3);
    }
    if with_seccomp {
        let identity = ChildIdentity {
            pid: std::process::id() as i32,
            socket_fds: [fd, fd],
        };
        if seccomp::lock_down(identity).is_err() {
            exit_now(4);
        }
    }
    let mut attempts = Vec::new();
    attack(targets, fd, &mut attempts);
    let report = Report {
        layers: Layers::default(),
        seccomp: with_seccomp,
        identity: identity(),
        attempts,
    };
    let mut stream = stream;
    let _ = stream.write_all(
        serde_json::to_string(&report)
            .unwrap_or_default()
            .as_bytes(),
    );
    drop(stream);
    exit_now(0)
}

fn exit_now(code: i32) -> ! {
    // SAFETY: ends this process at once.
    unsafe { libc::_exit(code) }
}

/// What the child sees of itself.
fn identity() -> Vec<(String, String)> {
    let mut uname: libc::utsname = unsafe_zeroed();
    // SAFETY: uname fills the structure it is given.
    let named = unsafe { libc::uname(&mut uname) } == 0;
    let host = if named {
        // SAFETY: uname writes NUL-terminated strings.
        unsafe { std::ffi::CStr::from_ptr(uname.nodename.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        String::new()
    };
    // SAFETY: plain queries of this process.
    let (pid, uid, euid) = unsafe { (libc::getpid(), libc::getuid(), libc::geteuid()) };
    vec![
        ("pid".into(), pid.to_string()),
        ("uid".into(), uid.to_string()),
        ("euid".into(), euid.to_string()),
        ("hostname".into(), host),
        (
            "policy".into(),
            // SAFETY: a query of this process's own scheduling policy.
            unsafe { libc::sched_getscheduler(0) }.to_string(),
        ),
        (
            "nice".into(),
            // SAFETY: a query of this process's own nice value.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }.to_string(),
        ),
    ]
}

fn unsafe_zeroed<T>() -> T {
    // SAFETY: used only for plain C structures whose all-zero value is valid.
    unsafe { std::mem::zeroed() }
}

/// Records the outcome of one raw call.
fn record(attempts: &mut Vec<Attempt>, name: &str, returned: i64) {
    let errno = if returned < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    } else {
        0
    };
    attempts.push(Attempt {
        name: name.to_owned(),
        returned,
        errno,
    });
}

/// x86-64 numbers of calls newer than the `libc` crate's table.
mod newer {
    pub(super) const STATMOUNT: libc::c_long = 457;
    pub(super) const LISTMOUNT: libc::c_long = 458;
    pub(super) const SETXATTRAT: libc::c_long = 463;
    pub(super) const X32_BIT: libc::c_long = 0x4000_0000;
    /// `fcntl`: the signal sent when the descriptor is ready.
    pub(super) const F_SETSIG: libc::c_int = 10;
    /// `ioctl`: the process that gets `SIGIO`.
    pub(super) const FIOSETOWN: libc::c_ulong = 0x8901;
}

/// Every attack, as raw system calls.
#[allow(clippy::too_many_lines)]
fn attack(targets: &Targets, socket: i32, out: &mut Vec<Attempt>) {
    let file = std::ffi::CString::new(targets.file.clone()).unwrap_or_default();
    let victim = targets.victim_pid;
    let proc_fd = std::ffi::CString::new(format!("/proc/{victim}/status")).unwrap_or_default();
    let mut buffer = [0u8; 512];
    // SAFETY: each call below is a raw system call with valid pointers to
    // local buffers and C strings; none of them touches this process's own
    // memory in a way Rust relies on (the probe exits right after).
    unsafe {
        // The host's files.
        record(
            out,
            "open host file",
            i64::from(libc::open(file.as_ptr(), libc::O_RDWR)),
        );
        record(
            out,
            "open /proc of the victim",
            i64::from(libc::open(proc_fd.as_ptr(), libc::O_RDONLY)),
        );
        record(
            out,
            "chmod host file",
            i64::from(libc::chmod(file.as_ptr(), 0o777)),
        );
        record(
            out,
            "fchmodat2 host file",
            libc::syscall(libc::SYS_fchmodat2, libc::AT_FDCWD, file.as_ptr(), 0o777, 0),
        );
        record(
            out,
            "chown host file",
            i64::from(libc::chown(file.as_ptr(), 0, 0)),
        );
        let name = c"user.baton";
        record(
            out,
            "setxattr host file",
            i64::from(libc::setxattr(
                file.as_ptr(),
                name.as_ptr(),
                b"x".as_ptr().cast(),
                1,
                0,
            )),
        );
        record(
            out,
            "setxattrat host file",
            libc::syscall(
                newer::SETXATTRAT,
                libc::AT_FDCWD,
                file.as_ptr(),
                0,
                name.as_ptr(),
                std::ptr::null::<u8>(),
                0,
            ),
        );
        record(
            out,
            "unlink host file",
            i64::from(libc::unlink(file.as_ptr())),
        );
        let mut stat: libc::stat = unsafe_zeroed();
        record(
            out,
            "stat host path",
            i64::from(libc::stat(c"/etc/passwd".as_ptr(), &mut stat)),
        );
        let mut statx: libc::statx = unsafe_zeroed();
        record(
            out,
            "statx host path",
            i64::from(libc::statx(
                libc::AT_FDCWD,
                c"/etc/passwd".as_ptr(),
                0,
                libc::STATX_ALL,
                &mut statx,
            )),
        );
        let mut statfs: libc::statfs = unsafe_zeroed();
        record(
            out,
            "statfs /",
            i64::from(libc::statfs(c"/".as_ptr(), &mut statfs)),
        );
        record(
            out,
            "getdents of the root",
            i64::from(libc::open(
                c".".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY,
            )),
        );
        // Mounts.
        record(
            out,
            "mount tmpfs",
            i64::from(libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )),
        );
        record(
            out,
            "fsopen tmpfs",
            libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), 0),
        );
        record(
            out,
            "fsopen proc",
            libc::syscall(libc::SYS_fsopen, c"proc".as_ptr(), 0),
        );
        record(
            out,
            "listmount",
            libc::syscall(
                newer::LISTMOUNT,
                std::ptr::null::<u8>(),
                buffer.as_mut_ptr(),
                8,
                0,
            ),
        );
        record(
            out,
            "statmount",
            libc::syscall(
                newer::STATMOUNT,
                std::ptr::null::<u8>(),
                buffer.as_mut_ptr(),
                buffer.len(),
                0,
            ),
        );
        record(
            out,
            "chroot escape",
            i64::from(libc::chroot(c"..".as_ptr())),
        );
        record(
            out,
            "umount",
            i64::from(libc::umount2(c"/".as_ptr(), libc::MNT_DETACH)),
        );
        // Other processes: signals, priority, scheduling, limits, tracing.
        record(
            out,
            "kill victim",
            i64::from(libc::kill(victim, libc::SIGKILL)),
        );
        record(
            out,
            "kill every process",
            i64::from(libc::kill(-1, libc::SIGKILL)),
        );
        record(
            out,
            "kill process group 1",
            i64::from(libc::kill(-1000, libc::SIGTERM)),
        );
        record(
            out,
            "setpriority victim",
            i64::from(libc::setpriority(libc::PRIO_PROCESS, victim as u32, 19)),
        );
        record(
            out,
            "setpriority own user",
            i64::from(libc::setpriority(libc::PRIO_USER, 0, 19)),
        );
        record(
            out,
            "setpriority self",
            i64::from(libc::setpriority(libc::PRIO_PROCESS, 0, 19)),
        );
        let idle = libc::sched_param { sched_priority: 0 };
        record(
            out,
            "sched_setscheduler victim idle",
            i64::from(libc::sched_setscheduler(victim, libc::SCHED_IDLE, &idle)),
        );
        let fifo = libc::sched_param { sched_priority: 99 };
        record(
            out,
            "sched_setscheduler self fifo 99",
            i64::from(libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo)),
        );
        let one = libc::rlimit {
            rlim_cur: 1,
            rlim_max: 1,
        };
        record(
            out,
            "prlimit victim",
            i64::from(libc::prlimit(
                victim,
                libc::RLIMIT_NOFILE,
                &one,
                std::ptr::null_mut(),
            )),
        );
        record(
            out,
            "ptrace attach victim",
            libc::ptrace(libc::PTRACE_ATTACH, victim, 0, 0),
        );
        let mut local = [0u8; 8];
        let local_iov = libc::iovec {
            iov_base: local.as_mut_ptr().cast(),
            iov_len: 8,
        };
        let remote_iov = libc::iovec {
            iov_base: 0x400000 as *mut libc::c_void,
            iov_len: 8,
        };
        record(
            out,
            "process_vm_readv victim",
            libc::process_vm_readv(victim, &local_iov, 1, &remote_iov, 1, 0) as i64,
        );
        record(
            out,
            "pidfd_open victim",
            libc::syscall(libc::SYS_pidfd_open, victim, 0),
        );
        // Its own socket: signals to someone else when it becomes ready.
        record(
            out,
            "fcntl F_SETOWN victim",
            i64::from(libc::fcntl(socket, libc::F_SETOWN, victim)),
        );
        record(
            out,
            "fcntl F_SETSIG SIGKILL",
            i64::from(libc::fcntl(socket, newer::F_SETSIG, libc::SIGKILL)),
        );
        record(
            out,
            "fcntl O_ASYNC",
            i64::from(libc::fcntl(socket, libc::F_SETFL, libc::O_ASYNC)),
        );
        let mut owner = victim;
        record(
            out,
            "ioctl FIOSETOWN victim",
            i64::from(libc::ioctl(socket, newer::FIOSETOWN, &mut owner)),
        );
        let mut on: libc::c_int = 1;
        record(
            out,
            "ioctl FIOASYNC",
            i64::from(libc::ioctl(socket, libc::FIOASYNC, &mut on)),
        );
        let _ = libc::write(socket, b"".as_ptr().cast(), 0);
        // Processes and threads of its own.
        let forked = libc::fork();
        if forked == 0 {
            exit_now(0);
        }
        record(out, "fork", i64::from(forked));
        record(
            out,
            "unshare",
            i64::from(libc::unshare(libc::CLONE_NEWUSER)),
        );
        // Network.
        let tcp = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        record(out, "socket inet", i64::from(tcp));
        if tcp >= 0 {
            let address = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: targets.tcp_port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
                },
                sin_zero: [0; 8],
            };
            record(
                out,
                "connect host tcp",
                i64::from(libc::connect(
                    tcp,
                    (&address as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )),
            );
        }
        let unix = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        record(out, "socket unix", i64::from(unix));
        if unix >= 0 {
            let mut address: libc::sockaddr_un = unsafe_zeroed();
            address.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (slot, byte) in address.sun_path[1..]
                .iter_mut()
                .zip(targets.abstract_socket.bytes())
            {
                *slot = byte as libc::c_char;
            }
            let length = 2 + targets.abstract_socket.len();
            record(
                out,
                "connect host abstract socket",
                i64::from(libc::connect(
                    unix,
                    (&address as *const libc::sockaddr_un).cast(),
                    length as u32,
                )),
            );
        }
        // IPC of other tenants.
        record(
            out,
            "shmget 96 MiB",
            i64::from(libc::shmget(
                libc::IPC_PRIVATE,
                96 << 20,
                libc::IPC_CREAT | 0o666,
            )),
        );
        record(
            out,
            "msgget",
            i64::from(libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o666)),
        );
        record(
            out,
            "mq_open",
            libc::syscall(
                libc::SYS_mq_open,
                c"baton-probe".as_ptr(),
                libc::O_CREAT | libc::O_RDWR,
                0o666,
                std::ptr::null::<u8>(),
            ),
        );
        // The system.
        record(
            out,
            "sethostname",
            i64::from(libc::sethostname(c"pwned".as_ptr(), 5)),
        );
        record(out, "setuid 0", i64::from(libc::setuid(0)));
        let past = libc::timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        record(
            out,
            "clock_settime",
            i64::from(libc::clock_settime(libc::CLOCK_REALTIME, &past)),
        );
        record(out, "reboot", i64::from(libc::reboot(libc::RB_POWER_OFF)));
        record(
            out,
            "keyctl",
            libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0),
        );
        record(
            out,
            "bpf",
            libc::syscall(libc::SYS_bpf, 0, std::ptr::null::<u8>(), 0),
        );
        record(
            out,
            "io_uring_setup",
            libc::syscall(libc::SYS_io_uring_setup, 8, buffer.as_mut_ptr()),
        );
        record(
            out,
            "personality",
            i64::from(libc::personality(0x0040_0000)),
        );
        record(out, "userfaultfd", libc::syscall(libc::SYS_userfaultfd, 0));
        record(
            out,
            "perf_event_open",
            libc::syscall(libc::SYS_perf_event_open, buffer.as_mut_ptr(), 0, -1, -1, 0),
        );
        let executable = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        record(
            out,
            "mmap executable",
            if executable == libc::MAP_FAILED {
                -1
            } else {
                0
            },
        );
        record(
            out,
            "x32 getpid",
            libc::syscall(newer::X32_BIT | libc::SYS_getpid),
        );
        record(out, "uname", {
            let mut uname: libc::utsname = unsafe_zeroed();
            i64::from(libc::uname(&mut uname))
        });
        record(
            out,
            "times",
            libc::syscall(libc::SYS_times, buffer.as_mut_ptr()),
        );
    }
}
