//! The service's upkeep: recovery of rounds left running by a dead node,
//! the per-key usage counted at start (and again with each upkeep when
//! other nodes share the store), and the sweeps of what expired, which one
//! node at a time makes.
//!
//! Invariants: these read the store by streaming scans (sizes, not
//! contents, where sizes suffice); the executions' states are read once per
//! upkeep, whatever it does to them (a pass that puts back, deletes and
//! notes owners in one scan).

use std::collections::HashMap;

use crate::quota::{Item, KeyUsage};
use crate::state::{
    EARLY_CANCELS, EarlyCancel, ExecState, LISTINGS, NODES, OUTCOMES, PROGRESS, RECORDS,
    REQUEST_LINKS, ROUNDS, RequestLink, STATES, Status, id_after_prefix, id_of_state_key,
    outcome_key,
};

use super::Service;
use super::error::ServiceError;
use super::records::slices;
use super::recovery::{Orphan, Replay};

/// What one round of [`Service::upkeep`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Upkept {
    /// Children ended: parked ones whose executions went on elsewhere,
    /// running ones whose executions were cancelled elsewhere.
    pub evicted: usize,
    /// Rounds of dead nodes paused again (or failed).
    pub recovered: usize,
    /// Expired executions deleted (0 when another node swept).
    pub swept: usize,
    /// Expired session files deleted.
    pub swept_files: usize,
}

/// The keys a sweep removes once they are gone, other than executions
/// and files.
#[derive(Clone, Copy)]
enum Swept {
    /// Request-id links past their expiry at `now`.
    RequestLinks { now: u64 },
    /// Cancels that came before their request, past their expiry.
    EarlyCancels { now: u64 },
    /// Listing entries of executions that are gone.
    Listings,
    /// Addresses of nodes that are gone.
    NodeAddresses,
    /// Runtime sessions expired and not held at `now`.
    RuntimeSessions { now: u64 },
}

impl Swept {
    /// Where the keys of this kind are.
    fn prefix(self) -> &'static [u8] {
        match self {
            Swept::RequestLinks { .. } => REQUEST_LINKS,
            Swept::EarlyCancels { .. } => EARLY_CANCELS,
            Swept::Listings => LISTINGS,
            Swept::NodeAddresses => NODES,
            Swept::RuntimeSessions { .. } => super::RUNTIME_SESSIONS,
        }
    }
}

/// What one pass over the executions' states does to each
/// ([`Service::pass_over_states`]).
struct StatePass {
    /// Put back rounds left running by dead nodes.
    recover: bool,
    /// Keep each execution's owner and expiry, for the usage count.
    count: bool,
    /// Delete the executions expired at this time (the sweep's turn).
    sweep_at: Option<u64>,
}

/// What a [`StatePass`] found and did.
#[derive(Default)]
struct PassDone {
    recovered: usize,
    swept: usize,
    /// Owner and expiry of every execution kept, when counting.
    owners: HashMap<[u8; 16], ([u8; 8], u64)>,
}

impl Service {
    /// At start-up: rounds left running by a dead node (a previous process
    /// of this server, or another node that shares the store) are
    /// recovered (`recovery`: paused again, failed, or left to be run again
    /// by the next continuation), and what each key stores is counted; one
    /// read of the states. Returns how many rounds were put back.
    pub async fn recover_and_count(&self) -> Result<usize, ServiceError> {
        let done = self
            .pass_over_states(StatePass {
                recover: true,
                count: true,
                sweep_at: None,
            })
            .await?;
        self.store.flush().await.map_err(ServiceError::store)?;
        self.count_usage(&done.owners).await?;
        Ok(done.recovered)
    }

    /// Reads every state once and does to each what `pass` asks: a round
    /// left running by a dead node is paused again (a round a live node
    /// runs is left alone), an expired execution is deleted, the owner of
    /// every execution kept is noted.
    async fn pass_over_states(&self, pass: StatePass) -> Result<PassDone, ServiceError> {
        let mut done = PassDone::default();
        let mut scan = crate::store::scan_prefix(self.store.as_ref(), STATES);
        while let Some(pair) = scan.next().await {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            let Some(id) = id_of_state_key(&key) else {
                continue;
            };
            let mut state = ExecState::decode(&bytes);
            // A round left by a dead node (to be run again) expires as a
            // paused one does; a live node's never.
            let mut left = false;
            match &state {
                Some(stored) if pass.recover => {
                    match self
                        .recover_orphan(&id, &bytes, stored, Replay::Later)
                        .await?
                    {
                        Orphan::Recovered(_, next) => {
                            done.recovered += 1;
                            state = Some(next);
                        }
                        Orphan::Left => left = true,
                        Orphan::No => {}
                    }
                }
                Some(stored)
                    if stored.status == Status::Running
                        && pass.sweep_at.is_some_and(|now| stored.expires_at <= now) =>
                {
                    left = !self
                        .store
                        .node_alive(stored.node)
                        .await
                        .map_err(ServiceError::store)?;
                }
                _ => {}
            }
            let expired = |now| {
                state
                    .as_ref()
                    .is_none_or(|s| s.expires_at <= now && (s.status != Status::Running || left))
            };
            if pass.sweep_at.is_some_and(expired) {
                self.delete_expired(&id, key).await?;
                done.swept += 1;
                continue;
            }
            if let (true, Some(state)) = (pass.count, &state) {
                done.owners.insert(id, (state.owner, state.expires_at));
            }
        }
        Ok(done)
    }

