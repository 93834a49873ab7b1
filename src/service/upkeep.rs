//! The service's upkeep: recovery of rounds left running by a dead server,
//! the per-key usage counted at start, and the sweeps of what expired.
//!
//! Invariant: these read the store by streaming scans (sizes, not contents,
//! where sizes suffice).

use crate::quota::Item;
use crate::state::{
    EARLY_CANCELS, EarlyCancel, ExecState, OUTCOMES, PROGRESS, RECORDS, REQUEST_LINKS, ROUNDS,
    RequestLink, STATES, Status, id_after_prefix, id_of_state_key, outcome_key, record_key,
};

use super::Service;
use super::error::ServiceError;
use super::records::slices;

impl Service {
    /// At start-up: rounds left running by a dead server become paused again.
    pub fn recover(&self) -> Result<usize, ServiceError> {
        let mut recovered = 0;
        for pair in self.store.scan_prefix(STATES) {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            let (Some(id), Some(state)) = (id_of_state_key(&key), ExecState::decode(&bytes)) else {
                continue;
            };
            if state.status != Status::Running {
                continue;
            }
            let has_record = self
                .store
                .get(&record_key(&id))
                .map_err(ServiceError::store)?
                .is_some();
            let next = ExecState {
                status: if has_record {
                    Status::Paused
                } else {
                    Status::Failed
                },
                ..state
            };
            // Only what is put back is counted (recovery runs before the
            // server serves, so nothing else should change a state).
            let swapped = self
                .store
                .compare_and_swap(&key, Some(&bytes), Some(&next.encode()))
                .map_err(ServiceError::store)?;
            if swapped.is_ok() {
                recovered += 1;
            }
        }
        self.store.flush().map_err(ServiceError::store)?;
        Ok(recovered)
    }

    /// At start-up: counts what each key stores (its executions' records
    /// and outcomes, its files), reading sizes, not contents.
    pub fn count_usage(&self) -> Result<(), ServiceError> {
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
                self.usage
                    .set(Item::Execution(id), *owner, bytes, *expires_at);
            }
        }
        self.files.count_usage().map_err(ServiceError::from)
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
