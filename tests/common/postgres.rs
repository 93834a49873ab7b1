//! A private PostgreSQL server for the tests that need one: `initdb` in a
//! temporary directory and the server on a free loopback port, with trust
//! authentication. PostgreSQL refuses to run as root, so under root the
//! server runs as `nobody` (`setpriv`). Its binaries come from Debian's
//! package (`/usr/lib/postgresql/<version>/bin`, installed by `.ci/run`)
//! or `PATH`; without them the test fails and says what to install.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running PostgreSQL server, stopped when dropped.
pub(crate) struct Postgres {
    dir: tempfile::TempDir,
    server: Child,
    port: u16,
    /// Its settings beyond the defaults (`-c name=value` each).
    settings: Vec<String>,
}

/// The directory of PostgreSQL's server binaries.
fn binaries() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.retain(|dir| dir.join("postgres").exists());
    versions.sort();
    if let Some(newest) = versions.pop() {
        return newest;
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|dir| dir.join("postgres").exists() && dir.join("initdb").exists())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "these tests need PostgreSQL's server (initdb, postgres): apt-get install postgresql"
        )
    })
}

/// `command` as `nobody` when this process is root.
fn unprivileged(program: &Path) -> Command {
    if nix::unistd::geteuid().is_root() {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(program);
        command
    } else {
        Command::new(program)
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

impl Postgres {
    /// Creates a cluster and starts its server; waits until it answers.
    pub(crate) fn start() -> Postgres {
        Self::start_with(&[])
    }

    /// [`Postgres::start`] with `settings` (`name=value`, as `-c` takes).
    pub(crate) fn start_with(settings: &[&str]) -> Postgres {
        let dir = tempfile::Builder::new()
            .prefix("baton-pg-")
            .tempdir_in("/tmp")
            .unwrap_or_else(|e| panic!("{e}"));
        let data = dir.path().join("data");
        if nix::unistd::geteuid().is_root() {
            let nobody = Some(nix::unistd::Uid::from_raw(65534));
            let group = Some(nix::unistd::Gid::from_raw(65534));
            nix::unistd::chown(dir.path(), nobody, group).unwrap_or_else(|e| panic!("{e}"));
        }
        let initdb = unprivileged(&binaries().join("initdb"))
            .args([
                "--auth=trust",
                "--username=baton",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .stdout(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run initdb: {e}"));
        assert!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let port = free_port();
        let settings: Vec<String> = settings.iter().map(|s| (*s).to_owned()).collect();
        let server = spawn_server(&data, port, &settings);
        stop_at_exit(server.id() as i32, dir.path());
        let postgres = Postgres {
            dir,
            server,
            port,
            settings,
        };
        postgres.wait_ready();
        postgres
    }

    /// Crashes the server (an immediate shutdown: what its memory held and
    /// had not written is lost, as in a power cut of the database alone)
    /// and starts it again on the same data, which it recovers from its
    /// log; waits until it answers.
    pub(crate) fn crash_and_restart(&mut self) {
        let pid = self.server.id() as i32;
        stop(pid);
        let _ = self.server.wait();
        if let Ok(mut running) = RUNNING.lock() {
            running.retain(|(running, _)| *running != pid);
        }
        self.server = spawn_server(&self.dir.path().join("data"), self.port, &self.settings);
        stop_at_exit(self.server.id() as i32, self.dir.path());
        self.wait_ready();
    }

    fn admin_url(&self) -> String {
        format!("postgres://baton@127.0.0.1:{}/postgres", self.port)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match postgres::Client::connect(&self.admin_url(), postgres::NoTls) {
                Ok(_) => return,
                Err(error) if Instant::now() > deadline => {
                    panic!("postgres did not answer within 30 s: {error}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// A new, empty database; its URL.
    pub(crate) fn database(&self, name: &str) -> String {
        let mut admin = postgres::Client::connect(&self.admin_url(), postgres::NoTls)
            .unwrap_or_else(|e| panic!("{e}"));
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("{e}"));
        format!("postgres://baton@127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let pid = self.server.id() as i32;
        if let Ok(mut running) = RUNNING.lock() {
            running.retain(|(running, _)| *running != pid);
        }
        stop(pid);
        let _ = self.server.wait();
    }
}

/// The server on `data`, listening on loopback `port` only, with
/// `settings`.
fn spawn_server(data: &Path, port: u16, settings: &[String]) -> Child {
    let mut server = unprivileged(&binaries().join("postgres"));
    server
        .arg("-D")
        .arg(data)
        .args(["-c", "listen_addresses=127.0.0.1", "-c"])
        .arg(format!("port={port}"))
        .args([
            "-c",
            "unix_socket_directories=",
            "-c",
            "max_connections=200",
        ]);
    for setting in settings {
        server.args(["-c", setting]);
    }
    server
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start postgres: {e}"))
}

/// SIGQUIT: PostgreSQL's immediate shutdown (what is not on disk is lost).
fn stop(pid: i32) {
    let pid = nix::unistd::Pid::from_raw(pid);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGQUIT);
}

/// Servers not dropped yet, with their directories: a server kept in a
/// `static` is never dropped, so these are stopped and removed when the
/// test process exits.
static RUNNING: std::sync::Mutex<Vec<(i32, PathBuf)>> = std::sync::Mutex::new(Vec::new());

fn stop_at_exit(pid: i32, dir: &Path) {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        // SAFETY: registers a plain function with the C library.
        unsafe {
            libc::atexit(stop_all);
        }
    });
    if let Ok(mut running) = RUNNING.lock() {
        running.push((pid, dir.to_owned()));
    }
}

extern "C" fn stop_all() {
    let Ok(running) = RUNNING.lock() else {
        return;
    };
    for (pid, dir) in running.iter() {
        stop(*pid);
        // SAFETY: waits for our own child.
        unsafe {
            libc::waitpid(*pid, std::ptr::null_mut(), 0);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
