//! A [`Store`] on PostgreSQL (`--store postgres://…`): one table of keys
//! and values, the same contract as the embedded sled store.
//!
//! Every write is its own committed transaction, visible to every node
//! when the call returns, and durable at the next [`Store::flush`], as in
//! the embedded store: writes commit with `synchronous_commit = off` (no
//! wait for PostgreSQL's log to reach the disk), and a flush commits one
//! transaction with `synchronous_commit = on`, which returns once the log
//! is on disk (and on the synchronous standbys, if any) up to its own
//! commit, past every write committed before it. So a step costs one
//! wait for the disk, not one per write (a start wrote three, a continue
//! two), and flushes of concurrent steps are shared by the group commit.
//! A pause's own write ([`Store::put_then_swap`]) is that wait: it commits
//! with `synchronous_commit = on` (set before it and reset after it, the
//! three sent together), so the flush that follows it skips the database
//! unless other writes came meanwhile.
//! Compare-and-swap is a conditional `UPDATE`/`INSERT`/`DELETE`; a batch
//! is one statement (one round trip), a guarded one locking its guard's
//! row (`SELECT … FOR UPDATE` in a `WITH`) and writing only when it holds
//! the expected value. Scans read pages of [`SCAN_PAGE`] keys in key order
//! (`bytea` compares byte by byte, as sled does), so no scan holds a
//! table or a transaction open.
//!
//! Invariants:
//! - The schema is created and migrated at open, under a transaction-level
//!   advisory lock; a database whose schema is newer than this build knows
//!   is refused with a sentence, never written to.
//! - Several servers (nodes) may share a database. Each node holds a
//!   session-level advisory lock numbered by its id for its whole life,
//!   on a connection with TCP keepalives: a node is alive exactly while
//!   its lock is granted (PostgreSQL drops it at once when the process is
//!   killed, within about 10 s when its machine vanishes).
//! - One node sweeps at a time: the sweeper's turn is [`SWEEP_LOCK`], held
//!   on a connection of its own that is closed when the turn ends.
//! - A flush covers every write whose call returned before the flush
//!   began; it skips the database when no write was made since the last
//!   flush that covered them all.
//! - Calls are asynchronous (`tokio-postgres`, connections pooled by
//!   `deadpool-postgres`, statements prepared once per connection); none
//!   blocks a runtime thread. A call dropped by its caller (its request
//!   went away) may or may not have been applied, as in a crash; a
//!   transaction it left open is rolled back, and a write it may have made
//!   is covered by the next flush.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row};

use super::{CasConflict, CasResult, Head, Pair, Store, StoreError, scan_prefix};

/// The schema, one statement list per version; applied in order at open.
const MIGRATIONS: &[&str] = &[
    // Version 1: every key and value of the service.
    "CREATE TABLE baton_kv (key bytea PRIMARY KEY, value bytea NOT NULL)",
];

/// Serialises migrations between servers that start at once.
const MIGRATION_LOCK: i64 = 0x6261_746f_6e5f_6d69;
/// Held by the node that sweeps. Node ids are below 2^62, these numbers
/// above it.
const SWEEP_LOCK: i64 = 0x6261_746f_6e5f_7377;
/// Connections a node keeps open at most; calls beyond wait for one.
const POOL_SIZE: usize = 16;
/// How long a call waits for a free connection.
const POOL_WAIT: Duration = Duration::from_secs(10);
/// How long a connection attempt may take (unless the URL says).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The settings of every connection: writes do not wait for the disk
/// (a flush does), and notices below warnings stay in the database's log.
const SESSION_OPTIONS: &str = "-c synchronous_commit=off -c client_min_messages=warning";

/// A PostgreSQL database.
pub struct PostgresStore {
    /// How to connect (the URL's settings and [`SESSION_OPTIONS`]).
    config: tokio_postgres::Config,
    pool: Pool,
    /// This node's id, the number of the advisory lock it holds.
    node: u64,
    /// The connection that holds the node's lock (its life is the node's).
    _node_lock: Client,
    /// Writes whose call returned (or was dropped), counted from open.
    written: AtomicU64,
    /// The count of writes the last flush covered.
    flushed: AtomicU64,
    /// This node's [`flush_transaction`].
    flush_sql: String,
}

/// Where each node's flushes write (a transaction that writes nothing
/// commits without waiting for the disk, whatever its settings).
const FLUSH_ROWS: &[u8] = b"\x00baton/flush/";

