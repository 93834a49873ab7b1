//! A control group per child, where the kernel offers one: its memory
//! capped and measured by the kernel, its tasks capped, its CPU time
//! counted.
//!
//! At startup the server (it needs to be root, or to own a delegated
//! cgroup) finds, for each controller it uses, the hierarchy that holds it:
//! the unified one (cgroup v2: `memory.max`, `memory.current`, `pids.max`,
//! `cpu.stat`) or a v1 one (`memory.limit_in_bytes`,
//! `memory.usage_in_bytes`, `pids.max`, `cpuacct.usage`); a hybrid machine
//! mixes both. In each such hierarchy it makes a group of its own,
//! `baton-<server pid>`, in its own group (or, on v2, beside it when its
//! own holds processes and its parent passes the controllers down: the
//! server never moves itself), owned by the zygote's user; the zygote is
//! moved into `zygote` inside it. For every child it forks, the zygote makes `c<pid>` there, writes the limits, and
//! moves the child in before the server ever sees the child, so no job runs
//! outside its group. The server removes a child's groups once the child
//! is gone (one reaper thread; a group with a live task cannot be
//! removed), adding the child's CPU time to a counter, and reads a parked
//! child's memory from its group (one small file, cheap enough to read
//! every second).
//!
//! Invariants:
//! - The memory controller is required: without it there are no groups
//!   (said at startup, with the reason); tasks and CPU are used where
//!   present.
//! - A child's group caps its memory above its address-space limit (the
//!   limit a program meets first, as a `MemoryError`); the group also
//!   counts what the address space does not (page tables, socket buffers)
//!   and swap, and its task cap is the child's own threads.
//! - Groups are removed only when empty; a server that crashed leaves its
//!   `baton-<pid>`, which the next start in the same group removes.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The threads of a child: the interpreter and its watchdog.
pub const CHILD_TASKS: u32 = 2;

/// Memory a child's group allows beyond its address-space budget, bytes:
/// the kernel's own memory for it (page tables, socket buffers).
const KERNEL_SLACK: u64 = 64 << 20;

/// How often the reaper looks for groups whose child is gone.
const REAP_EVERY: Duration = Duration::from_millis(200);

/// The name of the zygote's group in a server's group.
const ZYGOTE: &str = "zygote";

/// One hierarchy the children's groups live in.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hierarchy {
    /// The server's group in it (`.../baton-<pid>`).
    dir: PathBuf,
    /// Whether it is the unified (v2) hierarchy.
    unified: bool,
    /// The controllers of this hierarchy baton uses.
    controllers: Vec<&'static str>,
}

/// The children's groups of one server.
pub struct ChildGroups {
    hierarchies: Vec<Hierarchy>,
    /// Children whose groups wait to be removed.
    gone: Mutex<Vec<i32>>,
    /// Groups of servers that are gone, removed once their last children
    /// are (a server killed just before this one started leaves children
    /// dying for a moment).
    stale: Mutex<Vec<PathBuf>>,
}

impl ChildGroups {
    /// Makes the server's groups, owned by `owner` (the zygote's uid and
    /// gid); the reason there are none otherwise.
    pub fn prepare(owner: (u32, u32)) -> Result<Arc<ChildGroups>, String> {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let found = find_hierarchies(&mounts, &own);
        if !found.iter().any(|h| h.controllers.contains(&"memory")) {
            return Err("no memory controller in this process's cgroups".into());
        }
        let mut hierarchies = Vec::new();
        let mut stale = Vec::new();
        for (group, found) in found.into_iter().map(|h| (h.dir.clone(), h)) {
            let (made, left) = make_server_group(&group, &found, owner)
                .map_err(|e| format!("cannot make a group beside {}: {e}", group.display()))?;
            hierarchies.push(made);
            stale.extend(left);
        }
        let groups = Arc::new(ChildGroups {
            hierarchies,
            gone: Mutex::new(Vec::new()),
            stale: Mutex::new(stale),
        });
        spawn_reaper(Arc::downgrade(&groups));
        Ok(groups)
    }

