//! The program a child runs: the one typed contract between the server and
//! the Python runtime (`stdlib_shims/baton_runtime.py`, which
//! `tests/oracle/harness.py` runs under CPython), sent as JSON in the start
//! job. The rewrite of the user's source, its call sites, its tools and every
//! limit the runtime applies.
//!
//! Invariants:
//! - The same source, tools, limits and arguments always give the same
//!   program, so a cold resume runs exactly what the first run ran.
//! - Every limit the runtime applies is a field of [`ProgramLimits`], set by
//!   the server from its configuration; the runtime reads each without a
//!   default of its own (a missing field is a `KeyError`, not a guess).
//! - Every interpreter (zygote and children) hashes with [`HASH_SEED`], so a
//!   replay iterates sets and dicts of strings in the order the first run did.

use serde::Serialize;

use crate::config::defaults;
use crate::rewrite::{self, CallMode, RewriteError};
use crate::tools::ToolDef;

/// The hash seed of every interpreter.
pub const HASH_SEED: u32 = 0;

/// The failure of a program that cannot run: the one-line error and the
/// stderr text (a CPython-style report).
pub type CannotRun = (String, String);

/// The limits the runtime applies inside the child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ProgramLimits {
    /// Python recursion limit at the start.
    pub recursion_limit: u32,
    /// The highest recursion limit code may set.
    pub recursion_cap: u32,
    /// Largest JSON input of one tool call, bytes.
    pub max_input_bytes: u64,
    /// Bytes in `/mnt/data`.
    pub workspace_bytes: u64,
    /// Files in `/mnt/data`.
    pub workspace_files: u64,
    /// Calls in one round (more wait for the next round).
    pub calls_per_round: u32,
    /// Bytes of code a program may have (a compaction's base source too).
    pub max_source_bytes: usize,
}

impl Default for ProgramLimits {
    /// The configuration's defaults.
    fn default() -> Self {
        ProgramLimits {
            recursion_limit: defaults::RECURSION_LIMIT,
            recursion_cap: defaults::RECURSION_CAP,
            max_input_bytes: defaults::MAX_TOOL_INPUT_BYTES,
            workspace_bytes: defaults::WORKSPACE_BYTES,
            workspace_files: defaults::WORKSPACE_FILES,
            calls_per_round: defaults::CALLS_PER_ROUND,
            max_source_bytes: defaults::MAX_SOURCE_BYTES,
        }
    }
}

/// A tool as the runtime binds it.
#[derive(Clone, Debug, Serialize)]
pub struct ToolBinding {
    /// The name the client declared (reported back in calls).
    pub original: String,
    /// The Python identifier code calls it by.
    pub python: String,
    /// Parameter names, in signature order (required first).
    pub params: Vec<String>,
    /// The parameters that may be left out.
    pub optional: Vec<String>,
    /// Whether keywords beyond `params` are accepted.
    pub open: bool,
    /// The reduced schema of each checked parameter (see `contract.rs`),
    /// as the text of one JSON object, parsed by the child at the tool's
    /// first call (`{}`: nothing to check).
    pub checks: String,
    /// The tool's description, its `__doc__`.
    pub doc: Option<String>,
    /// Whether code may not call it (its `allowed_callers`).
    pub direct_only: bool,
}

/// A call site of the rewritten source.
#[derive(Clone, Debug, Serialize)]
pub struct CallSite {
    /// The site's id: its index in the marker's list.
    pub id: usize,
    /// Index of its tool in [`Program::tools`].
    pub tool: usize,
    /// How its value is used.
    pub mode: CallMode,
    /// The user's line.
    pub line: usize,
}

/// The language of a program's source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Python, rewritten at its tool call sites.
    #[default]
    Python,
    /// A shell command line, run by the runtime's own small shell
    /// (`stdlib_shims/baton_shell.py`) over the same `/mnt/data`.
    Bash,
}

impl Lang {
    /// The language a request's `lang` names: `py`/`python`, `bash`/`sh`;
    /// `None` for the others.
    pub fn parse(name: &str) -> Option<Lang> {
        match name.trim().to_ascii_lowercase().as_str() {
            "py" | "python" | "python3" => Some(Lang::Python),
            "bash" | "sh" => Some(Lang::Bash),
            _ => None,
        }
    }
}

/// What a child runs.
#[derive(Clone, Debug, Serialize)]
pub struct Program {
    /// The language of `source`.
    pub lang: Lang,
    /// The rewritten source (the user's when it does not parse: the child's
    /// compiler then reports the error as the VM does).
    pub source: String,
    /// The user's source, for tracebacks.
    pub original: String,
    /// The global name the call sites are reached by.
    pub marker: String,
    /// The call sites.
    pub sites: Vec<CallSite>,
    /// The tools.
    pub tools: Vec<ToolBinding>,
    /// The limits the runtime applies.
    pub limits: ProgramLimits,
    /// `sys.argv[1:]`.
    pub argv: Vec<String>,
    /// Names of the workspace files code may read and not change.
    pub read_only: Vec<String>,
    /// Directories of the workspace beside those of its files.
    pub directories: Vec<String>,
    /// Its place in a session, when it is a session's cell: the runtime
    /// runs it in the globals the earlier cells left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<CellPlace>,
}