/// The transaction of a flush by `node`: it rewrites the node's own row
/// (no other node waits for its lock) and commits synchronously, so it
/// returns once PostgreSQL's log is on disk up to its commit. One simple
/// query, one round trip; the key is spelled with `decode`, which reads
/// the same under any `standard_conforming_strings`.
fn flush_transaction(node: u64) -> String {
    let key = hex::encode([FLUSH_ROWS, &node.to_be_bytes()[..]].concat());
    format!(
        "BEGIN; SET LOCAL synchronous_commit = on; \
         INSERT INTO baton_kv (key, value) VALUES (decode('{key}', 'hex'), ''::bytea) \
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value; COMMIT"
    )
}

fn database(error: tokio_postgres::Error) -> StoreError {
    StoreError::Database(format!("postgres: {}", with_causes(&error)))
}

/// `error` and each error that caused it, joined by colons.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

/// A connection the pool could not give: the database's own error.
fn unavailable(error: deadpool_postgres::PoolError) -> StoreError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => refused(with_causes(&error)),
        other => refused(other),
    }
}

fn refused(error: impl std::fmt::Display) -> StoreError {
    StoreError::Database(format!(
        "cannot connect to the PostgreSQL database: {error}"
    ))
}

/// The connection settings of `url`, with a connect timeout unless it
/// gives one, and [`SESSION_OPTIONS`] after its own options.
fn connection_config(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(refused)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let options = match config.get_options() {
        Some(own) if !own.trim().is_empty() => format!("{own} {SESSION_OPTIONS}"),
        _ => SESSION_OPTIONS.to_owned(),
    };
    config.options(options);
    Ok(config)
}

/// A connection of its own (not pooled): its driver runs in a task, and
/// dropping the client closes it.
async fn connect(config: &tokio_postgres::Config) -> Result<Client, StoreError> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| refused(with_causes(&e)))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "a PostgreSQL connection ended");
        }
    });
    Ok(client)
}

/// The first key after every key that starts with `prefix`, if any.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Counts a write for the next flush when the call returns or is dropped
/// (a dropped write may have been committed), unless it was made durable
/// itself ([`CountedWrite::durable`]).
struct CountedWrite<'a> {
    written: &'a AtomicU64,
    counts: bool,
}

impl<'a> CountedWrite<'a> {
    fn new(written: &'a AtomicU64) -> Self {
        Self {
            written,
            counts: true,
        }
    }

    /// The write committed synchronously: no flush needs to cover it.
    fn durable(mut self) {
        self.counts = false;
    }
}

