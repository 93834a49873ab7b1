//! Parked children: executions paused with their child alive, ready for a
//! hot resume, within a count and a memory budget for the whole server.
//!
//! A child's cost is its private memory (the pages it no longer shares with
//! the zygote: `Private_Clean + Private_Dirty` of `/proc/<pid>/smaps_rollup`),
//! measured once it has stayed parked for [`MEASURE_AFTER`], by one
//! background measurer, off the request's path (a parked child does not
//! run, so the figure holds until it resumes; a child resumed sooner, as
//! in a tight tool loop, is never measured: reading smaps walks every
//! mapping of the process, which would double a hot resume). A server without
//! `CAP_SYS_PTRACE` cannot read the smaps of its non-dumpable children; it
//! falls back to the world-readable `/proc/<pid>/status`: the child's
//! anonymous resident memory beyond the zygote's (a lower bound: pages the
//! child copied on write are not counted). Beyond either bound the least
//! parked children of the principal that holds the most (children, or
//! bytes) are evicted first, so one principal's pauses cannot push out
//! another's; their executions resume cold, by replay.
//!
//! A parked child is believed idle only while it is seen to be: the
//! measurer reads each measured child's CPU time every [`RECHECK`] (one
//! small `/proc/<pid>/stat`), and a child that ran while parked (a program
//! that reported a pause over its socket and went on computing or
//! allocating) is evicted at once, its execution resumed cold. So a figure
//! measured once stays true: a child that does not run cannot grow.
//!
//! Invariants:
//! - A parked child belongs to exactly one execution and one pause (the
//!   number of rounds completed when it paused); taking it removes it,
//!   and a child taken for another pause (its execution went on
//!   elsewhere: on another node, or cold after an eviction) is killed,
//!   never resumed.
//! - The total is the sum of the measured children still parked; a child is
//!   counted from its measurement until it leaves.
//! - At most one measurer runs; while children are parked, one runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sandbox::cgroups::ChildGroups;
use crate::sandbox::pool::ChildProc;

/// Where a child is parked: its execution, the principal it runs for,
/// and the rounds its execution had completed when it paused.
pub(super) struct Place {
    /// The execution.
    pub id: [u8; 16],
    /// Its principal.
    pub owner: [u8; 8],
    /// The rounds completed when it paused; for a session, the cells it
    /// ran.
    pub rounds: usize,
    /// Whether `id` is a session's (the child holds its namespace between
    /// cells) rather than a paused execution's.
    pub session: bool,
}

struct Parked {
    since: Instant,
    /// Whether it holds a session's namespace between cells.
    session: bool,
    /// The principal its execution runs for.
    owner: [u8; 8],
    /// The rounds its execution had completed when it paused.
    rounds: usize,
    child: ChildProc,
    /// The pid of the child's zygote, the fallback measure's baseline.
    zygote: Option<i32>,
    /// Private bytes, once measured.
    bytes: Option<u64>,
    /// CPU time (clock ticks) when last seen, and when that was.
    cpu: Option<(u64, Instant)>,
}

/// How long a child stays parked before it is measured.
pub(super) const MEASURE_AFTER: Duration = Duration::from_millis(200);
/// How often a measured child's CPU time is read again.
pub(super) const RECHECK: Duration = Duration::from_secs(1);
/// CPU time (clock ticks, usually 10 ms) a parked child may take between
/// two readings: an idle one (blocked reading its socket, its watchdog
/// waiting) takes none.
const IDLE_TICKS: u64 = 2;

/// The parked children of the engine.
pub(super) struct Parking {
    children: Mutex<HashMap<[u8; 16], Parked>>,
    max_count: usize,
    max_bytes: u64,
    /// Whether the measurer runs.
    measuring: AtomicBool,
    /// The children's control groups, where they have them: their memory
    /// is then read from there, at every recheck.
    groups: Option<Arc<ChildGroups>>,
}

impl Parking {
    /// Parking for at most `max_count` children and `max_bytes` of their
    /// private memory.
    pub(super) fn new(
        max_count: usize,
        max_bytes: u64,
        groups: Option<Arc<ChildGroups>>,
    ) -> Arc<Parking> {
        Arc::new(Parking {
            children: Mutex::new(HashMap::new()),
            max_count,
            max_bytes,
            measuring: AtomicBool::new(false),
            groups,
        })
    }

