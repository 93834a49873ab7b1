//! Execution records in the store and in memory: a record is read from its
//! parts (or from a whole record of an earlier format), a pause writes the
//! parts it added, an end or a cancel deletes every part, and the record of
//! each recent pause is kept in memory ([`RecordCache`]) so that a hot
//! continuation neither reads nor decodes its journal again.
//!
//! Invariants:
//! - A cached record is the record exactly as its last pause stored it
//!   (including what the store holds of it): it is put only after that
//!   pause is durable, taken out (never shared) by the continuation that
//!   claims the next round, and served only for the round it was stored
//!   at. The store stays the truth: a miss reads it.
//! - The cache holds at most its budget (`--record-cache-mb`) of records
//!   (by stored size, [`crate::journal::StoredExtent::total`]), dropping
//!   the oldest first; a record over a quarter of it is not kept.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::journal::{ExecutionRecord, NewParts, is_whole_record};
use crate::state::{progress_key, record_key, round_key, rounds_prefix};

use super::Service;
use super::error::ServiceError;

/// Records of recent pauses (see the module doc).
pub(super) struct RecordCache {
    inner: Mutex<CacheInner>,
    /// The most it holds, bytes of stored records.
    budget: u64,
}

#[derive(Default)]
struct CacheInner {
    /// By execution: (order of insertion, record).
    records: HashMap<[u8; 16], (u64, ExecutionRecord)>,
    /// The stored size of the records held.
    bytes: u64,
    next: u64,
}

impl CacheInner {
    /// Drops the record of `id`; returns it.
    fn drop_record(&mut self, id: &[u8; 16]) -> Option<ExecutionRecord> {
        let (_, record) = self.records.remove(id)?;
        self.bytes -= record.stored.total();
        Some(record)
    }
}

impl RecordCache {
    /// An empty cache holding at most `budget` bytes of records.
    pub(super) fn new(budget: u64) -> RecordCache {
        RecordCache {
            inner: Mutex::default(),
            budget,
        }
    }

    /// Keeps `record`, as stored at its last pause.
    pub(super) fn put(&self, record: ExecutionRecord) {
        let bytes = record.stored.total();
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.drop_record(&record.id);
        if self.budget == 0 || bytes > self.budget / 4 {
            return;
        }
        let order = inner.next;
        inner.next += 1;
        inner.records.insert(record.id, (order, record));
        inner.bytes += bytes;
        while inner.bytes > self.budget {
            let oldest = inner
                .records
                .iter()
                .min_by_key(|(_, (order, _))| *order)
                .map(|(id, _)| *id);
            let Some(oldest) = oldest else { break };
            inner.drop_record(&oldest);
        }
    }

    /// Takes the record of `id` if it was stored at pause `round`.
    pub(super) fn take(&self, id: &[u8; 16], round: u32) -> Option<ExecutionRecord> {
        let record = self.inner.lock().ok()?.drop_record(id)?;
        (record.round_count() == round as usize).then_some(record)
    }

    /// Forgets the record of `id`.
    pub(super) fn remove(&self, id: &[u8; 16]) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.drop_record(id);
        }
    }
}

/// How many times [`Service::load_record`] reads a record that does not
/// hold together before calling it corrupt.
const RECORD_READS: u32 = 4;

