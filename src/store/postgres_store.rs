//! A [`Store`] on PostgreSQL (`--store postgres://…`): one table of keys
//! and values, the same contract as the embedded sled store.
//!
//! Every write is its own committed transaction (with
//! `synchronous_commit = on`, set on each connection), so it is durable
//! when the call returns and [`Store::flush`] has nothing left to do.
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
//! - One server per database: the store holds a session-level advisory
//!   lock ([`NODE_LOCK`]) for its whole life, and a second server is
//!   refused. The service keeps per-process state (parked children,
//!   quota counters, recovery of rounds left running) that several nodes
//!   on one database would contradict.
//! - Calls block their thread: on a tokio worker they run inside
//!   `block_in_place`.

use std::sync::Mutex;

use postgres::{Client, NoTls};

use super::{CasConflict, CasResult, Head, HeadScan, Pair, Scan, Store, StoreError, blocking};

/// The schema, one statement list per version; applied in order at open.
const MIGRATIONS: &[&str] = &[
    // Version 1: every key and value of the service.
    "CREATE TABLE baton_kv (key bytea PRIMARY KEY, value bytea NOT NULL)",
];

/// Serialises migrations between servers that start at once.
const MIGRATION_LOCK: i64 = 0x6261_746f_6e5f_6d69;
/// Held by the one server that uses the database.
const NODE_LOCK: i64 = 0x6261_746f_6e5f_6e6f;
/// Keys read per page of a scan.
const SCAN_PAGE: i64 = 256;
/// Idle connections kept for reuse.
const IDLE_CONNECTIONS: usize = 16;

/// A PostgreSQL database.
pub struct PostgresStore {
    url: String,
    idle: Mutex<Vec<Client>>,
    /// The connection that holds [`NODE_LOCK`].
    _node: Mutex<Client>,
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
        .batch_execute("SET synchronous_commit = on")
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

impl PostgresStore {
    /// Connects to `url`, creates or migrates the schema, and takes the
    /// database for this server.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        blocking(|| {
            let mut node = connect(url)?;
            migrate(&mut node)?;
            take_node_lock(&mut node)?;
            Ok(Self {
                url: url.to_owned(),
                idle: Mutex::new(Vec::new()),
                _node: Mutex::new(node),
            })
        })
    }

    /// Runs `work` on a pooled connection (a new one when none is idle);
    /// the connection goes back unless it broke.
    fn with_client<T>(
        &self,
        work: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        blocking(|| {
            let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
            let mut client = match pooled {
                Some(client) if !client.is_closed() => client,
                _ => connect(&self.url)?,
            };
            let result = work(&mut client).map_err(database);
            if !client.is_closed()
                && let Ok(mut idle) = self.idle.lock()
                && idle.len() < IDLE_CONNECTIONS
            {
                idle.push(client);
            }
            result
        })
    }

    fn current(client: &mut Client, key: &[u8]) -> Result<Option<Vec<u8>>, postgres::Error> {
        Ok(client
            .query_opt("SELECT value FROM baton_kv WHERE key = $1", &[&key])?
            .map(|row| row.get(0)))
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
        self.with_client(|client| client.query(&sql, &params))
    }
}

/// Takes [`NODE_LOCK`] on `node`, waiting up to [`NODE_LOCK_WAIT`] for a
/// server that died: PostgreSQL releases its lock when it notices the
/// connection is gone, at once after a kill, within about 10 s (the
/// keepalives set here) when its machine vanished.
fn take_node_lock(node: &mut Client) -> Result<(), StoreError> {
    node.batch_execute(
        "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 2",
    )
    .map_err(database)?;
    let deadline = std::time::Instant::now() + NODE_LOCK_WAIT;
    let mut announced = false;
    loop {
        let locked: bool = node
            .query_one("SELECT pg_try_advisory_lock($1)", &[&NODE_LOCK])
            .map_err(database)?
            .get(0);
        if locked {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(StoreError::DatabaseTaken);
        }
        if !announced {
            tracing::info!(
                "another baton server holds the PostgreSQL database; waiting up to {} s for it to end",
                NODE_LOCK_WAIT.as_secs()
            );
            announced = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// How long [`take_node_lock`] waits.
const NODE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

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

const UPSERT: &str = "INSERT INTO baton_kv (key, value) VALUES ($1, $2) \
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";

fn write_batch(
    tx: &mut postgres::Transaction<'_>,
    puts: &[(&[u8], &[u8])],
    deletes: &[&[u8]],
) -> Result<(), postgres::Error> {
    for (key, value) in puts {
        tx.execute(UPSERT, &[key, value])?;
    }
    for key in deletes {
        tx.execute("DELETE FROM baton_kv WHERE key = $1", &[key])?;
    }
    Ok(())
}

impl Store for PostgresStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_client(|client| Self::current(client, key))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.with_client(|client| client.execute(UPSERT, &[&key, &value]).map(drop))
    }

    fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
        self.with_client(|client| {
            client
                .execute("DELETE FROM baton_kv WHERE key = $1", &[&key])
                .map(drop)
        })
    }

    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> CasResult {
        self.with_client(|client| {
            let changed = match (expected, new) {
                (Some(old), Some(value)) => client.execute(
                    "UPDATE baton_kv SET value = $3 WHERE key = $1 AND value = $2",
                    &[&key, &old, &value],
                )?,
                (Some(old), None) => client.execute(
                    "DELETE FROM baton_kv WHERE key = $1 AND value = $2",
                    &[&key, &old],
                )?,
                (None, Some(value)) => client.execute(
                    "INSERT INTO baton_kv (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    &[&key, &value],
                )?,
                (None, None) => u64::from(Self::current(client, key)?.is_none()),
            };
            if changed == 1 {
                return Ok(Ok(()));
            }
            let current = Self::current(client, key)?;
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
        self.with_client(|client| {
            let mut tx = client.transaction()?;
            write_batch(&mut tx, puts, deletes)?;
            tx.commit()
        })
    }

    fn apply_batch_if(
        &self,
        guard: (&[u8], &[u8]),
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> CasResult {
        self.with_client(|client| {
            let mut tx = client.transaction()?;
            let current: Option<Vec<u8>> = tx
                .query_opt(
                    "SELECT value FROM baton_kv WHERE key = $1 FOR UPDATE",
                    &[&guard.0],
                )?
                .map(|row| row.get(0));
            if current.as_deref() != Some(guard.1) {
                tx.rollback()?;
                return Ok(Err(CasConflict { current }));
            }
            write_batch(&mut tx, puts, deletes)?;
            tx.commit()?;
            Ok(Ok(()))
        })
    }

    fn flush(&self) -> Result<(), StoreError> {
        // Every write committed (synchronously) before it returned.
        Ok(())
    }

    fn check(&self) -> Result<(), StoreError> {
        self.with_client(|client| client.simple_query("SELECT 1").map(drop))
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
