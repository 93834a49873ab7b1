//! The embedded default [`Store`]: one sled tree in the data directory, and
//! values over 64 KiB as files beside it (`large_values`).
//!
//! Invariants:
//! - Batches and compare-and-swaps are atomic (sled guarantees it; a batch
//!   is a sled transaction so that the values it replaces are known and
//!   their files reclaimed).
//! - Durability comes only from [`Store::flush`], which the service calls
//!   through group commit before it hands out a token; the files of values
//!   superseded before a flush are deleted right after it. sled's own flush
//!   writes its log with `sync_file_range`, which neither flushes the
//!   device's cache nor the file's size; `flush` therefore ends with an
//!   `fdatasync` of the log file, so a flushed write survives a power loss,
//!   not only a crash of the process.
//! - Compare-and-swap is for small values only: it refuses large ones
//!   rather than compare a pointer with a value.

use std::collections::HashSet;
use std::path::Path;

use super::large_values::{LargeValues, Pointer, is_large};
use super::{CasConflict, CasResult, Head, HeadScan, Scan, Store, StoreError};

/// A sled database.
pub struct SledStore {
    db: sled::Db,
    /// sled's log file (`db`), opened here to `fdatasync` it.
    log: std::fs::File,
    large: LargeValues,
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
        let db = open_db(path)?;
        let log = std::fs::File::open(path.join("db")).map_err(|e| {
            StoreError::Database(format!("cannot open the database's log file: {e}"))
        })?;
        let referenced = referenced_files(&db)?;
        let large = LargeValues::open(path.join("large-values"), &referenced)?;
        Ok(Self { db, log, large })
    }

    /// The stored form of `value`: a pointer to a new file for a large
    /// value (the file written and synced), else the value itself.
    fn stored_form(&self, value: &[u8]) -> Result<Option<[u8; 24]>, StoreError> {
        if !is_large(value) {
            return Ok(None);
        }
        let file = self.db.generate_id().map_err(database)?;
        Ok(Some(self.large.write(file, value)?.encode()))
    }

    /// The value behind a stored form read at `key`. A file deleted between
    /// reading the pointer and opening it means the key changed: read again.
    fn resolve(&self, key: &[u8], stored: sled::IVec) -> Result<Option<Vec<u8>>, StoreError> {
        let mut stored = Some(stored);
        for _ in 0..8 {
            let Some(current) = stored else {
                return Ok(None);
            };
            let Some(pointer) = Pointer::decode(&current) else {
                return Ok(Some(current.to_vec()));
            };
            match self.large.read(pointer) {
                Ok(value) => return Ok(Some(value)),
                Err(error) => {
                    let again = self.db.get(key).map_err(database)?;
                    if again.as_deref() == Some(&current[..]) {
                        return Err(error);
                    }
                    stored = again;
                }
            }
        }
        Err(StoreError::Database(
            "a large value kept changing while it was read".into(),
        ))
    }

    /// The head and length of a stored form.
    fn head_of(&self, stored: &[u8], head_len: usize) -> Result<(Vec<u8>, u64), StoreError> {
        let Some(pointer) = Pointer::decode(stored) else {
            return Ok((
                stored[..stored.len().min(head_len)].to_vec(),
                stored.len() as u64,
            ));
        };
        let value = self.large.read_head(pointer, head_len)?;
        Ok((value, pointer.len))
    }

    /// One atomic batch, applied only when `guard` (key, expected value)
    /// holds, if given. The values it replaces are known (a transaction),
    /// so their files are reclaimed after the next flush.
    fn batch(
        &self,
        guard: Option<(&[u8], &[u8])>,
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> CasResult {
        let mut stored = Vec::with_capacity(puts.len());
        for (key, value) in puts {
            stored.push((*key, self.stored_form(value)?, *value));
        }
        let written: Vec<u64> = stored
            .iter()
            .filter_map(|(_, pointer, _)| pointer.as_ref().and_then(|p| Pointer::decode(p)))
            .map(|p| p.file)
            .collect();
        if !written.is_empty() {
            self.large.sync_dir()?;
        }
        let replaced = self.db.transaction(|tx| {
            if let Some((key, expected)) = guard {
                let current = tx.get(key)?;
                if current.as_deref() != Some(expected) {
                    return sled::transaction::abort(CasConflict {
                        current: current.map(|v| v.to_vec()),
                    });
                }
            }
            let mut replaced = Vec::new();
            for (key, pointer, value) in &stored {
                let form = pointer.as_ref().map_or(*value, |p| &p[..]);
                replaced.push(tx.insert(*key, form)?);
            }
            for key in deletes {
                replaced.push(tx.remove(*key)?);
            }
            Ok(replaced)
        });
        match replaced {
            Ok(replaced) => {
                for old in &replaced {
                    self.large.superseded(old.as_deref());
                }
                Ok(Ok(()))
            }
            Err(sled::transaction::TransactionError::Abort(conflict)) => {
                self.large.delete(&written);
                Ok(Err(conflict))
            }
            Err(error) => {
                self.large.delete(&written);
                Err(StoreError::Database(format!("batch failed: {error:?}")))
            }
        }
    }
}

