//! Python sessions over HTTP, against a real `baton serve`: what the
//! contract promises besides CPython's answers (`session_oracle.rs` checks
//! those): one cell at a time (409 `session_busy`), a principal's sessions
//! only (404 for another's), the names a session shows, delete and expiry,
//! a cell stopped from outside leaves the session as it was, a retried
//! cell is answered again and never run twice, the caps.

mod common;

use common::server::{KEY, OTHER_KEY, Server, answers, continue_, weather_tools};
use serde_json::{Value, json};

fn server(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let server = Server::start(dir.path(), extra);
    (dir, server)
}

fn create(server: &Server, body: Value) -> String {
    let (status, created) = server.post("/sessions", &body);
    assert_eq!(status, 201, "{created}");
    created["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {created}"))
        .to_owned()
}

fn cell(server: &Server, id: &str, body: Value) -> (u16, Value) {
    server.post(&format!("/sessions/{id}/exec"), &body)
}

fn run(server: &Server, id: &str, code: &str) -> Value {
    let (status, reply) = cell(server, id, json!({"code": code, "tools": weather_tools()}));
    assert_eq!(status, 200, "{reply}");
    let mut reply = reply;
    while reply["status"] == "tool_call_required" {
        let (status, next) = continue_(server, &reply, answers(&reply));
        assert_eq!(status, 200, "{next}");
        reply = next;
    }
    reply
}

fn show(server: &Server, id: &str) -> Value {
    let (status, view) = server.get(&format!("/sessions/{id}"), Some(KEY));
    assert_eq!(status, 200, "{view}");
    view
}

fn names(view: &Value) -> Vec<(String, String, String)> {
    view["names"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .map(|n| {
                    let text = |k: &str| n[k].as_str().unwrap_or_default().to_owned();
                    (text("name"), text("type"), text("repr"))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn one_cell_at_a_time_and_a_paused_cell_continues_through_exec_programmatic() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({}));
    let (status, paused) = cell(
        &server,
        &id,
        json!({"code": "w = await get_weather(city='Oslo')\nprint(w['temp'])", "tools": weather_tools()}),
    );
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["status"], "tool_call_required");
    assert_eq!(
        paused["session"],
        json!({"session_id": id, "cell": 1, "resumed": "new"})
    );
    assert_eq!(show(&server, &id)["status"], "busy");
    let (status, busy) = cell(&server, &id, json!({"code": "print(1)"}));
    assert_eq!(
        (status, busy["error"].as_str()),
        (409, Some("session_busy")),
        "{busy}"
    );
    let (status, done) = continue_(&server, &paused, answers(&paused));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["stdout"], "14\n");
    assert_eq!(done["session"]["cell"], 1);
    let view = show(&server, &id);
    assert_eq!(
        (view["cells"].as_u64(), view["status"].as_str()),
        (Some(1), Some("idle"))
    );
    let next = run(&server, &id, "print(w['city'], w['temp'] + 1)");
    assert_eq!(next["stdout"], "Oslo 15\n");
    assert_eq!(
        next["session"],
        json!({"session_id": id, "cell": 2, "resumed": "hot"})
    );
}

#[test]
fn a_session_is_its_principals_alone() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({"ttl_seconds": 600}));
    run(&server, &id, "secret = 42");
    let as_other = Some(("x-api-key", OTHER_KEY));
    let (status, _) = server.get(&format!("/sessions/{id}"), Some(OTHER_KEY));
    assert_eq!(status, 404);
    let (status, _) = server.post_as(
        &format!("/sessions/{id}/exec"),
        &json!({"code": "print(secret)"}),
        as_other,
    );
    assert_eq!(status, 404);
    let (status, _) = server.request(
        "DELETE",
        &format!("/sessions/{id}"),
        &[("x-api-key", OTHER_KEY)],
        None,
    );
    assert_eq!(status, 404);
    let (status, listed) = server.get("/sessions", Some(OTHER_KEY));
    assert_eq!(status, 200);
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    let (_, mine) = server.get("/sessions", Some(KEY));
    assert_eq!(mine["sessions"][0]["session_id"], id.as_str(), "{mine}");
    assert!(mine["sessions"][0].get("names").is_none(), "{mine}");
    // The owner still has it, untouched.
    assert_eq!(run(&server, &id, "print(secret)")["stdout"], "42\n");
    for bad in [
        "ps_00",
        "rt_0123",
        "ps_zz000000000000000000000000000000",
        "x",
    ] {
        let (status, _) = server.get(&format!("/sessions/{bad}"), Some(KEY));
        assert_eq!(status, 404, "{bad}");
    }
}

