//! The children running a step now, by execution, and the executions ended
//! (cancelled, or gone) recently.
//!
//! A cancel is decided in the store, then the engine is told to kill the
//! execution's child ([`Running::end`]). A continuation may have claimed its
//! round just before the cancel and not yet have a child running it: its
//! parked child is then evicted by the kill, or taken but not yet
//! registered, and the round would run (cold, or in the taken child) with
//! nobody left to kill it. So an ended execution is remembered, and a step
//! that registers its child for it afterwards is refused
//! ([`Running::register`]): the round is never run.
//!
//! Invariants:
//! - Registering a child and ending its execution happen under one lock
//!   (the engine's mutex around this table): either the end finds the child
//!   registered (and kills it) or the registration finds the end (and the
//!   step does not run).
//! - An ended execution is remembered for [`ENDED_MEMORY`], far longer than
//!   a claim takes to reach its child; the memory is bounded by the cancels
//!   of that long, forgotten oldest first.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sandbox::pool::ChildKiller;

/// How long an ended execution stays remembered.
pub(super) const ENDED_MEMORY: Duration = Duration::from_secs(600);

/// Executions ended within [`ENDED_MEMORY`].
#[derive(Default)]
struct Ended {
    order: VecDeque<(Instant, [u8; 16])>,
    ids: HashSet<[u8; 16]>,
}

impl Ended {
    fn insert(&mut self, id: [u8; 16], now: Instant) {
        self.forget_before(now);
        if self.ids.insert(id) {
            self.order.push_back((now, id));
        }
    }

    fn contains(&self, id: &[u8; 16]) -> bool {
        self.ids.contains(id)
    }

    fn forget_before(&mut self, now: Instant) {
        while let Some((at, id)) = self.order.front() {
            if now.saturating_duration_since(*at) < ENDED_MEMORY {
                break;
            }
            self.ids.remove(id);
            self.order.pop_front();
        }
    }
}

/// The table (see the module doc).
#[derive(Default)]
pub(super) struct Running {
    children: HashMap<[u8; 16], Arc<ChildKiller>>,
    ended: Ended,
}

impl Running {
    /// Registers the child running a step of `id`; `false` (nothing
    /// registered) when the execution has ended: the step must not run.
    pub(super) fn register(&mut self, id: [u8; 16], child: Arc<ChildKiller>) -> bool {
        if self.ended.contains(&id) {
            return false;
        }
        self.children.insert(id, child);
        true
    }

    /// The step of `id` is over.
    pub(super) fn unregister(&mut self, id: &[u8; 16]) {
        self.children.remove(id);
    }

    /// Marks `id` ended at `now`; returns its running child, if any (the
    /// caller kills it).
    pub(super) fn end(&mut self, id: [u8; 16], now: Instant) -> Option<Arc<ChildKiller>> {
        self.ended.insert(id, now);
        self.children.get(&id).cloned()
    }

    /// Whether `id` was ended (a step for it must not run).
    pub(super) fn has_ended(&self, id: &[u8; 16]) -> bool {
        self.ended.contains(id)
    }

    /// The executions with a running child.
    pub(super) fn ids(&self) -> Vec<[u8; 16]> {
        self.children.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_execution_is_refused_then_forgotten_after_its_memory() {
        let mut ended = Ended::default();
        let start = Instant::now();
        ended.insert([1; 16], start);
        ended.insert([2; 16], start + Duration::from_secs(300));
        ended.insert([1; 16], start + Duration::from_secs(301));
        assert!(ended.contains(&[1; 16]) && ended.contains(&[2; 16]));
        ended.insert([3; 16], start + ENDED_MEMORY);
        assert!(!ended.contains(&[1; 16]), "forgotten after ENDED_MEMORY");
        assert!(ended.contains(&[2; 16]) && ended.contains(&[3; 16]));
        ended.forget_before(start + ENDED_MEMORY * 3);
        assert!(ended.ids.is_empty() && ended.order.is_empty());
    }
}
