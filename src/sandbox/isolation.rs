//! The kernel layers around a child, beside the system-call filter: new
//! namespaces, an unprivileged identity without capabilities, and Landlock.
//!
//! A child is created by the zygote with `clone` into new user, pid, mount,
//! IPC, network and UTS namespaces (its pid is 1 in its own pid namespace; it
//! sees no other process, no network interface, no System V or POSIX IPC
//! object of anyone else, and a host name of its own). Inside, it is uid and
//! gid [`INNER_ID`], mapped to the zygote's own uid outside (the zygote drops
//! to `nobody` first when it starts as root). It then drops every
//! capability (effective, permitted, inheritable, ambient and the bounding
//! set), sets `no_new_privs`, and restricts itself with Landlock: no file
//! access of any kind, no TCP bind or connect, no abstract unix socket or
//! signal outside its own domain.
//!
//! Invariants:
//! - Each layer is applied whatever the others did; a layer the kernel lacks
//!   is reported by [`probe`] (the server says so at startup), never assumed.
//! - The order is fixed by what each step needs: the identity maps are
//!   written through `/proc` before the root changes, the host name and the
//!   root change use capabilities the child then drops, Landlock and the
//!   dropped capabilities come before any user code, and the system-call
//!   filter comes last (`seccomp`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

/// The uid and gid of a child inside its user namespace.
pub const INNER_ID: u32 = 1000;

/// The uid and gid a zygote started as root runs as.
pub const NOBODY: u32 = 65534;

/// The host name a child sees.
pub const HOST_NAME: &str = "baton";

/// The namespaces every child gets.
const NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWUTS;

/// Everything the zygote applies to each child.
#[derive(Clone, Debug)]
pub struct Confinement {
    /// The child's resource limits.
    pub rlimits: crate::sandbox::limits::ChildRlimits,
    /// The empty root every child enters.
    pub root_fd: i32,
    /// Whether children get namespaces of their own.
    pub namespaces: bool,
    /// The zygote's uid and gid, which a child's ids map to.
    pub outer_ids: (u32, u32),
    /// The server's control groups a child is moved into (none: no group
    /// per child; see [`crate::sandbox::cgroups`]).
    pub cgroups: Vec<std::path::PathBuf>,
}

impl Confinement {
    /// In the zygote at its start, while it has one thread: the empty root,
    /// whether namespaces work, and `nobody` instead of root.
    pub fn prepare(rlimits: crate::sandbox::limits::ChildRlimits) -> io::Result<Confinement> {
        let root_fd = crate::sandbox::limits::make_empty_root()?;
        let namespaces = namespaces_work();
        if namespaces {
            drop_root()?;
        }
        Ok(Confinement {
            rlimits,
            root_fd,
            namespaces,
            outer_ids: outer_ids(),
            cgroups: Vec::new(),
        })
    }

    /// A new child: cloned into new namespaces, or forked where the kernel
    /// has none. The caller must hold no lock another thread could need.
    pub fn spawn(&self) -> io::Result<Cloned> {
        if self.namespaces {
            clone_into_namespaces()
        } else {
            fork()
        }
    }

    /// In a new child: its layers, in the order each needs: its
    /// namespaces' identity, then limits, descriptors (all but `keep_fd`
    /// closed) and the empty root, then Landlock, then no capabilities.
    pub fn apply(&self, keep_fd: i32) -> io::Result<()> {
        if self.namespaces {
            enter_namespaces(self.outer_ids)?;
        }
        crate::sandbox::limits::confine_child(&self.rlimits, keep_fd, self.root_fd)?;
        // Best effort: a kernel without Landlock is reported at startup.
        let _ = landlock_everything();
        drop_capabilities()
    }
}

/// What a `clone` returned.
pub enum Cloned {
    /// In the new child.
    Child,
    /// In the zygote: the child's pid, and its pidfd where the kernel has
    /// them (Linux 5.2+): a handle that can only ever signal this child,
    /// even after its pid is reused.
    Parent(i32, Option<OwnedFd>),
}

/// Which layers this machine gives a child (see [`probe`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// New user, pid, mount, IPC, network and UTS namespaces per child.
    pub namespaces: bool,
    /// The Landlock ABI of the kernel (0: absent).
    pub landlock_abi: i32,
}

impl Layers {
    /// One line for the log.
    pub fn describe(&self) -> String {
        let namespaces = if self.namespaces {
            "new user, pid, mount, IPC, network and UTS namespaces per child"
        } else {
            "NO namespaces (the kernel refused them: children share the zygote's)"
        };
        let landlock = match self.landlock_abi {
            0 => "NO Landlock (absent from this kernel)".to_owned(),
            abi if abi >= 6 => {
                format!("Landlock ABI {abi} (files, TCP, signals, abstract sockets)")
            }
            abi if abi >= 4 => format!("Landlock ABI {abi} (files and TCP; no signal scoping)"),
            abi => format!("Landlock ABI {abi} (files only)"),
        };
        format!("{namespaces}; {landlock}; seccomp allow list; no capabilities")
    }
}

