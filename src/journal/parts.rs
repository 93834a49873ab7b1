//! An execution record stored in parts, so that a pause writes what that
//! pause added and nothing it wrote before (formats 4 and 5):
//!
//! - the **start** part: what the start request fixed (source, tools, seed,
//!   clock base, budget, the request's files, argv), written once;
//! - one **round** part per completed round (its calls, results, offsets,
//!   frame and clock), written once, when the round is complete;
//! - the **progress** part: what each pause changes (run time used, the
//!   pending round, the output so far, and how many rounds are stored),
//!   rewritten at each pause.
//!
//! Each part is the magic `BATN`, the little-endian `u16` version, then
//! bincode. Format 5 appends to the start and progress parts an
//! *extension* (the bincode of [`StartExtension`], [`ProgressExtension`])
//! after the format-4 body, which is otherwise unchanged: a format-4 part
//! reads with default extensions. Formats 2 and 3 stored the whole record
//! as one value in the start part's place; such a value still loads
//! (`ExecutionRecord::decode`) and is replaced by parts at the next pause.
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
    CELL_VERSION, COMPACTED_CELL_VERSION, ClockBase, ExecutionRecord, FIRST_PARTS_VERSION,
    FORMAT_VERSION, JournalError, MAGIC, PendingRound, READ_ONLY_VERSION, Round, RoundTimes,
    SessionCell, WorkspaceFile, bincode_limits,
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

/// What format 5 added to the start part.
#[derive(Default, Serialize, Deserialize)]
struct StartExtension<'a> {
    direct_only: Cow<'a, [String]>,
    include_history: bool,
}

/// What format 6 added to the start part: the extension of format 5 and
/// the names of the files code may not change. Written only for a start
/// that has such files (its other parts, and every other start, stay
/// format 5, which earlier builds read).
#[derive(Default, Serialize, Deserialize)]
struct StartExtension6<'a> {
    direct_only: Cow<'a, [String]>,
    include_history: bool,
    read_only: Cow<'a, [String]>,
}

impl<'a> From<StartExtension<'a>> for StartExtension6<'a> {
    fn from(extension: StartExtension<'a>) -> Self {
        StartExtension6 {
            direct_only: extension.direct_only,
            include_history: extension.include_history,
            read_only: Cow::Borrowed(&[]),
        }
    }
}

/// What format 7 added to the start part: the extension of format 6 and
/// the cell's place in its session. Written only for a session's cells.
#[derive(Default, Serialize, Deserialize)]
struct StartExtension7<'a> {
    direct_only: Cow<'a, [String]>,
    include_history: bool,
    read_only: Cow<'a, [String]>,
    cell: Option<SessionCell>,
    directories: Cow<'a, [String]>,
}

impl<'a> From<StartExtension6<'a>> for StartExtension7<'a> {
    fn from(extension: StartExtension6<'a>) -> Self {
        StartExtension7 {
            direct_only: extension.direct_only,
            include_history: extension.include_history,
            read_only: extension.read_only,
            cell: None,
            directories: Cow::Borrowed(&[]),
        }
    }
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

/// What format 5 added to the progress part.
#[derive(Default, Serialize, Deserialize)]
struct ProgressExtension<'a> {
    round_times: Cow<'a, RoundTimes>,
}

/// Header and bincode of one part; `extension`, when given, follows it.
fn encode_part<T: Serialize, E: Serialize>(
    part: &T,
    extension: Option<&E>,
) -> Result<Vec<u8>, JournalError> {
    encode_versioned(FORMAT_VERSION, part, extension)
}

/// Header (`version`) and bincode of one part and its extension.
fn encode_versioned<T: Serialize, E: Serialize>(
    version: u16,
    part: &T,
    extension: Option<&E>,
) -> Result<Vec<u8>, JournalError> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    let encoded = bincode::serialize_into(&mut out, part).and_then(|()| match extension {
        Some(extension) => bincode::serialize_into(&mut out, extension),
        None => Ok(()),
    });
    encoded.map_err(|e| JournalError::Corrupt(format!("a record part does not encode: {e}")))?;
    Ok(out)
}

/// A round part (no extension).
fn encode_round(round: &Round) -> Result<Vec<u8>, JournalError> {
    encode_part::<Round, ()>(round, None)
}

