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
//! recently parked children are evicted; their executions resume cold, by
//! replay.
//!
//! Invariants:
//! - A parked child belongs to exactly one execution and one pause (the
//!   number of rounds completed when it paused); taking it removes it,
//!   and a child taken for another pause (its execution went on
//!   elsewhere: on another node, or cold after an eviction) is killed,
//!   never resumed.
//! - The total is the sum of the measured children still parked; a child is
//!   counted from its measurement until it leaves.
//! - At most one measurer runs; while unmeasured children are parked, one
//!   runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sandbox::pool::ChildProc;

struct Parked {
    since: Instant,
    /// The rounds its execution had completed when it paused.
    rounds: usize,
    child: ChildProc,
    /// The pid of the child's zygote, the fallback measure's baseline.
    zygote: Option<i32>,
    /// Private bytes, once measured.
    bytes: Option<u64>,
}

/// How long a child stays parked before it is measured.
pub(super) const MEASURE_AFTER: Duration = Duration::from_millis(200);

/// The parked children of the engine.
pub(super) struct Parking {
    children: Mutex<HashMap<[u8; 16], Parked>>,
    max_count: usize,
    max_bytes: u64,
    /// Whether the measurer runs.
    measuring: AtomicBool,
}

impl Parking {
    /// Parking for at most `max_count` children and `max_bytes` of their
    /// private memory.
    pub(super) fn new(max_count: usize, max_bytes: u64) -> Arc<Parking> {
        Arc::new(Parking {
            children: Mutex::new(HashMap::new()),
            max_count,
            max_bytes,
            measuring: AtomicBool::new(false),
        })
    }

    /// Parks `child` for execution `id`, paused after `rounds` completed
    /// rounds, evicting the least recent beyond
    /// the count; the measurer measures it once it has stayed parked, and
    /// enforces the memory budget then. `zygote` is the pid of the child's
    /// zygote (the fallback measure's baseline).
    pub(super) fn park(
        self: &Arc<Self>,
        id: [u8; 16],
        rounds: usize,
        child: ChildProc,
        zygote: Option<i32>,
    ) {
        if let Ok(mut children) = self.children.lock() {
            children.insert(
                id,
                Parked {
                    since: Instant::now(),
                    rounds,
                    child,
                    zygote,
                    bytes: None,
                },
            );
            while children.len() > self.max_count {
                if !evict_oldest(&mut children) {
                    break;
                }
            }
        }
        if !self.measuring.swap(true, Ordering::AcqRel) {
            let parking = self.clone();
            tokio::task::spawn_blocking(move || parking.measure_until_done());
        }
    }

    /// The measurer: measures the children parked for [`MEASURE_AFTER`]
    /// until none is left unmeasured.
    fn measure_until_done(&self) {
        loop {
            std::thread::sleep(MEASURE_AFTER);
            for (id, pid, zygote) in self.due() {
                let bytes = private_bytes(pid).or_else(|| anon_beyond(pid, zygote?));
                self.measured(id, pid, bytes);
            }
            if self.unmeasured() > 0 {
                continue;
            }
            self.measuring.store(false, Ordering::Release);
            // A child parked between the count and the store needs a measurer.
            if self.unmeasured() == 0 || self.measuring.swap(true, Ordering::AcqRel) {
                return;
            }
        }
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

    fn unmeasured(&self) -> usize {
        self.children
            .lock()
            .map(|c| c.values().filter(|p| p.bytes.is_none()).count())
            .unwrap_or(0)
    }

    fn measured(&self, id: [u8; 16], pid: i32, bytes: Option<u64>) {
        let Ok(mut children) = self.children.lock() else {
            return;
        };
        match children.get_mut(&id) {
            // A child that cannot be measured counts as nothing, and is not
            // measured again.
            Some(parked) if parked.child.pid() == pid => parked.bytes = Some(bytes.unwrap_or(0)),
            _ => return,
        }
        let mut evicted = 0;
        while total(&children) > self.max_bytes && children.len() > 1 {
            if !evict_oldest(&mut children) {
                break;
            }
            evicted += 1;
        }
        if evicted > 0 {
            metrics::counter!("baton_parked_evictions_total").increment(evicted);
            tracing::debug!(evicted, "parked children over the memory budget evicted");
        }
        metrics::gauge!("baton_parked_bytes").set(total(&children) as f64);
    }

    /// Takes the child of `id` parked after `rounds` completed rounds, if
    /// there is one.
    pub(super) fn take(&self, id: &[u8; 16], rounds: usize) -> Option<ChildProc> {
        let parked = self.remove(id)?;
        // Dropped (killed) when it paused at another round.
        (parked.rounds == rounds).then_some(parked.child)
    }

    fn remove(&self, id: &[u8; 16]) -> Option<Parked> {
        self.children.lock().ok()?.remove(id)
    }

    /// Drops the parked child of `id` (it is killed; the execution will
    /// resume cold). Returns whether there was one.
    pub(super) fn evict(&self, id: &[u8; 16]) -> bool {
        self.remove(id).is_some()
    }

    /// The executions whose children are parked.
    pub(super) fn ids(&self) -> Vec<[u8; 16]> {
        self.children
            .lock()
            .map(|c| c.keys().copied().collect())
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

fn total(children: &HashMap<[u8; 16], Parked>) -> u64 {
    children.values().filter_map(|p| p.bytes).sum()
}

/// Removes the least recently parked child; false when there is none.
fn evict_oldest(children: &mut HashMap<[u8; 16], Parked>) -> bool {
    let oldest = children
        .iter()
        .min_by_key(|(_, parked)| parked.since)
        .map(|(id, _)| *id);
    oldest.is_some_and(|id| children.remove(&id).is_some())
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
