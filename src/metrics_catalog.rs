//! Every metric baton exports, with its `# HELP` text and unit, described
//! once, and the Prometheus exporter that renders them: durations are
//! histograms with buckets (not summaries), so they aggregate across
//! scrapes and nodes.
//!
//! Invariant: a metric recorded anywhere in the crate is described here
//! (`tests/http_api.rs` checks that `/metrics` has a `# HELP` line for each
//! metric it shows).

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Bucket bounds of the duration histograms, in seconds (100 µs to 10 s).
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Bucket bounds of the flush group size histogram.
const GROUP_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// Installs the Prometheus recorder and describes every metric; `None`
/// (logged) when a recorder is already installed.
pub fn install() -> Option<PrometheusHandle> {
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full("baton_store_flush_group_size".into()),
                GROUP_BUCKETS,
            )
        });
    let handle = builder
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| tracing::warn!(error = %e, "metrics disabled"))
        .ok()?;
    describe();
    Some(handle)
}

fn describe() {
    describe_counter!(
        "baton_executions_started_total",
        "Executions started (programmatic and /exec)."
    );
    describe_counter!(
        "baton_executions_completed_total",
        "Executions that ran to their end without an error."
    );
    describe_counter!(
        "baton_executions_failed_total",
        "Executions that ended with an error, by kind (timeout, memory, exception, ...)."
    );
    describe_counter!(
        "baton_executions_cancelled_total",
        "Executions cancelled by their client."
    );
    describe_counter!(
        "baton_nondeterminism_errors_total",
        "Replays that did not reach the pause the first run reached."
    );
    describe_counter!("baton_rounds_total", "Pauses made durable and handed out.");
    describe_counter!(
        "baton_auth_refused_total",
        "Requests refused for their credentials, by `reason`: missing, unknown_key, key_not_accepted, token_not_accepted, or the token's (malformed, algorithm, missing_kid, unknown_kid, key_mismatch, signature, expired, not_yet_valid, lifetime, issuer, audience, claim)."
    );
    describe_counter!(
        "baton_runtime_session_busy_total",
        "Calls answered 409 runtime_session_busy: their runtime session ran another call for longer than --runtime-session-wait-secs."
    );
    describe_counter!(
        "baton_children_cpu_microseconds_total",
        Unit::Microseconds,
        "CPU time of the children that ended, from their control groups (0 where children have none)."
    );
    describe_counter!(
        "baton_parked_children_running_total",
        "Parked children evicted because they took CPU time while paused (a program that reported a pause and went on running); their executions resume cold."
    );
    describe_counter!(
        "baton_pauses_refused_for_storage_total",
        "Pauses not written because their record would take the key past --max-key-storage-mb (answered 429; the round is run again when retried)."
    );
    describe_counter!(
        "baton_http_bodies_refused_total",
        "Requests answered 503 because the bodies of requests under way filled --max-bodies-in-flight-mb for longer than the body timeout."
    );
    describe_gauge!(
        "baton_http_connections",
        "HTTP connections open now (at most --max-connections)."
    );
    describe_counter!(
        "baton_http_connections_refused_total",
        "HTTP connections closed as soon as accepted: --max-connections, or --max-connections-per-address for their peer, was reached."
    );
    describe_counter!(
        "baton_cold_resumes_total",
        "Continuations that replayed the journal in a fresh child (no parked child)."
    );
    describe_counter!(
        "baton_rounds_run_again_total",
        "Rounds run again by replay because the node that ran them died after storing their results (its pause, if it made one, was not yet durable)."
    );
    describe_counter!(
        "baton_forwarded_continuations_total",
        "Continuations sent to the node whose child is parked for them; `outcome` is `answered` (that node answered) or `served_here` (it could not be reached or could not serve, so this node did)."
    );
    describe_counter!(
        "baton_forwarded_cancels_total",
        "Cancels decided here for an execution another node runs or holds, sent on to that node so it ends the child at once; `outcome` is `delivered` or `failed` (that node's next upkeep ends it)."
    );
    describe_counter!(
        "baton_retried_continuations_total",
        "Continuations answered from the stored outcome of the same continuation."
    );
    describe_counter!(
        "baton_parked_evictions_total",
        "Parked children evicted for the parked count or memory budget."
    );
    describe_counter!(
        "baton_store_flushes_total",
        "Store flushes (group commits) to disk."
    );
    describe_gauge!("baton_parked_children", "Children parked at a pause.");
    describe_gauge!(
        "baton_parked_bytes",
        Unit::Bytes,
        "Private memory of the parked children measured so far."
    );
    describe_gauge!(
        "baton_idle_children",
        "Pre-forked children ready for a start."
    );
    describe_histogram!(
        "baton_start_to_pause_seconds",
        Unit::Seconds,
        "From a start's job to its first pause or end, in the engine."
    );
    describe_histogram!(
        "baton_resume_to_pause_seconds",
        Unit::Seconds,
        "From a continuation's results to the next pause or end, in the engine."
    );
    describe_histogram!(
        "baton_pause_durable_seconds",
        Unit::Seconds,
        "From a step's store write to the flush its reply waits for (group commit; on the embedded store a pause waits for its claim's flush, begun before its code ran): pauses, and ends that name files."
    );
    describe_histogram!(
        "baton_store_flush_group_size",
        "Writers made durable by one flush."
    );
}
