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
//!
//! **The log is written ahead of use.** An `fdatasync` after an append
//! also journals the file's new size and blocks; one after overwriting
//! blocks already written and synced only writes the data, and costs half
//! as much here (`benches/fsync_cost.py`). So a thread of its own
//! ([`Wal::fill_ahead`]) keeps up to [`FILL_BYTES`] of zeros written and
//! synced past the end of the records, and commits overwrite them. The
//! replay reads zeros as the clean end of a segment.
//! - A fill writes only past the segment's records and past what is filled
//!   already, and a commit that would write past the filled part waits for
//!   a fill in progress ([`Wal::filling`]): the two never write the same
//!   bytes. Locks are taken in the order segment, then filling.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::StoreError;

/// Where the tree keeps the number of the last change it applied.
pub(super) const SEQUENCE_KEY: &[u8] = b"\x00baton/wal-sequence";

/// A segment this large asks for a checkpoint.
pub(super) const CHECKPOINT_BYTES: u64 = 64 << 20;

/// How far past the records a fill writes zeros; a fill is asked for when
/// less than half of it is left.
pub(super) const FILL_BYTES: u64 = 1 << 20;

/// A commit this large is not slowed by its sync as much as by its data:
/// it asks for no fill, and when it writes past the fill, fills wait until
/// small commits have appended half a fill's worth past it (else rounds
/// of 1 MB tool results, each followed by a small commit, would have 1 MiB
/// of zeros written for every round, and overwritten by the next).
const SMALL_COMMIT: usize = 64 << 10;

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
    file: Arc<File>,
    /// The bytes of records written.
    len: u64,
    /// The bytes written (records, then zeros) and synced: a commit that
    /// ends within them overwrites only.
    filled: u64,
    /// A large commit wrote past the fill since the last fill; then the
    /// bytes that small commits appended past it since.
    overrun: Option<u64>,
    /// A fill of this segment failed: no more are asked for (the next
    /// segment tries again), so a full disk does not start a fill per
    /// commit.
    fill_failed: bool,
}

/// What a commit asks to be done after it, off the caller's path.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct AfterCommit {
    /// The segment passed [`CHECKPOINT_BYTES`]: a checkpoint ([`Wal::rotate`]).
    pub checkpoint: bool,
    /// Less than half of [`FILL_BYTES`] is filled ahead: [`Wal::fill_ahead`].
    pub fill: bool,
}

