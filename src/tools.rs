//! Tool declarations as the client sends them.
//!
//! A [`ToolDef`] is what the client declared: the original name (reported back
//! in `tool_calls` verbatim), an optional description, and the JSON-Schema of
//! its parameters kept as JSON text so that it survives bincode in the journal.
//!
//! Invariant: the order of `properties` in `parameters` is the order the client
//! wrote (serde_json's `preserve_order`), because positional arguments are
//! mapped to names through it.

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

impl ToolDef {
    /// The parameters in the order of a Python signature, as the official
    /// code API's stubs have them: the `required` properties first, then the
    /// optional ones, each group in the order of the schema's `properties`;
    /// each with whether it is required.
    pub fn signature(&self) -> Vec<(String, bool)> {
        let Some(text) = &self.parameters else {
            return Vec::new();
        };
        let Ok(serde_json::Value::Object(schema)) = serde_json::from_str(text) else {
            return Vec::new();
        };
        let Some(serde_json::Value::Object(props)) = schema.get("properties") else {
            return Vec::new();
        };
        let required: Vec<&str> = match schema.get("required") {
            Some(serde_json::Value::Array(names)) => {
                names.iter().filter_map(|n| n.as_str()).collect()
            }
            _ => Vec::new(),
        };
        let is_required = |name: &str| required.contains(&name);
        let (mut first, rest): (Vec<_>, Vec<_>) = props
            .keys()
            .map(|name| (name.clone(), is_required(name)))
            .partition(|(_, required)| *required);
        first.extend(rest);
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(parameters: &str) -> ToolDef {
        ToolDef {
            name: "t".into(),
            description: None,
            parameters: Some(parameters.into()),
        }
    }

    #[test]
    fn signature_keeps_the_written_order() {
        let tool = tool(r#"{"type":"object","properties":{"zeta":{},"alpha":{},"mid":{}}}"#);
        let names: Vec<String> = tool.signature().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec!["zeta", "alpha", "mid"]);
    }

    #[test]
    fn signature_puts_required_parameters_first() {
        let tool = tool(
            r#"{"type":"object","properties":{"units":{},"city":{},"days":{},"lang":{}},
                "required":["lang","city"]}"#,
        );
        assert_eq!(
            tool.signature(),
            vec![
                ("city".to_owned(), true),
                ("lang".to_owned(), true),
                ("units".to_owned(), false),
                ("days".to_owned(), false),
            ]
        );
    }
}
