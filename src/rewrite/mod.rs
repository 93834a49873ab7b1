//! The source-to-source rewrite that turns tool calls into checkpoints.
//!
//! The source is parsed with the parser the VM itself uses
//! (`rustpython-ruff_python_parser`, the VM's version), so the rewrite accepts
//! exactly what the VM accepts. Each tool call site's callee (`get_weather`,
//! `tools.get_weather`) is replaced by `<marker>[<site id>]`, padded with
//! spaces to the callee's width; the runtime binds `<marker>` to the list of
//! sites. Module-level `asyncio.run(` becomes `await      (`.
//!
//! Invariants:
//! - No edit adds or removes a line break, so every line number of the
//!   rewritten program is the user's; columns stay in place whenever the
//!   callee is at least as wide as its replacement (a callee of one to four
//!   characters shifts the rest of its own line).
//! - The marker is a name that appears nowhere in the source as a word.
//! - Site ids are dense `0..n` and depend only on the source and the tools,
//!   so a cold resume of the same request finds the same sites.
//! - A call the rewrite cannot see (an alias, `getattr`) still reaches the
//!   tool through the plain functions the runtime defines.

mod depth;
mod librechat;
mod names;
mod sites;

use serde::Serialize;

use std::sync::Arc;

use crate::contract::{self, SharedContract};
use crate::tools::ToolDef;
pub use depth::{leaks_too_deep, on_sized_stack};
pub use librechat::unwrap_librechat_main;
pub use names::{is_parameter_name, python_name};

/// How a site's result is used (see [`sites`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CallMode {
    /// Pauses on the spot; the call is its value.
    Sync,
    /// The operand of `await`.
    Awaited,
    /// Registered and batched; waited on when used.
    Deferred,
}

/// A tool as the program sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolBinding {
    /// The name the client knows.
    pub original: String,
    /// The Python name.
    pub python: String,
    /// What its schema says of a call (signature and checks), shared by
    /// the starts that declare the same schema.
    pub contract: Arc<SharedContract>,
}

/// One checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The id a call reports: its index into the marker list, plus the
    /// earlier cells' sites in a session's cell.
    pub id: usize,
    /// Index of the tool in the bindings.
    pub tool: usize,
    /// 1-based line of the call.
    pub line: usize,
    /// 0-based column (in characters) of the callee.
    pub col: usize,
    /// How the result is used.
    pub mode: CallMode,
}

/// The rewritten program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    /// Source to compile.
    pub source: String,
    /// The global name of the site list.
    pub marker: String,
    /// Sites by id.
    pub sites: Vec<Site>,
}

/// Why a program or its tools cannot be rewritten.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RewriteError {
    /// The parser refused the source; the VM's compile reports it.
    #[error("SyntaxError: {message} (line {line})")]
    Syntax {
        /// The parser's message.
        message: String,
        /// 1-based line.
        line: usize,
    },
    /// Two tools map to one Python name.
    #[error("tools {first:?} and {second:?} both map to the Python name {python:?}")]
    NameCollision {
        /// The first tool.
        first: String,
        /// The second tool.
        second: String,
        /// Their Python name.
        python: String,
    },
    /// A tool name with no character left for a Python name.
    #[error("tool name {0:?} has no characters usable in a Python name")]
    UnnameableTool(String),
    /// The program nests deeper than the interpreter's compiler accepts; the
    /// VM's compile reports it (`RecursionError`, or `SyntaxError: too many
    /// nested parentheses`).
    #[error("RecursionError: maximum recursion depth exceeded during compilation (line {line})")]
    TooDeep {
        /// 1-based line of the first node past the limit.
        line: usize,
    },
}

/// The tools' Python names, in order; refuses collisions and empty names.
pub fn python_names(tools: &[ToolDef]) -> Result<Vec<String>, RewriteError> {
    let mut seen: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    let mut names = Vec::with_capacity(tools.len());
    for tool in tools {
        let python = python_name(&tool.name)
            .ok_or_else(|| RewriteError::UnnameableTool(tool.name.clone()))?;
        if let Some(first) = seen.insert(python.clone(), &tool.name) {
            return Err(RewriteError::NameCollision {
                first: first.to_owned(),
                second: tool.name.clone(),
                python,
            });
        }
        names.push(python);
    }
    Ok(names)
}

/// The tools bound: their Python names ([`python_names`]) and contracts.
pub fn bind_tools(tools: &[ToolDef]) -> Result<Vec<ToolBinding>, RewriteError> {
    let names = python_names(tools)?;
    Ok(tools
        .iter()
        .zip(names)
        .map(|(tool, python)| ToolBinding {
            original: tool.name.clone(),
            python,
            contract: contract::shared(tool),
        })
        .collect())
}

/// Rewrites `source` for `bindings`.
///
/// Safe for any input: the parser grows its own stack, the walks run only
/// over a tree no deeper than the VM's compiler accepts ([`depth`]), and the
/// whole analysis, including dropping a deep tree, runs on a stack sized for
/// the source ([`depth::on_sized_stack`]).
pub fn rewrite(source: &str, bindings: &[ToolBinding]) -> Result<Rewritten, RewriteError> {
    depth::on_sized_stack(source.len(), || rewrite_here(source, bindings, None))
}

