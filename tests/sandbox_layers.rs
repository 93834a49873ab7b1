//! Each kernel layer around a child holds on its own, checked on the host.
//!
//! `baton sandbox-probe` confines a child exactly as the zygote does and
//! makes raw system calls (no Python, no fence: as if code had reached
//! native calls) against a host file, a victim process, a TCP listener and
//! an abstract unix socket of this test. Once with the system-call filter,
//! once without it (namespaces, no capabilities, the empty root and
//! Landlock alone). After each, the test looks at the host: the victim is
//! alive with its nice value, scheduling policy, limits and no tracer; the
//! file keeps its mode, owner and attributes; the mount table, System V IPC
//! and the host name are unchanged; the listeners got no connection.
//!
//! Runs as root and, in CI, again as an unprivileged user.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener};
use std::process::{Child, Command};

use serde_json::{Value, json};

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// What the host looks like, in the parts an escape would change.
#[derive(Debug, PartialEq)]
struct Host {
    victim_alive: bool,
    victim_stat: Vec<String>,
    victim_limits: String,
    victim_tracer: String,
    file_mode: u32,
    file_owner: (u32, u32),
    file_xattr: bool,
    mounts: String,
    shm: String,
    msg: String,
    hostname: String,
}

fn look(victim: &Child, file: &std::path::Path) -> Host {
    let pid = victim.id();
    let stat = read(&format!("/proc/{pid}/stat"));
    // nice (19th field) and policy (41st), after the command name.
    let fields: Vec<String> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let pick = |n: usize| fields.get(n).cloned().unwrap_or_default();
    let metadata = std::fs::metadata(file).ok();
    // SAFETY: a signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid as i32, 0) } == 0;
    Host {
        victim_alive: alive,
        victim_stat: vec![pick(16), pick(38)],
        victim_limits: read(&format!("/proc/{pid}/limits")),
        victim_tracer: read(&format!("/proc/{pid}/status"))
            .lines()
            .find(|l| l.starts_with("TracerPid"))
            .unwrap_or("")
            .to_owned(),
        file_mode: metadata.as_ref().map_or(0, |m| m.permissions().mode()),
        file_owner: metadata.as_ref().map_or((0, 0), |m| (m.uid(), m.gid())),
        file_xattr: has_xattr(file),
        mounts: read("/proc/self/mountinfo"),
        shm: read("/proc/sysvipc/shm"),
        msg: read("/proc/sysvipc/msg"),
        hostname: read("/proc/sys/kernel/hostname"),
    }
}

fn has_xattr(file: &std::path::Path) -> bool {
    let path = std::ffi::CString::new(file.to_string_lossy().as_bytes()).unwrap_or_default();
    let mut buffer = [0u8; 8];
    // SAFETY: reads an attribute into a local buffer.
    unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"user.baton".as_ptr(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        ) >= 0
    }
}

fn probe(targets: &Value, with_seccomp: bool) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .arg("sandbox-probe")
        .arg("--targets")
        .arg(targets.to_string());
    if !with_seccomp {
        command.arg("--without-seccomp");
    }
    let output = command.output().unwrap_or_else(|e| panic!("probe: {e}"));
    assert!(
        output.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("probe output: {e}"))
}

