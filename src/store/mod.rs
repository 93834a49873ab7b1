//! Durable key-value storage of executions.
//!
//! [`Store`] is what the service needs from a database: point reads and
//! writes, an atomic compare-and-swap (the claim of a round), atomic batches
//! (a pause writes its record and state together), prefix scans that read
//! one pair at a time (recovery and sweeping never hold a whole table), scans
//! of value heads and sizes (listings and accounting never read file
//! contents) and a flush. [`SledStore`] is the embedded default.
//!
//! [`Durability`] turns flushes into a group commit: every caller of
//! [`Durability::durable`] waits until a flush that *started after its call*
//! has finished, and callers that arrive while a flush runs share the next
//! one. Invariant: when `durable()` returns `Ok`, every write made before the
//! call is on disk. [`Durability::soon`] asks for the same flush without
//! waiting for it (writes whose loss in a crash the protocol tolerates).

mod large_values;
mod sled_store;

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

pub use sled_store::SledStore;

/// A failure of the database itself.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database reported an error.
    #[error("database error: {0}")]
    Database(String),
    /// The group-commit task is gone (the server is shutting down).
    #[error("the flusher has stopped")]
    FlusherStopped,
    /// Another process holds the database's lock.
    #[error(
        "the database in {0} is locked by another process: another baton may be running with the same --data-dir (BATON_DATA_DIR); stop it, or give this one another --data-dir"
    )]
    Locked(String),
}

/// A compare-and-swap that found another value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasConflict {
    /// What the key holds now.
    pub current: Option<Vec<u8>>,
}

/// Result of a compare-and-swap: the outer error is the database's, the inner
/// one a lost race.
pub type CasResult = Result<Result<(), CasConflict>, StoreError>;

/// One pair of a scan.
pub type Pair = (Vec<u8>, Vec<u8>);

/// A scan, read one pair at a time.
pub type Scan<'a> = Box<dyn Iterator<Item = Result<Pair, StoreError>> + Send + 'a>;

/// What a head scan gives of one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The key.
    pub key: Vec<u8>,
    /// The value's first bytes (at most the length asked for).
    pub head: Vec<u8>,
    /// The value's whole length.
    pub len: u64,
}

/// A head scan, read one value at a time.
pub type HeadScan<'a> = Box<dyn Iterator<Item = Result<Head, StoreError>> + Send + 'a>;

/// What the service needs from a database.
pub trait Store: Send + Sync {
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Sets `key`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    /// Removes `key`.
    fn delete(&self, key: &[u8]) -> Result<(), StoreError>;
    /// Sets `key` to `new` (or removes it when `None`) only if it holds
    /// `expected` (or is absent when `None`), atomically. Meant for small
    /// values (states); a store may refuse large ones.
    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> CasResult;
    /// The pairs whose key starts with `prefix`, in key order, read as the
    /// scan goes.
    fn scan_prefix(&self, prefix: &[u8]) -> Scan<'_>;
    /// The first `head_len` bytes and the length of every value whose key
    /// starts with `prefix`, without reading the rest of the values.
    fn scan_heads(&self, prefix: &[u8], head_len: usize) -> HeadScan<'_>;
    /// Applies puts and deletes atomically.
    fn apply_batch(&self, puts: &[(&[u8], &[u8])], deletes: &[&[u8]]) -> Result<(), StoreError>;
    /// Applies puts and deletes atomically only if `guard`'s key holds the
    /// expected (small) value; otherwise changes nothing and reports what
    /// the key holds.
    fn apply_batch_if(
        &self,
        guard: (&[u8], &[u8]),
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> CasResult;
    /// Makes every write so far durable.
    fn flush(&self) -> Result<(), StoreError>;
}

type Waiter = oneshot::Sender<Result<(), String>>;

/// Group commit over a [`Store`] (see the module doc).
#[derive(Clone)]
pub struct Durability {
    requests: mpsc::UnboundedSender<Waiter>,
}

impl Durability {
    /// Starts the flusher task; must be called inside a tokio runtime.
    pub fn new(store: Arc<dyn Store>) -> Self {
        let (requests, receiver) = mpsc::unbounded_channel();
        tokio::spawn(flush_loop(store, receiver));
        Self { requests }
    }

