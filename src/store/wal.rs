//! The store's write-ahead log: what makes a write durable, in one
//! `fdatasync` of one appended file.
//!
//! sled's own flush writes its log buffer, waits for it with
//! `sync_file_range`, and still needs an `fdatasync` to reach the device
//! (see `sled_store`): 0.35–0.4 ms a flush on this project's machines,
//! where an append and an `fdatasync` take 0.1–0.15 ms. So every change to
//! the tree is also appended, as the stored forms it wrote, to a log
//! segment (`wal/<number>.log`), and a flush writes and syncs the appended
//! records only. sled writes its own files in the background; a
//! *checkpoint* (when the segment passes [`CHECKPOINT_BYTES`], and at
//! open) flushes sled and syncs its log, after which the segments before it
//! are deleted.
//!
//! Each record carries a sequence number, and the change that a record
//! describes writes the same number into the tree ([`SEQUENCE_KEY`]) in
//! the same sled transaction. At open, the records whose number is above
//! the tree's are applied again, in order: sled recovers a prefix of its
//! changes, so the tree holds either changes up to some record (and the
//! records after it complete it) or more than the log (changes made but not
//! yet flushed when the process died, which is a prefix as well).
//!
//! Invariants:
//! - Records are appended in the order their changes were applied to the
//!   tree: a change and its record are made under one lock
//!   ([`Wal::order`]), and numbers follow each other without gaps.
//! - A record is whole or absent: a torn or corrupt one (length, CRC-32, a
//!   number out of sequence) ends the replay; nothing after it was
//!   acknowledged as durable.
//! - A segment is deleted only after a checkpoint that covers all its
//!   records.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::StoreError;

/// Where the tree keeps the number of the last change it applied.
pub(super) const SEQUENCE_KEY: &[u8] = b"\x00baton/wal-sequence";

/// A segment this large asks for a checkpoint.
pub(super) const CHECKPOINT_BYTES: u64 = 64 << 20;

/// The frame before each record: its length and its CRC-32.
const FRAME: usize = 8;

const PUT: u8 = 1;
const DELETE: u8 = 2;

/// One change of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Change<'a> {
    /// The key now holds this stored form.
    Put(&'a [u8], &'a [u8]),
    /// The key is gone.
    Delete(&'a [u8]),
}

/// A change read back from a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ReadChange {
    /// The key.
    pub key: Vec<u8>,
    /// Its stored form, or `None` when it was deleted.
    pub value: Option<Vec<u8>>,
}

/// Records appended but not yet written, and the next number.
pub(super) struct Pending {
    next: u64,
    bytes: Vec<u8>,
}

impl Pending {
    /// The number the next record will carry (written into the tree with
    /// its change).
    pub(super) fn next_number(&self) -> u64 {
        self.next
    }

    /// Appends the record of a change just applied with
    /// [`Pending::next_number`].
    pub(super) fn append(&mut self, changes: &[Change<'_>]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(&[0u8; FRAME]);
        self.bytes.extend_from_slice(&self.next.to_le_bytes());
        self.bytes
            .extend_from_slice(&(changes.len() as u32).to_le_bytes());
        for change in changes {
            let (kind, key, value) = match change {
                Change::Put(key, value) => (PUT, key, Some(value)),
                Change::Delete(key) => (DELETE, key, None),
            };
            self.bytes.push(kind);
            self.bytes
                .extend_from_slice(&(key.len() as u32).to_le_bytes());
            self.bytes.extend_from_slice(key);
            if let Some(value) = value {
                self.bytes
                    .extend_from_slice(&(value.len() as u32).to_le_bytes());
                self.bytes.extend_from_slice(value);
            }
        }
        let body = &self.bytes[start + FRAME..];
        let length = (body.len() as u32).to_le_bytes();
        let crc = crc32fast::hash(body).to_le_bytes();
        self.bytes[start..start + 4].copy_from_slice(&length);
        self.bytes[start + 4..start + FRAME].copy_from_slice(&crc);
        self.next += 1;
    }
}

/// The segment being appended to.
struct Segment {
    number: u64,
    file: File,
    len: u64,
}

/// The log of one store (see the module doc).
pub(super) struct Wal {
    dir: PathBuf,
    /// Held across a change to the tree and the append of its record.
    pub(super) order: Mutex<Pending>,
    segment: Mutex<Segment>,
    checkpointing: AtomicBool,
    /// A segment this large asks for a checkpoint ([`CHECKPOINT_BYTES`]).
    checkpoint_bytes: u64,
}

fn io_error(what: &str, path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Database(format!("{what} {}: {error}", path.display()))
}

pub(super) fn poisoned() -> StoreError {
    StoreError::Database("the write-ahead log's lock is poisoned".into())
}

fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:016x}.log"))
}

