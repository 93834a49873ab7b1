//! The embedded default [`Store`]: one sled tree in the data directory.
//!
//! Invariant: batches and compare-and-swaps are atomic (sled guarantees it);
//! durability comes only from [`Store::flush`], which the service calls
//! through group commit before it hands out a token.

use std::path::Path;

use super::{CasConflict, CasResult, Pairs, Store, StoreError};

/// A sled database.
pub struct SledStore {
    db: sled::Db,
}

fn database(error: sled::Error) -> StoreError {
    StoreError::Database(error.to_string())
}

impl SledStore {
    /// Opens (or creates) the database in `path`. The database's file lock
    /// is waited for up to [`LOCK_WAIT`]: a server killed with `SIGKILL`
    /// can hold it for some milliseconds after its death, and a supervisor
    /// restarts at once. A lock still held after that means another process
    /// has it.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        let mut announced = false;
        loop {
            let opened = sled::Config::new()
                .path(path)
                .flush_every_ms(Some(1000))
                .open();
            match opened {
                Ok(db) => return Ok(Self { db }),
                Err(sled::Error::Io(error)) if is_lock_held(&error) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(StoreError::Locked(path.display().to_string()));
                    }
                    if !announced {
                        tracing::info!(
                            path = %path.display(),
                            "the database is locked; waiting up to {} s for the process that holds it to end",
                            LOCK_WAIT.as_secs()
                        );
                        announced = true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(error) => return Err(database(error)),
            }
        }
    }
}

/// Whether sled could not take the database's file lock (it reports that
/// as an error of kind `Other` whose text says so, around `WouldBlock`).
fn is_lock_held(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::WouldBlock
        || error.to_string().starts_with("could not acquire lock")
}

/// How long [`SledStore::open`] waits for the database's lock.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get(key).map_err(database)?.map(|v| v.to_vec()))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.db.insert(key, value).map_err(database).map(drop)
    }

    fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
        self.db.remove(key).map_err(database).map(drop)
    }

    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> CasResult {
        let swapped = self
            .db
            .compare_and_swap(key, expected, new)
            .map_err(database)?;
        Ok(swapped.map_err(|conflict| CasConflict {
            current: conflict.current.map(|v| v.to_vec()),
        }))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError> {
        self.db
            .scan_prefix(prefix)
            .map(|pair| {
                pair.map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .map_err(database)
            })
            .collect()
    }

    fn apply_batch(&self, puts: &[(&[u8], &[u8])], deletes: &[&[u8]]) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for (key, value) in puts {
            batch.insert(*key, *value);
        }
        for key in deletes {
            batch.remove(*key);
        }
        self.db.apply_batch(batch).map_err(database)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map_err(database).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_claims_once_and_reports_current() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        store.put(b"s/1", b"paused").unwrap();
        assert_eq!(
            store
                .compare_and_swap(b"s/1", Some(b"paused"), Some(b"running"))
                .unwrap(),
            Ok(())
        );
        let lost = store
            .compare_and_swap(b"s/1", Some(b"paused"), Some(b"running"))
            .unwrap();
        assert_eq!(
            lost,
            Err(CasConflict {
                current: Some(b"running".to_vec())
            })
        );
    }

    #[test]
    fn batch_and_scan_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path()).unwrap();
            store.put(b"r/gone", b"x").unwrap();
            store
                .apply_batch(&[(b"r/a", b"1"), (b"s/a", b"2")], &[b"r/gone"])
                .unwrap();
            store.flush().unwrap();
        }
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(
            store.scan_prefix(b"r/").unwrap(),
            vec![(b"r/a".to_vec(), b"1".to_vec())]
        );
        assert_eq!(store.get(b"s/a").unwrap(), Some(b"2".to_vec()));
    }
}
