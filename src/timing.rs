//! Request timing: a span of the `baton::timing` target around each step of
//! a request (decode, rewrite, child, encode, store write, flush...). With
//! `--trace-requests` each span is printed when it closes, with its busy
//! and idle time; otherwise the target is disabled and a span costs one
//! filter check.
//!
//! Invariant: a step's span covers exactly that step; async steps are
//! instrumented (`Instrument`), never entered across an `.await`.

/// The target of the timing spans.
pub const TARGET: &str = "baton::timing";

/// A span for the step `$name` of a request.
macro_rules! step {
    ($name:literal) => {
        tracing::debug_span!(target: $crate::timing::TARGET, $name)
    };
}

pub(crate) use step;