impl Drop for CountedWrite<'_> {
    fn drop(&mut self) {
        if self.counts {
            self.written.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl PostgresStore {
    /// Connects to `url`, creates or migrates the schema, and joins the
    /// nodes that use the database (with a new node id).
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let config = connection_config(url)?;
        let mut node_lock = connect(&config).await?;
        migrate(&mut node_lock).await?;
        let node = super::new_node_id();
        hold_node_lock(&node_lock, node).await?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(refused)?;
        let store = Self {
            config,
            pool,
            node,
            _node_lock: node_lock,
            written: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
            flush_sql: flush_transaction(node),
        };
        // A failure only leaves them for the sweeper.
        let _ = store.forget_dead_nodes().await;
        Ok(store)
    }

    /// A pooled connection (a new one when none is idle).
    async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(unavailable)
    }

    /// Runs one statement that writes, counted for the next flush.
    async fn write(&self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        let _counted = CountedWrite::new(&self.written);
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(database)?;
        client.execute(&statement, params).await.map_err(database)
    }

    /// The rows of one statement that reads.
    async fn read(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(database)?;
        client.query(&statement, params).await.map_err(database)
    }

    /// One page of a scan: the keys that start with `prefix`, after
    /// `after` (or from the first), `limit` at most, with `columns` of
    /// each; a `head` length is parameter `$3` of `columns`.
    async fn page(
        &self,
        columns: &str,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
        head: Option<i32>,
    ) -> Result<Vec<Row>, StoreError> {
        let end = prefix_end(prefix);
        let (low, low_op) = match after {
            Some(after) => (after, ">"),
            None => (prefix, ">="),
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&low, &limit];
        if let Some(head) = &head {
            params.push(head);
        }
        let mut sql = format!("SELECT {columns} FROM baton_kv WHERE key {low_op} $1");
        if let Some(end) = &end {
            params.push(end);
            sql.push_str(&format!(" AND key < ${}", params.len()));
        }
        sql.push_str(" ORDER BY key LIMIT $2");
        self.read(&sql, &params).await
    }

    /// Writes a batch as one statement (atomic, as every statement is;
    /// one round trip): its deletes and its puts, or, with a `guard`,
    /// first locking the guard's row and writing nothing (and reporting
    /// what it holds) when it holds another value. Applied as the puts and
    /// then the deletes in order would be: a key put twice takes its last
    /// value, a key put and deleted is deleted (one statement may change
    /// a row only once).
    ///
    /// With [`Commit::Now`] the statement runs between two session
    /// settings sent with it (still one round trip), so its commit waits
    /// for PostgreSQL's log, and with it every commit before it: a flush
    /// after it has nothing to do unless other writes came since it began.
    /// A failure counts it as a write (it may have committed).
    async fn batch(
        &self,
        guard: Option<(&[u8], &[u8])>,
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
        commit: Commit,
    ) -> CasResult {
        let counted = CountedWrite::new(&self.written);
        let before = self.written.load(Ordering::Acquire);
        let (keys, values) = final_puts(puts, deletes);
        let deletes: Vec<&[u8]> = deletes.to_vec();
        let client = self.client().await?;
        let sql = if guard.is_some() {
            GUARDED_BATCH
        } else {
            BATCH
        };
        let statement = client.prepare_cached(sql).await.map_err(database)?;
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(5);
        if let Some((key, expected)) = &guard {
            params.extend([key as &(dyn ToSql + Sync), expected]);
        }
        params.extend([&keys as &(dyn ToSql + Sync), &values, &deletes]);
        let rows = match commit {
            Commit::AtNextFlush => client.query(&statement, &params).await,
            Commit::Now => {
                let (on, rows, off) = futures_util::future::join3(
                    client.batch_execute(SYNCHRONOUS_ON),
                    client.query(&statement, &params),
                    client.batch_execute(SYNCHRONOUS_OFF),
                )
                .await;
                on.and(rows).and_then(|rows| off.map(|()| rows))
            }
        }
        .map_err(database)?;
        if commit == Commit::Now {
            counted.durable();
            // Every write counted before this one began had committed
            // before it, so its synchronous commit covers them.
            self.flushed.fetch_max(before, Ordering::AcqRel);
        }
        let Some((_, expected)) = guard else {
            return Ok(Ok(()));
        };
        let current: Option<Vec<u8>> = rows.first().and_then(|row| row.get(0));
        if current.as_deref() == Some(expected) {
            Ok(Ok(()))
        } else {
            Ok(Err(CasConflict { current }))
        }
    }
}

/// When a batch's commit reaches the disk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Commit {
    /// At the next flush (the session's `synchronous_commit = off`).
    AtNextFlush,
    /// Before the call returns.
    Now,
}

/// The keys and values a batch leaves put: each key's last value, and no
/// key the batch also deletes.
fn final_puts<'a>(
    puts: &[(&'a [u8], &'a [u8])],
    deletes: &[&[u8]],
) -> (Vec<&'a [u8]>, Vec<&'a [u8]>) {
    let mut last: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for (index, (key, _)) in puts.iter().enumerate() {
        last.insert(key, index);
    }
    puts.iter()
        .enumerate()
        .filter(|(index, (key, _))| last.get(key) == Some(index) && !deletes.contains(key))
        .map(|(_, (key, value))| (*key, *value))
        .unzip()
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Takes the advisory lock numbered `node` on `connection`, with TCP
/// keepalives so that PostgreSQL notices a vanished machine (and lets the
/// lock go) within about 10 s.
async fn hold_node_lock(connection: &Client, node: u64) -> Result<(), StoreError> {
    connection
        .batch_execute(
            "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 2",
        )
        .await
        .map_err(database)?;
    let number = i64::try_from(node).map_err(|_| StoreError::Database("node id".into()))?;
    connection
        .execute("SELECT pg_advisory_lock($1)", &[&number])
        .await
        .map_err(database)?;
    Ok(())
}

/// Whether the advisory lock numbered `node` is held in this database: a
/// bigint lock shows in `pg_locks` as its high and low halves.
const NODE_ALIVE: &str = "SELECT EXISTS (SELECT 1 FROM pg_locks \
    WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
    AND classid = $1 AND objid = $2)";

