//! The replay check: a cold child's pauses compared with the journal's
//! rounds (calls and output), and the words that say what differed.
//!
//! Invariant: two calls are the same when site, tool and input (as JSON
//! values) are; output is the same when the journal's is a prefix of what
//! the replay printed up to the same round.

use crate::journal::Round;
use crate::sandbox::protocol::PendingCall;

pub(super) fn prefix(text: &str, len: u64) -> &str {
    text.get(..len as usize).unwrap_or(text)
}

pub(super) fn compare_calls(round: &Round, calls: &[PendingCall]) -> Result<(), String> {
    if round.calls.len() != calls.len() {
        return Err(format!(
            "the journal has {} call(s) here, the program made {}: {}",
            round.calls.len(),
            calls.len(),
            calls
                .iter()
                .map(describe_call)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (index, (recorded, made)) in round.calls.iter().zip(calls).enumerate() {
        let same_input = json_equal(&recorded.input, &made.input);
        if recorded.site != made.site || recorded.tool != made.tool || !same_input {
            return Err(format!(
                "call {} was {}({}) at site {}, now {} at site {}",
                index + 1,
                recorded.tool,
                recorded.input,
                recorded.site,
                describe_call(made),
                made.site
            ));
        }
    }
    Ok(())
}

fn describe_call(call: &PendingCall) -> String {
    format!("{}({})", call.tool, call.input)
}

fn json_equal(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

pub(super) fn describe_output_difference(stream: &str, expected: &str, got: &str) -> String {
    let at = expected
        .char_indices()
        .zip(got.chars())
        .find(|((_, a), b)| a != b)
        .map_or(expected.len().min(got.len()), |((i, _), _)| i);
    let show = |s: &str| {
        let tail: String = s.get(at..).unwrap_or("").chars().take(40).collect();
        format!("{tail:?}")
    };
    format!(
        "{stream} differs from the recorded run at byte {at}: recorded {}, now {}",
        show(expected),
        show(got)
    )
}
