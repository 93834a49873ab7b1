//! Durable key-value storage of executions.
//!
//! [`Store`] is what the service needs from a database, every call
//! asynchronous: point reads and writes, an atomic compare-and-swap (the
//! claim of a round), atomic batches (a pause writes its record and state
//! together), prefix scans read a page at a time ([`Scan`]: recovery and
//! sweeping never hold a whole table), scans of value heads and sizes
//! (listings and accounting never read file contents) and a flush. [`SledStore`] is the embedded default;
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
//! waiting for it (writes whose loss in a crash the protocol tolerates),
//! and [`Durability::begin`] starts it to be waited for later (a claim's
//! flush runs while the child runs).

mod large_values;
mod postgres_store;
mod sled_store;
mod wal;

use std::sync::Arc;

use tokio::sync::oneshot;

pub use postgres_store::PostgresStore;
pub use sled_store::{SledScan, SledStore};

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

/// Items a scan reads per call to the store.
pub const SCAN_PAGE: usize = 256;

/// A future of a store call, as [`async_trait`] boxes them.
pub type StoreFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// What the service needs from a database. Every call is `async`: the
/// embedded store answers at once (its flush blocks its thread, inside
/// `block_in_place`), PostgreSQL over its asynchronous driver, and a call
/// that reached the database runs to its end even when its caller is
/// dropped.
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// The value of `key`.
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Sets `key`.
    async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    /// Removes `key`.
    async fn delete(&self, key: &[u8]) -> Result<(), StoreError>;
    /// Sets `key` to `new` (or removes it when `None`) only if it holds
    /// `expected` (or is absent when `None`), atomically. Meant for small
    /// values (states); a store may refuse large ones.
    async fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> CasResult;
    /// At most `limit` pairs whose key starts with `prefix` and comes after
    /// `after` (from the first when `None`), in key order; fewer than
    /// `limit` only when no more follow. Read whole scans with
    /// [`scan_prefix`].
    async fn pairs_after(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Pair>, StoreError>;
    /// As [`Store::pairs_after`], but the first `head_len` bytes and the
    /// length of each value, without reading the rest of the values. Read
    /// whole scans with [`scan_heads`].
    async fn heads_after(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        head_len: usize,
        limit: usize,
    ) -> Result<Vec<Head>, StoreError>;
    /// Sets every key, in order, at least as durably as one `put` after
    /// the other: once a later key's value survives a crash, every earlier
    /// one does too (a store may apply them atomically, in one round trip).
    async fn put_all(&self, puts: &[(&[u8], &[u8])]) -> Result<(), StoreError> {
        for (key, value) in puts {
            self.put(key, value).await?;
        }
        Ok(())
    }
    /// Sets `key` to `new` if it holds `expected` (a compare-and-swap of a
    /// small value), and then, only if it did, sets `puts` as
    /// [`Store::put_all`] does: a crash may keep the swap without the puts,
    /// never the puts without the swap (a store may apply all atomically).
    /// Cheaper than a guarded batch where a batch is a transaction.
    async fn swap_then_put(
        &self,
        key: &[u8],
        expected: &[u8],
        new: &[u8],
        puts: &[(&[u8], &[u8])],
    ) -> CasResult {
        if let Err(conflict) = self
            .compare_and_swap(key, Some(expected), Some(new))
            .await?
        {
            return Ok(Err(conflict));
        }
        self.put_all(puts).await.map(Ok)
    }
    /// Sets `puts`, then `key` to `new` if it holds `expected` (a small
    /// value): a crash may keep the puts without the swap, never the swap
    /// without the puts, and a swap that fails leaves the puts in place
    /// (the caller deletes them). A store may apply all atomically (then a
    /// failed swap writes nothing): the default is a guarded batch.
    async fn put_then_swap(
        &self,
        puts: &[(&[u8], &[u8])],
        key: &[u8],
        expected: &[u8],
        new: &[u8],
    ) -> CasResult {
        let all = with_swap(puts, key, new);
        self.apply_batch_if((key, expected), &all, &[]).await
    }
    /// Applies puts and deletes atomically.
    async fn apply_batch(
        &self,
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> Result<(), StoreError>;
    /// Applies puts and deletes atomically only if `guard`'s key holds the
    /// expected (small) value; otherwise changes nothing and reports what
    /// the key holds.
    async fn apply_batch_if(
        &self,
        guard: (&[u8], &[u8]),
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> CasResult;
    /// Makes every write so far durable.
    async fn flush(&self) -> Result<(), StoreError>;
    /// Whether the database answers (for `/health`); a store in this
    /// process always does.
    async fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Whether a step should store what it follows from (a round's
    /// results, a start's record) before its code runs, so that their
    /// flush runs while the code does: worth it where a write costs little
    /// next to a flush (the embedded store); not where the extra writes
    /// cost a round trip as long as the flush they would hide (PostgreSQL).
    fn flush_while_running(&self) -> bool {
        true
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
    async fn node_alive(&self, node: u64) -> Result<bool, StoreError> {
        Ok(node != 0 && node == self.node())
    }
    /// The sweeper's turn, or `None` while another node sweeps.
    async fn sweep_turn(&self) -> Result<Option<SweepTurn>, StoreError> {
        Ok(Some(Box::new(())))
    }
    /// Deletes what the store keeps of its own for nodes that are gone
    /// (when a node joins, and on the sweeper's turn); a store in one
    /// process keeps nothing.
    async fn forget_dead_nodes(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// What a scan reads: pairs or heads, each named by its key.
pub trait Scanned: Sized + Send {
    /// The item's key.
    fn key(&self) -> &[u8];
    /// The page of items after `after`.
    fn page<'a>(
        store: &'a dyn Store,
        prefix: &'a [u8],
        after: Option<&'a [u8]>,
        head_len: usize,
    ) -> StoreFuture<'a, Vec<Self>>;
}

impl Scanned for Pair {
    fn key(&self) -> &[u8] {
        &self.0
    }
    fn page<'a>(
        store: &'a dyn Store,
        prefix: &'a [u8],
        after: Option<&'a [u8]>,
        _head_len: usize,
    ) -> StoreFuture<'a, Vec<Self>> {
        store.pairs_after(prefix, after, SCAN_PAGE)
    }
}

impl Scanned for Head {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn page<'a>(
        store: &'a dyn Store,
        prefix: &'a [u8],
        after: Option<&'a [u8]>,
        head_len: usize,
    ) -> StoreFuture<'a, Vec<Self>> {
        store.heads_after(prefix, after, head_len, SCAN_PAGE)
    }
}

/// A prefix scan, read [`SCAN_PAGE`] items per call to the store (no scan
/// holds a table, a transaction or a whole key range in memory). A key
/// written or deleted while the scan runs may or may not be seen.
pub struct Scan<'a, T> {
    store: &'a dyn Store,
    prefix: Vec<u8>,
    head_len: usize,
    after: Option<Vec<u8>>,
    page: std::vec::IntoIter<T>,
    done: bool,
}

