//! Tool contracts: what a tool's JSON Schema enforces on a call from code.
//!
//! A tool's `parameters` become a Python signature (required parameters
//! first, then optional ones, each group in schema order) and a *reduced*
//! schema per parameter: the part of the schema baton understands and
//! enforces, which the child's checker (`stdlib_shims/baton_contract.py`)
//! applies at the call site, and which the server checks again with the
//! `jsonschema` crate when a child reports a call ([`check_input`]), so a
//! child that bypassed its checker still cannot send a call its schema
//! refuses.
//!
//! Enforced keywords: `type` (a name or a list of `string`, `integer`,
//! `number`, `boolean`, `array`, `object`, `null`), `enum`, `const`,
//! `properties`, `required`, `additionalProperties` (`false` or a schema)
//! and `items` (one schema). Everything else (`minLength`, `pattern`,
//! `format`, `minimum`...) is not checked. A schema node baton cannot
//! decide (`$ref`, `anyOf`, `oneOf`, `allOf`, `not`, `if`,
//! `patternProperties`, ...) is accepted without checks, with everything
//! under it.
//!
//! Invariants:
//! - The reduction is a pure function of the tool's declaration: the same
//!   tools always give the same program (a replay checks what the first
//!   run checked).
//! - A reduced schema holds only the enforced keywords, so the child's
//!   checker and the crate judge the same schema (a property test holds
//!   them to agreeing).
//! - Reduction depth is bounded ([`MAX_DEPTH`]): deeper nodes are not
//!   checked.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::tools::ToolDef;

/// Schema nesting the reduction follows.
pub const MAX_DEPTH: usize = 32;
/// The largest `parameters` text of one tool a start may declare: every
/// call is checked against it, so its size is bounded when it arrives.
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;
/// The most values of one checked `enum` (or of the enums of one tool):
/// the check of a call scans them.
pub const MAX_ENUM_VALUES: usize = 4096;

/// Keywords under which baton cannot decide a value's validity: a node that
/// has one is not checked.
const UNDECIDED: &[&str] = &[
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "contains",
    "patternProperties",
    "propertyNames",
];

/// The JSON types a `type` may name.
const TYPES: &[&str] = &[
    "string", "integer", "number", "boolean", "array", "object", "null",
];

/// One parameter of a tool's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name (a key of `properties`).
    pub name: String,
    /// Whether the schema lists it in `required`.
    pub required: bool,
    /// Its reduced schema (`{}` when nothing is checked).
    pub check: Value,
}

/// What a tool's schema says of a call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contract {
    /// The parameters in signature order: required ones, then optional
    /// ones, each group in the order of `properties`.
    pub params: Vec<Param>,
    /// Whether keywords beyond the parameters are accepted: the schema has
    /// no `properties`, or allows additional ones.
    pub open: bool,
}

impl Contract {
    /// The contract of `tool`. A tool without a usable schema takes any
    /// keyword argument and checks nothing.
    pub fn of(tool: &ToolDef) -> Contract {
        let schema = tool
            .parameters
            .as_deref()
            .and_then(|text| serde_json::from_str::<Value>(text).ok());
        let Some(Value::Object(schema)) = schema else {
            return Contract::open();
        };
        let Some(Value::Object(properties)) = schema.get("properties") else {
            return Contract::open();
        };
        let decidable = !UNDECIDED.iter().any(|k| schema.contains_key(*k));
        let required = required_names(&schema);
        let (mut params, optional): (Vec<Param>, Vec<Param>) = properties
            .iter()
            .map(|(name, property)| Param {
                name: name.clone(),
                required: required.contains(&name.as_str()),
                check: if decidable {
                    reduce(property, 1)
                } else {
                    empty()
                },
            })
            .partition(|param| param.required);
        params.extend(optional);
        let open = !decidable
            || !matches!(
                schema.get("additionalProperties"),
                Some(Value::Bool(false)) | None
            );
        Contract { params, open }
    }