    /// The server's groups, one per hierarchy (given to the zygote).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.hierarchies.iter().map(|h| h.dir.clone()).collect()
    }

    /// One line for the startup log.
    pub fn describe(&self, memory_mb: u64) -> String {
        let mut used: Vec<String> = Vec::new();
        for hierarchy in &self.hierarchies {
            let version = if hierarchy.unified { "v2" } else { "v1" };
            for controller in &hierarchy.controllers {
                used.push(format!("{controller} ({version})"));
            }
        }
        format!(
            "a control group per child: {}; memory capped at {} MiB, {CHILD_TASKS} tasks",
            used.join(", "),
            memory_mb + (KERNEL_SLACK >> 20)
        )
    }

    /// Moves the zygote `pid` into the zygote's group of every hierarchy.
    pub fn adopt_zygote(&self, pid: u32) -> io::Result<()> {
        for hierarchy in &self.hierarchies {
            std::fs::write(
                hierarchy.dir.join(ZYGOTE).join("cgroup.procs"),
                pid.to_string(),
            )?;
        }
        Ok(())
    }

    /// The memory a child's group holds now, bytes.
    pub fn memory_bytes(&self, pid: i32) -> Option<u64> {
        let hierarchy = self
            .hierarchies
            .iter()
            .find(|h| h.controllers.contains(&"memory"))?;
        let file = if hierarchy.unified {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        };
        read_number(&child_dir(&hierarchy.dir, pid).join(file))
    }

    /// The CPU time a child's group has used, microseconds.
    fn cpu_microseconds(&self, pid: i32) -> Option<u64> {
        let hierarchy = self
            .hierarchies
            .iter()
            .find(|h| h.controllers.contains(&"cpuacct") || h.unified)?;
        let dir = child_dir(&hierarchy.dir, pid);
        if hierarchy.unified {
            let stat = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
            let usec = stat
                .lines()
                .find_map(|line| line.strip_prefix("usage_usec "))?
                .trim()
                .parse::<u64>()
                .ok()?;
            Some(usec)
        } else {
            read_number(&dir.join("cpuacct.usage")).map(|ns| ns / 1000)
        }
    }

    /// The child `pid` is gone (or going): its groups are removed once
    /// empty.
    pub fn release(&self, pid: i32) {
        if let Ok(mut gone) = self.gone.lock() {
            gone.push(pid);
        }
    }

    /// Removes the groups of the children that are gone, and of servers
    /// that are gone; keeps the others.
    fn reap(&self) {
        if let Ok(mut stale) = self.stale.lock() {
            stale.retain(|dir| {
                remove_tree(dir);
                dir.exists()
            });
        }
        let pending = match self.gone.lock() {
            Ok(mut gone) => std::mem::take(&mut *gone),
            Err(_) => return,
        };
        let mut still = Vec::new();
        for pid in pending {
            let cpu = self.cpu_microseconds(pid);
            if self.remove_child(pid) {
                if let Some(microseconds) = cpu {
                    metrics::counter!("baton_children_cpu_microseconds_total")
                        .increment(microseconds);
                }
            } else {
                still.push(pid);
            }
        }
        if let Ok(mut gone) = self.gone.lock() {
            gone.extend(still);
        }
    }

    /// At the server's end, once its zygote is stopped: removes every
    /// group it made, waiting up to `wait` for the children to be gone.
    pub fn remove_all(&self, wait: Duration) {
        let deadline = std::time::Instant::now() + wait;
        while self.remove_server_groups() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Removes the server's groups and the empty ones in them; whether
    /// any is left (a child still ending).
    fn remove_server_groups(&self) -> bool {
        for hierarchy in &self.hierarchies {
            remove_tree(&hierarchy.dir);
        }
        self.hierarchies.iter().any(|h| h.dir.exists())
    }

    /// Removes a child's group from every hierarchy; whether none is left.
    fn remove_child(&self, pid: i32) -> bool {
        self.hierarchies.iter().all(|h| {
            let dir = child_dir(&h.dir, pid);
            match std::fs::remove_dir(&dir) {
                Ok(()) => true,
                Err(e) => e.kind() == io::ErrorKind::NotFound,
            }
        })
    }
}

impl Drop for ChildGroups {
    fn drop(&mut self) {
        let _left = self.remove_server_groups();
    }
}

/// Where a child's group is, in the server's group `dir`.
fn child_dir(dir: &Path, pid: i32) -> PathBuf {
    dir.join(format!("c{pid}"))
}