impl<T: Scanned> Scan<'_, T> {
    /// The next item; after an error, `None`.
    pub async fn next(&mut self) -> Option<Result<T, StoreError>> {
        loop {
            if let Some(item) = self.page.next() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            let fetched = T::page(
                self.store,
                &self.prefix,
                self.after.as_deref(),
                self.head_len,
            )
            .await;
            match fetched {
                Ok(items) => {
                    self.done = items.len() < SCAN_PAGE;
                    self.after = items.last().map(|item| item.key().to_vec());
                    self.page = items.into_iter();
                }
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            }
        }
    }

    /// Every item, or the first error.
    pub async fn all(mut self) -> Result<Vec<T>, StoreError> {
        let mut items = Vec::new();
        while let Some(item) = self.next().await {
            items.push(item?);
        }
        Ok(items)
    }
}

fn scan<'a, T>(store: &'a dyn Store, prefix: &[u8], head_len: usize) -> Scan<'a, T> {
    Scan {
        store,
        prefix: prefix.to_vec(),
        head_len,
        after: None,
        page: Vec::new().into_iter(),
        done: false,
    }
}

/// `puts` and then the swap's own write (`key` set to `new`): the batch a
/// store that applies a swap and its puts atomically writes.
fn with_swap<'a>(
    puts: &[(&'a [u8], &'a [u8])],
    key: &'a [u8],
    new: &'a [u8],
) -> Vec<(&'a [u8], &'a [u8])> {
    let mut all = Vec::with_capacity(puts.len() + 1);
    all.extend_from_slice(puts);
    all.push((key, new));
    all
}