/// The numbers of the segments in `dir`, in order.
fn segments(dir: &Path) -> Result<Vec<u64>, StoreError> {
    let entries = fs::read_dir(dir).map_err(|e| io_error("cannot list", dir, e))?;
    let mut numbers: Vec<u64> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let stem = name.to_str()?.strip_suffix(".log")?;
            u64::from_str_radix(stem, 16).ok()
        })
        .collect();
    numbers.sort_unstable();
    Ok(numbers)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("cannot sync", dir, e))
}

/// The records of `bytes`, each with its number, up to the first that is
/// torn or corrupt; and whether the segment ended cleanly.
pub(super) fn parse_records(bytes: &[u8]) -> (Vec<(u64, Vec<ReadChange>)>, bool) {
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(record) = parse_record(&bytes[at..]) else {
            return (records, false);
        };
        at += FRAME + record.0;
        records.push((record.1, record.2));
    }
    (records, true)
}

/// One framed record: its body length, number and changes.
fn parse_record(bytes: &[u8]) -> Option<(usize, u64, Vec<ReadChange>)> {
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let length = word(bytes, 0)? as usize;
    let crc = word(bytes, 4)?;
    let body = bytes.get(FRAME..FRAME + length)?;
    if length < 12 || crc32fast::hash(body) != crc {
        return None;
    }
    let number = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let count = word(body, 8)?;
    let mut at = 12;
    let mut changes = Vec::new();
    let take = |at: &mut usize| -> Option<Vec<u8>> {
        let len = word(body, *at)? as usize;
        let value = body.get(*at + 4..*at + 4 + len)?.to_vec();
        *at += 4 + len;
        Some(value)
    };
    for _ in 0..count {
        let kind = *body.get(at)?;
        at += 1;
        let key = take(&mut at)?;
        let value = match kind {
            PUT => Some(take(&mut at)?),
            DELETE => None,
            _ => return None,
        };
        changes.push(ReadChange { key, value });
    }
    (at == body.len()).then_some((length, number, changes))
}

