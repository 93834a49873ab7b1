//! Several nodes on one store: where a continuation is best served, the
//! nodes' addresses, and the parked children whose executions went on
//! elsewhere.
//!
//! Invariants:
//! - Routing is advice, never a decision: whichever node a continuation
//!   reaches, the round is claimed by the one compare-and-swap of
//!   `continuation.rs`. A continuation is left to another node only when
//!   the execution is paused there, at the token's round, claimable, and
//!   that node is alive and has given an address; anything else is served
//!   here (cold when the child is elsewhere).
//! - A node keeps a parked child only while its execution is paused on
//!   this node: one that went on elsewhere, ended or expired is killed at
//!   the next upkeep (and never resumed: parking checks the round). The
//!   child of an execution cancelled on another node, running or parked,
//!   is killed when that node forwards the cancel here (`cancel.rs`), and
//!   else at the next upkeep.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::state::{ExecState, Status, node_key, node_of_key, state_key};

use super::Service;
use super::error::ServiceError;

/// How long what was learnt of a node (alive with an address, or not) is
/// used for routing before it is asked again.
const KNOWN_FOR: Duration = Duration::from_secs(1);

/// What this node knows of the others, for routing: whether each is alive
/// and its address, as of at most [`KNOWN_FOR`] ago. Stale knowledge costs
/// at most a failed forward (then served here) or a cold resume, never a
/// wrong answer.
#[derive(Default)]
pub(super) struct NodeDirectory {
    known: Mutex<HashMap<u64, (Instant, Option<String>)>>,
}

impl NodeDirectory {
    /// What is known of the address of `node` (`Some(None)`: it has
    /// none, or is dead), if it was looked up recently.
    fn known(&self, node: u64) -> Option<Option<String>> {
        let known = self.known.lock().ok()?;
        let (at, address) = known.get(&node)?;
        (at.elapsed() < KNOWN_FOR).then(|| address.clone())
    }

    /// Keeps what a lookup found of the address of `node`.
    fn remember(&self, node: u64, address: Option<String>) {
        let now = Instant::now();
        if let Ok(mut known) = self.known.lock() {
            known.retain(|_, (at, _)| now.duration_since(*at) < KNOWN_FOR);
            known.insert(node, (now, address));
        }
    }
}

impl Service {
    /// Stores this node's address for the other nodes (`--advertise`).
    pub async fn advertise(&self, address: &str) -> Result<(), ServiceError> {
        self.store
            .put(&node_key(self.store.node()), address.as_bytes())
            .await
            .map_err(ServiceError::store)
    }

    /// The address of the node that wrote `state` (whose child is parked
    /// for it, or runs its round), when that is another node, alive and
    /// with an address.
    pub(super) async fn holder_address(&self, state: &ExecState) -> Option<String> {
        if !self.store.shared() || state.node == self.store.node() {
            return None;
        }
        if let Some(known) = self.directory.known(state.node) {
            return known;
        }
        let address = self.lookup(state.node).await;
        self.directory.remember(state.node, address.clone());
        address
    }

    /// The address of `node` if it is alive and gave one.
    async fn lookup(&self, node: u64) -> Option<String> {
        if !self.store.node_alive(node).await.ok()? {
            return None;
        }
        let address = self.store.get(&node_key(node)).await.ok()??;
        String::from_utf8(address).ok()
    }

    /// Kills the parked children whose executions are no longer paused (or
    /// pausing) on this node (continued on another, ended, cancelled or
    /// swept there),
    /// and the running children of executions cancelled or swept on
    /// another node; returns how many.
    pub async fn end_stale_children(&self) -> Result<usize, ServiceError> {
        let here = self.store.node();
        let mut evicted = 0;
        for id in self.engine.parked_ids() {
            // Running here too: a pause parks its child before its state
            // is stored.
            let held_here = self.stored_state(&id).await?.is_some_and(|s| {
                s.node == here && matches!(s.status, Status::Paused | Status::Running)
            });
            if !held_here && self.engine.evict(&id) {
                evicted += 1;
            }
        }
        for (session, owner, key) in self.engine.parked_sessions() {
            if !self.session_child_is_current(owner, &session, key).await?
                && self.engine.evict(&session)
            {
                evicted += 1;
            }
        }
        for id in self.engine.running_ids() {
            let gone = self
                .stored_state(&id)
                .await?
                .is_none_or(|s| s.status == Status::Cancelled);
            if gone && self.engine.kill(&id) {
                evicted += 1;
            }
        }
        Ok(evicted)
    }

    /// The state of execution `id`, whoever owns it.
    async fn stored_state(&self, id: &[u8; 16]) -> Result<Option<ExecState>, ServiceError> {
        Ok(self
            .store
            .get(&state_key(id))
            .await
            .map_err(ServiceError::store)?
            .and_then(|bytes| ExecState::decode(&bytes)))
    }

    /// Whether the address `key` is of a node that is gone.
    pub(super) async fn address_is_stale(&self, key: &[u8]) -> Result<bool, ServiceError> {
        match node_of_key(key) {
            None => Ok(true),
            Some(node) => Ok(!self
                .store
                .node_alive(node)
                .await
                .map_err(ServiceError::store)?),
        }
    }
}