/// In the zygote, right after a child is cloned: its group in each of the
/// server's groups `dirs`, with its limits, and the child moved in.
pub fn admit_child(dirs: &[PathBuf], pid: i32, memory_mb: u64) -> io::Result<()> {
    let memory = (memory_mb << 20) + KERNEL_SLACK;
    for dir in dirs {
        let group = child_dir(dir, pid);
        // A group left by an earlier child of the same pid (it is empty:
        // that child is dead, or its pid would not be free).
        let _stale = std::fs::remove_dir(&group);
        std::fs::create_dir(&group)?;
        write_if_present(&group.join("memory.max"), memory)?;
        write_if_present(&group.join("memory.swap.max"), 0)?;
        write_if_present(&group.join("memory.limit_in_bytes"), memory)?;
        write_if_present(&group.join("memory.memsw.limit_in_bytes"), memory)?;
        write_if_present(&group.join("pids.max"), u64::from(CHILD_TASKS))?;
        std::fs::write(group.join("cgroup.procs"), pid.to_string())?;
    }
    Ok(())
}

/// Writes `value` to a control file, if the group has it (a control
/// group's directory refuses to create any other file).
fn write_if_present(file: &Path, value: u64) -> io::Result<()> {
    if !file.exists() {
        return Ok(());
    }
    std::fs::write(file, value.to_string())
}

fn read_number(file: &Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// The hierarchies holding the controllers baton uses, each with the
/// directory of this process's own group in it (the server's group to be
/// made below). `mountinfo` and `own` are the texts of
/// `/proc/self/mountinfo` and `/proc/self/cgroup`.
fn find_hierarchies(mountinfo: &str, own: &str) -> Vec<Hierarchy> {
    const WANTED: [&str; 3] = ["memory", "pids", "cpuacct"];
    let mut found = Vec::new();
    for line in mountinfo.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = before.split(' ').collect();
        let after: Vec<&str> = after.split(' ').collect();
        let (Some(root), Some(mount_point), Some(fstype)) =
            (fields.get(3), fields.get(4), after.first())
        else {
            continue;
        };
        let (unified, controllers) = match *fstype {
            "cgroup2" => (true, unified_controllers(mount_point, root, own)),
            "cgroup" => {
                let options = after.get(2).copied().unwrap_or("");
                let controllers: Vec<&'static str> = WANTED
                    .into_iter()
                    .filter(|c| options.split(',').any(|o| o == *c))
                    .collect();
                (false, controllers)
            }
            _ => continue,
        };
        if controllers.is_empty() {
            continue;
        }
        let key = if unified { "" } else { controllers[0] };
        let Some(dir) = own_dir(mount_point, root, own, unified, key) else {
            continue;
        };
        found.push(Hierarchy {
            dir,
            unified,
            controllers,
        });
    }
    found
}

/// The controllers baton uses that the unified hierarchy offers this
/// process's group.
fn unified_controllers(mount_point: &str, root: &str, own: &str) -> Vec<&'static str> {
    let Some(dir) = own_dir(mount_point, root, own, true, "") else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    ["memory", "pids"]
        .into_iter()
        .filter(|c| text.split_whitespace().any(|o| o == *c))
        .collect()
}

/// The directory of this process's own group in a hierarchy mounted at
/// `mount_point` (showing the hierarchy's `root`): from its line of
/// `/proc/self/cgroup` (`0::path` for the unified one, `n:controllers:path`
/// otherwise).
fn own_dir(mount_point: &str, root: &str, own: &str, unified: bool, key: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if unified {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == key)
        };
        matches.then_some(path)
    })?;
    let relative = path.strip_prefix(root).unwrap_or(path);
    let mut dir = PathBuf::from(mount_point);
    dir.extend(relative.split('/').filter(|part| !part.is_empty()));
    Some(dir)
}

/// Makes `baton-<pid>` and its zygote group in the hierarchy whose own
/// group is `group` (in it, or beside it: see [`where_to_make`]), owned by
/// `owner`, after removing what servers that are gone left there; returns
/// it, and the groups left that are not removable yet.
fn make_server_group(
    group: &Path,
    found: &Hierarchy,
    owner: (u32, u32),
) -> io::Result<(Hierarchy, Vec<PathBuf>)> {
    let parent = where_to_make(group, found)?;
    let stale = remove_stale(&parent);
    let dir = parent.join(format!("baton-{}", std::process::id()));
    let _stale = std::fs::remove_dir(&dir);
    std::fs::create_dir(&dir)?;
    let made = (|| {
        if found.unified {
            enable_controllers(&dir, &found.controllers)?;
        }
        std::fs::create_dir(dir.join(ZYGOTE))?;
        hand_over(&dir, owner)
    })();
    if let Err(error) = made {
        remove_tree(&dir);
        return Err(error);
    }
    let hierarchy = Hierarchy {
        dir,
        unified: found.unified,
        controllers: found.controllers.clone(),
    };
    Ok((hierarchy, stale))
}