#[test]
fn the_names_a_session_shows_run_no_code_and_hide_what_the_runtime_bound() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({}));
    let code = "import json, statistics\n\
        class Shouty:\n\
        \x20   def __repr__(self):\n\
        \x20       print('repr ran')\n\
        \x20       return 'loud'\n\
        def helper(x):\n\
        \x20   return x\n\
        n = 3\n\
        text = 'x' * 500\n\
        data = {'a': [1, 2.5, None], 'b': (True,)}\n\
        obj = Shouty()\n\
        mixed = [1, Shouty()]\n\
        _private = 1\n\
        get_weather = 'rebound by the code'\n";
    let reply = run(&server, &id, code);
    assert_eq!(reply["stdout"], "", "{reply}");
    let shown = names(&show(&server, &id));
    let by_name = |name: &str| shown.iter().find(|(n, _, _)| n == name).cloned();
    assert_eq!(by_name("n"), Some(("n".into(), "int".into(), "3".into())));
    assert_eq!(
        by_name("data"),
        Some((
            "data".into(),
            "dict".into(),
            "{'a': [1, 2.5, None], 'b': (True,)}".into()
        ))
    );
    assert_eq!(
        by_name("helper").map(|n| n.2),
        Some("<function helper>".into())
    );
    assert_eq!(
        by_name("Shouty").map(|n| n.2),
        Some("<class 'Shouty'>".into())
    );
    assert_eq!(
        by_name("statistics").map(|n| n.2),
        Some("<module 'statistics'>".into())
    );
    assert_eq!(
        by_name("obj").map(|n| (n.1, n.2)),
        Some(("Shouty".into(), "<Shouty object>".into()))
    );
    assert_eq!(by_name("mixed").map(|n| n.2), Some("<list object>".into()));
    let text = by_name("text").map(|n| n.2).unwrap_or_default();
    assert!(
        text.chars().count() <= 200 && text.starts_with("'xxx"),
        "{text}"
    );
    assert_eq!(
        by_name("get_weather").map(|n| n.2),
        Some("'rebound by the code'".into())
    );
    // `json` is the module the runtime bound before the code ran.
    for hidden in [
        "_private",
        "asyncio",
        "json",
        "tools",
        "ToolError",
        "class_",
    ] {
        assert!(by_name(hidden).is_none(), "{hidden} shown: {shown:?}");
    }
    // A rebound tool name stays the code's in the next cell.
    assert_eq!(
        run(&server, &id, "print(get_weather)")["stdout"],
        "rebound by the code\n"
    );
}