/// The pairs whose key starts with `prefix`, in key order.
pub fn scan_prefix<'a>(store: &'a dyn Store, prefix: &[u8]) -> Scan<'a, Pair> {
    scan(store, prefix, 0)
}

/// The first `head_len` bytes and the length of every value whose key
/// starts with `prefix`, in key order.
pub fn scan_heads<'a>(store: &'a dyn Store, prefix: &[u8], head_len: usize) -> Scan<'a, Head> {
    scan(store, prefix, head_len)
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
/// The flush runs in the task of the caller that found no flush running
/// (the leader), not on a flusher task: on a small virtual machine each
/// wake-up of another thread costs tens of microseconds, several times
/// over per pause (the embedded store's flush blocks the leader's thread,
/// inside `block_in_place`). Callers that arrive while it runs wait; when
/// it ends, a task of its own flushes once for all of them (and again for
/// those who came meanwhile). A leader dropped in the middle of its flush
/// (its request went away) hands the callers it covered to such a task.
#[derive(Clone)]
pub struct Durability {
    store: Arc<dyn Store>,
    commits: Arc<std::sync::Mutex<Commits>>,
}

/// A flush under way ([`Durability::begin`]).
pub struct Flushing(tokio::task::JoinHandle<Result<(), StoreError>>);

impl Flushing {
    /// Waits until the flush is done: every write made before it began is
    /// on disk when this returns `Ok`.
    pub async fn wait(self) -> Result<(), StoreError> {
        self.0.await.unwrap_or(Err(StoreError::FlusherStopped))
    }
}

/// The callers a leader's flush covers, handed on to a new leader if the
/// flush's task is dropped before it answers them.
struct Covered<'a> {
    durability: &'a Durability,
    waiters: Option<Vec<Waiter>>,
}

impl Drop for Covered<'_> {
    fn drop(&mut self) {
        let Some(waiters) = self.waiters.take() else {
            return;
        };
        if let Ok(mut commits) = self.durability.commits.lock() {
            commits.waiting.extend(waiters);
        }
        self.durability.lead_in_a_task();
    }
}

