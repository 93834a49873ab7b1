//! Tests of the rewrite: modes, shadowing, layout, names.

use proptest::prelude::*;

use super::*;

fn bindings() -> Vec<ToolBinding> {
    ["get_weather", "search"]
        .iter()
        .map(|name| ToolBinding {
            original: name.replace('_', "-"),
            python: (*name).to_owned(),
            contract: crate::contract::shared(&crate::tools::ToolDef {
                name: "t".into(),
                description: None,
                parameters: None,
            }),
        })
        .collect()
}

fn modes(source: &str) -> Vec<(usize, CallMode)> {
    let rewritten = rewrite(source, &bindings()).unwrap();
    let mut sites: Vec<_> = rewritten.sites.iter().map(|s| (s.line, s.mode)).collect();
    sites.sort_by_key(|(line, _)| *line);
    sites
}

/// The mode of the one site on each line of `source`.
fn mode_by_line(source: &str) -> Vec<(usize, CallMode)> {
    modes(source)
}

#[test]
fn awaited_and_bare_calls() {
    let source = "\
a = await get_weather('x')
search('fire and forget')
await asyncio.gather(get_weather('p'), tools.search('q'))
";
    assert_eq!(
        mode_by_line(source),
        vec![
            (1, CallMode::Awaited),
            (2, CallMode::Sync),
            (3, CallMode::Deferred),
            (3, CallMode::Deferred),
        ]
    );
}

#[test]
fn a_call_is_a_coroutine_wherever_it_may_be_awaited_later() {
    // Each of these is valid CPython when the coroutine is awaited later:
    // the call must not be made before that.
    let lines = [
        "c = get_weather('x')\nawait c",
        "c = get_weather('x')\nawait asyncio.gather(c)",
        "c = get_weather('x')\nr = await audited('label', c)",
        "cs = [get_weather(c) for c in cities]",
        "d = {'a': get_weather('x')}",
        "t = (get_weather('x'), search('y'))",
        "tasks.append(get_weather('x'))",
        "t = asyncio.create_task(get_weather('x'))",
        "f = lambda s: get_weather(s)",
        "def make(s):\n    return get_weather(s)",
        "async def g():\n    yield get_weather('x')",
        "self.pending = get_weather('x')",
        "pending['x'] = get_weather('x')",
        "unused = get_weather('x')",
        "c = get_weather('x')\nalias = c",
        "c = get_weather('x') or search('y')\nawait c",
        "r = helper(get_weather('x'))",
        "coros = list(map(get_weather, cities)) + [search('z')]",
    ];
    for source in lines {
        let found = modes(&format!("{source}\n"));
        assert!(!found.is_empty(), "no site in {source:?}");
        for (line, mode) in found {
            assert_eq!(mode, CallMode::Deferred, "line {line} of {source:?}");
        }
    }
}

#[test]
fn a_call_used_as_a_value_is_made_on_the_spot() {
    // CPython would never await these coroutines; baton's extension makes
    // the call and the value is real.
    let lines = [
        "w = get_weather('x')\nprint(w['temp'])",
        "print(get_weather('x'))",
        "t = get_weather('x')['temp']",
        "n = len(search('q'))",
        "s = f'{search(3)}'",
        "if search('q'):\n    pass",
        "for r in search('q'):\n    pass",
        "total = 1 + get_weather('x')",
        "a, b = search('q')",
        "x = search('q').get('k')",
        "ok = search('q') == []",
        "names = ', '.join(search('q'))",
        "w = get_weather('x')\nif w:\n    print(json.dumps(w))",
        "prices = [get_weather(c) for c in cs]\nprint(statistics.mean(prices))",
        "x: dict = get_weather('x')\nx['a']",
        "n = 0\nn += get_weather('x')",
        "with get_weather('x') as f:\n    pass",
        "assert search('q')",
        "print(*[search(i) for i in range(3)])",
    ];
    for source in lines {
        let found = modes(&format!("{source}\n"));
        assert!(!found.is_empty(), "no site in {source:?}");
        for (line, mode) in found {
            assert_eq!(mode, CallMode::Sync, "line {line} of {source:?}");
        }
    }
}

#[test]
fn a_name_used_both_ways_stays_a_coroutine() {
    let source = "w = get_weather('x')\nprint(w['temp'])\nawait w\n";
    assert_eq!(mode_by_line(source), vec![(1, CallMode::Deferred)]);
    // Reaching names dynamically: nothing is known of them.
    let source = "w = get_weather('x')\nprint(w['temp'])\nprint(eval('w'))\n";
    assert_eq!(mode_by_line(source), vec![(1, CallMode::Deferred)]);
}

#[test]
fn a_shadowed_builtin_is_not_a_value_reader() {
    let source = "def print(x):\n    return x\nprint(get_weather('x'))\n";
    assert_eq!(mode_by_line(source), vec![(3, CallMode::Deferred)]);
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
