//! An execution record stored in parts, so that a pause writes what that
//! pause added and nothing it wrote before (format 4):
//!
//! - the **start** part: what the start request fixed (source, tools, seed,
//!   clock base, budget, the request's files, argv), written once;
//! - one **round** part per completed round (its calls, results, offsets,
//!   frame and clock), written once, when the round is complete;
//! - the **progress** part: what each pause changes (run time used, the
//!   pending round, the output so far, and how many rounds are stored),
//!   rewritten at each pause.
//!
//! Each part is the magic `BATN`, the little-endian `u16` version 4, then
//! bincode. Formats 2 and 3 stored the whole record as one value in the
//! start part's place; such a value still loads (`ExecutionRecord::decode`)
//! and is replaced by parts at the next pause.
//!
//! Invariants:
//! - [`ExecutionRecord::from_parts`] returns only a record that validates,
//!   and only when the progress part's round count equals the round parts
//!   given, numbered `0..n` in order: a lost or extra round is corruption,
//!   never a silently shorter replay.
//! - [`ExecutionRecord::new_parts`] encodes exactly what
//!   [`ExecutionRecord::stored`] says the store lacks; the caller records
//!   the write with [`ExecutionRecord::mark_stored`] once it succeeded.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{
    ClockBase, ExecutionRecord, FORMAT_VERSION, JournalError, MAGIC, PendingRound, Round,
    WorkspaceFile, bincode_limits,
};
use crate::tools::ToolDef;

/// What the store holds of a record, so the next pause writes only the
/// rest (kept in memory, not stored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoredExtent {
    /// Size of the stored start part; 0 when it is not stored (a new
    /// execution, or a record stored whole by an earlier format).
    pub start_bytes: u64,
    /// How many rounds are stored as round parts.
    pub rounds: usize,
    /// Their total size.
    pub rounds_bytes: u64,
    /// Size of the stored progress part (0 when none is stored).
    pub progress_bytes: u64,
}

impl StoredExtent {
    /// Everything the store holds of the record, bytes.
    pub fn total(&self) -> u64 {
        self.start_bytes + self.rounds_bytes + self.progress_bytes
    }
}

/// The parts a pause must write.
#[derive(Debug)]
pub struct NewParts {
    /// The start part, when it is not stored yet.
    pub start: Option<Vec<u8>>,
    /// Round parts not stored yet, with their round index (from 0).
    pub rounds: Vec<(u32, Vec<u8>)>,
    /// The progress part (always rewritten).
    pub progress: Vec<u8>,
}

impl NewParts {
    /// The size of everything the record will have stored once these are
    /// written on top of `stored`.
    pub fn total_bytes(&self, stored: &StoredExtent) -> u64 {
        let start = self
            .start
            .as_ref()
            .map_or(stored.start_bytes, |s| s.len() as u64);
        let rounds: u64 = self.rounds.iter().map(|(_, r)| r.len() as u64).sum();
        start + stored.rounds_bytes + rounds + self.progress.len() as u64
    }
}

/// The start part.
#[derive(Serialize, Deserialize)]
struct StartPart<'a> {
    id: [u8; 16],
    session_id: Cow<'a, str>,
    source: Cow<'a, str>,
    tools: Cow<'a, [ToolDef]>,
    timeout_ms: u64,
    seed: [u8; 32],
    hash_seed: u32,
    clock0: ClockBase,
    files: Cow<'a, [WorkspaceFile]>,
    argv: Cow<'a, [String]>,
}

/// The progress part.
#[derive(Serialize, Deserialize)]
struct ProgressPart<'a> {
    used_ms: u64,
    rounds: u32,
    pending: Cow<'a, Option<PendingRound>>,
    stdout: Cow<'a, str>,
    stderr: Cow<'a, str>,
}

/// Header and bincode of one part.
fn encode_part<T: Serialize>(part: &T) -> Result<Vec<u8>, JournalError> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bincode::serialize_into(&mut out, part)
        .map_err(|e| JournalError::Corrupt(format!("a record part does not encode: {e}")))?;
    Ok(out)
}

