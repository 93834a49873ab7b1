//! The service's upkeep: recovery of rounds left running by a dead node,
//! the per-key usage counted at start (and again with each sweep when
//! other nodes share the store), and the sweeps of what expired, which one
//! node at a time makes.
//!
//! Invariant: these read the store by streaming scans (sizes, not contents,
//! where sizes suffice).

use crate::quota::{Item, KeyUsage};
use crate::state::{
    EARLY_CANCELS, EarlyCancel, ExecState, OUTCOMES, PROGRESS, RECORDS, REQUEST_LINKS, ROUNDS,
    RequestLink, STATES, Status, id_after_prefix, id_of_state_key, outcome_key, record_key,
    state_key,
};

use super::Service;
use super::error::ServiceError;
use super::records::slices;

/// What one round of [`Service::upkeep`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Upkept {
    /// Children ended: parked ones whose executions went on elsewhere,
    /// running ones whose executions were cancelled elsewhere.
    pub evicted: usize,
    /// Rounds of dead nodes paused again.
    pub recovered: usize,
    /// Expired executions deleted (0 when another node swept).
    pub swept: usize,
    /// Expired session files deleted.
    pub swept_files: usize,
}

impl Service {
    /// Rounds left running by a dead node (a previous process of this
    /// server, or another node that shares the store) become paused again
    /// (failed when the execution has no record: it died starting); a
    /// round that a live node runs is left alone. Runs at start-up and
    /// with each sweep. Returns how many were put back.
    pub fn recover(&self) -> Result<usize, ServiceError> {
        let mut recovered = 0;
        for pair in self.store.scan_prefix(STATES) {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            let (Some(id), Some(state)) = (id_of_state_key(&key), ExecState::decode(&bytes)) else {
                continue;
            };
            if self.put_back_if_orphaned(&id, &bytes, &state)?.is_some() {
                recovered += 1;
            }
        }
        self.store.flush().map_err(ServiceError::store)?;
        Ok(recovered)
    }

    /// When `state` (stored as `bytes`) is a round left running by a dead
    /// node, puts it back to paused (failed without a record) by a
    /// compare-and-swap, and returns what it stored; `None` when the state
    /// is not orphaned or changed meanwhile.
    pub(super) fn put_back_if_orphaned(
        &self,
        id: &[u8; 16],
        bytes: &[u8],
        state: &ExecState,
    ) -> Result<Option<(Vec<u8>, ExecState)>, ServiceError> {
        if state.status != Status::Running
            || self
                .store
                .node_alive(state.node)
                .map_err(ServiceError::store)?
        {
            return Ok(None);
        }
        let has_record = self
            .store
            .get(&record_key(id))
            .map_err(ServiceError::store)?
            .is_some();
        let next = ExecState {
            status: if has_record {
                Status::Paused
            } else {
                Status::Failed
            },
            ..state.clone()
        };
        let next_bytes = next.encode();
        let swapped = self
            .store
            .compare_and_swap(&state_key(id), Some(bytes), Some(&next_bytes))
            .map_err(ServiceError::store)?;
        Ok(swapped.is_ok().then_some((next_bytes, next)))
    }

    /// Counts what each key stores (its executions' records and outcomes,
    /// its files), reading sizes, not contents: at start-up, and with each
    /// sweep when other nodes share the store (they write too), in place
    /// of the counts kept so far.
    pub fn count_usage(&self) -> Result<(), ServiceError> {
        let counted = KeyUsage::new(self.config.max_key_storage_bytes);
        self.count_usage_into(&counted)?;
        self.usage.replace_with(counted);
        Ok(())
    }

    fn count_usage_into(&self, usage: &KeyUsage) -> Result<(), ServiceError> {
        let mut owners = std::collections::HashMap::new();
        for pair in self.store.scan_prefix(STATES) {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            if let (Some(id), Some(state)) = (id_of_state_key(&key), ExecState::decode(&bytes)) {
                owners.insert(id, (state.owner, state.expires_at));
            }
        }
        let mut sizes: std::collections::HashMap<[u8; 16], u64> = std::collections::HashMap::new();
        for prefix in [RECORDS, PROGRESS, ROUNDS, OUTCOMES] {
            for head in self.store.scan_heads(prefix, 0) {
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
        self.files.count_usage(usage).map_err(ServiceError::from)
    }

    /// One round of upkeep, every `--sweep-secs` on every node: parked
    /// children whose executions went on elsewhere are killed; with other
    /// nodes on the store, rounds orphaned by a dead node are paused again
    /// and the usage is counted anew; then, on the one node whose turn it
    /// is, the sweeps of what expired and of dead nodes' addresses.
    pub fn upkeep(&self, now: u64) -> Result<Upkept, ServiceError> {
        let mut done = Upkept {
            evicted: self.end_stale_children()?,
            ..Upkept::default()
        };
        if self.store.shared() {
            done.recovered = self.recover()?;
            self.count_usage()?;
        }
        let Some(_turn) = self.store.sweep_turn().map_err(ServiceError::store)? else {
            return Ok(done);
        };
        done.swept = self.sweep(now)?;
        done.swept_files = self.sweep_files(now)?;
        self.sweep_nodes()?;
        Ok(done)
    }

    /// Deletes session files past their lifetime; returns how many.
    pub fn sweep_files(&self, now: u64) -> Result<usize, ServiceError> {
        self.files
            .sweep(now.saturating_sub(self.config.file_ttl_secs))
            .map_err(ServiceError::from)
    }

    /// Deletes expired executions, request-id links and early cancels;
    /// returns how many executions.
    pub fn sweep(&self, now: u64) -> Result<usize, ServiceError> {
        let mut swept = 0;
        for pair in self.store.scan_prefix(STATES) {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            let expired = ExecState::decode(&bytes)
                .is_none_or(|s| s.expires_at <= now && s.status != Status::Running);
            let Some(id) = id_of_state_key(&key).filter(|_| expired) else {
                continue;
            };
            self.engine.evict(&id);
            let mut deletes = self.forget_record(&id)?;
            deletes.extend([key, outcome_key(&id)]);
            let deletes = slices(&deletes);
            self.store
                .apply_batch(&[], &deletes)
                .map_err(ServiceError::store)?;
            self.usage.remove(&Item::Execution(id));
            swept += 1;
        }
        self.sweep_prefix(REQUEST_LINKS, |_, bytes| {
            Ok(RequestLink::decode(bytes).is_none_or(|link| link.expires_at <= now))
        })?;
        self.sweep_prefix(EARLY_CANCELS, |_, bytes| {
            Ok(EarlyCancel::decode(bytes).is_none_or(|early| early.until <= now))
        })?;
        self.sweep_listings()?;
        // The deletions' large values are reclaimed once they are durable.
        self.store.flush().map_err(ServiceError::store)?;
        Ok(swept)
    }

    /// Deletes the keys under `prefix` that `expired` (given a key and its
    /// value) says are gone.
    pub(super) fn sweep_prefix(
        &self,
        prefix: &[u8],
        expired: impl Fn(&[u8], &[u8]) -> Result<bool, ServiceError>,
    ) -> Result<(), ServiceError> {
        for pair in self.store.scan_prefix(prefix) {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            if expired(&key, &bytes)? {
                self.store.delete(&key).map_err(ServiceError::store)?;
            }
        }
        Ok(())
    }
}
