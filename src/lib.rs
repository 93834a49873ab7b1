//! baton: durable programmatic tool calling.
//!
//! LLM-written Python runs in sandboxed RustPython children and pauses at every
//! tool call; a pause is persisted before the client sees its token, so it
//! survives a restart. See `ARCHITECTURE.md` for the map.

pub mod api;
pub mod config;
pub mod engine;
pub mod journal;
pub mod quota;
pub mod rewrite;
pub mod sandbox;
pub mod server;
pub mod service;
pub mod state;
pub mod store;
pub mod token;
pub mod tools;
pub mod vm;
pub mod workspace;

/// Reports allocation failures of children (see [`vm::oom`]).
#[global_allocator]
static ALLOCATOR: vm::oom::ReportingAllocator = vm::oom::ReportingAllocator;