/// The version and body of a part of format 4, 5 or 6.
fn part_body(bytes: &[u8]) -> Result<(u16, &[u8]), JournalError> {
    if bytes.len() < 6 || &bytes[..4] != MAGIC {
        return Err(JournalError::BadMagic);
    }
    match u16::from_le_bytes([bytes[4], bytes[5]]) {
        version @ (FIRST_PARTS_VERSION
        | FORMAT_VERSION
        | READ_ONLY_VERSION
        | CELL_VERSION
        | COMPACTED_CELL_VERSION) => Ok((version, &bytes[6..])),
        version => Err(JournalError::UnknownVersion(version)),
    }
}

fn decode_part<'de, T: Deserialize<'de>>(bytes: &'de [u8], what: &str) -> Result<T, JournalError> {
    let (_, body) = part_body(bytes)?;
    bincode::Options::deserialize(bincode_limits(bytes.len()), body)
        .map_err(|e| JournalError::Corrupt(format!("{what} part: {e}")))
}

/// A part and the extension after it (the default for a format-4 part).
fn decode_extended<'de, T, E>(bytes: &'de [u8], what: &str) -> Result<(T, E), JournalError>
where
    T: Deserialize<'de> + Serialize,
    E: Deserialize<'de> + Default,
{
    let (part, rest) = split_extension::<T>(bytes, what)?;
    match rest {
        None => Ok((part, E::default())),
        Some(rest) => Ok((part, decode_rest(bytes.len(), rest, what)?)),
    }
}

/// The start part and its extension: format 7's (a cell), 6's, or 5's (no
/// file is read-only), or none (format 4).
fn decode_start(bytes: &[u8]) -> Result<(StartPart<'_>, StartExtension7<'_>), JournalError> {
    let (part, rest) = split_extension::<StartPart<'_>>(bytes, "start")?;
    let extension = match (part_body(bytes)?.0, rest) {
        (_, None) => StartExtension7::default(),
        (CELL_VERSION, Some(rest)) => decode_rest(bytes.len(), rest, "start")?,
        (COMPACTED_CELL_VERSION, Some(rest)) => {
            let (mut extension, offset): (StartExtension7<'_>, u32) =
                decode_rest(bytes.len(), rest, "start")?;
            if let Some(cell) = extension.cell.as_mut() {
                cell.offset = offset;
            }
            extension
        }
        (READ_ONLY_VERSION, Some(rest)) => {
            decode_rest::<StartExtension6<'_>>(bytes.len(), rest, "start")?.into()
        }
        (_, Some(rest)) => StartExtension6::from(decode_rest::<StartExtension<'_>>(
            bytes.len(),
            rest,
            "start",
        )?)
        .into(),
    };
    Ok((part, extension))
}

fn decode_rest<'de, E: Deserialize<'de>>(
    len: usize,
    rest: &'de [u8],
    what: &str,
) -> Result<E, JournalError> {
    use bincode::Options;
    bincode_limits(len)
        .deserialize(rest)
        .map_err(|e| JournalError::Corrupt(format!("{what} part: {e}")))
}