/// Creates or migrates the schema; refuses a newer one.
async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(database)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(database)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS baton_schema (version integer NOT NULL)")
        .await
        .map_err(database)?;
    let version: Option<i32> = tx
        .query_opt("SELECT max(version) FROM baton_schema", &[])
        .await
        .map_err(database)?
        .and_then(|row| row.get(0));
    let version = usize::try_from(version.unwrap_or(0)).unwrap_or(0);
    if version > MIGRATIONS.len() {
        return Err(StoreError::Database(format!(
            "the PostgreSQL database's baton schema is version {version}, newer than this build knows ({}): run a newer baton, or give --store another database",
            MIGRATIONS.len()
        )));
    }
    for (index, statements) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.batch_execute(statements).await.map_err(database)?;
        let applied = i32::try_from(index + 1).unwrap_or(i32::MAX);
        tx.execute("DELETE FROM baton_schema", &[])
            .await
            .map_err(database)?;
        tx.execute(
            "INSERT INTO baton_schema (version) VALUES ($1)",
            &[&applied],
        )
        .await
        .map_err(database)?;
    }
    tx.commit().await.map_err(database)
}

const SELECT: &str = "SELECT value FROM baton_kv WHERE key = $1";
/// An unguarded batch: `$1`/`$2` the keys and values to put, `$3` the
/// keys to delete (disjoint from `$1`). A data-modifying `WITH` runs
/// whether or not the statement reads it.
const BATCH: &str = "WITH deleted AS (DELETE FROM baton_kv WHERE key = ANY($3::bytea[])) \
    INSERT INTO baton_kv (key, value) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS p(k, v) \
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";
/// A guarded batch: the guard's row `$1` locked, and the batch (`$3`/`$4`
/// to put, `$5` to delete) applied only if it holds `$2`; returns what the
/// guard's row held (null when absent).
const GUARDED_BATCH: &str = "WITH guard AS (SELECT value FROM baton_kv WHERE key = $1 FOR UPDATE), \
    allowed AS (SELECT 1 FROM guard WHERE value = $2), \
    deleted AS (DELETE FROM baton_kv WHERE key = ANY($5::bytea[]) AND EXISTS (SELECT 1 FROM allowed)), \
    written AS (INSERT INTO baton_kv (key, value) \
        SELECT k, v FROM unnest($3::bytea[], $4::bytea[]) AS p(k, v) WHERE EXISTS (SELECT 1 FROM allowed) \
        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value) \
    SELECT (SELECT value FROM guard)";