impl Wal {
    /// Opens the log in `dir` and replays it: `apply` gets every record
    /// after the last number the tree has (`applied`), in order; then
    /// `checkpoint` makes the tree durable, and the replayed segments are
    /// deleted. Appending starts in a new segment.
    pub(super) fn open(
        dir: PathBuf,
        checkpoint_bytes: u64,
        applied: u64,
        mut apply: impl FnMut(u64, Vec<ReadChange>) -> Result<(), StoreError>,
        checkpoint: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<Wal, StoreError> {
        fs::create_dir_all(&dir).map_err(|e| io_error("cannot create", &dir, e))?;
        let numbers = segments(&dir)?;
        let mut last = applied;
        let mut replayed = 0usize;
        'segments: for number in &numbers {
            let path = segment_path(&dir, *number);
            let mut bytes = Vec::new();
            File::open(&path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| io_error("cannot read", &path, e))?;
            let (records, clean) = parse_records(&bytes);
            for (record_number, changes) in records {
                if record_number <= applied {
                    continue;
                }
                if record_number != last + 1 {
                    tracing::warn!(path = %path.display(), record_number, expected = last + 1,
                        "the write-ahead log skips a number; the records after it are ignored");
                    break 'segments;
                }
                apply(record_number, changes)?;
                last = record_number;
                replayed += 1;
            }
            if !clean {
                tracing::info!(path = %path.display(),
                    "the write-ahead log ends in a torn record (a write that was never acknowledged); replay stops there");
                break;
            }
        }
        if replayed > 0 {
            tracing::info!(
                records = replayed,
                "replayed the write-ahead log into the store"
            );
        }
        checkpoint()?;
        let next_segment = numbers.last().map_or(1, |n| n + 1);
        let segment = Self::create_segment(&dir, next_segment)?;
        for number in numbers {
            let _ = fs::remove_file(segment_path(&dir, number));
        }
        Ok(Wal {
            dir,
            order: Mutex::new(Pending {
                next: last + 1,
                bytes: Vec::new(),
            }),
            segment: Mutex::new(segment),
            checkpointing: AtomicBool::new(false),
            checkpoint_bytes,
        })
    }

