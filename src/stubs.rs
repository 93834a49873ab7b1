//! Stubs of tools for a model's prompt (`POST /tools/stubs`): the Python
//! functions code calls, written from the tools' JSON Schemas, as typed
//! `async def` stubs with docstrings (`python`) or one line per tool
//! (`compact`: `web_search(query: str, num_results?: int) -> Any`).
//!
//! Invariants:
//! - Deterministic: the same tools give the same bytes (schema order is
//!   the client's; nothing depends on a hash or the clock).
//! - The names and parameter order are the ones code calls with
//!   ([`crate::rewrite::bind_tools`], [`crate::contract::Contract`]), so a
//!   stub never shows a call the runtime would refuse for its shape.
//! - Type rendering is bounded in depth ([`MAX_TYPE_DEPTH`]): deeper
//!   schemas render as `Any`.

use serde_json::{Map, Value};

use crate::contract::Contract;
use crate::rewrite::{RewriteError, bind_tools, is_parameter_name};
use crate::tools::ToolDef;

/// Schema nesting a rendered type follows.
const MAX_TYPE_DEPTH: usize = 6;

/// How stubs are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StubFormat {
    /// Typed `async def` stubs with docstrings.
    Python,
    /// One line per tool.
    Compact,
}

impl StubFormat {
    /// The format named `name` (`python` or `compact`).
    pub fn parse(name: &str) -> Option<StubFormat> {
        match name {
            "python" => Some(StubFormat::Python),
            "compact" => Some(StubFormat::Compact),
            _ => None,
        }
    }

    /// Its name in requests and answers.
    pub fn name(self) -> &'static str {
        match self {
            StubFormat::Python => "python",
            StubFormat::Compact => "compact",
        }
    }
}

/// The stubs of `tools`; an error when their names cannot all be bound (a
/// name with no Python form, two names with the same one).
pub fn stubs(tools: &[ToolDef], format: StubFormat) -> Result<String, RewriteError> {
    let bindings = bind_tools(tools)?;
    let mut out = String::new();
    if format == StubFormat::Python {
        out.push_str("from typing import Any, Literal\n");
    }
    for (binding, tool) in bindings.iter().zip(tools) {
        let schema = schema_of(tool);
        let properties = schema
            .as_ref()
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        let stub = Stub {
            python: &binding.python,
            original: &tool.name,
            description: tool.description.as_deref().map(str::trim).unwrap_or(""),
            contract: &binding.contract,
            properties,
        };
        match format {
            StubFormat::Python => stub.python(&mut out),
            StubFormat::Compact => stub.compact(&mut out),
        }
    }
    Ok(out)
}

fn schema_of(tool: &ToolDef) -> Option<Map<String, Value>> {
    match serde_json::from_str(tool.parameters.as_deref()?) {
        Ok(Value::Object(schema)) => Some(schema),
        _ => None,
    }
}

/// One tool as its stub shows it.
struct Stub<'a> {
    python: &'a str,
    original: &'a str,
    description: &'a str,
    contract: &'a Contract,
    properties: Option<&'a Map<String, Value>>,
}