/// Where the server's group goes. A v1 hierarchy: in the server's own
/// group. The unified one passes controllers down only from a group that
/// holds no process (the root excepted): in the server's own group when it
/// can enable them there (the root group, a group of its own), else beside
/// it when its parent already passes them down (a delegated group whose
/// processes live in a leaf: systemd's `Delegate=yes` with
/// `DelegateSubgroup=`). The server never moves itself: a group changed
/// under a service manager could keep the manager from starting it again.
fn where_to_make(group: &Path, found: &Hierarchy) -> io::Result<PathBuf> {
    if !found.unified || enable_controllers(group, &found.controllers).is_ok() {
        return Ok(group.to_path_buf());
    }
    let parent = group
        .parent()
        .ok_or_else(|| io::Error::other("no parent group"))?;
    let passed = std::fs::read_to_string(parent.join("cgroup.subtree_control"))?;
    if found
        .controllers
        .iter()
        .all(|c| passed.split_whitespace().any(|p| p == *c))
    {
        return Ok(parent.to_path_buf());
    }
    Err(io::Error::other(
        "the server's cgroup (v2) holds processes and its parent does not pass the memory and pids controllers down: delegate a cgroup to baton (systemd: Delegate=yes with DelegateSubgroup=), or run it in a group of its own",
    ))
}

fn enable_controllers(group: &Path, controllers: &[&str]) -> io::Result<()> {
    let line: Vec<String> = controllers.iter().map(|c| format!("+{c}")).collect();
    std::fs::write(group.join("cgroup.subtree_control"), line.join(" "))
}

/// Gives the zygote's user what it needs in the server's group `dir`:
/// making groups in it and moving processes between its groups.
fn hand_over(dir: &Path, (uid, gid): (u32, u32)) -> io::Result<()> {
    for path in [
        dir.to_path_buf(),
        dir.join("cgroup.procs"),
        dir.join(ZYGOTE),
        dir.join(ZYGOTE).join("cgroup.procs"),
    ] {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
    }
    Ok(())
}

/// Removes a server's group and the (empty) groups in it.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _gone = std::fs::remove_dir(entry.path());
            }
        }
    }
    let _gone = std::fs::remove_dir(dir);
}

/// Removes the groups left in `group` by servers that are no longer
/// running (`baton-<pid>` whose pid is not a live process); returns those
/// not removable yet (a child still ending).
fn remove_stale(group: &Path) -> Vec<PathBuf> {
    let mut left = Vec::new();
    let Ok(entries) = std::fs::read_dir(group) else {
        return left;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("baton-"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            remove_tree(&entry.path());
            if entry.path().exists() {
                left.push(entry.path());
            }
        }
    }
    left
}

/// The reaper: removes released children's groups every [`REAP_EVERY`]
/// while the groups exist.
fn spawn_reaper(groups: std::sync::Weak<ChildGroups>) {
    let spawned = std::thread::Builder::new()
        .name("cgroup-reaper".into())
        .spawn(move || {
            loop {
                std::thread::sleep(REAP_EVERY);
                let Some(groups) = groups.upgrade() else {
                    return;
                };
                groups.reap();
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the cgroup reaper; children's groups stay until the server stops");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
33 25 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
34 25 0:30 / /proc rw - proc proc rw";

    const HYBRID_OWN: &str = "\
9:pids:/
4:memory:/api/x
2:cpu,cpuacct:/
0::/";

    #[test]
    fn each_v1_controller_is_found_in_its_hierarchy_at_this_process_group() {
        let found = find_hierarchies(HYBRID_MOUNTS, HYBRID_OWN);
        let dirs: Vec<(String, Vec<&str>)> = found
            .iter()
            .filter(|h| !h.unified)
            .map(|h| (h.dir.display().to_string(), h.controllers.clone()))
            .collect();
        assert_eq!(
            dirs,
            vec![
                ("/sys/fs/cgroup/memory/api/x".to_owned(), vec!["memory"]),
                ("/sys/fs/cgroup/pids".to_owned(), vec!["pids"]),
                ("/sys/fs/cgroup/cpu,cpuacct".to_owned(), vec!["cpuacct"]),
            ]
        );
    }

    #[test]
    fn a_mount_showing_a_subtree_strips_its_root_from_the_group_path() {
        let dir = own_dir(
            "/sys/fs/cgroup",
            "/docker/abc",
            "0::/docker/abc/app",
            true,
            "",
        );
        assert_eq!(dir, Some(PathBuf::from("/sys/fs/cgroup/app")));
    }
}