/// A cell's place in its session, as the runtime reads it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CellPlace {
    /// Its number, from 1 (its file is `<cell N>`).
    pub cell: u32,
    /// Whether it is the first cell of its session's globals (the session's
    /// first, or the base a compaction made).
    pub first: bool,
    /// A compaction's look at the namespace: the runtime writes the base
    /// source on stdout and runs no code (`baton_snapshot`).
    pub snapshot: bool,
    /// A compaction's base: each of its statements runs as if in the file
    /// and at the line its header names (`baton_snapshot.segments`).
    pub base: bool,
    /// Whether `/mnt/data` is exactly its files (else they are laid over
    /// what the earlier cells left).
    pub fresh_workspace: bool,
}

impl Program {
    /// Rewrites `source` for `tools`; `argv` becomes `sys.argv[1:]`; the
    /// tools named in `direct_only` raise when code calls them.
    pub fn build(
        source: &str,
        tools: &[ToolDef],
        limits: ProgramLimits,
        argv: &[String],
        direct_only: &[String],
    ) -> Result<Program, CannotRun> {
        Program::build_with(source, tools, limits, argv, direct_only, None)
    }

    /// [`Program::build`] for the cell `cell` of a session: its sites are
    /// named by `cell`'s marker and numbered after the earlier cells'.
    pub fn build_cell(
        source: &str,
        tools: &[ToolDef],
        limits: ProgramLimits,
        direct_only: &[String],
        cell: &crate::journal::SessionCell,
    ) -> Result<Program, CannotRun> {
        let naming = rewrite::CellNaming {
            marker: &cell.marker,
            site_base: cell.site_base as usize,
        };
        let mut program =
            Program::build_with(source, tools, limits, &[], direct_only, Some(naming))?;
        program.session = Some(CellPlace {
            cell: cell.number(),
            first: cell.index == 1,
            snapshot: cell.snapshot,
            base: cell.is_base(),
            fresh_workspace: cell.fresh_workspace,
        });
        Ok(program)
    }

    fn build_with(
        source: &str,
        tools: &[ToolDef],
        limits: ProgramLimits,
        argv: &[String],
        direct_only: &[String],
        naming: Option<rewrite::CellNaming<'_>>,
    ) -> Result<Program, CannotRun> {
        let bindings = rewrite::bind_tools(tools).map_err(|e| (e.to_string(), String::new()))?;
        let rewritten = match naming {
            Some(naming) => rewrite::rewrite_cell(source, &bindings, naming),
            None => rewrite::rewrite(source, &bindings),
        };
        let rewritten = match rewritten {
            Ok(rewritten) => rewritten,
            // The child compiles the user's own source and reports the error
            // exactly as the VM does (CPython's messages and layout).
            Err(RewriteError::Syntax { .. } | RewriteError::TooDeep { .. }) => rewrite::Rewritten {
                source: source.to_owned(),
                marker: naming.map_or("_B", |n| n.marker).to_owned(),
                sites: Vec::new(),
            },
            Err(other) => return Err((other.to_string(), String::new())),
        };
        let tools = bindings
            .iter()
            .zip(tools)
            .map(|(b, tool)| {
                let params = &b.contract.params;
                ToolBinding {
                    original: b.original.clone(),
                    python: b.python.clone(),
                    params: params.iter().map(|p| p.name.clone()).collect(),
                    optional: params
                        .iter()
                        .filter(|p| !p.required)
                        .map(|p| p.name.clone())
                        .collect(),
                    open: b.contract.open,
                    checks: b.contract.checks_json.clone(),
                    doc: tool.description.clone(),
                    direct_only: direct_only.contains(&tool.name),
                }
            })
            .collect();
        let sites = rewritten
            .sites
            .iter()
            .map(|s| CallSite {
                id: s.id,
                tool: s.tool,
                mode: s.mode,
                line: s.line,
            })
            .collect();
        Ok(Program {
            lang: Lang::Python,
            source: rewritten.source,
            original: source.to_owned(),
            marker: rewritten.marker,
            sites,
            tools,
            limits,
            argv: argv.to_vec(),
            read_only: Vec::new(),
            directories: Vec::new(),
            session: None,
        })
    }

    /// A shell command line: no tools, nothing rewritten.
    pub fn shell(script: &str, limits: ProgramLimits, argv: &[String]) -> Program {
        Program {
            lang: Lang::Bash,
            source: script.to_owned(),
            original: script.to_owned(),
            marker: "_B".to_owned(),
            sites: Vec::new(),
            tools: Vec::new(),
            limits,
            argv: argv.to_vec(),
            read_only: Vec::new(),
            directories: Vec::new(),
            session: None,
        }
    }

    /// The program with `read_only` names and `directories` in its
    /// workspace.
    pub fn with_workspace(mut self, read_only: &[String], directories: &[String]) -> Program {
        self.read_only = read_only.to_vec();
        self.directories = directories.to_vec();
        self
    }

    /// The program as the runtime reads it.
    pub fn to_json(&self) -> String {
        // A struct of strings and numbers always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}