    /// Asks for a flush of every write made before this call, without
    /// waiting for it; a failure is logged by the flusher.
    pub fn soon(&self) {
        let (done, _not_waited_for) = oneshot::channel();
        if self.requests.send(done).is_err() {
            tracing::error!("the store's flusher has stopped: a write waits for the next flush");
        }
    }

    /// Waits until every write made before this call is on disk.
    pub async fn durable(&self) -> Result<(), StoreError> {
        let (done, wait) = oneshot::channel();
        self.requests
            .send(done)
            .map_err(|_| StoreError::FlusherStopped)?;
        match wait.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(StoreError::Database(message)),
            Err(_) => Err(StoreError::FlusherStopped),
        }
    }
}

/// Takes every waiting caller, flushes once for all of them, answers them.
async fn flush_loop(store: Arc<dyn Store>, mut receiver: mpsc::UnboundedReceiver<Waiter>) {
    while let Some(first) = receiver.recv().await {
        let mut waiters = vec![first];
        while let Ok(next) = receiver.try_recv() {
            waiters.push(next);
        }
        let store = store.clone();
        let flushed = tokio::task::spawn_blocking(move || store.flush())
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        if let Err(error) = &flushed {
            tracing::error!(%error, "store flush failed");
        }
        metrics::counter!("baton_store_flushes_total").increment(1);
        metrics::histogram!("baton_store_flush_group_size").record(waiters.len() as f64);
        for waiter in waiters {
            let _ = waiter.send(flushed.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts flushes; each flush takes a while so callers pile up.
    struct SlowFlush {
        inner: SledStore,
        flushes: AtomicUsize,
    }

    impl Store for SlowFlush {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.get(key)
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
            self.inner.put(key, value)
        }
        fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
            self.inner.delete(key)
        }
        fn compare_and_swap(
            &self,
            key: &[u8],
            expected: Option<&[u8]>,
            new: Option<&[u8]>,
        ) -> CasResult {
            self.inner.compare_and_swap(key, expected, new)
        }
        fn scan_prefix(&self, prefix: &[u8]) -> Scan<'_> {
            self.inner.scan_prefix(prefix)
        }
        fn scan_heads(&self, prefix: &[u8], head_len: usize) -> HeadScan<'_> {
            self.inner.scan_heads(prefix, head_len)
        }
        fn apply_batch(
            &self,
            puts: &[(&[u8], &[u8])],
            deletes: &[&[u8]],
        ) -> Result<(), StoreError> {
            self.inner.apply_batch(puts, deletes)
        }
        fn apply_batch_if(
            &self,
            guard: (&[u8], &[u8]),
            puts: &[(&[u8], &[u8])],
            deletes: &[&[u8]],
        ) -> CasResult {
            self.inner.apply_batch_if(guard, puts, deletes)
        }
        fn flush(&self) -> Result<(), StoreError> {
            std::thread::sleep(std::time::Duration::from_millis(50));
            self.flushes.fetch_add(1, Ordering::SeqCst);
            self.inner.flush()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SlowFlush {
            inner: SledStore::open(dir.path()).unwrap(),
            flushes: AtomicUsize::new(0),
        });
        let durability = Durability::new(store.clone());
        let mut handles = Vec::new();
        for i in 0..40u32 {
            let durability = durability.clone();
            let store = store.clone();
            handles.push(tokio::spawn(async move {
                store.put(&i.to_be_bytes(), b"v").unwrap();
                durability.durable().await.unwrap();
            }));
        }
        for handle in handles {
            handle.await.unwrap();
        }
        let flushes = store.flushes.load(Ordering::SeqCst);
        assert!(
            (1..40).contains(&flushes),
            "40 callers took {flushes} flushes"
        );
    }
}