fn attempts(report: &Value) -> Vec<(String, i64, i64)> {
    report["attempts"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|a| {
                    (
                        a["name"].as_str().unwrap_or_default().to_owned(),
                        a["returned"].as_i64().unwrap_or(0),
                        a["errno"].as_i64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn identity(report: &Value, key: &str) -> String {
    report["identity"]
        .as_array()
        .and_then(|pairs| pairs.iter().find(|p| p[0] == key))
        .and_then(|p| p[1].as_str())
        .unwrap_or_default()
        .to_owned()
}

struct Fixture {
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    victim: Child,
    tcp: TcpListener,
    unix: UnixListener,
    targets: Value,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("host-file");
    std::fs::write(&file, "host data").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))
        .unwrap_or_else(|e| panic!("{e}"));
    let victim = Command::new("sleep")
        .arg("120")
        .spawn()
        .unwrap_or_else(|e| panic!("sleep: {e}"));
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    tcp.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("baton-probe-{}-{serial}", std::process::id());
    let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let unix = UnixListener::bind_addr(&address).unwrap_or_else(|e| panic!("{e}"));
    unix.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
    let targets = json!({
        "file": file.to_string_lossy(),
        "victim_pid": victim.id(),
        "tcp_port": tcp.local_addr().map(|a| a.port()).unwrap_or(0),
        "abstract_socket": name,
    });
    Fixture {
        _dir: dir,
        file,
        victim,
        tcp,
        unix,
        targets,
    }
}

fn assert_no_connection(fixture: &Fixture) {
    assert_eq!(
        fixture.tcp.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock),
        "the TCP listener got a connection from the sandbox"
    );
    assert_eq!(
        fixture.unix.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock),
        "the abstract socket got a connection from the sandbox"
    );
}

#[test]
fn with_every_layer_every_raw_call_is_refused_and_the_host_is_untouched() {
    let mut fixture = fixture();
    let before = look(&fixture.victim, &fixture.file);
    let report = probe(&fixture.targets, true);
    let after = look(&fixture.victim, &fixture.file);
    assert_eq!(before, after, "the host changed");
    assert!(after.victim_alive);
    assert_no_connection(&fixture);
    for (name, returned, errno) in attempts(&report) {
        assert!(
            returned < 0,
            "{name} succeeded ({returned}) under the filter"
        );
        assert!(
            errno == i64::from(libc::EPERM) || errno == i64::from(libc::ENOSYS),
            "{name} failed with errno {errno}, not the filter's EPERM"
        );
    }
    assert!(attempts(&report).len() >= 55, "{report}");
    let _ = fixture.victim.kill();
}

#[test]
fn without_the_filter_the_other_layers_still_hold() {
    let mut fixture = fixture();
    let before = look(&fixture.victim, &fixture.file);
    let report = probe(&fixture.targets, false);
    let after = look(&fixture.victim, &fixture.file);
    assert_eq!(before, after, "the host changed without the filter");
    assert_no_connection(&fixture);
    // This kind of machine has the layers; say so if one is missing.
    assert_eq!(report["layers"]["namespaces"], true, "{report}");
    assert!(
        report["layers"]["landlock_abi"].as_i64().unwrap_or(0) >= 6,
        "{report}"
    );
    // Its own pid namespace, user namespace and host name.
    assert_eq!(identity(&report, "pid"), "1");
    assert_eq!(identity(&report, "uid"), "1000");
    assert_eq!(identity(&report, "hostname"), "baton");
    let refused = [
        "open host file",
        "open /proc of the victim",
        "chmod host file",
        "fchmodat2 host file",
        "chown host file",
        "setxattr host file",
        "setxattrat host file",
        "unlink host file",
        "stat host path",
        "statx host path",
        "mount tmpfs",
        "fsopen tmpfs",
        "fsopen proc",
        "listmount",
        "statmount",
        "chroot escape",
        "umount",
        "kill victim",
        "setpriority victim",
        "sched_setscheduler victim idle",
        "sched_setscheduler self fifo 99",
        "prlimit victim",
        "ptrace attach victim",
        "process_vm_readv victim",
        "pidfd_open victim",
        "fcntl F_SETOWN victim",
        "ioctl FIOSETOWN victim",
        "unshare",
        "connect host tcp",
        "connect host abstract socket",
        "mq_open",
        "sethostname",
        "setuid 0",
        "clock_settime",
        "reboot",
    ];
    let all = attempts(&report);
    for name in refused {
        let attempt = all.iter().find(|(n, _, _)| n == name);
        assert!(
            attempt.is_some_and(|(_, returned, _)| *returned < 0),
            "{name} was not refused without the filter: {attempt:?}"
        );
    }
    let _ = fixture.victim.kill();
}