    /// Counts what each key stores (its executions' records and outcomes,
    /// its files), reading sizes, not contents, for the executions of
    /// `owners`, in place of the counts kept so far: at start-up, and with
    /// each upkeep when other nodes share the store (they write too).
    async fn count_usage(
        &self,
        owners: &HashMap<[u8; 16], ([u8; 8], u64)>,
    ) -> Result<(), ServiceError> {
        let usage = KeyUsage::new(self.config.max_key_storage_bytes);
        let mut sizes: HashMap<[u8; 16], u64> = HashMap::new();
        for prefix in [RECORDS, PROGRESS, ROUNDS, OUTCOMES] {
            let mut scan = crate::store::scan_heads(self.store.as_ref(), prefix, 0);
            while let Some(head) = scan.next().await {
                let head = head.map_err(ServiceError::store)?;
                if let Some(id) = id_after_prefix(prefix, &head.key) {
                    *sizes.entry(id).or_default() += head.len;
                }
            }
        }
        for (id, bytes) in sizes {
            if let Some((owner, expires_at)) = owners.get(&id) {
                usage.set(Item::Execution(id), *owner, bytes, *expires_at);
            }
        }
        self.files
            .count_usage(&usage)
            .await
            .map_err(ServiceError::from)?;
        self.count_sessions(&usage).await?;
        self.usage.replace_with(usage);
        Ok(())
    }

    /// One round of upkeep, every `--sweep-secs` on every node: parked
    /// children whose executions went on elsewhere are killed; then one
    /// read of the states: with other nodes on the store, rounds orphaned
    /// by a dead node are paused again and the usage is counted anew; on
    /// the one node whose turn it is, expired executions are deleted; then
    /// (that node) the sweeps of the other expired keys, of files, of
    /// dead nodes' addresses and of what the store keeps for dead nodes
    /// (PostgreSQL: their flush rows).
    pub async fn upkeep(&self, now: u64) -> Result<Upkept, ServiceError> {
        let mut done = Upkept {
            evicted: self.end_stale_children().await?,
            ..Upkept::default()
        };
        let shared = self.store.shared();
        let turn = self.store.sweep_turn().await.map_err(ServiceError::store)?;
        if !shared && turn.is_none() {
            return Ok(done);
        }
        let passed = self
            .pass_over_states(StatePass {
                recover: shared,
                count: shared,
                sweep_at: turn.is_some().then_some(now),
            })
            .await?;
        done.recovered = passed.recovered;
        done.swept = passed.swept;
        if shared {
            self.count_usage(&passed.owners).await?;
        }
        if turn.is_some() {
            self.sweep_the_rest(now).await?;
            done.swept += self.sweep_sessions(now).await?;
            done.swept_files = self.sweep_files(now).await?;
            self.sweep(Swept::NodeAddresses).await?;
            self.store
                .forget_dead_nodes()
                .await
                .map_err(ServiceError::store)?;
        }
        // Puts back and deletions reach the disk (the deletions' large
        // values are reclaimed once they are durable).
        self.store.flush().await.map_err(ServiceError::store)?;
        Ok(done)
    }

    /// Deletes an expired execution: its state (`key`), record and
    /// outcome; ends its parked child.
    async fn delete_expired(&self, id: &[u8; 16], key: Vec<u8>) -> Result<(), ServiceError> {
        self.engine.evict(id);
        let mut deletes = self.forget_record(id).await?;
        deletes.extend([key, outcome_key(id)]);
        self.store
            .apply_batch(&[], &slices(&deletes))
            .await
            .map_err(ServiceError::store)?;
        self.usage.remove(&Item::Execution(*id));
        Ok(())
    }

    /// Deletes session files past their lifetime; returns how many.
    pub async fn sweep_files(&self, now: u64) -> Result<usize, ServiceError> {
        self.files
            .sweep(now.saturating_sub(self.config.file_ttl_secs))
            .await
            .map_err(ServiceError::from)
    }

    /// Deletes expired request-id links and early cancels, and the
    /// listings' entries of executions that are gone.
    async fn sweep_the_rest(&self, now: u64) -> Result<(), ServiceError> {
        for swept in [
            Swept::RequestLinks { now },
            Swept::EarlyCancels { now },
            Swept::Listings,
            Swept::RuntimeSessions { now },
        ] {
            self.sweep(swept).await?;
        }
        Ok(())
    }

    /// Deletes the keys of `swept`'s kind that are gone.
    async fn sweep(&self, swept: Swept) -> Result<(), ServiceError> {
        let mut scan = crate::store::scan_prefix(self.store.as_ref(), swept.prefix());
        while let Some(pair) = scan.next().await {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            if self.is_gone(swept, &key, &bytes).await? {
                self.store.delete(&key).await.map_err(ServiceError::store)?;
            }
        }
        Ok(())
    }

    /// Whether the pair `key`/`bytes` of `swept`'s kind is gone.
    async fn is_gone(&self, swept: Swept, key: &[u8], bytes: &[u8]) -> Result<bool, ServiceError> {
        match swept {
            Swept::RequestLinks { now } => {
                Ok(RequestLink::decode(bytes).is_none_or(|link| link.expires_at <= now))
            }
            Swept::EarlyCancels { now } => {
                Ok(EarlyCancel::decode(bytes).is_none_or(|early| early.until <= now))
            }
            Swept::Listings => self.listing_is_stale(key).await,
            Swept::NodeAddresses => self.address_is_stale(key).await,
            Swept::RuntimeSessions { now } => Ok(self.runtime_session_is_gone(bytes, now)),
        }
    }
}