    fn open() -> Contract {
        Contract {
            params: Vec::new(),
            open: true,
        }
    }

    /// The reduced schema of a whole call input (the keyword arguments as
    /// an object, optional ones given `None` left out): what the server
    /// checks a reported call against.
    pub fn input_schema(&self) -> Value {
        let mut properties = Map::new();
        for param in &self.params {
            properties.insert(param.name.clone(), param.check.clone());
        }
        let required: Vec<Value> = self
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| Value::String(p.name.clone()))
            .collect();
        let mut schema = Map::new();
        schema.insert("type".into(), Value::String("object".into()));
        schema.insert("properties".into(), Value::Object(properties));
        schema.insert("required".into(), Value::Array(required));
        if !self.open {
            schema.insert("additionalProperties".into(), Value::Bool(false));
        }
        Value::Object(schema)
    }
}

/// Contracts kept, by the tool's `parameters` text.
const CACHED_CONTRACTS: usize = 1024;

/// A tool's contract as the server keeps it: built once per distinct
/// schema text and shared by every start that declares it (clients send
/// the same tools start after start), with the checks already written for
/// the program and the validator compiled on first use.
#[derive(Debug)]
pub struct SharedContract {
    contract: Contract,
    /// The checked parameters' reduced schemas, one JSON object text (what
    /// the program gives the child, which parses it at the first call).
    pub checks_json: String,
    validator: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
}

impl std::ops::Deref for SharedContract {
    type Target = Contract;

    fn deref(&self) -> &Contract {
        &self.contract
    }
}

impl PartialEq for SharedContract {
    fn eq(&self, other: &Self) -> bool {
        self.contract == other.contract
    }
}

impl Eq for SharedContract {}

impl SharedContract {
    fn new(contract: Contract) -> SharedContract {
        let checks: Map<String, Value> = contract
            .params
            .iter()
            .filter(|p| p.check.as_object().is_some_and(|c| !c.is_empty()))
            .map(|p| (p.name.clone(), p.check.clone()))
            .collect();
        SharedContract {
            checks_json: Value::Object(checks).to_string(),
            contract,
            validator: std::sync::OnceLock::new(),
        }
    }

    /// Checks a call's input (a JSON object) with the `jsonschema` crate;
    /// the error names the first violation.
    pub fn check(&self, input: &Value) -> Result<(), String> {
        let validator = self
            .validator
            .get_or_init(|| {
                jsonschema::draft202012::new(&self.contract.input_schema())
                    .map_err(|error| format!("its schema cannot be checked: {error}"))
            })
            .as_ref()
            .map_err(Clone::clone)?;
        match validator.iter_errors(input).next() {
            None => Ok(()),
            Some(error) => Err(format!(
                "{} (at {})",
                error,
                if error.instance_path().as_str().is_empty() {
                    "the input"
                } else {
                    error.instance_path().as_str()
                }
            )),
        }
    }
}

/// The recent tools' contracts (cleared whole when full).
static CONTRACTS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, Arc<SharedContract>>>,
> = std::sync::LazyLock::new(Default::default);

/// The shared contract of `tool`, built when its schema text is new.
pub fn shared(tool: &ToolDef) -> Arc<SharedContract> {
    let key = tool.parameters.as_deref().unwrap_or_default();
    let mut cache = CONTRACTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = cache.get(key) {
        return found.clone();
    }
    let made = Arc::new(SharedContract::new(Contract::of(tool)));
    if cache.len() >= CACHED_CONTRACTS {
        cache.clear();
    }
    cache.insert(key.to_owned(), made.clone());
    made
}

/// Checks a call's input (a JSON object) against its tool's contract.
pub fn check_input(tool: &ToolDef, input: &Value) -> Result<(), String> {
    shared(tool).check(input)
}