/// How a session's cell names its sites: its marker (chosen by the
/// session, never a word of the cell) and the id of its first site (the
/// earlier cells' sites come before), so that a function of an earlier
/// cell called in a later one still reaches its own sites.
#[derive(Clone, Copy, Debug)]
pub struct CellNaming<'a> {
    /// The global name of the cell's site list.
    pub marker: &'a str,
    /// The id of the cell's first site.
    pub site_base: usize,
}

/// [`rewrite`] for a session's cell: its sites are written `<marker>[n]`
/// (an index into the cell's own list) and `sites[n].id`, the id a call
/// reports, is `site_base + n`: unique in the session.
pub fn rewrite_cell(
    source: &str,
    bindings: &[ToolBinding],
    naming: CellNaming<'_>,
) -> Result<Rewritten, RewriteError> {
    depth::on_sized_stack(source.len(), || {
        rewrite_here(source, bindings, Some(naming))
    })
}

/// The first of `_Bc{cell}`, `_Bc{cell}_0`, `_Bc{cell}_1`... that is not a
/// word of `source` nor one of `taken`: a session cell's marker.
pub fn choose_cell_marker(source: &str, cell: u32, taken: &[String]) -> String {
    std::iter::once(format!("_Bc{cell}"))
        .chain((0..).map(|n| format!("_Bc{cell}_{n}")))
        .find(|candidate| !contains_word(source, candidate) && !taken.contains(candidate))
        .unwrap_or_else(|| format!("_Bc{cell}"))
}

/// The first of `markers` that `source` uses as a word: a cell may not
/// rebind the site list of an earlier cell.
pub fn uses_marker<'a>(source: &str, markers: &'a [String]) -> Option<&'a str> {
    markers
        .iter()
        .find(|marker| contains_word(source, marker))
        .map(String::as_str)
}

fn rewrite_here(
    source: &str,
    bindings: &[ToolBinding],
    naming: Option<CellNaming<'_>>,
) -> Result<Rewritten, RewriteError> {
    let parsed =
        ruff_python_parser::parse_module(source).map_err(|error| RewriteError::Syntax {
            message: error.error.to_string(),
            line: line_of(source, usize::from(error.location.start())),
        })?;
    let body = &parsed.syntax().body;
    if let Some(offset) = depth::first_too_deep(body) {
        return Err(RewriteError::TooDeep {
            line: line_of(source, offset),
        });
    }
    let bound = names::bound_names(body);
    let python_names: Vec<String> = bindings.iter().map(|b| b.python.clone()).collect();
    let findings = sites::find(source, body, &python_names, &bound);
    let (marker, site_base) = match naming {
        Some(naming) => (naming.marker.to_owned(), naming.site_base),
        None => (choose_marker(source), 0),
    };
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut sites = Vec::with_capacity(findings.sites.len());
    for (local, found) in findings.sites.iter().enumerate() {
        let start = usize::from(found.callee.start());
        edits.push((
            start,
            usize::from(found.callee.end()),
            format!("{marker}[{local}]"),
        ));
        sites.push(Site {
            id: site_base + local,
            tool: found.tool,
            line: line_of(source, start),
            col: column_of(source, start),
            mode: found.mode,
        });
    }
    for range in &findings.asyncio_runs {
        edits.push((
            usize::from(range.start()),
            usize::from(range.end()),
            "await".to_owned(),
        ));
    }
    Ok(Rewritten {
        source: apply_edits(source, edits),
        marker,
        sites,
    })
}

/// Replaces each `(start, end)` range by its text padded with spaces to the
/// range's width. Ranges never overlap: a callee does not contain another.
fn apply_edits(source: &str, mut edits: Vec<(usize, usize, String)>) -> String {
    edits.sort_by_key(|(start, _, _)| *start);
    let mut out = String::with_capacity(source.len() + edits.len() * 4);
    let mut at = 0;
    for (start, end, text) in edits {
        out.push_str(&source[at..start]);
        let width = source[start..end].chars().count();
        out.push_str(&text);
        for _ in text.len()..width {
            out.push(' ');
        }
        at = end;
    }
    out.push_str(&source[at..]);
    out
}

/// `_B`, or the first of `_B0`, `_B1`... that is not a word of the source.
fn choose_marker(source: &str) -> String {
    std::iter::once("_B".to_owned())
        .chain((0..).map(|n| format!("_B{n}")))
        .find(|candidate| !contains_word(source, candidate))
        .unwrap_or_else(|| "_B".to_owned())
}

fn contains_word(source: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    source.match_indices(word).any(|(at, _)| {
        let before = source[..at].chars().next_back();
        let after = source[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The 1-based line of `offset`, counting line breaks as Python does:
/// `\n`, `\r\n` and a lone `\r`.
fn line_of(source: &str, offset: usize) -> usize {
    let before = &source.as_bytes()[..offset.min(source.len())];
    let breaks = before
        .iter()
        .enumerate()
        .filter(|&(at, &b)| b == b'\n' || (b == b'\r' && before.get(at + 1) != Some(&b'\n')))
        .count();
    breaks + 1
}

/// The 0-based column (in characters) of `offset` in its line.
fn column_of(source: &str, offset: usize) -> usize {
    let line_start = source[..offset].rfind(['\n', '\r']).map_or(0, |i| i + 1);
    source[line_start..offset].chars().count()
}

#[cfg(test)]
mod tests;