/// The log of one store (see the module doc).
pub(super) struct Wal {
    dir: PathBuf,
    /// Held across a change to the tree and the append of its record.
    pub(super) order: Mutex<Pending>,
    segment: Mutex<Segment>,
    /// Held by a fill while it writes and syncs its zeros; a commit that
    /// would write past [`Segment::filled`] takes it first.
    filling: Mutex<()>,
    /// A fill has been asked for and has not ended.
    fill_asked: AtomicBool,
    /// How many bytes a fill writes ([`FILL_BYTES`], less for tests).
    fill_bytes: u64,
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

/// Writes `len` bytes of zeros at `offset`, one page at a time, and
/// starts and waits for their writeback every 64 KiB.
///
/// One page at a time: the page cache sizes its folios by the writes that
/// create them, and dirtying a byte of a folio counts (in
/// `/proc/<pid>/io`) as writing all of it: one write of 1 MiB would make
/// every later commit count as 1 MiB written, though the device writes
/// only the pages it changed. Written back as it goes: a commit's
/// `fdatasync` writes every dirty page of the file, so a commit that syncs
/// while a fill runs pays for at most 64 KiB of its zeros, not 1 MiB.
fn write_zero_pages(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    const PAGE: u64 = 4096;
    const WRITEBACK: u64 = 64 << 10;
    let zeros = [0u8; PAGE as usize];
    let end = offset + len;
    let (mut at, mut written_back) = (offset, offset);
    while at < end {
        let piece = PAGE.min(end - at);
        file.write_all_at(&zeros[..piece as usize], at)?;
        at += piece;
        if at - written_back >= WRITEBACK || at == end {
            write_back(file, written_back, at - written_back)?;
            written_back = at;
        }
    }
    Ok(())
}

/// Writes the dirty pages of `len` bytes at `offset` to the device and
/// waits for them (their size and blocks are made durable by the
/// `fdatasync` after).
fn write_back(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: a range of a file this process has open; no memory is passed.
    let done = unsafe { libc::sync_file_range(file.as_raw_fd(), offset as i64, len as i64, flags) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("cannot sync", dir, e))
}

/// The records of `bytes`, each with its number, up to the first that is
/// torn or corrupt; and whether the segment ended cleanly (at its end, or
/// where only the zeros of a fill are left).
pub(super) fn parse_records(bytes: &[u8]) -> (Vec<(u64, Vec<ReadChange>)>, bool) {
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(record) = parse_record(&bytes[at..]) else {
            let zeros = bytes[at..].iter().all(|b| *b == 0);
            return (records, zeros);
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
            filling: Mutex::new(()),
            fill_asked: AtomicBool::new(false),
            fill_bytes: FILL_BYTES.min(checkpoint_bytes.max(4096)),
            checkpointing: AtomicBool::new(false),
            checkpoint_bytes,
        })
    }

    fn create_segment(dir: &Path, number: u64) -> Result<Segment, StoreError> {
        let path = segment_path(dir, number);
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|e| io_error("cannot create", &path, e))?;
        sync_dir(dir)?;
        Ok(Segment {
            number,
            file: Arc::new(file),
            len: 0,
            filled: 0,
            overrun: None,
            fill_failed: false,
        })
    }

    /// Whether a fill should be asked for now (and marks it asked): less
    /// than half a fill is left, and no large commit has overrun the fill
    /// since small commits last appended half a fill's worth.
    fn ask_fill(&self, segment: &Segment) -> bool {
        let half = self.fill_bytes / 2;
        !segment.fill_failed
            && segment.filled.saturating_sub(segment.len) < half
            && segment.overrun.is_none_or(|appended| appended >= half)
            && !self.fill_asked.swap(true, Ordering::AcqRel)
    }

    /// Asks for a fill of the segment just opened (see [`Wal::fill_ahead`]).
    pub(super) fn wants_fill(&self) -> bool {
        self.segment
            .lock()
            .map(|segment| self.ask_fill(&segment))
            .unwrap_or(false)
    }

    /// Writes [`FILL_BYTES`] of zeros past the records and what is filled
    /// already, syncs them, and counts them as filled (if the segment is
    /// still the one filled). Runs off the request path, after a commit or
    /// an open asked for it.
    pub(super) fn fill_ahead(&self) -> Result<(), StoreError> {
        let filled = self.write_zeros();
        self.fill_asked.store(false, Ordering::Release);
        let mut segment = self.segment.lock().map_err(|_| poisoned())?;
        match filled {
            Ok((number, end)) if segment.number == number => {
                segment.filled = segment.filled.max(end);
                segment.overrun = None;
            }
            Ok(_) => {}
            Err((number, error)) => {
                segment.fill_failed |= segment.number == number;
                return Err(error);
            }
        }
        Ok(())
    }

    /// A fill asked for could not be started: allows the next one.
    pub(super) fn fill_not_started(&self) {
        self.fill_asked.store(false, Ordering::Release);
    }

    /// The write of a fill, under [`Wal::filling`]: the segment's number
    /// and where the zeros end (or the number of the segment that failed).
    fn write_zeros(&self) -> Result<(u64, u64), (u64, StoreError)> {
        let (number, file, from, filling) = {
            let segment = self.segment.lock().map_err(|_| (0, poisoned()))?;
            let filling = self
                .filling
                .lock()
                .map_err(|_| (segment.number, poisoned()))?;
            let from = segment.filled.max(segment.len);
            (segment.number, segment.file.clone(), from, filling)
        };
        let path = segment_path(&self.dir, number);
        write_zero_pages(&file, from, self.fill_bytes)
            .and_then(|()| file.sync_data())
            .map_err(|e| (number, io_error("cannot fill", &path, e)))?;
        drop(filling);
        Ok((number, from + self.fill_bytes))
    }

    /// Writes and syncs every record appended so far. `with_taken` runs at
    /// the moment the records are taken, under the order lock (what it
    /// takes belongs to exactly these records). Returns its result and
    /// what the caller should start after it.
    pub(super) fn commit<T>(
        &self,
        with_taken: impl FnOnce() -> T,
    ) -> Result<(T, AfterCommit), StoreError> {
        let mut segment = self.segment.lock().map_err(|_| poisoned())?;
        let (bytes, taken) = {
            let mut pending = self.order.lock().map_err(|_| poisoned())?;
            (std::mem::take(&mut pending.bytes), with_taken())
        };
        if !bytes.is_empty() {
            let end = segment.len + bytes.len() as u64;
            let _past_the_fill = if end > segment.filled {
                Some(self.filling.lock().map_err(|_| poisoned())?)
            } else {
                None
            };
            let path = segment_path(&self.dir, segment.number);
            segment
                .file
                .write_all_at(&bytes, segment.len)
                .and_then(|()| segment.file.sync_data())
                .map_err(|e| io_error("cannot write", &path, e))?;
            if end > segment.filled {
                segment.overrun = match segment.overrun {
                    _ if bytes.len() >= SMALL_COMMIT => Some(0),
                    Some(appended) => Some(appended + bytes.len() as u64),
                    None => None,
                };
            }
            segment.len = end;
            segment.filled = segment.filled.max(end);
        }
        let upkeep = AfterCommit {
            checkpoint: segment.len >= self.checkpoint_bytes
                && !self.checkpointing.swap(true, Ordering::AcqRel),
            fill: bytes.len() < SMALL_COMMIT && self.ask_fill(&segment),
        };
        Ok((taken, upkeep))
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
        assert!(
            clean && read.is_empty(),
            "zeros are no record, and a clean end"
        );
        for cut in first_len + 1..bytes.len() {
            let mut torn = bytes[..cut].to_vec();
            torn.extend_from_slice(&[0u8; 4096]);
            let (read, clean) = parse_records(&torn);
            assert!(!clean, "cut at {cut}, then the zeros of a fill");
            assert_eq!(read.len(), 1, "cut at {cut}, then zeros");
        }
    }

    #[test]
    fn records_then_the_zeros_of_a_fill_end_cleanly() {
        let mut bytes = records(&[&[Change::Put(b"a", b"1")], &[Change::Put(b"b", b"")]], 1);
        bytes.extend_from_slice(&[0u8; 8192]);
        let (read, clean) = parse_records(&bytes);
        assert!(clean);
        assert_eq!(read.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2]);
    }

    fn append_and_commit(wal: &Wal, value: &[u8]) -> AfterCommit {
        wal.order
            .lock()
            .unwrap_or_else(|e| panic!("{e}"))
            .append(&[Change::Put(b"k", value)]);
        wal.commit(|| ()).unwrap_or_else(|e| panic!("{e}")).1
    }

    fn segment_len(wal: &Wal) -> u64 {
        let numbers = segments(&wal.dir).unwrap_or_default();
        let last = numbers
            .last()
            .copied()
            .unwrap_or_else(|| panic!("no segment"));
        fs::metadata(segment_path(&wal.dir, last))
            .unwrap_or_else(|e| panic!("{e}"))
            .len()
    }

    /// A new log in a temporary directory (`<dir>/wal`), nothing to replay.
    fn empty_wal() -> (tempfile::TempDir, Wal) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let wal = Wal::open(
            dir.path().join("wal"),
            CHECKPOINT_BYTES,
            0,
            |_, _| Ok(()),
            || Ok(()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (dir, wal)
    }

    fn replayed_numbers(dir: PathBuf) -> Vec<u64> {
        let mut applied = Vec::new();
        Wal::open(
            dir,
            CHECKPOINT_BYTES,
            0,
            |number, _| {
                applied.push(number);
                Ok(())
            },
            || Ok(()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        applied
    }

    #[test]
    fn commits_overwrite_the_filled_log_and_replay_whole() {
        let (dir, wal) = empty_wal();
        let wal_dir = dir.path().join("wal");
        assert!(wal.wants_fill(), "a new segment asks for a fill");
        assert!(!wal.wants_fill(), "once, until the fill ends");
        wal.fill_ahead().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(segment_len(&wal), FILL_BYTES);
        for _ in 0..100 {
            let after = append_and_commit(&wal, &[7u8; 3000]);
            assert!(!after.checkpoint);
        }
        assert_eq!(
            segment_len(&wal),
            FILL_BYTES,
            "commits within the fill only overwrite: the file's size never changes"
        );
        // Less than half the fill is left: the next small commit asks again.
        let mut asked = false;
        for _ in 0..100 {
            asked |= append_and_commit(&wal, &[7u8; 3000]).fill;
        }
        assert!(asked, "a fill is asked for when half of it is used");
        wal.fill_ahead().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            segment_len(&wal) > FILL_BYTES,
            "the fill writes past the first"
        );
        // A record larger than the fill is written past it (the file grows).
        let before = segment_len(&wal);
        let after = append_and_commit(&wal, &vec![9u8; 2 << 20]);
        assert!(!after.fill, "a large commit asks for no fill");
        assert!(segment_len(&wal) > before);
        // Small commits after it append; they ask for a fill only once they
        // have appended half a fill's worth (else every large round would
        // be followed by a fill that the next one overwrites).
        let mut small = 0;
        while !append_and_commit(&wal, &[7u8; 3000]).fill {
            small += 1;
            assert!(small < 1000, "small commits ask for a fill again");
        }
        assert!(
            small >= FILL_BYTES as usize / 2 / 3100,
            "a fill was asked after {small} small commits"
        );
        drop(wal);
        assert_eq!(
            replayed_numbers(wal_dir),
            (1..=(202 + small as u64)).collect::<Vec<u64>>(),
            "every record is read back, the zeros after them are the end"
        );
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
    fn a_failed_fill_is_not_asked_again_until_the_next_segment() {
        let (dir, wal) = empty_wal();
        let wal_dir = dir.path().join("wal");
        {
            // The segment's file, read-only: a fill cannot write (as on a
            // full disk).
            let mut segment = wal.segment.lock().unwrap_or_else(|e| panic!("{e}"));
            let path = segment_path(&wal_dir, segment.number);
            segment.file = Arc::new(File::open(path).unwrap_or_else(|e| panic!("{e}")));
        }
        assert!(wal.wants_fill());
        assert!(wal.fill_ahead().is_err());
        assert!(!wal.wants_fill(), "no fill per commit after a failure");
        wal.rotate().unwrap_or_else(|e| panic!("{e}"));
        assert!(wal.wants_fill(), "the next segment tries again");
        wal.fill_ahead().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(segment_len(&wal), FILL_BYTES);
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