    /// Parks `child` at `place`, evicting beyond the count (the least
    /// recent child of the principal with the most); the measurer measures
    /// it once it has stayed parked, and enforces the memory budget then.
    /// `zygote` is the pid of the child's zygote (the fallback measure's
    /// baseline).
    pub(super) fn park(self: &Arc<Self>, place: Place, child: ChildProc, zygote: Option<i32>) {
        if let Ok(mut children) = self.children.lock() {
            children.insert(
                place.id,
                Parked {
                    since: Instant::now(),
                    session: place.session,
                    owner: place.owner,
                    rounds: place.rounds,
                    child,
                    zygote,
                    bytes: None,
                    cpu: None,
                },
            );
            while children.len() > self.max_count {
                if !evict_fairly(&mut children, |_| (1, 0)) {
                    break;
                }
            }
        }
        if !self.measuring.swap(true, Ordering::AcqRel) {
            // A thread of its own, not the runtime's: it lives as long as
            // children are parked, which must not hold up the runtime's
            // end; it ends when the parking goes.
            let parking = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("baton-parked".into())
                .spawn(move || measure_while_parked(&parking));
            if spawned.is_err() {
                self.measuring.store(false, Ordering::Release);
            }
        }
    }

    /// One pass of the measurer: measures the children parked for
    /// [`MEASURE_AFTER`] and evicts those that ran; says whether children
    /// are still parked (else the measurer stops).
    fn measure_once(&self) -> bool {
        for (id, pid, zygote) in self.due() {
            let bytes = self
                .group_bytes(pid)
                .or_else(|| private_bytes(pid).or_else(|| anon_beyond(pid, zygote?)));
            self.measured(id, pid, bytes);
        }
        self.evict_running();
        if self.count() > 0 {
            return true;
        }
        self.measuring.store(false, Ordering::Release);
        // A child parked between the count and the store needs a measurer.
        self.count() > 0 && !self.measuring.swap(true, Ordering::AcqRel)
    }

    /// A child's memory as its control group counts it (none without
    /// groups).
    fn group_bytes(&self, pid: i32) -> Option<u64> {
        self.groups.as_ref()?.memory_bytes(pid)
    }

    /// Reads the CPU time (and, with control groups, the memory) of the
    /// measured children not read for [`RECHECK`], and evicts those that
    /// ran since their last reading.
    fn evict_running(&self) {
        let Ok(mut children) = self.children.lock() else {
            return;
        };
        let mut running = Vec::new();
        for (id, parked) in children.iter_mut() {
            let Some((ticks, seen)) = parked.cpu else {
                continue;
            };
            if seen.elapsed() < RECHECK {
                continue;
            }
            let pid = parked.child.pid();
            match cpu_ticks(pid) {
                Some(now) if now > ticks + IDLE_TICKS => running.push(*id),
                Some(now) => parked.cpu = Some((now, Instant::now())),
                None => {}
            }
            if let Some(bytes) = self.group_bytes(pid) {
                parked.bytes = Some(bytes);
            }
        }
        for id in &running {
            children.remove(id);
            tracing::warn!(execution = %hex::encode(id), "a parked child ran while paused: evicted (its execution resumes cold)");
        }
        if !running.is_empty() {
            metrics::counter!("baton_parked_children_running_total")
                .increment(running.len() as u64);
        }
        self.within_budget(&mut children);
    }

    /// The unmeasured children parked for [`MEASURE_AFTER`] or longer.
    fn due(&self) -> Vec<([u8; 16], i32, Option<i32>)> {
        let Ok(children) = self.children.lock() else {
            return Vec::new();
        };
        children
            .iter()
            .filter(|(_, p)| p.bytes.is_none() && p.since.elapsed() >= MEASURE_AFTER)
            .map(|(id, p)| (*id, p.child.pid(), p.zygote))
            .collect()
    }

    fn measured(&self, id: [u8; 16], pid: i32, bytes: Option<u64>) {
        let Ok(mut children) = self.children.lock() else {
            return;
        };
        match children.get_mut(&id) {
            // A child that cannot be measured counts as nothing, and is not
            // measured again.
            Some(parked) if parked.child.pid() == pid => {
                parked.bytes = Some(bytes.unwrap_or(0));
                parked.cpu = cpu_ticks(pid).map(|ticks| (ticks, Instant::now()));
            }
            _ => return,
        }
        self.within_budget(&mut children);
    }

    /// Evicts fairly until the measured children fit the memory budget
    /// (one child alone is kept whatever it weighs).
    fn within_budget(&self, children: &mut HashMap<[u8; 16], Parked>) {
        let mut evicted = 0;
        while total(children) > self.max_bytes && children.len() > 1 {
            if !evict_fairly(children, |p| (p.bytes.unwrap_or(0), 1)) {
                break;
            }
            evicted += 1;
        }
        if evicted > 0 {
            metrics::counter!("baton_parked_evictions_total").increment(evicted);
            tracing::debug!(evicted, "parked children over the memory budget evicted");
        }
        metrics::gauge!("baton_parked_bytes").set(total(children) as f64);
    }

    /// Takes the child of `id` parked after `rounds` completed rounds, if
    /// there is one.
    pub(super) fn take(&self, id: &[u8; 16], rounds: usize) -> Option<ChildProc> {
        let parked = self.remove(id)?;
        // Dropped (killed) when it paused at another round.
        (parked.rounds == rounds).then_some(parked.child)
    }

