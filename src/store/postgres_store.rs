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
//! Compare-and-swap is a conditional `UPDATE`/`INSERT`/`DELETE`; a guarded
//! batch locks its guard's row (`SELECT … FOR UPDATE`) in the batch's
//! transaction. Scans read pages of [`SCAN_PAGE`] keys in key order
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
//! - Calls block their thread: on a tokio worker they run inside
//!   `block_in_place`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use postgres::{Client, NoTls, Row, Statement};

use super::{CasConflict, CasResult, Head, HeadScan, Pair, Scan, Store, StoreError, blocking};

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
/// Keys read per page of a scan.
const SCAN_PAGE: i64 = 256;
/// Idle connections kept for reuse.
const IDLE_CONNECTIONS: usize = 16;

/// A PostgreSQL database.
pub struct PostgresStore {
    url: String,
    idle: Mutex<Vec<Connection>>,
    /// This node's id, the number of the advisory lock it holds.
    node: u64,
    /// The connection that holds the node's lock.
    node_lock: Mutex<Option<Client>>,
    /// Writes whose call returned, counted from open.
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

fn database(error: postgres::Error) -> StoreError {
    StoreError::Database(format!("postgres: {error}"))
}

/// How long a connection attempt may take (unless the URL says).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn connect(url: &str) -> Result<Client, StoreError> {
    let refused = |e: postgres::Error| {
        StoreError::Database(format!("cannot connect to the PostgreSQL database: {e}"))
    };
    let mut config: postgres::Config = url.parse().map_err(refused)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let mut client = config.connect(NoTls).map_err(refused)?;
    client
        .batch_execute("SET synchronous_commit = off; SET client_min_messages = warning")
        .map_err(database)?;
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

/// A client's drop talks to the server (it blocks): the store's clients
/// are dropped the way every call is made ([`blocking`]), never straight
/// on a runtime's thread (where the driver's own runtime would panic).
impl Drop for PostgresStore {
    fn drop(&mut self) {
        let idle = self.idle.get_mut().map(std::mem::take).unwrap_or_default();
        let node_lock = self.node_lock.get_mut().ok().and_then(Option::take);
        blocking(move || drop((idle, node_lock)));
    }
}

impl PostgresStore {
    /// Connects to `url`, creates or migrates the schema, and joins the
    /// nodes that use the database (with a new node id).
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let store = Self::join(url)?;
        store.forget_flush_rows_of_dead_nodes();
        Ok(store)
    }

    /// [`PostgresStore::open`]'s connection, schema and node lock.
    fn join(url: &str) -> Result<Self, StoreError> {
        blocking(|| {
            let mut connection = connect(url)?;
            migrate(&mut connection)?;
            let node = super::new_node_id();
            hold_node_lock(&mut connection, node)?;
            Ok(Self {
                url: url.to_owned(),
                idle: Mutex::new(Vec::new()),
                node,
                node_lock: Mutex::new(Some(connection)),
                written: AtomicU64::new(0),
                flushed: AtomicU64::new(0),
                flush_sql: flush_transaction(node),
            })
        })
    }