fn open_db(path: &Path) -> Result<sled::Db, StoreError> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let mut announced = false;
    loop {
        let opened = sled::Config::new()
            .path(path)
            .flush_every_ms(Some(1000))
            .open();
        match opened {
            Ok(db) => return Ok(db),
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

/// The file numbers of every pointer in the tree.
fn referenced_files(db: &sled::Db) -> Result<HashSet<u64>, StoreError> {
    let mut files = HashSet::new();
    for pair in db.iter() {
        let (_, stored) = pair.map_err(database)?;
        if let Some(pointer) = Pointer::decode(&stored) {
            files.insert(pointer.file);
        }
    }
    Ok(files)
}

/// Whether sled could not take the database's file lock (it reports that
/// as an error of kind `Other` whose text says so, around `WouldBlock`).
fn is_lock_held(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::WouldBlock
        || error.to_string().starts_with("could not acquire lock")
}

/// How long [`SledStore::open`] waits for the database's lock.
pub(super) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match self.db.get(key).map_err(database)? {
            None => Ok(None),
            Some(stored) => self.resolve(key, stored),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let pointer = self.stored_form(value)?;
        if pointer.is_some() {
            self.large.sync_dir()?;
        }
        let stored = pointer.as_ref().map_or(value, |p| &p[..]);
        let old = self.db.insert(key, stored).map_err(database)?;
        self.large.superseded(old.as_deref());
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
        let old = self.db.remove(key).map_err(database)?;
        self.large.superseded(old.as_deref());
        Ok(())
    }

    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> CasResult {
        if expected.into_iter().chain(new).any(is_large) {
            return Err(StoreError::Database(
                "compare-and-swap is for small values only".into(),
            ));
        }
        let swapped = self
            .db
            .compare_and_swap(key, expected, new)
            .map_err(database)?;
        Ok(swapped.map_err(|conflict| CasConflict {
            current: conflict.current.map(|v| v.to_vec()),
        }))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Scan<'_> {
        // A key deleted while the scan reached it is skipped, not given
        // as an empty value (which would read as a corrupt entry).
        Box::new(self.db.scan_prefix(prefix).filter_map(move |pair| {
            let resolved = pair
                .map_err(database)
                .and_then(|(key, stored)| Ok((key.to_vec(), self.resolve(&key, stored)?)));
            match resolved {
                Ok((key, Some(value))) => Some(Ok((key, value))),
                Ok((_, None)) => None,
                Err(error) => Some(Err(error)),
            }
        }))
    }

    fn scan_heads(&self, prefix: &[u8], head_len: usize) -> HeadScan<'_> {
        Box::new(self.db.scan_prefix(prefix).map(move |pair| {
            let (key, stored) = pair.map_err(database)?;
            let (head, len) = self.head_of(&stored, head_len)?;
            Ok(Head {
                key: key.to_vec(),
                head,
                len,
            })
        }))
    }

    fn apply_batch(&self, puts: &[(&[u8], &[u8])], deletes: &[&[u8]]) -> Result<(), StoreError> {
        match self.batch(None, puts, deletes)? {
            Ok(()) => Ok(()),
            Err(conflict) => Err(StoreError::Database(format!(
                "an unguarded batch reported a conflict: {conflict:?}"
            ))),
        }
    }

    fn apply_batch_if(
        &self,
        guard: (&[u8], &[u8]),
        puts: &[(&[u8], &[u8])],
        deletes: &[&[u8]],
    ) -> CasResult {
        if is_large(guard.1) {
            return Err(StoreError::Database(
                "a batch's guard is for small values only".into(),
            ));
        }
        self.batch(Some(guard), puts, deletes)
    }

    fn flush(&self) -> Result<(), StoreError> {
        let superseded = self.large.take_superseded();
        self.db.flush().map_err(database)?;
        self.log
            .sync_data()
            .map_err(|e| StoreError::Database(format!("fdatasync of the log failed: {e}")))?;
        self.large.delete(&superseded);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_batch_applies_only_while_its_guard_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        store.put(b"s/1", b"running").unwrap();
        let big = vec![7u8; 200_000];
        let applied = store
            .apply_batch_if(
                (b"s/1", b"running"),
                &[(b"r/1", &big), (b"s/1", b"paused")],
                &[],
            )
            .unwrap();
        assert_eq!(applied, Ok(()));
        assert_eq!(store.get(b"r/1").unwrap(), Some(big.clone()));
        store.put(b"s/1", b"cancelled").unwrap();
        let refused = store
            .apply_batch_if(
                (b"s/1", b"paused"),
                &[(b"r/2", &big), (b"s/1", b"paused")],
                &[b"r/1"],
            )
            .unwrap();
        assert_eq!(
            refused,
            Err(CasConflict {
                current: Some(b"cancelled".to_vec())
            })
        );
        assert_eq!(store.get(b"s/1").unwrap(), Some(b"cancelled".to_vec()));
        assert_eq!(store.get(b"r/1").unwrap(), Some(big), "nothing deleted");
        assert_eq!(store.get(b"r/2").unwrap(), None, "nothing written");
        let files = std::fs::read_dir(dir.path().join("large-values"))
            .unwrap()
            .count();
        assert_eq!(files, 1, "the refused batch's large value left no file");
    }

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
        let scanned: Vec<crate::store::Pair> =
            store.scan_prefix(b"r/").map(|p| p.unwrap()).collect();
        assert_eq!(scanned, vec![(b"r/a".to_vec(), b"1".to_vec())]);
        assert_eq!(store.get(b"s/a").unwrap(), Some(b"2".to_vec()));
    }
}
