//! A control group per child, seen from the host, over a real server
//! process: every child the zygote forks is in a group of its own, with
//! its memory and task caps written there; a parked child's memory is what
//! its group holds; a child's group goes when the child ends (its CPU time
//! counted), the server's at its end, and a killed server's at the next
//! start.
//!
//! The groups need root (or a delegated cgroup) and a kernel with the
//! memory controller; elsewhere the tests stop early (CI runs them as
//! root, on a kernel that has it).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::server::{Server, children_of, continue_, counter, eventually};
use serde_json::{Value, json};

const MIB: u64 = 1 << 20;

/// Whether the server runs its children in control groups: it must when
/// this test runs as root on a machine whose cgroups have the memory
/// controller (v1, or v2 with it enabled here).
fn has_groups(server: &Server) -> bool {
    if !server_groups(server.pid().unwrap_or_default()).is_empty() {
        return true;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v1_memory = own.lines().any(|l| l.split(':').nth(1) == Some("memory"));
    let root = nix::unistd::geteuid().is_root();
    assert!(
        !(root && v1_memory),
        "root, with a v1 memory controller, yet the server made no groups"
    );
    eprintln!("no control groups here (root: {root}): nothing to check");
    false
}

/// The directories of the groups of the server with pid `server`: one per
/// hierarchy (`.../baton-<pid>`).
fn server_groups(server: u32) -> Vec<PathBuf> {
    let name = format!("baton-{server}");
    let mut found = Vec::new();
    let mut pending = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if file_name == name {
                found.push(path);
            } else if depth < 6 && !file_name.starts_with("baton-") {
                pending.push((path, depth + 1));
            }
        }
    }
    found.sort();
    found
}

/// The group directory of hierarchy `dir` that holds the control file
/// `file` (the memory one: `memory.max` or `memory.limit_in_bytes`).
fn hierarchy_with<'a>(dirs: &'a [PathBuf], files: &[&str]) -> Option<&'a PathBuf> {
    dirs.iter()
        .find(|dir| files.iter().any(|f| dir.join("zygote").join(f).exists()))
}

const TOOLS: &str = r#"[{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]"#;

fn start(server: &Server, code: &str) -> Value {
    let tools: Value = serde_json::from_str(TOOLS).unwrap_or_else(|e| panic!("{e}"));
    let (status, reply) = server.post("/exec/programmatic", &json!({"code": code, "tools": tools}));
    assert_eq!(status, 200, "{reply}");
    reply
}

