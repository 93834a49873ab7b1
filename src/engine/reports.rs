//! Checks of what a child reports. The runtime never reports a call to an
//! unknown tool, a call its tool's schema refuses, or a file over the
//! limits; a
//! program that talks to the native bridge itself might, and such a report
//! fails the execution instead of reaching the client or the store.

use crate::contract::SharedContract;
use crate::deep_json;
use crate::failure::Failure;
use crate::journal::{ExecutionRecord, WorkspaceFile};
use crate::sandbox::protocol::PendingCall;

use super::ExecLimits;

/// Checks a batch a child reports: every call names a tool of the request
/// and carries a JSON object its tool's contract accepts
/// ([`crate::contract::check_input`]). The runtime guarantees all three; a
/// program that calls the native bridge itself does not.
pub(super) fn check_calls(
    record: &ExecutionRecord,
    limits: &ExecLimits,
    calls: &[PendingCall],
) -> Result<(), String> {
    if calls.is_empty() {
        return Err("Invalid report: a pause with no call".into());
    }
    if calls.len() > crate::config::defaults::CALLS_PER_ROUND as usize {
        return Err(format!(
            "Invalid report: a pause with {} calls, over the limit of {}",
            calls.len(),
            crate::config::defaults::CALLS_PER_ROUND
        ));
    }
    let contracts = record.contracts.of(&record.tools);
    for call in calls {
        if call.input.len() as u64 > limits.max_input_bytes {
            return Err(format!(
                "Invalid tool call to {:?}: its input has {} bytes, over the limit of {}",
                call.tool,
                call.input.len(),
                limits.max_input_bytes
            ));
        }
        let Some(index) = record.tools.iter().position(|t| t.name == call.tool) else {
            return Err(format!("Invalid tool call: no tool named {:?}", call.tool));
        };
        if record.direct_only.contains(&call.tool) {
            return Err(format!(
                "Invalid tool call to {:?}: it can only be called directly",
                call.tool
            ));
        }
        check_input(&call.tool, &call.input, &contracts[index])?;
    }
    Ok(())
}

/// Checks one call's input: a JSON object, at most
/// [`deep_json::MAX_DEPTH`] levels deep, that its tool's contract accepts.
fn check_input(tool: &str, input: &str, contract: &SharedContract) -> Result<(), String> {
    let invalid = |problem: String| format!("Invalid tool call to {tool:?}: {problem}");
    deep_json::with_tree(input, |input| {
        if !input.is_object() {
            return Err(invalid("the input is not a JSON object".into()));
        }
        contract.check(&input).map_err(|problem| {
            invalid(format!(
                "its input does not match the tool's schema: {problem}"
            ))
        })
    })
    .map_err(|problem| match problem {
        deep_json::TreeError::TooDeep { .. } => invalid(format!("its input: {problem}")),
        deep_json::TreeError::NotJson(_) => invalid("the input is not a JSON object".into()),
    })?
}

/// Bytes of inputs a pause carries.
pub(super) fn input_bytes(calls: &[PendingCall]) -> usize {
    calls.iter().map(|call| call.input.len()).sum()
}

/// Inputs from which a pause's checks run off the runtime's workers.
const LARGE_INPUTS: usize = 256 << 10;

/// Runs a report's check: for `bytes` of inputs over [`LARGE_INPUTS`], on a
/// multi-threaded runtime, in place of this worker (`block_in_place`: the
/// other tasks move to another worker while it parses), else inline (a
/// small check costs less than the hand-over).
pub(super) fn off_the_workers<T>(bytes: usize, check: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi_threaded = Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
    if bytes > LARGE_INPUTS && multi_threaded {
        tokio::task::block_in_place(check)
    } else {
        check()
    }
}

/// Checks a failure a child reports: only what a child itself can know
/// (its code raised or exited, it ran out of time, memory or output, a
/// replay diverged). The other endings are the server's decisions (a
/// cancel, the round limit, the record's size) or the server's findings (a
/// crash, an invalid report): a child that claims one is lying.
pub(super) fn check_failure(failure: &Failure) -> Result<(), String> {
    match failure {
        Failure::Exception(_)
        | Failure::Exit(_)
        | Failure::TimeLimit
        | Failure::OutOfMemory
        | Failure::OutputCap(_)
        | Failure::NonDeterminism(_) => Ok(()),
        other => Err(format!(
            "Invalid report: a child may not end its execution as {:?}",
            other.kind()
        )),
    }
}

/// What a child reports of its workspace at its end.
pub(super) struct Workspace<'a> {
    /// Files created or changed.
    pub files: &'a [WorkspaceFile],
    /// Names of the request's files removed.
    pub removed: &'a [String],
    /// Directories left empty.
    pub directories: &'a [String],
}

/// Checks what a child reports of its workspace: within the workspace's
/// limits, valid names, no change to a read-only file, and removals of
/// the request's files only.
pub(super) fn check_workspace(
    record: &ExecutionRecord,
    limits: &ExecLimits,
    reported: &Workspace<'_>,
) -> Result<(), String> {
    let Workspace {
        files,
        removed,
        directories,
    } = reported;
    let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    let entries = (files.len() + directories.len()) as u64;
    if total > limits.workspace_bytes || entries > limits.workspace_files {
        return Err("Workspace limit exceeded".into());
    }
    let names = files.iter().map(|f| &f.name).chain(directories.iter());
    if let Some(bad) = names
        .clone()
        .find(|name| crate::workspace::check_name(name).is_err())
    {
        return Err(format!("Invalid workspace file name {bad:?}"));
    }
    let changed = files.iter().map(|f| &f.name).chain(removed.iter());
    if let Some(sealed) = changed.clone().find(|name| record.read_only.contains(name)) {
        return Err(format!("Invalid workspace report: {sealed:?} is read-only"));
    }
    // A session's cell may remove what earlier cells left (a name the
    // rule accepts); any other execution only its request's files.
    let unknown = |name: &&String| match record.cell {
        Some(_) => crate::workspace::check_name(name).is_err(),
        None => !record.files.iter().any(|f| &f.name == *name),
    };
    match removed.iter().find(unknown) {
        Some(bad) => Err(format!(
            "Invalid workspace report: {bad:?} was not a file of the request"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::{LARGE_INPUTS, off_the_workers};

    /// Whether a task spawned on a one-worker runtime runs while a check
    /// of `bytes` holds that worker.
    fn others_run_during_a_check_of(bytes: usize) -> bool {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        runtime.block_on(async {
            let flag = Arc::new(AtomicBool::new(false));
            let set = flag.clone();
            let checked = tokio::spawn(async move {
                let other = tokio::spawn(async move { set.store(true, Ordering::SeqCst) });
                let ran = off_the_workers(bytes, || {
                    let deadline = Instant::now() + Duration::from_millis(500);
                    while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                    flag.load(Ordering::SeqCst)
                });
                let _ = other.await;
                ran
            });
            checked.await.unwrap_or(false)
        })
    }

    #[test]
    fn a_large_check_leaves_its_worker_to_the_other_tasks() {
        assert!(others_run_during_a_check_of(LARGE_INPUTS + 1));
        assert!(
            !others_run_during_a_check_of(1),
            "a small check runs inline"
        );
    }
}