/// The body of a part of this format.
fn part_body(bytes: &[u8]) -> Result<&[u8], JournalError> {
    if bytes.len() < 6 || &bytes[..4] != MAGIC {
        return Err(JournalError::BadMagic);
    }
    match u16::from_le_bytes([bytes[4], bytes[5]]) {
        FORMAT_VERSION => Ok(&bytes[6..]),
        version => Err(JournalError::UnknownVersion(version)),
    }
}

fn decode_part<'de, T: Deserialize<'de>>(bytes: &'de [u8], what: &str) -> Result<T, JournalError> {
    let body = part_body(bytes)?;
    bincode::Options::deserialize(bincode_limits(bytes.len()), body)
        .map_err(|e| JournalError::Corrupt(format!("{what} part: {e}")))
}

/// Whether a stored start value is a whole record of an earlier format
/// (2 or 3) rather than a start part.
pub fn is_whole_record(start: &[u8]) -> bool {
    start.len() >= 6
        && &start[..4] == MAGIC
        && matches!(u16::from_le_bytes([start[4], start[5]]), 2 | 3)
}

impl ExecutionRecord {
    /// The parts the store lacks (see [`ExecutionRecord::stored`]).
    pub fn new_parts(&self) -> Result<NewParts, JournalError> {
        let start = if self.stored.start_bytes == 0 {
            Some(encode_part(&StartPart {
                id: self.id,
                session_id: Cow::Borrowed(&self.session_id),
                source: Cow::Borrowed(&self.source),
                tools: Cow::Borrowed(&self.tools),
                timeout_ms: self.timeout_ms,
                seed: self.seed,
                hash_seed: self.hash_seed,
                clock0: self.clock0,
                files: Cow::Borrowed(&self.files),
                argv: Cow::Borrowed(&self.argv),
            })?)
        } else {
            None
        };
        let rounds = self
            .rounds
            .iter()
            .enumerate()
            .skip(self.stored.rounds)
            .map(|(index, round)| Ok((round_index(index)?, encode_part(round)?)))
            .collect::<Result<Vec<_>, JournalError>>()?;
        let progress = encode_part(&ProgressPart {
            used_ms: self.used_ms,
            rounds: round_index(self.rounds.len())?,
            pending: Cow::Borrowed(&self.pending),
            stdout: Cow::Borrowed(&self.stdout),
            stderr: Cow::Borrowed(&self.stderr),
        })?;
        Ok(NewParts {
            start,
            rounds,
            progress,
        })
    }

    /// Records that `parts` were written.
    pub fn mark_stored(&mut self, parts: &NewParts) {
        if let Some(start) = &parts.start {
            self.stored.start_bytes = start.len() as u64;
        }
        self.stored.rounds += parts.rounds.len();
        self.stored.rounds_bytes += parts
            .rounds
            .iter()
            .map(|(_, r)| r.len() as u64)
            .sum::<u64>();
        self.stored.progress_bytes = parts.progress.len() as u64;
    }

    /// Rebuilds a record from its stored parts: the start part, the
    /// progress part and the round parts in order.
    pub fn from_parts(
        start: &[u8],
        progress: &[u8],
        rounds: &[Vec<u8>],
    ) -> Result<Self, JournalError> {
        let start_part: StartPart<'_> = decode_part(start, "start")?;
        let progress_part: ProgressPart<'_> = decode_part(progress, "progress")?;
        if progress_part.rounds as usize != rounds.len() {
            return Err(JournalError::Corrupt(format!(
                "{} rounds stored, {} expected",
                rounds.len(),
                progress_part.rounds
            )));
        }
        let decoded_rounds = rounds
            .iter()
            .map(|bytes| decode_part::<Round>(bytes, "round"))
            .collect::<Result<Vec<_>, _>>()?;
        let record = ExecutionRecord {
            id: start_part.id,
            session_id: start_part.session_id.into_owned(),
            source: start_part.source.into_owned(),
            tools: start_part.tools.into_owned(),
            timeout_ms: start_part.timeout_ms,
            used_ms: progress_part.used_ms,
            seed: start_part.seed,
            hash_seed: start_part.hash_seed,
            clock0: start_part.clock0,
            rounds: decoded_rounds,
            pending: progress_part.pending.into_owned(),
            stdout: progress_part.stdout.into_owned(),
            stderr: progress_part.stderr.into_owned(),
            files: start_part.files.into_owned(),
            argv: start_part.argv.into_owned(),
            produced: Vec::new(),
            removed: Vec::new(),
            stored: StoredExtent {
                start_bytes: start.len() as u64,
                rounds: rounds.len(),
                rounds_bytes: rounds.iter().map(|r| r.len() as u64).sum(),
                progress_bytes: progress.len() as u64,
            },
        };
        record.validate()?;
        Ok(record)
    }
}

