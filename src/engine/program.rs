//! The program a child runs: the rewrite of the user's source with its call
//! sites and tool bindings, as the JSON the Python runtime reads.
//!
//! Invariant: the same source, tools and limits always give the same JSON, so
//! a cold resume runs exactly the program the first run ran.

use serde_json::json;

use crate::engine::ExecLimits;
use crate::rewrite::{self, RewriteError};
use crate::tools::ToolDef;

/// The failure of a program that cannot run: the one-line error and the
/// stderr text (a CPython-style syntax error report).
pub type CannotRun = (String, String);

/// Rewrites `source` and describes it for the runtime, with no arguments.
pub fn program_json(
    source: &str,
    tools: &[ToolDef],
    limits: &ExecLimits,
) -> Result<String, CannotRun> {
    program_json_with(source, tools, limits, &[])
}

/// Rewrites `source` and describes it for the runtime; `argv` becomes
/// `sys.argv[1:]`.
pub fn program_json_with(
    source: &str,
    tools: &[ToolDef],
    limits: &ExecLimits,
    argv: &[String],
) -> Result<String, CannotRun> {
    let bindings = rewrite::bind_tools(tools).map_err(|e| (e.to_string(), String::new()))?;
    let rewritten = match rewrite::rewrite(source, &bindings) {
        Ok(rewritten) => rewritten,
        // The child compiles the user's own source and reports the error
        // exactly as the VM does (CPython's messages and layout).
        Err(RewriteError::Syntax { .. } | RewriteError::TooDeep { .. }) => rewrite::Rewritten {
            source: source.to_owned(),
            marker: "_B".to_owned(),
            sites: Vec::new(),
        },
        Err(other) => return Err((other.to_string(), String::new())),
    };
    let tools: Vec<_> = bindings
        .iter()
        .map(|b| {
            let optional: Vec<&String> = b
                .params
                .iter()
                .zip(&b.required)
                .filter(|(_, required)| !**required)
                .map(|(name, _)| name)
                .collect();
            json!({"original": b.original, "python": b.python, "params": b.params,
                   "optional": optional})
        })
        .collect();
    let sites: Vec<_> = rewritten
        .sites
        .iter()
        .map(|s| json!({"id": s.id, "tool": s.tool, "mode": s.mode, "line": s.line}))
        .collect();
    Ok(json!({
        "source": rewritten.source,
        "original": source,
        "marker": rewritten.marker,
        "sites": sites,
        "tools": tools,
        "recursion_limit": limits.recursion_limit,
        "max_input_bytes": limits.max_input_bytes,
        "workspace_bytes": limits.workspace_bytes,
        "workspace_files": limits.workspace_files,
        "argv": argv,
    })
    .to_string())
}
