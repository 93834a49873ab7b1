//! Durable key-value storage of executions.
//!
//! [`Store`] is what the service needs from a database: point reads and
//! writes, an atomic compare-and-swap (the claim of a round), atomic batches
//! (a pause writes its record and state together), prefix scans that read
//! one pair at a time (recovery and sweeping never hold a whole table), scans
//! of value heads and sizes (listings and accounting never read file
//! contents) and a flush. [`SledStore`] is the embedded default;
//! [`PostgresStore`] keeps the same contract in PostgreSQL (`--store`).
//!
//! Servers that share a store ([`Store::shared`]: PostgreSQL) are
//! *nodes*: each has an id for its life ([`Store::node`], never 0, never
//! reused), the store tells whether a node is alive ([`Store::node_alive`]:
//! it holds its place in the database), and one node at a time sweeps
//! ([`Store::sweep_turn`]). A store in this process has one node, the
//! process itself: every other id (a previous process's) is dead.
//!
//! [`Durability`] turns flushes into a group commit: every caller of
//! [`Durability::durable`] waits until a flush that *started after its call*
//! has finished, and callers that arrive while a flush runs share the next
//! one. Invariant: when `durable()` returns `Ok`, every write made before the
//! call is on disk. [`Durability::soon`] asks for the same flush without
//! waiting for it (writes whose loss in a crash the protocol tolerates).

mod large_values;
mod postgres_store;
mod sled_store;
mod wal;

use std::sync::Arc;

use tokio::sync::oneshot;

pub use postgres_store::PostgresStore;
pub use sled_store::SledStore;

/// A failure of the database itself.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database reported an error.
    #[error("database error: {0}")]
    Database(String),
    /// The flush a caller waited for never answered (the task that led it
    /// ended without answering: the server is shutting down).
    #[error("the flusher has stopped")]
    FlusherStopped,
    /// Another process holds the database's lock.
    #[error(
        "the database in {0} is locked by another process: another baton may be running with the same --data-dir (BATON_DATA_DIR); stop it, or give this one another --data-dir"
    )]
    Locked(String),
}

/// The turn of the node that sweeps; the turn ends when it is dropped.
pub type SweepTurn = Box<dyn Send>;

/// This process's node id for stores in this process: random, not 0.
fn process_node() -> u64 {
    static NODE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NODE.get_or_init(new_node_id)
}

/// A fresh node id: random, below 2^62 (above it are the advisory-lock
/// numbers of [`PostgresStore`]), never 0.
pub(crate) fn new_node_id() -> u64 {
    (rand::random::<u64>() >> 2).max(1)
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
    /// Whether the database answers (for `/health`); a store in this
    /// process always does.
    fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Whether other servers may use this store at the same time.
    fn shared(&self) -> bool {
        false
    }
    /// This server's id among the nodes that use the store (never 0).
    fn node(&self) -> u64 {
        process_node()
    }
    /// Whether the node `node` is alive (0, the id of states written
    /// before nodes had ids, never is).
    fn node_alive(&self, node: u64) -> Result<bool, StoreError> {
        Ok(node != 0 && node == self.node())
    }
    /// The sweeper's turn, or `None` while another node sweeps.
    fn sweep_turn(&self) -> Result<Option<SweepTurn>, StoreError> {
        Ok(Some(Box::new(())))
    }
}

/// How the flush that covered a waiting caller ended.
type Waiter = oneshot::Sender<Result<(), String>>;

/// Who flushes now, and who waits for the next flush.
#[derive(Default)]
struct Commits {
    /// A caller is flushing.
    flushing: bool,
    /// Callers whose writes the running flush may not cover.
    waiting: Vec<Waiter>,
}

/// Group commit over a [`Store`] (see the module doc).
///
/// The flush runs on the thread of the caller that found no flush running
/// (the leader), with `block_in_place`, not on a flusher thread: on a
/// small virtual machine each wake-up of another thread costs tens of
/// microseconds, several times over per pause. Callers that arrive while
/// it runs wait; when it ends, a task of its own flushes once for all of
/// them (and again for those who came meanwhile). No request leads a
/// flush it could be cancelled in the middle of: the leader's flush has
/// no await point.
#[derive(Clone)]
pub struct Durability {
    store: Arc<dyn Store>,
    commits: Arc<std::sync::Mutex<Commits>>,
}

impl Durability {
    /// Group commit over `store`; `soon` needs a tokio runtime.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            commits: Arc::default(),
        }
    }

    /// Asks for a flush of every write made before this call, without
    /// waiting for it; a failure is logged.
    pub fn soon(&self) {
        let durability = self.clone();
        tokio::spawn(async move {
            if let Err(error) = durability.durable().await {
                tracing::error!(%error, "a flush asked for after a reply failed");
            }
        });
    }

    /// Waits until every write made before this call is on disk.
    pub async fn durable(&self) -> Result<(), StoreError> {
        let wait = {
            let mut commits = self.lock()?;
            if commits.flushing {
                let (turn, wait) = oneshot::channel();
                commits.waiting.push(turn);
                Some(wait)
            } else {
                commits.flushing = true;
                None
            }
        };
        match wait {
            Some(wait) => match wait.await {
                Ok(flushed) => flushed.map_err(StoreError::Database),
                Err(_) => Err(StoreError::FlusherStopped),
            },
            None => self.lead(),
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Commits>, StoreError> {
        self.commits
            .lock()
            .map_err(|_| StoreError::Database("the group commit's lock is poisoned".into()))
    }

    /// Flushes for this caller and for every caller waiting now, answers
    /// them, and leaves the callers that came during the flush to a task
    /// that leads the next flush.
    fn lead(&self) -> Result<(), StoreError> {
        let covered = std::mem::take(&mut self.lock()?.waiting);
        let flushed = blocking(|| self.store.flush()).map_err(|e| e.to_string());
        if let Err(error) = &flushed {
            tracing::error!(%error, "store flush failed");
        }
        metrics::counter!("baton_store_flushes_total").increment(1);
        metrics::histogram!("baton_store_flush_group_size").record((covered.len() + 1) as f64);
        for waiter in covered {
            let _ = waiter.send(flushed.clone());
        }
        let mut commits = self.lock()?;
        if commits.waiting.is_empty() {
            commits.flushing = false;
        } else {
            let next = self.clone();
            tokio::spawn(async move { next.lead() });
        }
        drop(commits);
        flushed.map_err(StoreError::Database)
    }
}

/// Runs blocking store work on this thread, telling a multi-threaded
/// runtime that the thread blocks (`block_in_place`); elsewhere (no
/// runtime, a blocking-pool thread, a current-thread runtime) runs it as
/// it is.
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
        runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
    });
    if multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
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