/// A part, and the bytes of its extension (none in format 4).
fn split_extension<'de, T>(
    bytes: &'de [u8],
    what: &str,
) -> Result<(T, Option<&'de [u8]>), JournalError>
where
    T: Deserialize<'de> + Serialize,
{
    use bincode::Options;
    let corrupt = |e: bincode::Error| JournalError::Corrupt(format!("{what} part: {e}"));
    let (version, body) = part_body(bytes)?;
    let options = || bincode_limits(bytes.len());
    let part: T = options().deserialize(body).map_err(corrupt)?;
    if version == FIRST_PARTS_VERSION {
        return Ok((part, None));
    }
    // Fixed-width bincode is canonical: the part's own size says where its
    // extension starts.
    let used = options().serialized_size(&part).map_err(corrupt)?;
    let rest = usize::try_from(used)
        .ok()
        .and_then(|used| body.get(used..))
        .filter(|rest| !rest.is_empty())
        .ok_or_else(|| JournalError::Corrupt(format!("{what} part: its extension is missing")))?;
    Ok((part, Some(rest)))
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
            Some(self.encode_start()?)
        } else {
            None
        };
        let rounds = self
            .rounds
            .iter()
            .enumerate()
            .skip(self.stored.rounds)
            .map(|(index, round)| Ok((round_index(index)?, encode_round(round)?)))
            .collect::<Result<Vec<_>, JournalError>>()?;
        let progress = encode_part(
            &ProgressPart {
                used_ms: self.used_ms,
                rounds: round_index(self.rounds.len())?,
                pending: Cow::Borrowed(&self.pending),
                stdout: Cow::Borrowed(&self.stdout),
                stderr: Cow::Borrowed(&self.stderr),
            },
            Some(&ProgressExtension {
                round_times: Cow::Borrowed(&self.round_times),
            }),
        )?;
        Ok(NewParts {
            start,
            rounds,
            progress,
        })
    }

    /// The start part: format 7 for a session's cell, 6 when some file is
    /// read-only, else 5.
    fn encode_start(&self) -> Result<Vec<u8>, JournalError> {
        let part = StartPart {
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
        };
        if let Some(cell) = &self.cell {
            let extension = StartExtension7 {
                direct_only: Cow::Borrowed(&self.direct_only),
                include_history: self.include_history,
                read_only: Cow::Borrowed(&self.read_only),
                cell: Some(cell.clone()),
                directories: Cow::Borrowed(&self.directories),
            };
            if cell.offset > 0 {
                return encode_versioned(
                    COMPACTED_CELL_VERSION,
                    &part,
                    Some(&(extension, cell.offset)),
                );
            }
            return encode_versioned(CELL_VERSION, &part, Some(&extension));
        }
        if self.read_only.is_empty() {
            return encode_part(
                &part,
                Some(&StartExtension {
                    direct_only: Cow::Borrowed(&self.direct_only),
                    include_history: self.include_history,
                }),
            );
        }
        encode_versioned(
            READ_ONLY_VERSION,
            &part,
            Some(&StartExtension6 {
                direct_only: Cow::Borrowed(&self.direct_only),
                include_history: self.include_history,
                read_only: Cow::Borrowed(&self.read_only),
            }),
        )
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
        let (start_part, start_extension) = decode_start(start)?;
        let (progress_part, progress_extension): (ProgressPart<'_>, ProgressExtension<'_>) =
            decode_extended(progress, "progress")?;
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
            direct_only: start_extension.direct_only.into_owned(),
            include_history: start_extension.include_history,
            read_only: start_extension.read_only.into_owned(),
            lang: crate::program::Lang::Python,
            directories: start_extension.directories.into_owned(),
            directories_left: Vec::new(),
            contracts: Default::default(),
            owner: [0; 8],
            round_times: progress_extension.round_times.into_owned(),
            cell: start_extension.cell,
            names: Vec::new(),
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
    fn format_5_extensions_round_trip_and_format_4_parts_still_read() {
        let mut record = sample();
        record.direct_only = vec!["send-email".into()];
        record.include_history = true;
        record.round_times = RoundTimes {
            paused_ms: vec![1_000, 5_000],
            answered_ms: vec![1_250],
        };
        let (start, progress, rounds) = parts_of(&record);
        let back = ExecutionRecord::from_parts(&start, &progress, &rounds)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.direct_only, record.direct_only);
        assert!(back.include_history);
        assert_eq!(back.round_times, record.round_times);
        assert_eq!(back.round_times.client_ms(0), Some(250));
        assert_eq!(back.round_times.client_ms(1), None);
        // The same parts as format 4 wrote them: no extension, version 4.
        let as_format_4 = |part: &[u8], extension_len: usize| {
            let mut old = part[..part.len() - extension_len].to_vec();
            old[4..6].copy_from_slice(&FIRST_PARTS_VERSION.to_le_bytes());
            old
        };
        let start_extension = bincode::serialize(&StartExtension {
            direct_only: Cow::Borrowed(&record.direct_only),
            include_history: true,
        })
        .unwrap_or_default();
        let progress_extension = bincode::serialize(&ProgressExtension {
            round_times: Cow::Borrowed(&record.round_times),
        })
        .unwrap_or_default();
        let mut old_rounds = rounds.clone();
        for round in &mut old_rounds {
            round[4..6].copy_from_slice(&FIRST_PARTS_VERSION.to_le_bytes());
        }
        let old = ExecutionRecord::from_parts(
            &as_format_4(&start, start_extension.len()),
            &as_format_4(&progress, progress_extension.len()),
            &old_rounds,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.source, record.source);
        assert_eq!(old.rounds, record.rounds);
        assert!(old.direct_only.is_empty() && !old.include_history);
        assert_eq!(old.round_times, RoundTimes::default());
        // A format-5 part cut before its extension is corrupt, not default.
        let cut = &progress[..progress.len() - progress_extension.len()];
        assert!(matches!(
            ExecutionRecord::from_parts(&start, cut, &rounds),
            Err(JournalError::Corrupt(_))
        ));
    }

    #[test]
    fn a_start_with_read_only_files_is_format_6_and_others_stay_format_5() {
        let version = |part: &[u8]| u16::from_le_bytes([part[4], part[5]]);
        let mut record = sample();
        let (plain, _, _) = parts_of(&record);
        assert_eq!(version(&plain), FORMAT_VERSION);
        record.read_only = vec!["skills/pdf/SKILL.md".into()];
        record.direct_only = vec!["send-email".into()];
        let (start, progress, rounds) = parts_of(&record);
        assert_eq!(version(&start), READ_ONLY_VERSION);
        assert_eq!(version(&progress), FORMAT_VERSION);
        let back = ExecutionRecord::from_parts(&start, &progress, &rounds)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.read_only, record.read_only);
        assert_eq!(back.direct_only, record.direct_only);
        let cut = &start[..start.len() - 1];
        assert!(ExecutionRecord::from_parts(cut, &progress, &rounds).is_err());
    }

    #[test]
    fn a_sessions_cell_is_format_7_with_its_place_and_directories() {
        let version = |part: &[u8]| u16::from_le_bytes([part[4], part[5]]);
        let mut record = sample();
        record.read_only = vec!["in.csv".into()];
        record.directories = vec!["out".into()];
        record.cell = Some(SessionCell {
            session: [9; 16],
            index: 3,
            site_base: 2 << 20,
            marker: "_Bc3".into(),
            fresh_workspace: true,
            offset: 0,
            snapshot: false,
        });
        let (start, progress, rounds) = parts_of(&record);
        assert_eq!(version(&start), CELL_VERSION);
        assert_eq!(version(&progress), FORMAT_VERSION);
        let back = ExecutionRecord::from_parts(&start, &progress, &rounds)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.cell, record.cell);
        assert_eq!(back.directories, record.directories);
        assert_eq!(back.read_only, record.read_only);
        // Not a cell: format 6 (or 5) as before, no directories stored.
        record.cell = None;
        let (start, progress, rounds) = parts_of(&record);
        assert_eq!(version(&start), READ_ONLY_VERSION);
        let back = ExecutionRecord::from_parts(&start, &progress, &rounds)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((back.cell, back.directories.len()), (None, 0));
    }

    #[test]
    fn a_cell_of_a_compacted_session_is_format_8_with_its_offset() {
        let version = |part: &[u8]| u16::from_le_bytes([part[4], part[5]]);
        let mut record = sample();
        record.directories = vec!["out".into()];
        let cell = SessionCell {
            session: [9; 16],
            index: 2,
            site_base: 1 << 20,
            marker: "_Bc2".into(),
            fresh_workspace: false,
            offset: 64,
            snapshot: true,
        };
        record.cell = Some(cell.clone());
        let (start, progress, rounds) = parts_of(&record);
        assert_eq!(version(&start), COMPACTED_CELL_VERSION);
        let back = ExecutionRecord::from_parts(&start, &progress, &rounds)
            .unwrap_or_else(|e| panic!("{e}"));
        let back_cell = back.cell.unwrap_or_else(|| panic!("no cell"));
        // The offset is kept; the snapshot flag is never stored.
        assert_eq!((back_cell.offset, back_cell.number()), (64, 66));
        // Its child is found by the key of the cell before it, in the same
        // compaction: the base's (number 65), never a child parked after
        // the 65th cell before the compaction.
        let base = SessionCell {
            index: 1,
            ..back_cell.clone()
        };
        assert!(base.is_base() && base.hot_key().is_none());
        assert_eq!(back_cell.hot_key(), Some(base.park_key()));
        assert_ne!(base.park_key(), crate::journal::session_park_key(0, 65));
        let never_compacted = SessionCell {
            offset: 0,
            ..back_cell.clone()
        };
        assert_eq!(
            (never_compacted.park_key(), never_compacted.hot_key()),
            (2, Some(1))
        );
        assert_eq!(
            back_cell,
            SessionCell {
                snapshot: false,
                ..cell
            }
        );
        assert_eq!(back.directories, record.directories);
        let cut = &start[..start.len() - 2];
        assert!(ExecutionRecord::from_parts(cut, &progress, &rounds).is_err());
    }

    #[test]
    fn whole_records_of_earlier_formats_are_recognised() {
        let whole = sample().encode().unwrap_or_default();
        assert!(is_whole_record(&whole));
        let (start, _, _) = parts_of(&sample());
        assert!(!is_whole_record(&start));
    }
}
