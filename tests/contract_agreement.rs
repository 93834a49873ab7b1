//! The child's argument checker (`stdlib_shims/baton_contract.py`, run here
//! under CPython) and the `jsonschema` crate the server checks with agree
//! on every generated schema and value: the schema is first reduced
//! ([`baton::contract::reduce`]) exactly as a start reduces each parameter,
//! then both judge the value against the reduced schema.
//!
//! Cases are generated with proptest's runner and judged by one Python
//! process in a batch (a process per case would take minutes).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

const CASES: usize = 20_000;

fn keys() -> impl Strategy<Value = String> {
    prop_oneof![Just("a"), Just("b"), Just("c"), Just("d")].prop_map(str::to_owned)
}

fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(|n| json!(n)),
        prop_oneof![Just(2.0), Just(-1.0), Just(0.5), Just(1e20), Just(3.25)]
            .prop_map(|f| json!(f)),
        keys().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(keys(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn type_names() -> impl Strategy<Value = Value> {
    let name = prop_oneof![
        Just("string"),
        Just("integer"),
        Just("number"),
        Just("boolean"),
        Just("array"),
        Just("object"),
        Just("null"),
    ];
    prop_oneof![
        name.clone().prop_map(|n| json!(n)),
        prop::collection::btree_set(name, 1..3)
            .prop_map(|set| Value::Array(set.into_iter().map(|n| json!(n)).collect())),
        Just(json!("strange")),
    ]
}

fn schemas() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({})),
        type_names().prop_map(|t| json!({"type": t})),
        prop::collection::vec(values(), 1..4).prop_map(|members| json!({"enum": members})),
        values().prop_map(|value| json!({"const": value})),
        (type_names(), prop::collection::vec(values(), 1..3))
            .prop_map(|(t, members)| json!({"type": t, "enum": members})),
        Just(json!({"type": "string", "minLength": 3})),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map(keys(), inner.clone(), 0..3),
                prop::collection::btree_set(keys(), 0..3),
                prop_oneof![
                    Just(None),
                    Just(Some(json!(false))),
                    Just(Some(json!(true))),
                    inner.clone().prop_map(Some),
                ],
                any::<bool>(),
            )
                .prop_map(|(properties, required, extra, typed)| {
                    let mut schema = Map::new();
                    if typed {
                        schema.insert("type".into(), json!("object"));
                    }
                    schema.insert(
                        "properties".into(),
                        Value::Object(properties.into_iter().collect()),
                    );
                    if !required.is_empty() {
                        schema.insert("required".into(), json!(required));
                    }
                    if let Some(extra) = extra {
                        schema.insert("additionalProperties".into(), extra);
                    }
                    Value::Object(schema)
                }),
            (inner.clone(), any::<bool>()).prop_map(|(items, typed)| if typed {
                json!({"type": "array", "items": items})
            } else {
                json!({"items": items})
            }),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"anyOf": [a, b]})),
            inner.prop_map(|schema| json!({"not": schema, "type": "object"})),
        ]
    })
}

/// Every simple schema against every simple value: the type and equality
/// rules (booleans are not numbers, whole floats are integers, tuples of
/// JSON are arrays) case by case, not only as often as chance has them.
fn every_leaf_pair() -> Vec<(Value, Value)> {
    let names = [
        "string", "integer", "number", "boolean", "array", "object", "null",
    ];
    let mut schemas: Vec<Value> = names.iter().map(|n| json!({"type": n})).collect();
    schemas.extend([
        json!({"type": ["integer", "null"]}),
        json!({"type": ["number", "string"]}),
        json!({"type": ["boolean", "array"]}),
        json!({"enum": [1, "a", null]}),
        json!({"enum": [true]}),
        json!({"enum": [1.0]}),
        json!({"enum": [0]}),
        json!({"enum": [[1, "a"], {"a": 1}]}),
        json!({"enum": [[]]}),
        json!({"enum": [{}]}),
        json!({"type": "integer", "enum": [1, 2.5]}),
    ]);
    let values = [
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(1),
        json!(-1),
        json!(1.0),
        json!(0.5),
        json!(1e20),
        json!(-0.0),
        json!("a"),
        json!(""),
        json!([]),
        json!([1, "a"]),
        json!([1.0, "a"]),
        json!({}),
        json!({"a": 1}),
        json!({"a": 1.0}),
        json!({"a": true}),
    ];
    schemas
        .iter()
        .flat_map(|schema| values.iter().map(|value| (schema.clone(), value.clone())))
        .collect()
}

/// The checker's verdict on each `(schema, value)`: whether it accepts.
fn python_verdicts(cases: &[(Value, Value)]) -> Vec<bool> {
    let script = "import json, sys\n\
        sys.path.insert(0, sys.argv[1])\n\
        import baton_contract\n\
        for line in sys.stdin:\n\
        \x20   schema, value = json.loads(line)\n\
        \x20   print(1 if baton_contract._problem(value, schema, \"'x'\") is None else 0)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(common::root().join("stdlib_shims"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let mut input = String::new();
    for (schema, value) in cases {
        input.push_str(&json!([schema, value]).to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let _ = writer.join();
    assert!(output.status.success());
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line == "1")
        .collect()
}

#[test]
fn the_childs_checker_agrees_with_the_jsonschema_crate() {
    let mut runner = TestRunner::new(Config::default());
    let strategy = (schemas(), values());
    let cases: Vec<(Value, Value)> = (0..CASES)
        .map(|_| {
            let (schema, value) = strategy
                .new_tree(&mut runner)
                .unwrap_or_else(|e| panic!("{e}"))
                .current();
            (baton::contract::reduce(&schema, 1), value)
        })
        .chain(every_leaf_pair())
        .collect();
    let verdicts = python_verdicts(&cases);
    assert_eq!(verdicts.len(), cases.len());
    let mut disagreements = Vec::new();
    let mut refused = 0;
    for ((schema, value), python) in cases.iter().zip(&verdicts) {
        let validator = jsonschema::draft202012::new(schema)
            .unwrap_or_else(|e| panic!("reduced schema {schema} does not compile: {e}"));
        let crate_accepts = validator.is_valid(value);
        refused += usize::from(!crate_accepts);
        if crate_accepts != *python {
            disagreements.push(format!(
                "schema {schema}, value {value}: crate {crate_accepts}, checker {python}"
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} disagree:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements[..disagreements.len().min(20)].join("\n")
    );
    // Both verdicts occur often enough for the agreement to mean something.
    assert!(
        refused > cases.len() / 5 && refused < cases.len() * 4 / 5,
        "{refused} of {} refused",
        cases.len()
    );
}
