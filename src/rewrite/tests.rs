//! Tests of the rewrite: modes, shadowing, layout, names.

use proptest::prelude::*;

use super::*;

fn bindings() -> Vec<ToolBinding> {
    ["get_weather", "search"]
        .iter()
        .map(|name| ToolBinding {
            original: name.replace('_', "-"),
            python: (*name).to_owned(),
            params: vec!["a".into()],
        })
        .collect()
}

fn modes(source: &str) -> Vec<(usize, CallMode)> {
    let rewritten = rewrite(source, &bindings()).unwrap();
    let mut sites: Vec<_> = rewritten.sites.iter().map(|s| (s.line, s.mode)).collect();
    sites.sort_by_key(|(line, _)| *line);
    sites
}

#[test]
fn modes_follow_how_the_result_is_used() {
    let source = "\
a = await get_weather('x')
b = get_weather('y')
r = await asyncio.gather(get_weather('p'), tools.search('q'))
ts = [get_weather(c) for c in cs]
tasks.append(search('z'))
print(search('w'))
f = lambda c: get_weather(c)
";
    assert_eq!(
        modes(source),
        vec![
            (1, CallMode::Awaited),
            (2, CallMode::Sync),
            (3, CallMode::Deferred),
            (3, CallMode::Deferred),
            (4, CallMode::Deferred),
            (5, CallMode::Deferred),
            (6, CallMode::Sync),
            (7, CallMode::Sync),
        ]
    );
}

#[test]
fn callee_is_replaced_in_place() {
    let source = "w = await tools.get_weather(city='SF')\nx = search(1)\n";
    let rewritten = rewrite(source, &bindings()).unwrap();
    assert_eq!(rewritten.marker, "_B");
    assert_eq!(
        rewritten.source,
        "w = await _B[0]            (city='SF')\nx = _B[1] (1)\n"
    );
    assert_eq!(rewritten.sites[0].col, 10);
    assert_eq!(rewritten.sites[1].tool, 1);
}

/// Found by the `rewriter` fuzz target: a lone `\r` is a line break to
/// Python, so it must count for the sites' lines and columns.
#[test]
fn every_python_line_break_counts_for_lines_and_columns() {
    let source = "x = 1\ry = 2\r\nif x:\n    w = get_weather('a')\r    v = search('b')\n";
    let rewritten = rewrite(source, &bindings()).unwrap();
    let at: Vec<(usize, usize)> = rewritten.sites.iter().map(|s| (s.line, s.col)).collect();
    assert_eq!(at, vec![(4, 8), (5, 8)]);
}

#[test]
fn bound_names_are_not_tools() {
    let source = "def search(q):\n    return q\nprint(search(1))\nfor tools in []: pass\ntools.get_weather(1)\n";
    assert!(rewrite(source, &bindings()).unwrap().sites.is_empty());
}

#[test]
fn marker_avoids_the_programs_words() {
    let rewritten = rewrite("_B = 1\n_B0 = 2\nX_B1 = 3\nsearch(1)\n", &bindings()).unwrap();
    assert_eq!(rewritten.marker, "_B1");
}

#[test]
fn module_level_asyncio_run_becomes_await() {
    let source =
        "async def main():\n    asyncio.run(x())\nasyncio.run(main())\nr = asyncio.run(main())\n";
    let rewritten = rewrite(source, &bindings()).unwrap();
    assert_eq!(
        rewritten.source,
        "async def main():\n    asyncio.run(x())\nawait      (main())\nr = await      (main())\n"
    );
}

#[test]
fn syntax_errors_name_the_line() {
    let error = rewrite("x = 1\ny = = 2\n", &bindings()).unwrap_err();
    assert!(
        matches!(error, RewriteError::Syntax { line: 2, .. }),
        "{error:?}"
    );
}

#[test]
fn collisions_and_empty_names_are_refused() {
    let tool = |name: &str| ToolDef {
        name: name.into(),
        description: None,
        parameters: None,
    };
    let error = bind_tools(&[tool("get-weather"), tool("get weather")]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tools \"get-weather\" and \"get weather\" both map to the Python name \"get_weather\""
    );
    assert_eq!(
        bind_tools(&[tool("?!")]).unwrap_err(),
        RewriteError::UnnameableTool("?!".into())
    );
}

fn program() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("x = await get_weather('a')".to_owned()),
        Just("y = search(1)".to_owned()),
        Just("z = [search(i) for i in range(3)]".to_owned()),
        Just("t = tools.search(2); u = tools.get_weather(a=1)".to_owned()),
        Just("def f(v):\n    return search(v)".to_owned()),
        Just("s = f'{search(3)}'".to_owned()),
        Just("if x:\n    asyncio.run(main())".to_owned()),
        Just("k = 1  # search(9)".to_owned()),
        Just("m = '''\nsearch(1)\n'''".to_owned()),
    ];
    proptest::collection::vec(line, 0..12).prop_map(|lines| lines.join("\n") + "\n")
}

proptest! {
    #[test]
    fn rewrite_keeps_lines_and_parses(source in program()) {
        let rewritten = rewrite(&source, &bindings()).unwrap();
        prop_assert_eq!(rewritten.source.lines().count(), source.lines().count());
        prop_assert!(ruff_python_parser::parse_module(&rewritten.source).is_ok(), "{}", rewritten.source);
        let comment_or_string_sites = rewritten.sites.iter().filter(|s| {
            let line = source.lines().nth(s.line - 1).unwrap_or("");
            line.starts_with("k =") || line == "search(1)"
        });
        prop_assert_eq!(comment_or_string_sites.count(), 0);
        for site in &rewritten.sites {
            prop_assert_eq!(site.id, rewritten.sites.iter().position(|s| s == site).unwrap());
        }
    }
}