#[test]
fn each_child_is_in_a_group_of_its_own_with_its_caps() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--memory-mb", "200"]);
    if !has_groups(&server) {
        return;
    }
    let paused = start(&server, "w = await get_weather(city='SF')\nprint(w)");
    assert_eq!(paused["status"], "tool_call_required", "{paused}");
    let server_pid = server.pid().unwrap_or_else(|| panic!("no server"));
    let zygote = server.zygote_pid().unwrap_or_else(|| panic!("no zygote"));
    let groups = server_groups(server_pid);
    assert!(!groups.is_empty(), "no baton-{server_pid} group");
    let memory = hierarchy_with(&groups, &["memory.max", "memory.limit_in_bytes"])
        .unwrap_or_else(|| panic!("no memory group among {groups:?}"));
    // A child just cloned is in the zygote's group until the zygote moves
    // it (before the server sees it): checked once the pool is settled.
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(problem) = children_in_their_groups(memory, &groups, zygote) {
        assert!(Instant::now() < deadline, "{problem}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the zygote is alone in its group and each of its children
/// (at least two: the pool's and the parked one) alone in its own, with
/// its caps; what is not, otherwise.
fn children_in_their_groups(memory: &Path, groups: &[PathBuf], zygote: i32) -> Result<(), String> {
    let text = |path: &Path| {
        std::fs::read_to_string(path)
            .map(|t| t.trim().to_owned())
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let zygote_tasks = text(&memory.join("zygote").join("cgroup.procs"))?;
    if zygote_tasks != zygote.to_string() {
        return Err(format!("the zygote's group holds {zygote_tasks:?}"));
    }
    let children = children_of(zygote);
    if children.len() < 2 {
        return Err(format!("children of the zygote: {children:?}"));
    }
    for child in children {
        let group = memory.join(format!("c{child}"));
        let tasks = text(&group.join("cgroup.procs"))?;
        let cap = ["memory.max", "memory.limit_in_bytes"]
            .iter()
            .map(|f| group.join(f))
            .find(|f| f.exists())
            .map(|f| text(&f))
            .transpose()?;
        let mut seen = vec![tasks, cap.unwrap_or_default()];
        let mut expected = vec![child.to_string(), ((200 + 64) * MIB).to_string()];
        if let Some(pids) = hierarchy_with(groups, &["pids.max"]) {
            let group = pids.join(format!("c{child}"));
            seen.extend([
                text(&group.join("pids.max"))?,
                text(&group.join("cgroup.procs"))?,
            ]);
            expected.extend(["2".to_owned(), child.to_string()]);
        }
        if seen != expected {
            return Err(format!("{group:?}: {seen:?}, not {expected:?}"));
        }
    }
    Ok(())
}

#[test]
fn a_parked_childs_memory_is_what_its_group_holds() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    if !has_groups(&server) {
        return;
    }
    let paused = start(
        &server,
        "kept = bytearray(b'x' * (40 << 20))\nw = await get_weather(city='SF')\nprint(len(kept))",
    );
    assert_eq!(paused["status"], "tool_call_required", "{paused}");
    let zygote = server.zygote_pid().unwrap_or_else(|| panic!("no zygote"));
    let groups = server_groups(server.pid().unwrap_or_default());
    let memory = hierarchy_with(&groups, &["memory.max", "memory.limit_in_bytes"])
        .unwrap_or_else(|| panic!("no memory group among {groups:?}"))
        .clone();
    assert!(
        eventually(|| counter(&server, "baton_parked_bytes") >= (40 * MIB) as f64),
        "timed out waiting: the parked child measured"
    );
    let held: u64 = children_of(zygote)
        .iter()
        .filter_map(|child| {
            let group = memory.join(format!("c{child}"));
            ["memory.current", "memory.usage_in_bytes"]
                .iter()
                .find_map(|f| std::fs::read_to_string(group.join(f)).ok())
                .and_then(|text| text.trim().parse::<u64>().ok())
        })
        .max()
        .unwrap_or(0);
    let counted = counter(&server, "baton_parked_bytes") as u64;
    assert!(
        held >= 40 * MIB && counted.abs_diff(held) <= 4 * MIB,
        "the group holds {held} bytes, the server counts {counted}"
    );
    let (status, done) = continue_(
        &server,
        &paused,
        vec![json!({"call_id": paused["tool_calls"][0]["id"], "result": 1})],
    );
    assert_eq!((status, &done["stdout"]), (200, &json!("41943040\n")));
}

#[test]
fn groups_go_with_their_children_and_their_server() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &["--pool-size", "1"]);
    if !has_groups(&server) {
        return;
    }
    let server_pid = server.pid().unwrap_or_default();
    let groups = server_groups(server_pid);
    let before = counter(&server, "baton_children_cpu_microseconds_total");
    // Some CPU in the child: 3 million iterations take well over 50 ms of
    // CPU on any machine RustPython runs on (about half a second here).
    let busy = "n = 0\nfor i in range(3_000_000):\n    n += i\nprint(n)";
    let done = start(&server, busy);
    assert_eq!(done["stdout"], "4499998500000\n", "{done}");
    assert!(
        eventually(|| {
            counter(&server, "baton_children_cpu_microseconds_total") - before >= 50_000.0
        }),
        "timed out waiting: the ended child's CPU time counted"
    );
    // Only the live children keep groups: the pool's one, at most two
    // while it refills.
    let zygote = server.zygote_pid().unwrap_or_default();
    assert!(
        eventually(|| {
            groups.iter().all(|g| {
                let live = children_of(zygote);
                child_groups(g).iter().all(|pid| live.contains(pid))
            })
        }),
        "timed out waiting: the ended child's group removed"
    );
    assert!(server.terminate(), "the server did not stop cleanly");
    let left: Vec<PathBuf> = groups.iter().filter(|g| g.exists()).cloned().collect();
    assert!(left.is_empty(), "left after a clean stop: {left:?}");
    // A server killed outright leaves its groups; the next start removes
    // them.
    server.restart();
    let killed = server.pid().unwrap_or_default();
    assert!(!server_groups(killed).is_empty());
    server.restart();
    assert!(
        eventually(|| server_groups(killed).is_empty()),
        "timed out waiting: a killed server's groups removed at the next start"
    );
}

/// The pids whose groups (`c<pid>`) are in a server's group `dir`.
fn child_groups(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix('c')?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