#[test]
fn delete_cancels_the_cell_that_holds_it_and_expiry_ends_a_session() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({}));
    let (_, paused) = cell(
        &server,
        &id,
        json!({"code": "w = await get_weather(city='Rome')", "tools": weather_tools()}),
    );
    assert_eq!(paused["status"], "tool_call_required");
    let (status, _) = server.request(
        "DELETE",
        &format!("/sessions/{id}"),
        &[("x-api-key", KEY)],
        None,
    );
    assert_eq!(status, 204);
    let (status, _) = server.get(&format!("/sessions/{id}"), Some(KEY));
    assert_eq!(status, 404);
    let (status, after) = continue_(&server, &paused, answers(&paused));
    assert!(
        status == 409 || after["error"] == "Execution cancelled",
        "a continuation of a deleted session's cell: {status} {after}"
    );
    let (status, _) = server.request(
        "DELETE",
        &format!("/sessions/{id}"),
        &[("x-api-key", KEY)],
        None,
    );
    assert_eq!(status, 404);

    let short = create(&server, json!({"ttl_seconds": 1}));
    run(&server, &short, "x = 1");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let (status, _) = server.get(&format!("/sessions/{short}"), Some(KEY));
    assert_eq!(status, 404);
    let (status, _) = cell(&server, &short, json!({"code": "print(x)"}));
    assert_eq!(status, 404);
    for bad in [
        json!({"ttl_seconds": 0}),
        json!({"ttl_seconds": 10_000_000}),
        json!({"ttl_seconds": "1"}),
    ] {
        let (status, body) = server.post("/sessions", &bad);
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

#[test]
fn a_cell_stopped_from_outside_leaves_the_session_as_it_was() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({}));
    run(&server, &id, "state = ['before']");
    let (status, stopped) = cell(
        &server,
        &id,
        json!({"code": "state.append('during')\nwhile True:\n    pass", "timeout": 1000}),
    );
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["error"], "Time limit exceeded", "{stopped}");
    let view = show(&server, &id);
    assert_eq!(
        (view["cells"].as_u64(), view["status"].as_str()),
        (Some(1), Some("idle")),
        "{view}"
    );
    let after = run(&server, &id, "print(state)");
    assert_eq!(after["stdout"], "['before']\n");
    assert_eq!(after["session"]["cell"], 2);
    // A cell that raises is the code's own ending: it counts, and keeps
    // what it did before raising.
    let raised = run(&server, &id, "state.append('kept')\nraise KeyError('k')");
    assert_eq!(raised["status"], "error");
    assert_eq!(
        run(&server, &id, "print(state)")["stdout"],
        "['before', 'kept']\n"
    );
}

#[test]
fn a_retried_cell_is_answered_again_never_run_twice() {
    let (_dir, mut server) = server(&[]);
    let id = create(&server, json!({}));
    run(&server, &id, "count = 0");
    let code = "count += 1\nprint('count', count)";
    let (status, first) = cell(&server, &id, json!({"code": code, "cell": 2}));
    assert_eq!(status, 200, "{first}");
    // The answer was lost; the server even died. The client sends it again.
    server.restart();
    let (status, again) = cell(&server, &id, json!({"code": code, "cell": 2}));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["stdout"], first["stdout"]);
    assert_eq!(again["execution_id"], first["execution_id"]);
    assert_eq!(again["session"]["cell"], 2);
    assert_eq!(run(&server, &id, "print(count)")["stdout"], "1\n");
    let (status, ahead) = cell(&server, &id, json!({"code": "print(1)", "cell": 9}));
    assert_eq!(
        (status, ahead["error"].as_str()),
        (409, Some("session_busy"))
    );
    let (status, _) = cell(&server, &id, json!({"code": "print(1)", "cell": 0}));
    assert_eq!(status, 400);
}

#[test]
fn an_earlier_cells_marker_is_reserved() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({}));
    let first = run(&server, &id, "w = await get_weather(city='Bern')");
    assert_eq!(first["status"], "completed", "{first}");
    let (status, refused) = cell(&server, &id, json!({"code": "_Bc1 = []"}));
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("_Bc1"),
        "{refused}"
    );
}

/// The cells of the compaction tests: plain values, imports, a dataclass
/// and its instance, a function that awaits a tool, a lambda, a Counter,
/// an alias, a file; and a generator and a closed file object (which no
/// compaction can carry).
const COMPACTED_CELLS: [&str; 7] = [
    "import json\nfrom dataclasses import dataclass\nfrom collections import Counter\n@dataclass\nclass P:\n    x: int\n    y: int = 0\n    def norm(self):\n        return abs(self.x) + abs(self.y)\nw = await get_weather(city='Bern')\nhistory = [w]",
    "p = P(3, -4)\ncounts = Counter('hello')\ngen = (i for i in range(3))\nasync def fetch(city):\n    return (await get_weather(city=city))['temp']\nsq = lambda v: v * v\nalias = history",
    "total = sum(x['temp'] for x in history)\nwith open('/mnt/data/note.txt', 'w') as f:\n    f.write('kept')",
    "print(p, p.norm(), counts.most_common(1), sq(7), alias is history, total)\nprint(json.dumps(history))\nt = await fetch('Oslo')\nprint(t, open('/mnt/data/note.txt').read())",
    "history.append({'city': 'x', 'temp': t})\nprint(len(alias), p == P(3, -4), sorted(counts)[:2])",
    "q = P(t, 1)\nprint(q.norm(), await fetch('Lima'), [sq(i) for i in range(3)])",
    "print(sorted(k for k in globals() if not k.startswith('_') and k not in ('f', 'gen')))",
];

