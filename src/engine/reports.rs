//! Checks of what a child reports. The runtime never reports a call to an
//! unknown tool, a call its tool's schema refuses, or a file over the
//! limits; a
//! program that talks to the native bridge itself might, and such a report
//! fails the execution instead of reaching the client or the store.

use crate::journal::{ExecutionRecord, WorkspaceFile};
use crate::sandbox::protocol::PendingCall;

use super::ExecLimits;

/// Checks a batch a child reports: every call names a tool of the request
/// and carries a JSON object its tool's contract accepts
/// ([`crate::contract::check_input`]). The runtime guarantees all three; a
/// program that calls the native bridge itself does not.
pub(super) fn check_calls(record: &ExecutionRecord, calls: &[PendingCall]) -> Result<(), String> {
    for call in calls {
        let Some(tool) = record.tools.iter().find(|t| t.name == call.tool) else {
            return Err(format!("Invalid tool call: no tool named {:?}", call.tool));
        };
        if record.direct_only.contains(&call.tool) {
            return Err(format!(
                "Invalid tool call to {:?}: it can only be called directly",
                call.tool
            ));
        }
        let input = serde_json::from_str::<serde_json::Value>(&call.input)
            .ok()
            .filter(serde_json::Value::is_object)
            .ok_or_else(|| {
                format!(
                    "Invalid tool call to {:?}: the input is not a JSON object",
                    call.tool
                )
            })?;
        crate::contract::check_input(tool, &input).map_err(|problem| {
            format!(
                "Invalid tool call to {:?}: its input does not match the tool's schema: {problem}",
                call.tool
            )
        })?;
    }
    Ok(())
}

/// Checks what a child reports of its workspace at the end: the files it
/// produced fit the limits and have valid names; the files it removed were
/// files of the request.
pub(super) fn check_workspace(
    record: &ExecutionRecord,
    limits: &ExecLimits,
    files: &[WorkspaceFile],
    removed: &[String],
) -> Result<(), String> {
    let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    if total > limits.workspace_bytes || files.len() as u64 > limits.workspace_files {
        return Err("Workspace limit exceeded".into());
    }
    if let Some(bad) = files
        .iter()
        .find(|f| crate::workspace::check_name(&f.name).is_err())
    {
        return Err(format!("Invalid workspace file name {:?}", bad.name));
    }
    match removed
        .iter()
        .find(|name| !record.files.iter().any(|f| &f.name == *name))
    {
        Some(bad) => Err(format!(
            "Invalid workspace report: {bad:?} was not a file of the request"
        )),
        None => Ok(()),
    }
}