/// The uid and gid the zygote runs as: `nobody` when this process is root
/// (a zygote started by root drops to it; where the kernel has no
/// namespaces it stays root, which needs no ownership), else this
/// process's own.
pub fn zygote_ids() -> (u32, u32) {
    if nix::unistd::geteuid().is_root() {
        (NOBODY, NOBODY)
    } else {
        outer_ids()
    }
}

/// The Landlock ABI the kernel offers (0 when absent).
pub fn landlock_abi() -> i32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute only
    // asks for the version.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    i32::try_from(abi).unwrap_or(0).max(0)
}

/// Whether the kernel lets this process create a child in new namespaces:
/// clones one that exits at once.
pub fn namespaces_work() -> bool {
    match clone_into_namespaces() {
        Ok(Cloned::Child) => exit_now(0),
        Ok(Cloned::Parent(pid, _)) => matches!(
            nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None),
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0))
        ),
        Err(_) => false,
    }
}

/// What this machine gives a child.
pub fn probe() -> Layers {
    Layers {
        namespaces: namespaces_work(),
        landlock_abi: landlock_abi(),
    }
}

fn exit_now(code: i32) -> ! {
    // SAFETY: ends this process without running any handler.
    unsafe { libc::_exit(code) }
}

/// `fork`, into new namespaces. The caller must be single-threaded (the
/// zygote is): the child is a copy of this thread only.
pub fn clone_into_namespaces() -> io::Result<Cloned> {
    clone_with_pidfd(NAMESPACES)
}

/// A plain fork, for a machine without namespaces.
pub fn fork() -> io::Result<Cloned> {
    clone_with_pidfd(0)
}

/// `clone` with `flags` (a fork when they name no namespace), asking for a
/// pidfd (`CLONE_PIDFD`); where that clone fails (a kernel older than 5.2
/// answers `EINVAL`, a container's filter may answer `EPERM`), the same
/// clone without it.
fn clone_with_pidfd(flags: libc::c_int) -> io::Result<Cloned> {
    raw_clone(flags | libc::CLONE_PIDFD).or_else(|_| raw_clone(flags))
}

fn raw_clone(flags: libc::c_int) -> io::Result<Cloned> {
    let mut pidfd: libc::c_int = -1;
    // SAFETY: a clone without CLONE_VM and without a new stack is a fork;
    // the caller has one thread, so no lock is held by another. With
    // CLONE_PIDFD the kernel writes the parent's new descriptor (close on
    // exec) into `pidfd`, which outlives the call.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::c_long::from(flags | libc::SIGCHLD),
            0usize,
            &mut pidfd as *mut libc::c_int,
            0usize,
            0usize,
        )
    };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Cloned::Child),
        pid => {
            // SAFETY: a descriptor the kernel just made for this process,
            // owned by nothing else.
            let pidfd = (flags & libc::CLONE_PIDFD != 0 && pidfd >= 0)
                .then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
            Ok(Cloned::Parent(pid as i32, pidfd))
        }
    }
}

/// In the zygote at start: a zygote started as root becomes `nobody`, so
/// that its children's ids map to an unprivileged user outside.
pub fn drop_root() -> io::Result<()> {
    use nix::unistd::{Gid, Uid, geteuid, setgroups, setresgid, setresuid};
    if !geteuid().is_root() {
        return Ok(());
    }
    let (uid, gid) = (Uid::from_raw(NOBODY), Gid::from_raw(NOBODY));
    setgroups(&[])?;
    setresgid(gid, gid, gid)?;
    setresuid(uid, uid, uid)?;
    Ok(())
}

/// The uid and gid of this process (read in the zygote, before a clone).
pub fn outer_ids() -> (u32, u32) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

/// In a new child, first: maps its ids to [`INNER_ID`] and names its host.
/// A zygote that dropped root is not dumpable, which makes its children's
/// `/proc/self` files root's: the child is dumpable just long enough to
/// write its maps.
pub fn enter_namespaces((uid, gid): (u32, u32)) -> io::Result<()> {
    set_dumpable(true);
    let mapped = write_maps(uid, gid);
    set_dumpable(false);
    mapped?;
    nix::unistd::sethostname(HOST_NAME)?;
    Ok(())
}

fn write_maps(uid: u32, gid: u32) -> io::Result<()> {
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{INNER_ID} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{INNER_ID} {gid} 1"))
}

fn set_dumpable(dumpable: bool) {
    // Cannot fail for this process with a boolean; a failure would show as
    // the maps' write refused.
    let _ = nix::sys::prctl::set_dumpable(dumpable);
}

/// Restricts this process with every Landlock right the kernel knows:
/// no file access, no TCP, no signal or abstract socket out of its domain.
pub fn landlock_everything() -> Result<landlock::RulesetStatus, landlock::RulesetError> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope,
    };
    let abi = ABI::V6;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?
        .restrict_self()?;
    Ok(status.ruleset)
}

/// Drops every capability: the bounding set, the ambient set, and the
/// effective, permitted and inheritable sets; sets `no_new_privs`.
pub fn drop_capabilities() -> io::Result<()> {
    nix::sys::prctl::set_no_new_privs()?;
    // SAFETY: prctl and capset on this process only, with valid arguments
    // (nix has no wrapper for the capability calls).
    unsafe {
        for cap in 0..64 {
            // Past the last capability the kernel answers EINVAL.
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