/// Refuses, when a start declares them, the tools whose schemas would make
/// every call's check costly: a `parameters` text over [`MAX_SCHEMA_BYTES`],
/// or checked `enum`s of more than [`MAX_ENUM_VALUES`] values together.
pub fn admit(tools: &[ToolDef]) -> Result<(), String> {
    for tool in tools {
        let size = tool.parameters.as_deref().map_or(0, str::len);
        if size > MAX_SCHEMA_BYTES {
            return Err(format!(
                "tool {:?}: its parameters schema has {size} bytes, over the limit of {MAX_SCHEMA_BYTES}",
                tool.name
            ));
        }
        let values: usize = shared(tool)
            .params
            .iter()
            .map(|param| enum_values(&param.check))
            .sum();
        if values > MAX_ENUM_VALUES {
            return Err(format!(
                "tool {:?}: its schema's enums have {values} values, over the limit of {MAX_ENUM_VALUES}",
                tool.name
            ));
        }
    }
    Ok(())
}

/// Values of the checked enums of a reduced schema.
fn enum_values(node: &Value) -> usize {
    let Value::Object(node) = node else {
        return 0;
    };
    let own = match node.get("enum") {
        Some(Value::Array(values)) => values.len(),
        _ => 0,
    };
    let properties = match node.get("properties") {
        Some(Value::Object(properties)) => properties.values().map(enum_values).sum(),
        _ => 0,
    };
    let nested = ["additionalProperties", "items"]
        .iter()
        .filter_map(|key| node.get(*key))
        .map(enum_values)
        .sum::<usize>();
    own + properties + nested
}

/// The contracts of an execution's tools, built at the first call checked
/// and kept with its record: a call is then checked in time of its own
/// size, never of its tool's schema text (not stored; every instance
/// compares equal, as it is derived from the tools).
#[derive(Clone, Debug, Default)]
pub struct Contracts(std::sync::OnceLock<Vec<Arc<SharedContract>>>);