impl Stub<'_> {
    fn property(&self, name: &str) -> Option<&Value> {
        self.properties.and_then(|p| p.get(name))
    }

    fn param_type(&self, name: &str) -> String {
        self.property(name)
            .map_or_else(|| "Any".to_owned(), |schema| python_type(schema, 0))
    }

    fn python(&self, out: &mut String) {
        // A parameter that cannot be written in a `def` (`class`, `max-n`)
        // is passed through `**kwargs`; the docstring names it.
        let mut params: Vec<String> = self
            .contract
            .params
            .iter()
            .filter(|param| is_parameter_name(&param.name))
            .map(|param| {
                let kind = self.param_type(&param.name);
                if param.required {
                    format!("{}: {kind}", param.name)
                } else if kind == "Any" || kind.split(" | ").any(|k| k == "None") {
                    format!("{}: {kind} = None", param.name)
                } else {
                    format!("{}: {kind} | None = None", param.name)
                }
            })
            .collect();
        if self.contract.open || self.contract.params.len() > params.len() {
            params.push("**kwargs: Any".into());
        }
        out.push_str(&format!(
            "\n\nasync def {}({}) -> Any:\n",
            self.python,
            params.join(", ")
        ));
        out.push_str(&self.docstring());
        out.push_str("    ...\n");
    }

    fn docstring(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        if !self.description.is_empty() {
            lines.extend(self.description.lines().map(|l| l.trim_end().to_owned()));
        }
        if self.python != self.original {
            lines.push(format!("Tool {:?}.", self.original));
        }
        let args: Vec<String> = self
            .contract
            .params
            .iter()
            .filter_map(|param| {
                let text = self
                    .property(&param.name)
                    .and_then(|p| p.get("description"))
                    .and_then(Value::as_str)
                    .map_or("", str::trim)
                    .replace('\n', " ");
                if !is_parameter_name(&param.name) {
                    let kind = self.param_type(&param.name);
                    let needed = if param.required {
                        "required"
                    } else {
                        "optional"
                    };
                    return Some(format!(
                        "    {:?} ({kind}, {needed}, passed as **{{{:?}: ...}}): {text}",
                        param.name, param.name
                    ));
                }
                (!text.is_empty()).then(|| format!("    {}: {text}", param.name))
            })
            .collect();
        if !args.is_empty() {
            if !lines.is_empty() {
                lines.push(String::new());
            }
            lines.push("Args:".into());
            lines.extend(args);
        }
        if lines.is_empty() {
            return String::new();
        }
        let body = lines
            .iter()
            .map(|line| {
                if line.is_empty() {
                    String::new()
                } else {
                    format!("    {}", line.replace("\"\"\"", "\\\"\\\"\\\""))
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        format!("    \"\"\"{}\n    \"\"\"\n", body.trim_start())
    }

    fn compact(&self, out: &mut String) {
        let mut params: Vec<String> = self
            .contract
            .params
            .iter()
            .map(|param| {
                let mark = if param.required { "" } else { "?" };
                format!("{}{mark}: {}", param.name, self.param_type(&param.name))
            })
            .collect();
        if self.contract.open {
            params.push("**kwargs".into());
        }
        out.push_str(&format!("{}({}) -> Any", self.python, params.join(", ")));
        if let Some(first) = self.description.lines().next().map(str::trim)
            && !first.is_empty()
        {
            out.push_str("  # ");
            out.push_str(first);
        }
        out.push('\n');
    }
}

/// A schema as a Python type: `str`, `int`, `float`, `bool`, `None`,
/// `list[...]`, `dict[str, ...]`, `Literal[...]`, unions with `|`; `Any`
/// for what it cannot say.
fn python_type(schema: &Value, depth: usize) -> String {
    let Value::Object(schema) = schema else {
        return "Any".into();
    };
    if depth > MAX_TYPE_DEPTH {
        return "Any".into();
    }
    if let Some(Value::Array(members)) = schema.get("enum")
        && !members.is_empty()
    {
        return literal(members);
    }
    if let Some(value) = schema.get("const") {
        return literal(std::slice::from_ref(value));
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(union) {
            return join_union(options.iter().map(|o| python_type(o, depth + 1)));
        }
    }
    match schema.get("type") {
        Some(Value::String(name)) => named_type(name, schema, depth),
        Some(Value::Array(names)) => join_union(
            names
                .iter()
                .filter_map(Value::as_str)
                .map(|name| named_type(name, schema, depth)),
        ),
        _ => "Any".into(),
    }
}

fn named_type(name: &str, schema: &Map<String, Value>, depth: usize) -> String {
    match name {
        "string" => "str".into(),
        "integer" => "int".into(),
        "number" => "float".into(),
        "boolean" => "bool".into(),
        "null" => "None".into(),
        "array" => match schema.get("items") {
            Some(items @ Value::Object(_)) => format!("list[{}]", python_type(items, depth + 1)),
            _ => "list[Any]".into(),
        },
        "object" => match schema.get("additionalProperties") {
            Some(values @ Value::Object(_)) if schema.get("properties").is_none() => {
                format!("dict[str, {}]", python_type(values, depth + 1))
            }
            _ => "dict[str, Any]".into(),
        },
        _ => "Any".into(),
    }
}

/// Union members joined with `|`, each once, `Any` absorbing the rest.
fn join_union(members: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for member in members {
        if member == "Any" {
            return "Any".into();
        }
        if !seen.contains(&member) {
            seen.push(member);
        }
    }
    if seen.is_empty() {
        "Any".into()
    } else {
        seen.join(" | ")
    }
}

/// `Literal[...]` of JSON values written as Python.
fn literal(members: &[Value]) -> String {
    let shown: Vec<String> = members
        .iter()
        .map(|member| match member {
            Value::Null => "None".into(),
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            other => other.to_string(),
        })
        .collect();
    format!("Literal[{}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: Option<&str>, parameters: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: description.map(str::to_owned),
            parameters: Some(parameters.to_string()),
        }
    }

    fn weather() -> ToolDef {
        tool(
            "get-weather",
            Some("Current weather in a city."),
            json!({"type": "object", "properties": {
                "unit": {"enum": ["C", "F"], "description": "Scale"},
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "array", "items": {"type": "integer"}},
                "note": {"type": ["string", "null"]}
            }, "required": ["city"]}),
        )
    }

    #[test]
    fn python_stubs_are_typed_with_docstrings() {
        let text = stubs(&[weather()], StubFormat::Python).unwrap_or_default();
        assert_eq!(
            text,
            "from typing import Any, Literal\n\n\n\
             async def get_weather(city: str, unit: Literal[\"C\", \"F\"] | None = None, \
             days: list[int] | None = None, note: str | None = None) -> Any:\n\
             \x20   \"\"\"Current weather in a city.\n\
             \x20   Tool \"get-weather\".\n\n\
             \x20   Args:\n\
             \x20       city: City name\n\
             \x20       unit: Scale\n\
             \x20   \"\"\"\n\
             \x20   ...\n"
        );
    }

    #[test]
    fn compact_stubs_are_one_line_per_tool() {
        let open = tool("ping", None, json!({"type": "object"}));
        let text = stubs(&[weather(), open], StubFormat::Compact).unwrap_or_default();
        assert_eq!(
            text,
            "get_weather(city: str, unit?: Literal[\"C\", \"F\"], days?: list[int], note?: str | None) -> Any  # Current weather in a city.\n\
             ping(**kwargs) -> Any\n"
        );
    }

    #[test]
    fn odd_schemas_render_as_any_and_names_must_bind() {
        let mut deep = json!({"type": "string"});
        for _ in 0..20 {
            deep = json!({"type": "array", "items": deep});
        }
        let odd = tool(
            "odd",
            None,
            json!({"properties": {"a": {"$ref": "#/x"}, "b": deep, "c": {"anyOf": [{"type": "integer"}, {}]}}}),
        );
        let text = stubs(&[odd], StubFormat::Compact).unwrap_or_default();
        assert!(
            text.starts_with(
                "odd(a?: Any, b?: list[list[list[list[list[list[list[Any]]]]]]], c?: Any) -> Any"
            ),
            "{text}"
        );
        let keyword = tool(
            "k",
            None,
            json!({"properties": {"class": {"type": "string"}, "n": {}}, "required": ["class"]}),
        );
        let text = stubs(&[keyword], StubFormat::Python).unwrap_or_default();
        assert!(
            text.contains("async def k(n: Any = None, **kwargs: Any) -> Any:")
                && text.contains("\"class\" (str, required, passed as **{\"class\": ...}): "),
            "{text}"
        );
        let clash = [tool("a-b", None, json!({})), tool("a_b", None, json!({}))];
        assert!(stubs(&clash, StubFormat::Python).is_err());
    }
}
