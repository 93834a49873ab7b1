//! An execution's timeline for operators: each tool call it made, round by
//! round, with its input and the client's answer, cut to a preview.
//!
//! Built from the record's journal while the execution can run, and kept in
//! its ended outcome once the journal is dropped, so the console shows the
//! same timeline before and after the end.
//!
//! Invariants:
//! - A timeline holds at most [`TIMELINE_CALLS`] calls (the first ones;
//!   `omitted` counts the rest), each input and answer at most
//!   [`PREVIEW_BYTES`] bytes plus an ellipsis, cut on a character boundary:
//!   its size is bounded whatever the execution did.
//! - It is never read by replay.

use serde::{Deserialize, Serialize};

use super::{CallRecord, CallResult, ExecutionRecord};

/// Calls a timeline keeps.
const TIMELINE_CALLS: usize = 500;
/// Bytes of an input or answer a timeline keeps.
const PREVIEW_BYTES: usize = 1024;

/// One tool call as a timeline shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineCall {
    /// The pause it was made at (1 for the first).
    pub round: u32,
    /// The id the client saw.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The user's line of the call.
    pub line: u32,
    /// Its keyword arguments, JSON text (cut).
    pub input: String,
    /// The client's answer (cut); `None` while the call waits for it.
    pub answer: Option<CallResult>,
}

/// The calls of an execution, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// The first [`TIMELINE_CALLS`] calls.
    pub calls: Vec<TimelineCall>,
    /// Calls made beyond those.
    pub omitted: u32,
}

impl Timeline {
    /// The timeline of a record: its completed rounds, then its pending one.
    pub fn of(record: &ExecutionRecord) -> Self {
        let mut timeline = Timeline::default();
        for (index, call, answer) in calls_by_round(record) {
            timeline.push(round_number(index), call, answer);
        }
        timeline
    }

    fn push(&mut self, round: u32, call: &CallRecord, answer: Option<&CallResult>) {
        if self.calls.len() >= TIMELINE_CALLS {
            self.omitted = self.omitted.saturating_add(1);
            return;
        }
        self.calls.push(TimelineCall {
            round,
            id: call.id.clone(),
            tool: call.tool.clone(),
            line: call.line,
            input: preview(&call.input),
            answer: answer.map(|answer| match answer {
                CallResult::Value(text) => CallResult::Value(preview(text)),
                CallResult::Error(text) => CallResult::Error(preview(text)),
            }),
        });
    }
}

/// One call of an ended execution's history (its answer's `history`, when
/// the start asked for it): the whole input, whether the client answered
/// with an error, how long the client took to answer its round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryCall {
    /// The pause it was made at (1 for the first).
    pub round: u32,
    /// The id the client saw.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// Its input, JSON text.
    pub input: String,
    /// Whether the client answered it with an error.
    pub is_error: bool,
    /// Milliseconds from the pause to the arrival of its round's results
    /// (unknown for rounds stored by builds that did not keep the times).
    pub client_ms: Option<u64>,
}

/// The calls of a record's completed rounds, in order.
pub fn history(record: &ExecutionRecord) -> Vec<HistoryCall> {
    calls_by_round(record)
        .filter_map(|(index, call, answer)| {
            Some(HistoryCall {
                round: round_number(index),
                id: call.id.clone(),
                tool: call.tool.clone(),
                input: call.input.clone(),
                is_error: matches!(answer?, CallResult::Error(_)),
                client_ms: record.round_times.client_ms(index),
            })
        })
        .collect()
}

/// Every call of a record in order, with its round's index (from 0) and
/// its answer (`None` for the pending round's calls).
fn calls_by_round(
    record: &ExecutionRecord,
) -> impl Iterator<Item = (usize, &CallRecord, Option<&CallResult>)> {
    let answered = record.rounds.iter().map(|r| (&r.calls, Some(&r.results)));
    let pending = record.pending.iter().map(|p| (&p.calls, None));
    answered
        .chain(pending)
        .enumerate()
        .flat_map(|(index, (calls, results))| {
            calls
                .iter()
                .enumerate()
                .map(move |(n, call)| (index, call, results.and_then(|r| r.get(n))))
        })
}

/// The round number shown for a round's index: the pause it was made at.
fn round_number(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

/// `text` cut to [`PREVIEW_BYTES`] on a character boundary, with `…` when cut.
fn preview(text: &str) -> String {
    if text.len() <= PREVIEW_BYTES {
        return text.to_owned();
    }
    let cut = text.floor_char_boundary(PREVIEW_BYTES);
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::tests::sample;
    use crate::journal::{PendingRound, Round};

    fn call(n: usize, input: String) -> CallRecord {
        CallRecord {
            id: format!("call_{n}"),
            site: 0,
            tool: "get_weather".into(),
            input,
            line: 3,
        }
    }

    fn round(calls: Vec<CallRecord>, results: Vec<CallResult>) -> Round {
        Round {
            calls,
            results,
            ..sample().rounds[0].clone()
        }
    }

    #[test]
    fn rounds_then_the_pending_calls_in_order() {
        let mut record = sample();
        record.rounds = vec![round(
            vec![call(1, "{}".into()), call(2, "{\"a\":1}".into())],
            vec![
                CallResult::Value("7".into()),
                CallResult::Error("boom".into()),
            ],
        )];
        record.pending = Some(PendingRound {
            calls: vec![call(3, "{}".into())],
            stdout_len: 0,
            stderr_len: 0,
            frame: Default::default(),
        });
        let timeline = Timeline::of(&record);
        let shown: Vec<(u32, &str, Option<&CallResult>)> = timeline
            .calls
            .iter()
            .map(|c| (c.round, c.id.as_str(), c.answer.as_ref()))
            .collect();
        assert_eq!(
            shown,
            vec![
                (1, "call_1", Some(&CallResult::Value("7".into()))),
                (1, "call_2", Some(&CallResult::Error("boom".into()))),
                (2, "call_3", None),
            ]
        );
        assert_eq!(timeline.omitted, 0);
    }

    #[test]
    fn size_is_bounded_whatever_the_execution_did() {
        let mut record = sample();
        let big = "é".repeat(5000);
        record.rounds = (0..600)
            .map(|n| {
                round(
                    vec![call(n, big.clone())],
                    vec![CallResult::Value(big.clone())],
                )
            })
            .collect();
        record.pending = None;
        let timeline = Timeline::of(&record);
        assert_eq!(timeline.calls.len(), TIMELINE_CALLS);
        assert_eq!(timeline.omitted, 100);
        let first = &timeline.calls[0];
        assert!(first.input.ends_with('…') && first.input.len() <= PREVIEW_BYTES + 3);
        assert_eq!(
            first.input.trim_end_matches('…').chars().count(),
            PREVIEW_BYTES / 2
        );
    }
}