impl Durability {
    /// Group commit over `store`; `soon` needs a tokio runtime.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            commits: Arc::default(),
        }
    }

    /// Starts a flush of every write made before this call in a task of
    /// its own and returns at once: the disk works while the caller goes
    /// on, and [`Flushing::wait`] waits for it (a caller that goes away
    /// leaves the flush to finish).
    pub fn begin(&self) -> Flushing {
        let durability = self.clone();
        // On a thread of the blocking pool, not a runtime worker: a worker
        // may be the thread the caller's child preempts next, and the
        // flush must be under way before then.
        let runtime = tokio::runtime::Handle::current();
        Flushing(tokio::task::spawn_blocking(move || {
            runtime.block_on(durability.durable())
        }))
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
            None => self.lead().await,
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Commits>, StoreError> {
        self.commits
            .lock()
            .map_err(|_| StoreError::Database("the group commit's lock is poisoned".into()))
    }

    /// Leads the next flush in a task of its own; with no runtime left
    /// (the server is shutting down), its waiters are told the flusher
    /// stopped.
    fn lead_in_a_task(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            if let Ok(mut commits) = self.commits.lock() {
                commits.waiting.clear();
                commits.flushing = false;
            }
            return;
        };
        let next = self.clone();
        runtime.spawn(async move {
            let _ = next.lead().await;
        });
    }

    /// Flushes for this caller and for every caller waiting now, answers
    /// them, and leaves the callers that came during the flush to a task
    /// that leads the next flush.
    async fn lead(&self) -> Result<(), StoreError> {
        let waiters = std::mem::take(&mut self.lock()?.waiting);
        let mut covered = Covered {
            durability: self,
            waiters: Some(waiters),
        };
        let flushed = self.store.flush().await.map_err(|e| e.to_string());
        let waiters = covered.waiters.take().unwrap_or_default();
        if let Err(error) = &flushed {
            tracing::error!(%error, "store flush failed");
        }
        metrics::counter!("baton_store_flushes_total").increment(1);
        metrics::histogram!("baton_store_flush_group_size").record((waiters.len() + 1) as f64);
        for waiter in waiters {
            let _ = waiter.send(flushed.clone());
        }
        let more = {
            let mut commits = self.lock()?;
            let more = !commits.waiting.is_empty();
            commits.flushing = more;
            more
        };
        if more {
            self.lead_in_a_task();
        }
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

    #[async_trait::async_trait]
    impl Store for SlowFlush {
        async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.get(key)
        }
        async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
            self.inner.put(key, value)
        }
        async fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
            self.inner.delete(key)
        }
        async fn compare_and_swap(
            &self,
            key: &[u8],
            expected: Option<&[u8]>,
            new: Option<&[u8]>,
        ) -> CasResult {
            self.inner.compare_and_swap(key, expected, new)
        }
        async fn pairs_after(
            &self,
            prefix: &[u8],
            after: Option<&[u8]>,
            limit: usize,
        ) -> Result<Vec<Pair>, StoreError> {
            self.inner.pairs_after(prefix, after, limit)
        }
        async fn heads_after(
            &self,
            prefix: &[u8],
            after: Option<&[u8]>,
            head_len: usize,
            limit: usize,
        ) -> Result<Vec<Head>, StoreError> {
            self.inner.heads_after(prefix, after, head_len, limit)
        }
        async fn apply_batch(
            &self,
            puts: &[(&[u8], &[u8])],
            deletes: &[&[u8]],
        ) -> Result<(), StoreError> {
            self.inner.apply_batch(puts, deletes)
        }
        async fn apply_batch_if(
            &self,
            guard: (&[u8], &[u8]),
            puts: &[(&[u8], &[u8])],
            deletes: &[&[u8]],
        ) -> CasResult {
            self.inner.apply_batch_if(guard, puts, deletes)
        }
        async fn flush(&self) -> Result<(), StoreError> {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            self.flushes.fetch_add(1, Ordering::SeqCst);
            SledStore::flush(&self.inner)
        }
    }

    /// A store whose flushes take 50 ms, its directory, and group commit
    /// over it.
    fn slow_flushes() -> (tempfile::TempDir, Arc<SlowFlush>, Durability) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SlowFlush {
            inner: SledStore::open(dir.path()).unwrap(),
            flushes: AtomicUsize::new(0),
        });
        let durability = Durability::new(store.clone());
        (dir, store, durability)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_flushes() {
        let (_dir, store, durability) = slow_flushes();
        let mut handles = Vec::new();
        for i in 0..40u32 {
            let durability = durability.clone();
            let store = store.clone();
            handles.push(tokio::spawn(async move {
                store.put(&i.to_be_bytes(), b"v").await.unwrap();
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_dropped_in_its_flush_hands_its_callers_on() {
        let (_dir, store, durability) = slow_flushes();
        // The leader's flush takes 50 ms; a caller arrives, the leader's
        // task is dropped (its request went away) in the middle.
        let leader = tokio::spawn({
            let durability = durability.clone();
            async move { durability.durable().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        let waiter = tokio::spawn({
            let durability = durability.clone();
            async move { durability.durable().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        leader.abort();
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await;
        assert!(
            matches!(waited, Ok(Ok(Ok(())))),
            "the waiting caller was answered: {waited:?}"
        );
        assert!(store.flushes.load(Ordering::SeqCst) >= 1);
        // And the group commit is not left believing a flush runs.
        let next =
            tokio::time::timeout(std::time::Duration::from_secs(5), durability.durable()).await;
        assert!(matches!(next, Ok(Ok(()))), "{next:?}");
    }
}