    /// Whether the child of `id` is parked, paused after `rounds` rounds.
    pub(super) fn holds(&self, id: &[u8; 16], rounds: usize) -> bool {
        self.children
            .lock()
            .is_ok_and(|children| children.get(id).is_some_and(|p| p.rounds == rounds))
    }

    fn remove(&self, id: &[u8; 16]) -> Option<Parked> {
        self.children.lock().ok()?.remove(id)
    }

    /// Drops the parked child of `id` (it is killed; the execution will
    /// resume cold). Returns whether there was one.
    pub(super) fn evict(&self, id: &[u8; 16]) -> bool {
        self.remove(id).is_some()
    }

    /// The executions whose children are parked (not sessions').
    pub(super) fn ids(&self) -> Vec<[u8; 16]> {
        self.children
            .lock()
            .map(|c| {
                c.iter()
                    .filter(|(_, parked)| !parked.session)
                    .map(|(id, _)| *id)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The sessions whose children are parked between cells: each with
    /// its principal and the cells its child ran.
    pub(super) fn sessions(&self) -> Vec<([u8; 16], [u8; 8], usize)> {
        self.children
            .lock()
            .map(|c| {
                c.iter()
                    .filter(|(_, parked)| parked.session)
                    .map(|(id, parked)| (*id, parked.owner, parked.rounds))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Number of parked children.
    pub(super) fn count(&self) -> usize {
        self.children.lock().map(|c| c.len()).unwrap_or(0)
    }

    /// Private bytes of the parked children measured so far.
    pub(super) fn bytes(&self) -> u64 {
        self.children.lock().map(|c| total(&c)).unwrap_or(0)
    }

    /// The pid of the child parked for `id`.
    pub(super) fn pid(&self, id: &[u8; 16]) -> Option<i32> {
        self.children.lock().ok()?.get(id).map(|p| p.child.pid())
    }
}

/// The measurer: passes every [`MEASURE_AFTER`] while children are parked
/// and the parking exists.
fn measure_while_parked(parking: &std::sync::Weak<Parking>) {
    loop {
        std::thread::sleep(MEASURE_AFTER);
        let Some(parking) = parking.upgrade() else {
            return;
        };
        if !parking.measure_once() {
            return;
        }
    }
}

fn total(children: &HashMap<[u8; 16], Parked>) -> u64 {
    children.values().filter_map(|p| p.bytes).sum()
}

/// Removes the least recently parked child of the principal whose
/// children weigh the most together (`weight` of each; ties go to the one
/// that parked first); false when there is none.
fn evict_fairly(
    children: &mut HashMap<[u8; 16], Parked>,
    weight: impl Fn(&Parked) -> (u64, u64),
) -> bool {
    let mut owners: HashMap<[u8; 8], ((u64, u64), Instant)> = HashMap::new();
    for parked in children.values() {
        let (first, second) = weight(parked);
        let entry = owners.entry(parked.owner).or_insert(((0, 0), parked.since));
        entry.0 = (entry.0.0 + first, entry.0.1 + second);
        entry.1 = entry.1.min(parked.since);
    }
    let heaviest = owners
        .into_iter()
        .max_by_key(|(_, (weight, first))| (*weight, std::cmp::Reverse(*first)))
        .map(|(owner, _)| owner);
    let oldest = children
        .iter()
        .filter(|(_, parked)| Some(parked.owner) == heaviest)
        .min_by_key(|(_, parked)| parked.since)
        .map(|(id, _)| *id);
    oldest.is_some_and(|id| children.remove(&id).is_some())
}

/// A process's CPU time, user and system, in clock ticks (fields 14 and
/// 15 of `/proc/<pid>/stat`, counted after the command's closing `)`).
fn cpu_ticks(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text.rsplit_once(')')?.1.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// A process's private memory (`Private_Clean + Private_Dirty`), bytes.
fn private_bytes(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    Some((kib_field(&text, "Private_Clean:")? + kib_field(&text, "Private_Dirty:")?) * 1024)
}

/// A child's anonymous resident memory beyond its zygote's, bytes.
fn anon_beyond(pid: i32, zygote: i32) -> Option<u64> {
    let anon = |pid: i32| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        kib_field(&text, "RssAnon:")
    };
    Some(anon(pid)?.saturating_sub(anon(zygote)?) * 1024)
}

/// The value of a `Name:   123 kB` line of a `/proc` file.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
}

#[cfg(test)]
mod tests {
    use super::cpu_ticks;

    #[test]
    fn a_process_cpu_time_is_read_and_grows_as_it_runs() {
        let pid = i32::try_from(std::process::id()).unwrap_or(0);
        let before = cpu_ticks(pid);
        assert!(before.is_some(), "no CPU time for this process");
        let started = std::time::Instant::now();
        let mut spin = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(200) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        assert!(cpu_ticks(pid) > before, "200 ms of spinning added no tick");
    }
}
