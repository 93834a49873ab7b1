//! baton: durable programmatic tool calling.
//!
//! LLM-written Python runs in sandboxed RustPython children and pauses at every
//! tool call; a pause is persisted before the client sees its token, so it
//! survives a restart. See `ARCHITECTURE.md` for the map; in short:
//!
//! - [`server`], [`config`]: the process and its settings (every default in
//!   [`config::defaults`]).
//! - [`api`]: HTTP only; the one place errors become statuses.
//! - [`auth`]: who a request acts for (API keys, LibreChat's tokens).
//! - [`service`]: start, continue, cancel, inspect, sweep; no HTTP.
//! - [`engine`]: an execution's lifecycle on a record: start, hot and cold
//!   resume, budgets, parked children.
//! - [`sandbox`]: the zygote, the pool, confinement, the child protocol.
//! - [`vm`]: inside the sandbox: the interpreter, the zygote loop, a child.
//! - [`program`], [`failure`], [`journal`], [`tools`]: what both sides share;
//!   [`contract`]: what a tool's schema enforces on a call; [`stubs`]: the
//!   tools as prompt stubs.
//! - [`rewrite`]: the source rewrite at call sites.
//! - [`store`], [`state`], [`workspace`], [`token`]: what is stored, and how.

pub mod api;
pub mod auth;
pub mod config;
pub mod contract;
pub mod deep_json;
pub mod engine;
pub mod failure;
pub mod journal;
pub mod metrics_catalog;
pub mod program;
pub(crate) mod quota;
pub mod rewrite;
pub mod run_file;
pub mod sandbox;
pub mod server;
pub mod service;
pub mod state;
pub mod store;
pub mod stubs;
pub mod timing;
pub mod token;
pub mod tools;
pub mod vm;
pub mod workspace;

/// Reports allocation failures of children (see [`vm::oom`]).
#[global_allocator]
static ALLOCATOR: vm::oom::ReportingAllocator = vm::oom::ReportingAllocator;