#[test]
fn a_full_session_is_compacted_keeping_what_it_can_and_naming_what_it_cannot() {
    let (_dir, mut server) = server(&["--session-max-cells", "3"]);
    let (_oracle_dir, oracle) = self::server(&[]);
    let id = create(&server, json!({}));
    let whole = create(&oracle, json!({}));
    let mut tags = Vec::new();
    for (at, code) in COMPACTED_CELLS.iter().enumerate() {
        if at == 4 {
            // Between cells: the compacted session is rebuilt from its base.
            server.kill();
            server.restart();
        }
        let compacted = run(&server, &id, code);
        let expected = run(&oracle, &whole, code);
        assert_eq!(
            compacted["status"],
            "completed",
            "cell {}: {compacted}",
            at + 1
        );
        assert_eq!(
            compacted["stdout"],
            expected["stdout"],
            "cell {} differs from one session never compacted",
            at + 1
        );
        tags.push(compacted["session"].clone());
    }
    // (The tags are the last answers': continuations, hot in the base's
    // child; a compacting cell's first answer says `cold`.)
    // Cell 4 is past the cap of 3: cells 1-3 are folded; cell 6 folds the
    // base and cells 4-5. Only the generator and the file object are lost,
    // named once.
    let tag = |at: usize| {
        let t = &tags[at];
        (
            t["cell"].as_u64(),
            t["resumed"].as_str().map(str::to_owned),
            t.get("lost").cloned(),
        )
    };
    assert_eq!(
        tag(3),
        (Some(4), Some("hot".into()), Some(json!(["f", "gen"])))
    );
    assert_eq!(tag(4), (Some(5), Some("cold".into()), None));
    assert_eq!(tag(5), (Some(6), Some("hot".into()), Some(json!([]))));
    assert_eq!(tag(6), (Some(7), Some("hot".into()), None));
    let view = show(&server, &id);
    assert_eq!(
        (view["cells"].as_u64(), view["compacted_cells"].as_u64()),
        (Some(7), Some(5)),
        "{view}"
    );
    assert_eq!(view["lost"], json!([]), "{view}");
    let shown: Vec<String> = names(&view).into_iter().map(|(name, _, _)| name).collect();
    for name in [
        "P", "alias", "counts", "fetch", "history", "p", "q", "sq", "t", "total",
    ] {
        assert!(shown.iter().any(|n| n == name), "{name} not in {shown:?}");
    }
    assert!(!shown.iter().any(|n| n == "gen"), "{shown:?}");
    let gone = run(&server, &id, "print(gen)");
    assert_eq!(gone["status"], "error", "{gone}");
    assert!(
        gone["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("NameError: name 'gen' is not defined"),
        "{gone}"
    );
}

#[test]
fn a_retried_folded_cell_is_refused_with_a_reason() {
    let (_dir, server) = server(&["--session-max-cells", "2"]);
    let id = create(&server, json!({}));
    for code in ["a = 1", "b = 2", "c = a + b"] {
        assert_eq!(run(&server, &id, code)["status"], "completed");
    }
    let (status, refused) = cell(&server, &id, json!({"code": "a = 1", "cell": 1}));
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("folded"),
        "{refused}"
    );
    let again = cell(&server, &id, json!({"code": "c = a + b", "cell": 3})).1;
    assert_eq!(again["session"]["cell"], 3, "{again}");
    let next = run(&server, &id, "print(a, b, c)");
    assert_eq!(next["stdout"], "1 2 3\n", "{next}");
}

