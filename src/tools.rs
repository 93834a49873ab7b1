//! Tool declarations as the client sends them.
//!
//! A [`ToolDef`] is what the client declared: the original name (reported back
//! in `tool_calls` verbatim), an optional description, and the JSON-Schema of
//! its parameters kept as JSON text so that it survives bincode in the journal.
//!
//! Invariant: the order of `properties` in `parameters` is the order the client
//! wrote (serde_json's `preserve_order`), because positional arguments are
//! mapped to names through it (see `contract.rs`).

use serde::{Deserialize, Serialize};

/// One tool of a start request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The name exactly as the client sent it.
    pub name: String,
    /// Free text, shown to nobody but kept for inspection.
    pub description: Option<String>,
    /// The JSON-Schema of the parameters, as JSON text (`None` when absent).
    pub parameters: Option<String>,
}

/// A tool as it arrives in a request (unknown fields ignored).
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
pub struct WireTool {
    /// Tool name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON-Schema of the parameters.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<serde_json::Value>,
    /// Who may call the tool (LibreChat and Anthropic's field): without an
    /// entry starting with `code_execution`, code may not call it.
    #[serde(default)]
    pub allowed_callers: Option<Vec<String>>,
}

impl WireTool {
    /// Whether code may call the tool: its `allowed_callers`, when given,
    /// name code execution (`code_execution`, `code_execution_20250825`).
    pub fn callable_from_code(&self) -> bool {
        self.allowed_callers.as_ref().is_none_or(|callers| {
            callers
                .iter()
                .any(|caller| caller.starts_with("code_execution"))
        })
    }
}

/// What a start says of calls beyond the tools' schemas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallPolicy {
    /// Tools code may not call (their `allowed_callers` leave out code
    /// execution): calling one raises in the code.
    pub direct_only: Vec<String>,
    /// Whether the answer of the end lists the calls made.
    pub include_history: bool,
}

impl From<WireTool> for ToolDef {
    fn from(wire: WireTool) -> Self {
        ToolDef {
            name: wire.name,
            description: wire.description,
            parameters: wire
                .parameters
                .filter(|p| !p.is_null())
                .map(|p| p.to_string()),
        }
    }
}