impl Service {
    /// Reads an execution's record from the store. Its parts are read one
    /// after the other, so a read that crossed the commit of a step (the
    /// progress before it, the rounds after) is read again; a record still
    /// inconsistent after [`RECORD_READS`] reads is corrupt.
    pub(super) async fn load_record(&self, id: &[u8; 16]) -> Result<ExecutionRecord, ServiceError> {
        let mut reads = 1;
        loop {
            match self.read_record_parts(id).await {
                Err(ServiceError::Corrupt(_)) if reads < RECORD_READS => {
                    reads += 1;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                read => return read,
            }
        }
    }

    async fn read_record_parts(&self, id: &[u8; 16]) -> Result<ExecutionRecord, ServiceError> {
        let start = self
            .store
            .get(&record_key(id))
            .await
            .map_err(ServiceError::store)?
            .ok_or(ServiceError::NotFound)?;
        if is_whole_record(&start) {
            return ExecutionRecord::decode(&start).map_err(corrupt);
        }
        let progress = self
            .store
            .get(&progress_key(id))
            .await
            .map_err(ServiceError::store)?
            .ok_or_else(|| {
                ServiceError::Corrupt("execution record is corrupt: its progress is missing".into())
            })?;
        let rounds = crate::store::scan_prefix(self.store.as_ref(), &rounds_prefix(id))
            .all()
            .await
            .map_err(ServiceError::store)?
            .into_iter()
            .map(|(_, bytes)| bytes)
            .collect::<Vec<_>>();
        ExecutionRecord::from_parts(&start, &progress, &rounds).map_err(corrupt)
    }

    /// The record of a continuation of `round`: the cached one, or the
    /// stored one. A stored record already past `round` (another request
    /// continued the round since this one read the state) is
    /// [`ServiceError::AlreadyUsed`]: this request is a retry or too late,
    /// never a continuation of the next round with the last one's results.
    pub(super) async fn record_for_round(
        &self,
        id: &[u8; 16],
        round: u32,
    ) -> Result<ExecutionRecord, ServiceError> {
        let record = match self.records.take(id, round) {
            Some(record) => record,
            None => self.load_record(id).await?,
        };
        if record.round_count() != round as usize {
            return Err(ServiceError::AlreadyUsed);
        }
        Ok(record)
    }

    /// Forgets an execution's record (an end, a cancel, a sweep): drops it
    /// from the cache and returns the keys of every stored part, for the
    /// batch that deletes them.
    pub(super) async fn forget_record(&self, id: &[u8; 16]) -> Result<Vec<Vec<u8>>, ServiceError> {
        self.records.remove(id);
        self.record_keys(id).await
    }

    /// [`Service::forget_record`] for a record in hand: the keys of its
    /// parts follow from its rounds (a round part exists only for a round
    /// the record has), so nothing is read from the store.
    pub(super) fn forget_parts_of(&self, record: &ExecutionRecord) -> Vec<Vec<u8>> {
        self.records.remove(&record.id);
        let id = &record.id;
        let rounds = u32::try_from(record.rounds.len()).unwrap_or(u32::MAX);
        let mut keys = vec![record_key(id), progress_key(id)];
        keys.extend((0..rounds).map(|index| round_key(id, index)));
        keys
    }

    /// The keys of every stored part of an execution's record.
    async fn record_keys(&self, id: &[u8; 16]) -> Result<Vec<Vec<u8>>, ServiceError> {
        let mut keys = vec![record_key(id), progress_key(id)];
        let mut scan = crate::store::scan_heads(self.store.as_ref(), &rounds_prefix(id), 0);
        while let Some(head) = scan.next().await {
            keys.push(head.map_err(ServiceError::store)?.key);
        }
        Ok(keys)
    }
}

/// The key/value pairs that write `parts` of the record of `id`.
pub(super) fn part_writes<'a>(id: &[u8; 16], parts: &'a NewParts) -> Vec<(Vec<u8>, &'a [u8])> {
    let mut writes: Vec<(Vec<u8>, &'a [u8])> = Vec::with_capacity(parts.rounds.len() + 2);
    if let Some(start) = &parts.start {
        writes.push((record_key(id), start));
    }
    for (index, round) in &parts.rounds {
        writes.push((round_key(id, *index), round));
    }
    writes.push((progress_key(id), &parts.progress));
    writes
}

/// Borrowed views of owned keys and borrowed values, as a write takes them.
pub(super) fn borrowed<'a>(writes: &'a [(Vec<u8>, &'a [u8])]) -> Vec<(&'a [u8], &'a [u8])> {
    writes.iter().map(|(k, v)| (k.as_slice(), *v)).collect()
}

/// Borrowed views of owned keys, as a batch takes them.
pub(super) fn slices(keys: &[Vec<u8>]) -> Vec<&[u8]> {
    keys.iter().map(Vec::as_slice).collect()
}

fn corrupt(error: crate::journal::JournalError) -> ServiceError {
    ServiceError::Corrupt(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `id` that the store holds `bytes` of.
    fn record(id: u8, bytes: u64) -> ExecutionRecord {
        let mut record = crate::journal::tests::sample();
        record.id = [id; 16];
        record.stored.progress_bytes = bytes;
        record
    }

    #[test]
    fn a_cached_record_serves_its_round_once() {
        let cache = RecordCache::new(1000);
        let stored = record(1, 10);
        let round = stored.round_count() as u32;
        cache.put(stored.clone());
        assert!(
            cache.take(&[1; 16], round + 1).is_none(),
            "another round misses"
        );
        cache.put(stored.clone());
        assert_eq!(cache.take(&[1; 16], round), Some(stored));
        assert!(cache.take(&[1; 16], round).is_none(), "taken, not shared");
    }

    #[test]
    fn the_cache_keeps_its_byte_budget_dropping_the_oldest() {
        let cache = RecordCache::new(1000);
        for id in 0..10u8 {
            cache.put(record(id, 125));
        }
        let inner = cache.inner.lock().unwrap_or_else(|e| e.into_inner());
        assert!(inner.bytes <= 1000);
        assert_eq!(inner.records.len(), 8);
        assert!(!inner.records.contains_key(&[0; 16]) && !inner.records.contains_key(&[1; 16]));
        drop(inner);
        let round = record(42, 0).round_count() as u32;
        cache.put(record(42, 251));
        assert!(cache.take(&[42; 16], round).is_none(), "too large to keep");
        let off = RecordCache::new(0);
        off.put(record(7, 1));
        assert!(
            off.take(&[7; 16], round).is_none(),
            "a budget of 0 keeps nothing"
        );
    }
}