    /// Runs `work` on a pooled connection (a new one when none is idle);
    /// the connection goes back unless it broke.
    fn with_client<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        blocking(|| {
            let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
            let mut connection = match pooled {
                Some(connection) if !connection.client.is_closed() => connection,
                _ => Connection::new(connect(&self.url)?),
            };
            let result = work(&mut connection).map_err(database);
            if !connection.client.is_closed()
                && let Ok(mut idle) = self.idle.lock()
                && idle.len() < IDLE_CONNECTIONS
            {
                idle.push(connection);
            }
            result
        })
    }

    /// Deletes the flush rows of nodes that are gone (killed nodes leave
    /// theirs); a failure only leaves them for the next node that starts.
    fn forget_flush_rows_of_dead_nodes(&self) {
        let keys: Vec<Vec<u8>> = self
            .scan_prefix(FLUSH_ROWS)
            .filter_map(|pair| pair.ok().map(|(key, _)| key))
            .collect();
        for key in keys {
            let node = key
                .strip_prefix(FLUSH_ROWS)
                .and_then(|id| id.try_into().ok())
                .map(u64::from_be_bytes);
            let dead = node.is_none_or(|node| self.node_alive(node).is_ok_and(|alive| !alive));
            if dead {
                let _ = self.delete(&key);
            }
        }
    }

    /// [`PostgresStore::with_client`] for a write: counted once it
    /// returns, for the next flush.
    fn write<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let result = self.with_client(work);
        self.written.fetch_add(1, Ordering::AcqRel);
        result
    }

    /// One page of a scan: the keys that start with `prefix`, after
    /// `after` (or from the first), with `columns` of each; a `head`
    /// length is parameter `$3` of `columns`.
    fn page(
        &self,
        columns: &str,
        prefix: &[u8],
        after: Option<&[u8]>,
        head: Option<i32>,
    ) -> Result<Vec<postgres::Row>, StoreError> {
        let end = prefix_end(prefix);
        let (low, low_op) = match after {
            Some(after) => (after, ">"),
            None => (prefix, ">="),
        };
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&low, &SCAN_PAGE];
        if let Some(head) = &head {
            params.push(head);
        }
        let mut sql = format!("SELECT {columns} FROM baton_kv WHERE key {low_op} $1");
        if let Some(end) = &end {
            params.push(end);
            sql.push_str(&format!(" AND key < ${}", params.len()));
        }
        sql.push_str(" ORDER BY key LIMIT $2");
        self.with_client(|connection| connection.query(&sql, &params))
    }
}

/// A pooled connection and the statements prepared on it: each statement
/// is parsed by the server once per connection, then only bound and run
/// (one round trip instead of two).
struct Connection {
    client: Client,
    prepared: HashMap<String, Statement>,
}

type Params<'a> = &'a [&'a (dyn postgres::types::ToSql + Sync)];

impl Connection {
    fn new(client: Client) -> Self {
        Connection {
            client,
            prepared: HashMap::new(),
        }
    }

    /// `sql`, prepared on this connection once.
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.prepared.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, postgres::Error> {
        let statement = self.statement(sql)?;
        self.client.execute(&statement, params)
    }

    fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error> {
        let statement = self.statement(sql)?;
        self.client.query(&statement, params)
    }

    /// The value of `key`.
    fn current(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, postgres::Error> {
        let statement = self.statement(SELECT)?;
        Ok(self
            .client
            .query_opt(&statement, &[&key])?
            .map(|row| row.get(0)))
    }

    /// The statements a batch writes with.
    fn batch_statements(&mut self) -> Result<BatchStatements, postgres::Error> {
        Ok(BatchStatements {
            upsert: self.statement(UPSERT)?,
            delete: self.statement(DELETE)?,
        })
    }
}

struct BatchStatements {
    upsert: Statement,
    delete: Statement,
}

/// Takes the advisory lock numbered `node` on `connection`, with TCP
/// keepalives so that PostgreSQL notices a vanished machine (and lets the
/// lock go) within about 10 s.
fn hold_node_lock(connection: &mut Client, node: u64) -> Result<(), StoreError> {
    connection
        .batch_execute(
            "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 2",
        )
        .map_err(database)?;
    let number = i64::try_from(node).map_err(|_| StoreError::Database("node id".into()))?;
    connection
        .execute("SELECT pg_advisory_lock($1)", &[&number])
        .map_err(database)?;
    Ok(())
}

/// The connection that holds [`SWEEP_LOCK`]: closing it ends the turn.
/// A client's drop talks to the server (it blocks), so it is dropped the
/// way every call is made ([`blocking`]), never straight on a runtime
/// worker.
struct SweepConnection(Option<Client>);

impl Drop for SweepConnection {
    fn drop(&mut self) {
        if let Some(connection) = self.0.take() {
            blocking(move || drop(connection));
        }
    }
}

/// Whether the advisory lock numbered `node` is held in this database: a
/// bigint lock shows in `pg_locks` as its high and low halves.
const NODE_ALIVE: &str = "SELECT EXISTS (SELECT 1 FROM pg_locks \
    WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
    AND classid = $1 AND objid = $2)";

/// Creates or migrates the schema; refuses a newer one.
fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(database)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(database)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS baton_schema (version integer NOT NULL)")
        .map_err(database)?;
    let version: Option<i32> = tx
        .query_opt("SELECT max(version) FROM baton_schema", &[])
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
        tx.batch_execute(statements).map_err(database)?;
        let applied = i32::try_from(index + 1).unwrap_or(i32::MAX);
        tx.execute("DELETE FROM baton_schema", &[])
            .map_err(database)?;
        tx.execute(
            "INSERT INTO baton_schema (version) VALUES ($1)",
            &[&applied],
        )
        .map_err(database)?;
    }
    tx.commit().map_err(database)
}

