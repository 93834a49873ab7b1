//! Large values kept as files beside the sled tree, so their space comes
//! back as soon as they are superseded.
//!
//! sled 0.34 does not give back the space of an overwritten or removed
//! value: a 4 MiB value rewritten 17 times as it grew by 4 MiB, then
//! removed, left 732 MB on disk, also after a reopen (measured with
//! `st_blocks`). An execution's record is rewritten at every pause and grows
//! with every round's results, and session files are large, so values over
//! [`INLINE_MAX`] bytes are written to a file of their own in
//! `large-values/` and the tree holds a [`Pointer`] to it.
//!
//! Invariants:
//! - A pointer goes into the tree only after its file and the directory
//!   entry are synced: a durable pointer always names a complete file.
//! - A file is deleted only by the first [`LargeValues::collect`] after the
//!   write that superseded its pointer, and the caller runs that after the
//!   tree's flush: a crash never leaves a durable pointer without its file.
//! - A file that no pointer names (a crash between writing the file and
//!   making its pointer durable, or between a flush and the deletion) is
//!   deleted when the store is opened ([`LargeValues::open`]'s `referenced`).
//! - A stored value begins with [`MAGIC`] exactly when it is a pointer:
//!   every value that begins with it, whatever its size, is kept as a file.
//!   (No encoder of baton starts a value with `0xB7`.)

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::StoreError;

/// The largest value kept inside the tree.
pub(super) const INLINE_MAX: usize = 64 << 10;

/// How a pointer begins.
const MAGIC: &[u8; 8] = b"\xB7BATONLV";

/// A pointer's size: the magic, the file's number, the value's length.
const POINTER_LEN: usize = 24;

/// Where a large value is: its file's number and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pointer {
    /// The file's number (its name, in hex).
    pub file: u64,
    /// The value's length in bytes.
    pub len: u64,
}

impl Pointer {
    /// The bytes the tree holds.
    pub(super) fn encode(self) -> [u8; POINTER_LEN] {
        let mut out = [0u8; POINTER_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8..16].copy_from_slice(&self.file.to_le_bytes());
        out[16..].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// The pointer a stored value is, if it is one.
    pub(super) fn decode(stored: &[u8]) -> Option<Pointer> {
        if stored.len() != POINTER_LEN || !stored.starts_with(MAGIC) {
            return None;
        }
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&stored[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        Some(Pointer {
            file: word(8),
            len: word(16),
        })
    }
}

/// Whether a value must be kept as a file.
pub(super) fn is_large(value: &[u8]) -> bool {
    value.len() > INLINE_MAX || value.starts_with(&MAGIC[..1])
}

/// The directory of large values and the files waiting to be deleted.
pub(super) struct LargeValues {
    dir: PathBuf,
    /// Files whose pointers were replaced or removed, not yet deleted.
    superseded: Mutex<Vec<u64>>,
}

fn io_error(what: &str, path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Database(format!("{what} {}: {error}", path.display()))
}

impl LargeValues {
    /// Opens (or creates) `dir` and deletes every file in it that is not
    /// in `referenced` (the numbers of the pointers in the tree).
    pub(super) fn open(dir: PathBuf, referenced: &HashSet<u64>) -> Result<LargeValues, StoreError> {
        fs::create_dir_all(&dir).map_err(|e| io_error("cannot create", &dir, e))?;
        let entries = fs::read_dir(&dir).map_err(|e| io_error("cannot list", &dir, e))?;
        let mut orphans = 0usize;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let number = name.to_str().and_then(|n| u64::from_str_radix(n, 16).ok());
            if number.is_none_or(|n| !referenced.contains(&n)) {
                let _ = fs::remove_file(entry.path());
                orphans += 1;
            }
        }
        if orphans > 0 {
            tracing::info!(
                orphans,
                dir = %dir.display(),
                "deleted large-value files that no stored pointer names"
            );
        }
        Ok(LargeValues {
            dir,
            superseded: Mutex::new(Vec::new()),
        })
    }

    fn path(&self, file: u64) -> PathBuf {
        self.dir.join(format!("{file:016x}"))
    }

    /// Writes `value` to file number `file` and syncs it; the caller syncs
    /// the directory ([`LargeValues::sync_dir`]) before the pointer goes in.
    pub(super) fn write(&self, file: u64, value: &[u8]) -> Result<Pointer, StoreError> {
        let path = self.path(file);
        let mut out = File::create(&path).map_err(|e| io_error("cannot create", &path, e))?;
        out.write_all(value)
            .and_then(|()| out.sync_all())
            .map_err(|e| io_error("cannot write", &path, e))?;
        Ok(Pointer {
            file,
            len: value.len() as u64,
        })
    }

    /// Syncs the directory, so the files written so far have their entries
    /// on disk.
    pub(super) fn sync_dir(&self) -> Result<(), StoreError> {
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| io_error("cannot sync", &self.dir, e))
    }