impl PartialEq for Contracts {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Contracts {
    /// The contract of each of `tools`, in order.
    pub fn of(&self, tools: &[ToolDef]) -> &[Arc<SharedContract>] {
        self.0.get_or_init(|| tools.iter().map(shared).collect())
    }
}

fn required_names(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn empty() -> Value {
    Value::Object(Map::new())
}

/// The enforced part of a schema node (see the module's documentation).
pub fn reduce(node: &Value, depth: usize) -> Value {
    let Value::Object(node) = node else {
        return empty();
    };
    if depth > MAX_DEPTH || UNDECIDED.iter().any(|k| node.contains_key(*k)) {
        return empty();
    }
    let mut reduced = Map::new();
    if let Some(kind) = reduced_type(node.get("type")) {
        reduced.insert("type".into(), kind);
    }
    match (node.get("const"), node.get("enum")) {
        (Some(value), _) => {
            reduced.insert("enum".into(), Value::Array(vec![value.clone()]));
        }
        (None, Some(Value::Array(values))) if !values.is_empty() => {
            reduced.insert("enum".into(), Value::Array(values.clone()));
        }
        _ => {}
    }
    if let Some(Value::Object(properties)) = node.get("properties") {
        let properties: Map<String, Value> = properties
            .iter()
            .map(|(name, schema)| (name.clone(), reduce(schema, depth + 1)))
            .collect();
        reduced.insert("properties".into(), Value::Object(properties));
        let required: Vec<Value> = required_names(node)
            .into_iter()
            .map(|name| Value::String(name.to_owned()))
            .collect();
        if !required.is_empty() {
            reduced.insert("required".into(), Value::Array(required));
        }
    }
    match node.get("additionalProperties") {
        Some(Value::Bool(false)) => {
            reduced.insert("additionalProperties".into(), Value::Bool(false));
        }
        Some(schema @ Value::Object(_)) => {
            reduced.insert("additionalProperties".into(), reduce(schema, depth + 1));
        }
        _ => {}
    }
    if let Some(schema @ Value::Object(_)) = node.get("items") {
        reduced.insert("items".into(), reduce(schema, depth + 1));
    }
    Value::Object(reduced)
}

/// `type` kept when every name in it is a JSON type (one name, or a
/// non-empty list without repeats).
fn reduced_type(kind: Option<&Value>) -> Option<Value> {
    match kind? {
        Value::String(name) if TYPES.contains(&name.as_str()) => Some(Value::String(name.clone())),
        Value::Array(names) if !names.is_empty() => {
            let mut seen: Vec<&str> = Vec::with_capacity(names.len());
            for name in names {
                let name = name.as_str().filter(|n| TYPES.contains(n))?;
                if seen.contains(&name) {
                    return None;
                }
                seen.push(name);
            }
            Some(Value::Array(names.clone()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(parameters: Value) -> ToolDef {
        ToolDef {
            name: "get_weather".into(),
            description: None,
            parameters: Some(parameters.to_string()),
        }
    }

    #[test]
    fn required_parameters_come_first_in_schema_order() {
        let contract = Contract::of(&tool(json!({
            "type": "object",
            "properties": {"units": {}, "city": {"type": "string"}, "days": {}, "lang": {}},
            "required": ["lang", "city"]
        })));
        let names: Vec<(&str, bool)> = contract
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.required))
            .collect();
        assert_eq!(
            names,
            [
                ("city", true),
                ("lang", true),
                ("units", false),
                ("days", false)
            ]
        );
        assert!(!contract.open);
        assert_eq!(contract.params[0].check, json!({"type": "string"}));
    }

    #[test]
    fn a_schema_without_properties_takes_anything() {
        for parameters in [json!({"type": "object"}), json!(null), json!([1])] {
            let contract = Contract::of(&tool(parameters));
            assert!(contract.open && contract.params.is_empty());
        }
        let contract = Contract::of(&tool(json!({
            "properties": {"a": {}}, "additionalProperties": true
        })));
        assert!(contract.open);
    }

    #[test]
    fn undecidable_nodes_are_not_checked() {
        let reduced = reduce(
            &json!({
                "type": "object",
                "properties": {
                    "a": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "b": {"$ref": "#/definitions/b", "type": "string"},
                    "c": {"type": ["string", "null"], "minLength": 3, "pattern": "x"},
                    "d": {"type": "strange"},
                    "e": {"type": "array", "items": {"enum": ["x", 1]}},
                    "f": {"const": 5}
                },
                "required": ["a"]
            }),
            0,
        );
        assert_eq!(
            reduced,
            json!({
                "type": "object",
                "properties": {
                    "a": {}, "b": {}, "c": {"type": ["string", "null"]}, "d": {},
                    "e": {"type": "array", "items": {"enum": ["x", 1]}},
                    "f": {"enum": [5]}
                },
                "required": ["a"]
            })
        );
    }

    #[test]
    fn depth_is_bounded() {
        let mut node = json!({"type": "string"});
        for _ in 0..100 {
            node = json!({"type": "array", "items": node});
        }
        let mut reduced = &reduce(&node, 0);
        let mut levels = 0;
        while let Some(items) = reduced.get("items") {
            reduced = items;
            levels += 1;
        }
        assert_eq!(levels, MAX_DEPTH + 1);
        assert_eq!(reduced, &json!({}));
    }

    #[test]
    fn the_server_check_names_the_violation() {
        let weather = tool(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
            "required": ["city"]
        }));
        assert_eq!(check_input(&weather, &json!({"city": "SF"})), Ok(()));
        let refused = |input: Value| check_input(&weather, &input).is_err();
        assert!(refused(json!({"city": 3})));
        assert!(refused(json!({})));
        assert!(refused(json!({"city": "SF", "town": "x"})));
        assert!(refused(json!({"city": "SF", "unit": "K"})));
        let error = check_input(&weather, &json!({"city": 3})).unwrap_err();
        assert!(error.contains("/city"), "{error}");
    }
}