/// A scan read a page at a time: `fetch` gives the items after a key (or
/// from the first), [`SCAN_PAGE`] at most; `key_of` names an item's key.
fn paged<'a, T: Send + 'a>(
    mut fetch: impl FnMut(Option<&[u8]>) -> Result<Vec<T>, StoreError> + Send + 'a,
    key_of: fn(&T) -> Vec<u8>,
) -> Box<dyn Iterator<Item = Result<T, StoreError>> + Send + 'a> {
    let mut after: Option<Vec<u8>> = None;
    let mut page: std::vec::IntoIter<T> = Vec::new().into_iter();
    let mut done = false;
    Box::new(std::iter::from_fn(move || {
        loop {
            if let Some(item) = page.next() {
                return Some(Ok(item));
            }
            if done {
                return None;
            }
            let items = match fetch(after.as_deref()) {
                Ok(items) => items,
                Err(error) => {
                    done = true;
                    return Some(Err(error));
                }
            };
            done = (items.len() as i64) < SCAN_PAGE;
            after = items.last().map(key_of);
            page = items.into_iter();
        }
    }))
}

const SELECT: &str = "SELECT value FROM baton_kv WHERE key = $1";
const SELECT_FOR_UPDATE: &str = "SELECT value FROM baton_kv WHERE key = $1 FOR UPDATE";
const UPSERT: &str = "INSERT INTO baton_kv (key, value) VALUES ($1, $2) \
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";
const DELETE: &str = "DELETE FROM baton_kv WHERE key = $1";
const UPDATE_IF: &str = "UPDATE baton_kv SET value = $3 WHERE key = $1 AND value = $2";
const DELETE_IF: &str = "DELETE FROM baton_kv WHERE key = $1 AND value = $2";
const INSERT_IF_ABSENT: &str =
    "INSERT INTO baton_kv (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING";

fn write_batch(
    tx: &mut postgres::Transaction<'_>,
    statements: &BatchStatements,
    puts: &[(&[u8], &[u8])],
    deletes: &[&[u8]],
) -> Result<(), postgres::Error> {
    for (key, value) in puts {
        tx.execute(&statements.upsert, &[key, value])?;
    }
    for key in deletes {
        tx.execute(&statements.delete, &[key])?;
    }
    Ok(())
}

