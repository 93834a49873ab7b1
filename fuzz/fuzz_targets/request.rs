//! The request decoder and the tool-results check.
//!
//! Input: the pending call ids of a paused execution, and a request body
//! (see [`Input`]).
//! Properties: decoding any body (as an exec, a session's creation, a
//! session's cell, a cancel) never panics and gives a request or a 400 (or
//! the invalid-token answer); a start or cell has non-blank code and a
//! timeout in range, a cell never names cell 0; and for a continuation, ordering its results against the
//! pending calls succeeds exactly when every pending id is answered once
//! and no other id is given, in which case the i-th result answers the i-th
//! call.
#![no_main]

use std::collections::{HashMap, HashSet};

use baton::api::error::ApiError;
use baton::api::request::{
    ExecRequest, TIMEOUT_RANGE_MS, decode_cancel, decode_cell, decode_exec, decode_session,
};
use baton::journal::{CallRecord, CallResult, FrameSummary, PendingRound};
use baton::service::{ServiceError, order_results};
use libfuzzer_sys::fuzz_target;

/// The input: pending call ids, one per line, then a NUL byte, then the
/// body (no NUL: no ids, the whole input is the body).
struct Input {
    pending_ids: Vec<String>,
    body: Vec<u8>,
}

impl Input {
    fn parse(data: &[u8]) -> Self {
        match data.iter().position(|&b| b == 0) {
            Some(at) => Self {
                pending_ids: String::from_utf8_lossy(&data[..at])
                    .lines()
                    .map(str::to_owned)
                    .collect(),
                body: data[at + 1..].to_vec(),
            },
            None => Self {
                pending_ids: Vec::new(),
                body: data.to_vec(),
            },
        }
    }
}

fn pending(ids: &[String]) -> PendingRound {
    let unique: Vec<&String> = {
        let mut seen = HashSet::new();
        ids.iter().filter(|id| seen.insert(id.as_str())).collect()
    };
    PendingRound {
        calls: unique
            .into_iter()
            .map(|id| CallRecord {
                id: id.clone(),
                site: 0,
                tool: "t".into(),
                input: "{}".into(),
                line: 1,
            })
            .collect(),
        stdout_len: 0,
        stderr_len: 0,
        frame: FrameSummary::default(),
    }
}

fn check_results(pending: &PendingRound, results: Vec<baton::service::ToolResult>) {
    let mut given: HashMap<String, usize> = HashMap::new();
    for result in &results {
        *given.entry(result.call_id.clone()).or_default() += 1;
    }
    let exact = given.len() == pending.calls.len()
        && pending.calls.iter().all(|c| given.get(&c.id) == Some(&1));
    let by_id: HashMap<String, baton::service::ToolResult> = results
        .iter()
        .map(|r| (r.call_id.clone(), r.clone()))
        .collect();
    match order_results(pending, results) {
        Ok(ordered) => {
            assert!(exact, "accepted results that do not answer each call once");
            assert_eq!(ordered.len(), pending.calls.len());
            for (call, result) in pending.calls.iter().zip(&ordered) {
                let given = &by_id[&call.id];
                match result {
                    CallResult::Error(message) => {
                        assert!(given.is_error && !message.is_empty());
                    }
                    CallResult::Value(json) => {
                        assert!(!given.is_error);
                        assert_eq!(json, &given.result);
                        // Compacted, still JSON: what the child's json reads.
                        assert!(
                            serde_json::from_str::<&serde_json::value::RawValue>(json).is_ok(),
                            "{json}"
                        );
                    }
                }
            }
        }
        Err(ServiceError::Invalid(message)) => {
            assert!(
                !exact,
                "refused results that answer each call once: {message}"
            );
        }
        Err(other) => panic!("ordering results failed with {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let input = Input::parse(data);
    let _ = decode_cancel(&input.body);
    match decode_session(&input.body) {
        Ok(_) | Err(ApiError::BadRequest(_)) => {}
        Err(other) => panic!("decoding a session failed with {other:?}"),
    }
    match decode_cell(&input.body, Some("request-1")) {
        Ok((start, cell)) => {
            assert!(!start.code.trim().is_empty());
            assert!(TIMEOUT_RANGE_MS.contains(&start.timeout_ms));
            assert_ne!(cell, Some(0));
        }
        Err(ApiError::BadRequest(_)) => {}
        Err(other) => panic!("decoding a cell failed with {other:?}"),
    }
    match decode_exec(&input.body, Some("request-1")) {
        Ok(ExecRequest::Start(start)) => {
            assert!(!start.code.trim().is_empty());
            assert!(TIMEOUT_RANGE_MS.contains(&start.timeout_ms));
            assert_eq!(start.request_id.as_deref(), Some("request-1"));
        }
        Ok(ExecRequest::Continue { results, .. }) => match results.decode() {
            Ok(results) => check_results(&pending(&input.pending_ids), results),
            Err(ApiError::BadRequest(_)) => {}
            Err(other) => panic!("decoding results failed with {other:?}"),
        },
        Err(ApiError::BadRequest(_) | ApiError::Service(ServiceError::InvalidToken)) => {}
        Err(other) => panic!("decoding failed with {other:?}"),
    }
});