#[test]
fn a_session_past_its_replay_time_is_compacted_and_one_too_large_to_carry_is_full() {
    // No replay allowed at all: a cell after two compacts them.
    let (_dir, server) = server(&["--session-max-replay-secs", "0"]);
    let id = create(&server, json!({}));
    let spent = run(&server, &id, "n = sum(i * i for i in range(400_000))");
    assert_eq!(spent["status"], "completed", "{spent}");
    let second = run(&server, &id, "m = n + 1");
    assert_eq!(second["session"].get("lost"), None, "{second}");
    let third = run(&server, &id, "print(n, m)");
    assert_eq!(
        third["stdout"], "21333253333400000 21333253333400001\n",
        "{third}"
    );
    assert_eq!(third["session"]["lost"], json!([]), "{third}");
    // A namespace whose base source would pass the code cap: full, with
    // the reason, and the session as it was.
    let (_dir, server) = self::server(&["--session-max-cells", "2"]);
    let id = create(&server, json!({}));
    run(&server, &id, "data = list(range(100_000))");
    run(&server, &id, "x = 1");
    let (status, full) = cell(&server, &id, json!({"code": "print(len(data), x)"}));
    assert_eq!(
        (status, full["error"].as_str()),
        (409, Some("session_full")),
        "{full}"
    );
    let message = full["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("--session-max-cells") && message.contains("could not be compacted"),
        "{full}"
    );
    let view = show(&server, &id);
    assert_eq!(
        (
            view["cells"].as_u64(),
            view["status"].as_str(),
            view["compacted_cells"].as_u64()
        ),
        (Some(2), Some("idle"), Some(0)),
        "{view}"
    );
}

#[test]
fn a_cell_cannot_flood_the_names_it_reports() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({}));
    let code = "import _baton\n\
        for i in range(5000):\n\
        \x20   _baton.name('n%d' % i, 't' * 1000, 'r' * 100000)\n\
        for i in range(600):\n\
        \x20   globals()['v%04d' % i] = i\n";
    let reply = run(&server, &id, code);
    let shown = names(&show(&server, &id));
    assert!(
        reply["status"] == "completed" || reply["status"] == "error",
        "{reply}"
    );
    assert!(shown.len() <= 500, "{} names", shown.len());
    assert!(
        shown
            .iter()
            .all(|(n, t, r)| n.len() <= 200 && t.len() <= 200 && r.chars().count() <= 200)
    );
}

#[test]
fn a_session_child_killed_while_parked_is_rebuilt_cold() {
    let (_dir, server) = server(&[]);
    let id = create(&server, json!({}));
    let first = run(
        &server,
        &id,
        "w = await get_weather(city='Lima')
facts = {'city': w['city']}",
    );
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(
        run(&server, &id, "facts['n'] = 1")["session"]["resumed"],
        "hot"
    );
    // The child that holds the namespace: the zygote's oldest child (it
    // ran cell 1; the pool's idle children were forked after it).
    let zygote = server.zygote_pid().unwrap_or_else(|| panic!("no zygote"));
    let started = |pid: &i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let fields: Vec<String> = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect();
                fields.get(19)?.parse::<u64>().ok()
            })
            .unwrap_or(u64::MAX)
    };
    let holder = common::server::children_of(zygote)
        .into_iter()
        .min_by_key(started)
        .unwrap_or_else(|| panic!("the zygote has no child"));
    // SAFETY: signalling a child of the test's own server.
    unsafe {
        libc::kill(holder, libc::SIGKILL);
    }
    let after = run(&server, &id, "print(sorted(facts.items()))");
    assert_eq!(after["stdout"], "[('city', 'Lima'), ('n', 1)]\n", "{after}");
    assert_eq!(after["session"]["resumed"], "cold", "{after}");
    assert_eq!(
        run(&server, &id, "print(len(facts))")["session"]["resumed"],
        "hot"
    );
}