impl Store for PostgresStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_client(|connection| connection.current(key))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.write(|connection| connection.execute(UPSERT, &[&key, &value]).map(drop))
    }

    fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
        self.write(|connection| connection.execute(DELETE, &[&key]).map(drop))
    }

    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> CasResult {
        self.write(|connection| {
            let changed = match (expected, new) {
                (Some(old), Some(value)) => connection.execute(UPDATE_IF, &[&key, &old, &value])?,
                (Some(old), None) => connection.execute(DELETE_IF, &[&key, &old])?,
                (None, Some(value)) => connection.execute(INSERT_IF_ABSENT, &[&key, &value])?,
                (None, None) => u64::from(connection.current(key)?.is_none()),
            };
            if changed == 1 {
                return Ok(Ok(()));
            }
            let current = connection.current(key)?;
            Ok(Err(CasConflict { current }))
        })
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Scan<'_> {
        let prefix = prefix.to_vec();
        paged(
            move |after| {
                let rows = self.page("key, value", &prefix, after, None)?;
                Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
            },
            |(key, _): &Pair| key.clone(),
        )
    }

    fn scan_heads(&self, prefix: &[u8], head_len: usize) -> HeadScan<'_> {
        let prefix = prefix.to_vec();
        let head_len = i32::try_from(head_len).unwrap_or(i32::MAX);
        paged(
            move |after| {
                let columns = "key, substring(value from 1 for $3), length(value)";
                let rows = self.page(columns, &prefix, after, Some(head_len))?;
                Ok(rows
                    .iter()
                    .map(|row| Head {
                        key: row.get(0),
                        head: row.get(1),
                        len: u64::try_from(row.get::<_, i32>(2)).unwrap_or(0),
                    })
                    .collect())
            },
            |head: &Head| head.key.clone(),
        )
    }

    fn apply_batch(&self, puts: &[(&[u8], &[u8])], deletes: &[&[u8]]) -> Result<(), StoreError> {
        self.write(|connection| {
            let statements = connection.batch_statements()?;
            let mut tx = connection.client.transaction()?;
            write_batch(&mut tx, &statements, puts, deletes)?;
            tx.commit()
        })
    }

    fn apply_batch_if(
        &self,
        guard: (&[u8], &[u8]),
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> CasResult {
        self.write(|connection| {
            let statements = connection.batch_statements()?;
            let lock_guard = connection.statement(SELECT_FOR_UPDATE)?;
            let mut tx = connection.client.transaction()?;
            let current: Option<Vec<u8>> = tx
                .query_opt(&lock_guard, &[&guard.0])?
                .map(|row| row.get(0));
            if current.as_deref() != Some(guard.1) {
                tx.rollback()?;
                return Ok(Err(CasConflict { current }));
            }
            write_batch(&mut tx, &statements, puts, deletes)?;
            tx.commit()?;
            Ok(Ok(()))
        })
    }

    fn flush(&self) -> Result<(), StoreError> {
        let written = self.written.load(Ordering::Acquire);
        if self.flushed.load(Ordering::Acquire) >= written {
            return Ok(());
        }
        self.with_client(|connection| connection.client.batch_execute(&self.flush_sql))?;
        self.flushed.fetch_max(written, Ordering::AcqRel);
        Ok(())
    }

    fn check(&self) -> Result<(), StoreError> {
        self.with_client(|connection| connection.client.simple_query("SELECT 1").map(drop))
    }

    fn shared(&self) -> bool {
        true
    }

    fn node(&self) -> u64 {
        self.node
    }

    fn node_alive(&self, node: u64) -> Result<bool, StoreError> {
        if node == self.node {
            return Ok(true);
        }
        if node == 0 {
            return Ok(false);
        }
        let (high, low) = ((node >> 32) as u32, node as u32);
        self.with_client(|connection| {
            let alive = connection.query(NODE_ALIVE, &[&high, &low])?;
            Ok(alive.first().is_some_and(|row| row.get(0)))
        })
    }

    fn sweep_turn(&self) -> Result<Option<super::SweepTurn>, StoreError> {
        blocking(|| {
            let mut connection = connect(&self.url)?;
            let ours: bool = connection
                .query_one("SELECT pg_try_advisory_lock($1)", &[&SWEEP_LOCK])
                .map_err(database)?
                .get(0);
            Ok(ours.then(|| Box::new(SweepConnection(Some(connection))) as super::SweepTurn))
        })
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