/// A round's index as stored (a record never has 2^32 rounds; one that
/// claims to is refused rather than truncated).
fn round_index(index: usize) -> Result<u32, JournalError> {
    u32::try_from(index).map_err(|_| JournalError::Corrupt(format!("round index {index}")))
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    fn parts_of(record: &ExecutionRecord) -> (Vec<u8>, Vec<u8>, Vec<Vec<u8>>) {
        let parts = record.new_parts().unwrap_or_else(|e| panic!("{e}"));
        let start = parts.start.unwrap_or_default();
        let rounds = parts.rounds.into_iter().map(|(_, r)| r).collect();
        (start, parts.progress, rounds)
    }

    #[test]
    fn parts_round_trip() {
        let record = sample();
        let (start, progress, rounds) = parts_of(&record);
        let back = ExecutionRecord::from_parts(&start, &progress, &rounds)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.stored.rounds, 1);
        assert_eq!(back.stored.start_bytes, start.len() as u64);
        assert_eq!(back.stored.progress_bytes, progress.len() as u64);
        let back = ExecutionRecord {
            stored: StoredExtent::default(),
            ..back
        };
        assert_eq!(back, record);
    }

    #[test]
    fn a_pause_writes_only_what_is_new() {
        let mut record = sample();
        let first = record.new_parts().unwrap_or_else(|e| panic!("{e}"));
        assert!(first.start.is_some());
        assert_eq!(first.rounds.len(), 1);
        record.mark_stored(&first);
        let mut round = record.rounds[0].clone();
        round.results = vec![super::super::CallResult::Value("x".repeat(100_000))];
        record.rounds.push(round);
        let second = record.new_parts().unwrap_or_else(|e| panic!("{e}"));
        assert!(second.start.is_none(), "the start part is written once");
        assert_eq!(
            second.rounds.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![1],
            "only the new round"
        );
        let total = second.total_bytes(&record.stored);
        record.mark_stored(&second);
        assert_eq!(record.stored.rounds, 2);
        assert_eq!(
            total,
            record.stored.total(),
            "the extent says what is stored"
        );
        assert_eq!(
            total,
            record.stored.start_bytes + record.stored.rounds_bytes + second.progress.len() as u64
        );
    }

    #[test]
    fn a_lost_or_extra_round_is_corruption() {
        let mut record = sample();
        record.rounds.push(record.rounds[0].clone());
        let (start, progress, rounds) = parts_of(&record);
        for wrong in [
            &rounds[..1],
            &[rounds[0].clone(), rounds[1].clone(), rounds[1].clone()][..],
        ] {
            assert!(matches!(
                ExecutionRecord::from_parts(&start, &progress, wrong),
                Err(JournalError::Corrupt(_))
            ));
        }
        assert!(matches!(
            ExecutionRecord::from_parts(&progress, &start, &rounds),
            Err(JournalError::Corrupt(_))
        ));
    }

    #[test]
    fn whole_records_of_earlier_formats_are_recognised() {
        let whole = sample().encode().unwrap_or_default();
        assert!(is_whole_record(&whole));
        let (start, _, _) = parts_of(&sample());
        assert!(!is_whole_record(&start));
    }
}