/// `POST /exec` in LibreChat's `stateful` profile with a runtime session
/// hint, as its `execute_code` tool sends it.
fn stateful(server: &Server, hint: &str, lang: &str, code: &str) -> Value {
    let (status, reply) = server.request(
        "POST",
        "/exec",
        &[
            ("x-api-key", KEY),
            ("x-codeapi-expected-profile", "stateful"),
        ],
        Some(&json!({"lang": lang, "code": code, "runtime_session_hint": hint})),
    );
    assert_eq!(status, 200, "{reply}");
    reply
}

#[test]
fn librechats_stateful_profile_keeps_python_names_beside_its_files() {
    let (_dir, mut server) = server(&[]);
    let hint = "v2:user:feedfacefeedfacefeedfacefeedface";
    let first = stateful(
        &server,
        hint,
        "py",
        "x = 41\nopen('f.txt', 'w').write('hi')\nprint('set')",
    );
    assert_eq!(
        (first["stdout"].as_str(), first["runtime_status"].as_str()),
        (Some("set\n"), Some("new")),
        "{first}"
    );
    let shell = stateful(
        &server,
        hint,
        "bash",
        "cat f.txt && echo more > g.txt && rm f.txt",
    );
    assert_eq!(shell["stdout"], "hi", "{shell}");
    let second = stateful(
        &server,
        hint,
        "py",
        "import os\nprint(x + 1, open('g.txt').read().strip(), os.path.exists('f.txt'))",
    );
    assert_eq!(second["stdout"], "42 more False\n", "{second}");
    assert_eq!(second["runtime_status"], "reused");
    server.kill();
    server.restart();
    let after = stateful(&server, hint, "py", "print(x, sorted(os.listdir('.')))");
    assert_eq!(after["stdout"], "41 ['g.txt']\n", "{after}");
    // Another hint is another namespace.
    let other = stateful(&server, "conversation-2", "py", "print('x' in globals())");
    assert_eq!(other["stdout"], "False\n", "{other}");
}

#[test]
fn a_cell_cut_off_by_a_kill_leaves_the_session_free_and_as_it_was() {
    let (_dir, mut server) = server(&[]);
    let id = create(&server, json!({}));
    run(&server, &id, "kept = 'before'");
    let base = server.base.clone();
    let path = format!("/sessions/{id}/exec");
    let running = std::thread::spawn(move || {
        ureq::post(&format!("{base}{path}"))
            .set("x-api-key", KEY)
            .send_json(json!({"code": "kept = 'during'\nimport time\ntime.sleep(5)"}))
            .is_ok()
    });
    std::thread::sleep(std::time::Duration::from_millis(800));
    server.kill();
    assert!(
        !running.join().unwrap_or(true),
        "the cut-off request was answered"
    );
    server.restart();
    let after = run(&server, &id, "print(kept)");
    assert_eq!(after["stdout"], "before\n", "{after}");
    assert_eq!(after["session"]["cell"], 2, "{after}");
}

#[test]
fn a_cell_listed_by_another_request_while_its_end_is_flushed_keeps_its_journal() {
    let (_dir, mut server) = server(&[]);
    let id = create(&server, json!({}));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Another client reads the session all the time: a read that finds a
    // cell's hold dead while its end is flushed lists the cell itself.
    let reader = {
        let (base, id, stop) = (server.base.clone(), id.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = ureq::get(&format!("{base}/sessions/{id}"))
                    .set("x-api-key", KEY)
                    .call();
            }
        })
    };
    for n in 0..40 {
        let reply = run(&server, &id, &format!("x{n} = {n}"));
        assert_eq!(reply["status"], "completed", "{reply}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = reader.join();
    assert_eq!(show(&server, &id)["cells"], 40);
    // Every journal is there: a rebuild replays them all.
    server.kill();
    server.restart();
    let total = run(
        &server,
        &id,
        "print(sum(globals()[f'x{n}'] for n in range(40)))",
    );
    assert_eq!(total["stdout"], "780\n", "{total}");
    assert_eq!(total["session"]["resumed"], "cold");
}