    fn create_segment(dir: &Path, number: u64) -> Result<Segment, StoreError> {
        let path = segment_path(dir, number);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_error("cannot create", &path, e))?;
        sync_dir(dir)?;
        Ok(Segment {
            number,
            file,
            len: 0,
        })
    }

    /// Writes and syncs every record appended so far. `with_taken` runs at
    /// the moment the records are taken, under the order lock (what it
    /// takes belongs to exactly these records). Returns its result and
    /// whether the segment asks for a checkpoint.
    pub(super) fn commit<T>(
        &self,
        with_taken: impl FnOnce() -> T,
    ) -> Result<(T, bool), StoreError> {
        let mut segment = self.segment.lock().map_err(|_| poisoned())?;
        let (bytes, taken) = {
            let mut pending = self.order.lock().map_err(|_| poisoned())?;
            (std::mem::take(&mut pending.bytes), with_taken())
        };
        if !bytes.is_empty() {
            let path = segment_path(&self.dir, segment.number);
            segment
                .file
                .write_all(&bytes)
                .and_then(|()| segment.file.sync_data())
                .map_err(|e| io_error("cannot write", &path, e))?;
            segment.len += bytes.len() as u64;
        }
        let wants_checkpoint = segment.len >= self.checkpoint_bytes
            && !self.checkpointing.swap(true, Ordering::AcqRel);
        Ok((taken, wants_checkpoint))
    }

    /// The numbers of the segments on disk.
    #[cfg(test)]
    pub(super) fn segment_numbers(&self) -> Vec<u64> {
        segments(&self.dir).unwrap_or_default()
    }

    /// Starts a new segment; returns the number of the one before it, to
    /// delete with [`Wal::retire`] once a checkpoint covers it.
    pub(super) fn rotate(&self) -> Result<u64, StoreError> {
        let mut segment = self.segment.lock().map_err(|_| poisoned())?;
        let next = Self::create_segment(&self.dir, segment.number + 1)?;
        Ok(std::mem::replace(&mut *segment, next).number)
    }

    /// Deletes the segments up to `number` (a checkpoint covers them), and
    /// allows the next checkpoint.
    pub(super) fn retire(&self, number: u64) {
        if let Ok(numbers) = segments(&self.dir) {
            for old in numbers.into_iter().filter(|n| *n <= number) {
                let _ = fs::remove_file(segment_path(&self.dir, old));
            }
        }
        self.checkpointing.store(false, Ordering::Release);
    }

    /// A checkpoint failed: allows the next one.
    pub(super) fn checkpoint_failed(&self) {
        self.checkpointing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(changes: &[&[Change<'_>]], first: u64) -> Vec<u8> {
        let mut pending = Pending {
            next: first,
            bytes: Vec::new(),
        };
        for record in changes {
            pending.append(record);
        }
        pending.bytes
    }

    #[test]
    fn records_read_back_in_order() {
        let bytes = records(
            &[
                &[Change::Put(b"a", b"1"), Change::Delete(b"b")],
                &[Change::Put(b"c", b"")],
            ],
            7,
        );
        let (read, clean) = parse_records(&bytes);
        assert!(clean);
        let put = |k: &[u8], v: &[u8]| ReadChange {
            key: k.to_vec(),
            value: Some(v.to_vec()),
        };
        let expected = vec![
            (
                7,
                vec![
                    put(b"a", b"1"),
                    ReadChange {
                        key: b"b".to_vec(),
                        value: None,
                    },
                ],
            ),
            (8, vec![put(b"c", b"")]),
        ];
        assert_eq!(read, expected);
    }

    #[test]
    fn a_torn_or_corrupt_record_ends_the_log() {
        let bytes = records(&[&[Change::Put(b"a", b"1")], &[Change::Put(b"b", b"2")]], 1);
        let first_len = bytes.len() / 2;
        for cut in first_len + 1..bytes.len() {
            let (read, clean) = parse_records(&bytes[..cut]);
            assert!(!clean, "cut at {cut}");
            assert_eq!(read.len(), 1, "cut at {cut}");
        }
        for flipped in first_len..bytes.len() {
            let mut corrupt = bytes.clone();
            corrupt[flipped] ^= 0x40;
            let (read, clean) = parse_records(&corrupt);
            assert!(!clean, "byte {flipped} flipped");
            assert_eq!(read.len(), 1, "byte {flipped} flipped");
        }
        let (read, clean) = parse_records(&[0u8; 64]);
        assert!(!clean && read.is_empty(), "zeros are no record");
    }

    #[test]
    fn open_replays_what_the_tree_lacks_and_starts_a_new_segment() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let wal_dir = dir.path().join("wal");
        fs::create_dir_all(&wal_dir).unwrap_or_else(|e| panic!("{e}"));
        let first = records(&[&[Change::Put(b"a", b"1")], &[Change::Put(b"b", b"2")]], 1);
        let second = records(&[&[Change::Delete(b"a")], &[Change::Put(b"c", b"3")]], 3);
        let mut torn = second.clone();
        torn.extend_from_slice(&records(&[&[Change::Put(b"d", b"4")]], 5)[..10]);
        fs::write(segment_path(&wal_dir, 1), &first).unwrap_or_else(|e| panic!("{e}"));
        fs::write(segment_path(&wal_dir, 2), &torn).unwrap_or_else(|e| panic!("{e}"));
        let mut applied = Vec::new();
        let mut checkpoints = 0;
        let wal = Wal::open(
            wal_dir.clone(),
            CHECKPOINT_BYTES,
            2,
            |number, changes| {
                applied.push((number, changes.len()));
                Ok(())
            },
            || {
                checkpoints += 1;
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            applied,
            vec![(3, 1), (4, 1)],
            "records 1 and 2 were in the tree"
        );
        assert_eq!(checkpoints, 1);
        assert_eq!(segments(&wal_dir).unwrap_or_default(), vec![3]);
        let pending = wal.order.lock().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            pending.next_number(),
            5,
            "numbering goes on after the replay"
        );
    }

    #[test]
    fn a_gap_in_the_numbers_stops_the_replay() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let wal_dir = dir.path().join("wal");
        fs::create_dir_all(&wal_dir).unwrap_or_else(|e| panic!("{e}"));
        let mut bytes = records(&[&[Change::Put(b"a", b"1")]], 1);
        bytes.extend(records(&[&[Change::Put(b"b", b"2")]], 3));
        fs::write(segment_path(&wal_dir, 1), &bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut applied = Vec::new();
        Wal::open(
            wal_dir,
            CHECKPOINT_BYTES,
            0,
            |number, _| {
                applied.push(number);
                Ok(())
            },
            || Ok(()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(applied, vec![1]);
    }
}