    /// The value a pointer names.
    pub(super) fn read(&self, pointer: Pointer) -> Result<Vec<u8>, StoreError> {
        let path = self.path(pointer.file);
        let value = fs::read(&path).map_err(|e| io_error("cannot read", &path, e))?;
        if value.len() as u64 != pointer.len {
            return Err(StoreError::Database(format!(
                "large value {} holds {} bytes, its pointer says {}",
                path.display(),
                value.len(),
                pointer.len
            )));
        }
        Ok(value)
    }

    /// The first `head_len` bytes of the value a pointer names.
    pub(super) fn read_head(
        &self,
        pointer: Pointer,
        head_len: usize,
    ) -> Result<Vec<u8>, StoreError> {
        let path = self.path(pointer.file);
        let file = File::open(&path).map_err(|e| io_error("cannot read", &path, e))?;
        let mut head = Vec::with_capacity(head_len.min(pointer.len as usize));
        file.take(head_len as u64)
            .read_to_end(&mut head)
            .map_err(|e| io_error("cannot read", &path, e))?;
        Ok(head)
    }

    /// Notes that the pointer `stored` (if it is one) was replaced or
    /// removed: its file goes at the next collection.
    pub(super) fn superseded(&self, stored: Option<&[u8]>) {
        let Some(pointer) = stored.and_then(Pointer::decode) else {
            return;
        };
        if let Ok(mut superseded) = self.superseded.lock() {
            superseded.push(pointer.file);
        }
    }

    /// The files superseded so far; the caller deletes them with
    /// [`LargeValues::delete`] once the tree's flush that follows is done.
    pub(super) fn take_superseded(&self) -> Vec<u64> {
        self.superseded
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// Deletes files whose pointers are durably gone.
    pub(super) fn delete(&self, files: &[u64]) {
        for file in files {
            let path = self.path(*file);
            if let Err(error) = fs::remove_file(&path)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(%error, path = %path.display(), "cannot delete a superseded large value");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip_and_nothing_else_decodes_as_one() {
        let pointer = Pointer {
            file: 0x0102_0304_0506_0708,
            len: 4 << 20,
        };
        assert_eq!(Pointer::decode(&pointer.encode()), Some(pointer));
        assert_eq!(Pointer::decode(&pointer.encode()[..23]), None);
        assert_eq!(Pointer::decode(&[0u8; POINTER_LEN]), None);
        assert!(
            is_large(&pointer.encode()),
            "a value like a pointer is a file"
        );
        assert!(!is_large(&[0u8; INLINE_MAX]));
        assert!(is_large(&vec![0u8; INLINE_MAX + 1]));
    }

    #[test]
    fn unreferenced_files_are_deleted_on_open() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let values = LargeValues::open(dir.path().to_path_buf(), &HashSet::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let kept = values.write(1, b"kept").unwrap_or_else(|e| panic!("{e}"));
        values.write(2, b"orphan").unwrap_or_else(|e| panic!("{e}"));
        fs::write(dir.path().join("stray.tmp"), b"x").unwrap_or_else(|e| panic!("{e}"));
        let values = LargeValues::open(dir.path().to_path_buf(), &HashSet::from([1]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(values.read(kept).unwrap_or_else(|e| panic!("{e}")), b"kept");
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("0000000000000001")]);
    }
}