/// Around a batch committed at once ([`Commit::Now`]).
const SYNCHRONOUS_ON: &str = "SET synchronous_commit = on";
const SYNCHRONOUS_OFF: &str = "SET synchronous_commit = off";
const UPSERT: &str = "INSERT INTO baton_kv (key, value) VALUES ($1, $2) \
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";
const DELETE: &str = "DELETE FROM baton_kv WHERE key = $1";
const UPDATE_IF: &str = "UPDATE baton_kv SET value = $3 WHERE key = $1 AND value = $2";
const DELETE_IF: &str = "DELETE FROM baton_kv WHERE key = $1 AND value = $2";
const INSERT_IF_ABSENT: &str =
    "INSERT INTO baton_kv (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING";

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let rows = self.read(SELECT, &[&key]).await?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.write(UPSERT, &[&key, &value]).await.map(drop)
    }

    async fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
        self.write(DELETE, &[&key]).await.map(drop)
    }

    async fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> CasResult {
        let changed = match (expected, new) {
            (Some(old), Some(value)) => self.write(UPDATE_IF, &[&key, &old, &value]).await?,
            (Some(old), None) => self.write(DELETE_IF, &[&key, &old]).await?,
            (None, Some(value)) => self.write(INSERT_IF_ABSENT, &[&key, &value]).await?,
            (None, None) => u64::from(self.get(key).await?.is_none()),
        };
        if changed == 1 {
            return Ok(Ok(()));
        }
        let current = self.get(key).await?;
        Ok(Err(CasConflict { current }))
    }

    async fn pairs_after(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Pair>, StoreError> {
        let rows = self.page("key, value", prefix, after, limit, None).await?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    async fn heads_after(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        head_len: usize,
        limit: usize,
    ) -> Result<Vec<Head>, StoreError> {
        let head_len = i32::try_from(head_len).unwrap_or(i32::MAX);
        let columns = "key, substring(value from 1 for $3), length(value)";
        let rows = self
            .page(columns, prefix, after, limit, Some(head_len))
            .await?;
        Ok(rows
            .iter()
            .map(|row| Head {
                key: row.get(0),
                head: row.get(1),
                len: u64::try_from(row.get::<_, i32>(2)).unwrap_or(0),
            })
            .collect())
    }

    /// No: a claim's extra transaction (0.3 ms on loopback) costs as much
    /// as the flush it would hide.
    fn flush_while_running(&self) -> bool {
        false
    }

    /// One statement: one round trip.
    async fn put_all(&self, puts: &[(&[u8], &[u8])]) -> Result<(), StoreError> {
        self.apply_batch(puts, &[]).await
    }

    /// A pause: one guarded statement committed at once (one round trip
    /// and one wait for the disk, which the flush after it then skips).
    async fn put_then_swap(
        &self,
        puts: &[(&[u8], &[u8])],
        key: &[u8],
        expected: &[u8],
        new: &[u8],
    ) -> CasResult {
        let all = super::with_swap(puts, key, new);
        self.batch(Some((key, expected)), &all, &[], Commit::Now)
            .await
    }

    /// One guarded statement: one round trip, all or nothing.
    async fn swap_then_put(
        &self,
        key: &[u8],
        expected: &[u8],
        new: &[u8],
        puts: &[(&[u8], &[u8])],
    ) -> CasResult {
        let all = super::with_swap(puts, key, new);
        self.apply_batch_if((key, expected), &all, &[]).await
    }

    async fn apply_batch(
        &self,
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> Result<(), StoreError> {
        match self.batch(None, puts, deletes, Commit::AtNextFlush).await? {
            Ok(()) => Ok(()),
            Err(conflict) => Err(StoreError::Database(format!(
                "an unguarded batch reported a conflict: {conflict:?}"
            ))),
        }
    }

    async fn apply_batch_if(
        &self,
        guard: (&[u8], &[u8]),
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> CasResult {
        self.batch(Some(guard), puts, deletes, Commit::AtNextFlush)
            .await
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let written = self.written.load(Ordering::Acquire);
        if self.flushed.load(Ordering::Acquire) >= written {
            return Ok(());
        }
        let client = self.client().await?;
        client
            .batch_execute(&self.flush_sql)
            .await
            .map_err(database)?;
        self.flushed.fetch_max(written, Ordering::AcqRel);
        Ok(())
    }

    async fn check(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.simple_query("SELECT 1").await.map_err(database)?;
        Ok(())
    }

    fn shared(&self) -> bool {
        true
    }

    fn node(&self) -> u64 {
        self.node
    }

    async fn node_alive(&self, node: u64) -> Result<bool, StoreError> {
        if node == self.node {
            return Ok(true);
        }
        if node == 0 {
            return Ok(false);
        }
        let (high, low) = ((node >> 32) as u32, node as u32);
        let alive = self.read(NODE_ALIVE, &[&high, &low]).await?;
        Ok(alive.first().is_some_and(|row| row.get(0)))
    }

    /// Deletes the flush rows of nodes that are gone (killed nodes leave
    /// theirs).
    async fn forget_dead_nodes(&self) -> Result<(), StoreError> {
        for (key, _) in scan_prefix(self, FLUSH_ROWS).all().await? {
            let node = key
                .strip_prefix(FLUSH_ROWS)
                .and_then(|id| id.try_into().ok())
                .map(u64::from_be_bytes);
            let dead = match node {
                None => true,
                Some(node) => !self.node_alive(node).await?,
            };
            if dead {
                self.delete(&key).await?;
            }
        }
        Ok(())
    }

    async fn sweep_turn(&self) -> Result<Option<super::SweepTurn>, StoreError> {
        let connection = connect(&self.config).await?;
        let ours: bool = connection
            .query_one("SELECT pg_try_advisory_lock($1)", &[&SWEEP_LOCK])
            .await
            .map_err(database)?
            .get(0);
        // Dropping the connection ends the turn.
        Ok(ours.then(|| Box::new(connection) as super::SweepTurn))
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn the_end_of_a_prefix_is_the_first_key_after_it() {
        assert_eq!(prefix_end(b"r/"), Some(b"r0".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
