//! The console (`GET /ui`) in a real headless browser: Debian's `chromium`
//! driven through WebDriver (`chromedriver`, via fantoccini) against a real
//! server process. The executions it shows are made over HTTP first; what
//! the page shows is then compared with what the API says, and the effects
//! of its actions (a cancel) are checked through the API. Screenshots go to
//! `target/console-screenshots/`.
//!
//! Needs `chromium` and `chromedriver` on the path (`.ci/run` installs
//! Debian's `chromium` and `chromium-driver`).

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::server::{KEY, OTHER_KEY, Server, answers, continue_, weather_tools};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// What the completed execution prints: markup, which must stay text.
const HOSTILE_LINE: &str =
    "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>";

/// Executions made over HTTP before the browser looks.
struct Made {
    completed: String,
    failed: String,
    paused: Value,
    others: String,
}

fn id(reply: &Value) -> String {
    reply["execution_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn start(server: &Server, key: &str, code: &str) -> Value {
    let (status, reply) = server.post_as(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools()}),
        Some(("x-api-key", key)),
    );
    assert_eq!(status, 200, "{reply}");
    reply
}

fn finish(server: &Server, mut reply: Value) -> Value {
    while reply["status"] == "tool_call_required" {
        let (status, next) = continue_(server, &reply, answers(&reply));
        assert_eq!(status, 200, "{next}");
        reply = next;
    }
    reply
}

fn make_executions(server: &Server) -> Made {
    let completed_code = format!(
        "print({HOSTILE_LINE:?})\nw = await get_weather(city='<i>Paris</i>')\ntry:\n    await class_tool(x=1)\nexcept Exception as e:\n    print('class:', e)\nprint(w['temp'])\n"
    );
    let completed = finish(server, start(server, KEY, &completed_code));
    assert_eq!(completed["status"], "completed", "{completed}");
    let failed = finish(
        server,
        start(server, KEY, "x = await get_weather(city='Oslo')\n1 / 0\n"),
    );
    assert_eq!(failed["status"], "error", "{failed}");
    let paused = start(
        server,
        KEY,
        "city = 'Lyon'\ncount = 3\nw = await get_weather(city=city)\nprint(w)\n",
    );
    assert_eq!(paused["status"], "tool_call_required", "{paused}");
    let others = start(server, OTHER_KEY, "w = await get_weather(city='Rome')\n");
    Made {
        completed: id(&completed),
        failed: id(&failed),
        paused,
        others: id(&others),
    }
}

/// A `chromedriver` on a free loopback port, killed on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "this test needs chromedriver and chromium (apt-get install -y chromium chromium-driver): {e}"
                )
            });
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, url }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({"args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1400,1000", format!("--user-data-dir={}", profile.display()),
        ]}),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("WebDriver session: {e}"))
}

/// Runs `script` (a function body returning a value) until it returns
/// something other than null or false; panics with `what` after 10 s.
async fn until(client: &Client, what: &str, script: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let value = client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if !value.is_null() && value != Value::Bool(false) {
            return value;
        }
        assert!(Instant::now() < deadline, "waited 10 s for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn js(client: &Client, script: &str) -> Value {
    client
        .execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("{script}: {e}"))
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

async fn type_key(client: &Client, key: &str) {
    let field = client
        .find(Locator::Id("api-key"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    field.send_keys(key).await.unwrap_or_else(|e| panic!("{e}"));
    click(client, "#connect").await;
}

fn screenshots() -> PathBuf {
    let dir = common::root().join("target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir
}

async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{name}: not a rendered page ({} bytes)",
        png.len()
    );
    std::fs::write(screenshots().join(format!("{name}.png")), png)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The ids of the listed executions, top to bottom.
const LISTED: &str = "return [...document.querySelectorAll('#executions tbody tr')].map(r => r.dataset.executionId);";

/// The shown execution, once it is `id`: its facts and timeline.
fn shown(id: &str) -> String {
    format!(
        "const pane = document.getElementById('detail-pane');
         if (pane.hidden || pane.dataset.executionId !== '{id}') return null;
         const fact = (name) => (document.querySelector(`[data-fact='${{name}}']`) || {{}}).textContent;
         return {{
           status: fact('Status'),
           calls: [...document.querySelectorAll('#timeline tr[data-call-id]')].map(r => [
             r.closest('section').dataset.round, r.cells[1].textContent, r.cells[3].textContent,
             r.dataset.state, r.cells[4].textContent]),
           stdout: document.getElementById('stdout').textContent,
           error: document.getElementById('error-box').hidden ? null : document.getElementById('error').textContent,
           locals: [...document.querySelectorAll('#locals tbody tr')].map(r => [r.cells[0].textContent, r.cells[1].textContent]),
           cancel: !document.getElementById('cancel').hidden,
         }};"
    )
}

/// Clicks the listed execution `id` and waits until the page shows it;
/// what it shows.
async fn open_row(client: &Client, id: &str, what: &str) -> Value {
    click(client, &format!("#executions tr[data-execution-id='{id}']")).await;
    until(client, what, &shown(id)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_keys_executions_and_cancels_one() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let made = make_executions(&server);
    let paused_id = id(&made.paused);
    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let client = browser(&driver, profile.path()).await;
    client
        .goto(&format!("{}/ui", server.base))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // A wrong key: refused, nothing listed.
    type_key(&client, "not-a-key").await;
    let said = until(
        &client,
        "the refusal",
        "const b = document.getElementById('banner'); return b.hidden ? null : b.textContent;",
    )
    .await;
    assert!(
        said.as_str()
            .is_some_and(|s| s.contains("API key was refused")),
        "{said}"
    );
    assert_eq!(
        js(
            &client,
            "return document.getElementById('list-pane').hidden;"
        )
        .await,
        json!(true)
    );
    screenshot(&client, "1-refused").await;

    // The key: this key's executions, newest first; not the other key's.
    type_key(&client, KEY).await;
    let listed = until(
        &client,
        "the listing",
        &format!("const ids = (() => {{ {LISTED} }})(); return ids.length ? ids : null;"),
    )
    .await;
    assert_eq!(
        listed,
        json!([paused_id, made.failed, made.completed]),
        "other key's {}",
        made.others
    );
    // The key is in no storage, cookie, URL or field of the page.
    let kept = js(
        &client,
        "return [localStorage.length, sessionStorage.length, document.cookie, location.href.includes('test-key'), document.getElementById('api-key').value, document.documentElement.outerHTML.includes('test-key')];",
    )
    .await;
    assert_eq!(kept, json!([0, 0, "", false, "", false]));
    screenshot(&client, "2-listing").await;

    // The filter asks the server for one status.
    client
        .find(Locator::Id("status-filter"))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .select_by_value("paused")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let only_paused = until(
        &client,
        "the paused listing",
        &format!("const ids = (() => {{ {LISTED} }})(); return ids.length === 1 ? ids : null;"),
    )
    .await;
    assert_eq!(only_paused, json!([paused_id]));
    client
        .find(Locator::Id("status-filter"))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .select_by_value("")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    until(
        &client,
        "the whole listing again",
        &format!("const ids = (() => {{ {LISTED} }})(); return ids.length === 3;"),
    )
    .await;

    // The completed execution: its timeline round by round, its output as
    // text (the markup it printed is not markup in the page).
    let completed = open_row(&client, &made.completed, "the completed execution").await;
    assert_eq!(completed["status"], "completed");
    assert_eq!(
        completed["calls"],
        json!([
            [
                "1",
                "get-weather",
                "{\"city\":\"<i>Paris</i>\"}",
                "ok",
                "{\"city\":\"<i>Paris</i>\",\"temp\":22}"
            ],
            ["2", "class", "{\"x\":1}", "error", "class tool is down"],
        ])
    );
    assert_eq!(
        completed["stdout"],
        json!(format!("{HOSTILE_LINE}\nclass: class tool is down\n22\n"))
    );
    assert_eq!(completed["cancel"], json!(false));
    let injected = js(
        &client,
        "return [window.__pwned === undefined, document.querySelectorAll('#detail-pane img, #detail-pane script, #detail-pane i').length];",
    )
    .await;
    assert_eq!(injected, json!([true, 0]), "server text became markup");
    screenshot(&client, "3-completed").await;

    // The failed one: its error.
    let failed = open_row(&client, &made.failed, "the failed execution").await;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("ZeroDivisionError")),
        "{failed}"
    );

    // The paused one: its frame's locals and the call it waits on; cancel.
    let paused = open_row(&client, &paused_id, "the paused execution").await;
    assert_eq!(paused["status"], "paused");
    assert_eq!(
        paused["calls"],
        json!([[
            "1",
            "get-weather",
            "{\"city\":\"Lyon\"}",
            "pending",
            "waiting for the client"
        ]])
    );
    assert_eq!(
        paused["locals"],
        json!([["city", "\"Lyon\""], ["count", "3"]])
    );
    assert_eq!(paused["cancel"], json!(true));
    screenshot(&client, "4-paused").await;
    click(&client, "#cancel").await;
    let cancelled = until(
        &client,
        "the cancel",
        &format!(
            "const s = (() => {{ {} }})(); return s && s.status === 'cancelled' ? s : null;",
            shown(&paused_id)
        ),
    )
    .await;
    assert_eq!(cancelled["cancel"], json!(false));
    assert_eq!(cancelled["error"], json!("Execution was cancelled"));
    assert_eq!(
        cancelled["calls"],
        json!([[
            "1",
            "get-weather",
            "{\"city\":\"Lyon\"}",
            "pending",
            "never answered"
        ]])
    );
    screenshot(&client, "5-cancelled").await;
    // The server agrees: the execution is cancelled, its token refused.
    let (status, seen) = server.get(&format!("/executions/{paused_id}"), Some(KEY));
    assert_eq!(
        (status, &seen["status"]),
        (200, &json!("cancelled")),
        "{seen}"
    );
    let (status, refused) = continue_(&server, &made.paused, answers(&made.paused));
    assert_eq!(status, 409, "{refused}");

    // A reload forgets the key.
    client.refresh().await.unwrap_or_else(|e| panic!("{e}"));
    let forgotten = until(
        &client,
        "the page after a reload",
        "return document.readyState === 'complete' ? document.getElementById('list-pane').hidden : null;",
    )
    .await;
    assert_eq!(forgotten, json!(true));
    client.close().await.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_console_is_one_self_contained_page_under_a_strict_policy() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/console.js", "text/javascript"),
        ("/ui/console.css", "text/css"),
    ] {
        let response = ureq::get(&format!("{}{path}", server.base))
            .call()
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(response.status(), 200);
        assert!(
            response.content_type().starts_with(kind),
            "{path}: {}",
            response.content_type()
        );
        let policy = response
            .header("content-security-policy")
            .unwrap_or_default()
            .to_owned();
        assert!(
            policy.contains("default-src 'none'")
                && policy.contains("script-src 'self'")
                && policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
        assert_eq!(response.header("x-content-type-options"), Some("nosniff"));
        let body = response.into_string().unwrap_or_default();
        // No other origin anywhere: no external assets.
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path}"
        );
    }
    let page = server.get_text("/ui");
    assert!(
        !page.contains("<script>") && !page.contains("style="),
        "inline code"
    );
}

#[test]
fn cancel_by_execution_id_is_the_owners_only() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let paused = start(
        &server,
        KEY,
        "print('before')\nw = await get_weather(city='Kyiv')\n",
    );
    let path = format!("/executions/{}/cancel", id(&paused));
    let (status, other) = server.post_as(&path, &json!({}), Some(("x-api-key", OTHER_KEY)));
    assert_eq!(status, 404, "{other}");
    let (status, seen) = server.get(&format!("/executions/{}", id(&paused)), Some(KEY));
    assert_eq!((status, &seen["status"]), (200, &json!("paused")), "{seen}");
    let (status, bad) = server.post("/executions/nothex/cancel", &json!({}));
    assert_eq!(status, 404, "{bad}");
    let (status, cancelled) = server.post(&path, &json!({}));
    assert_eq!(
        (status, &cancelled["status"]),
        (200, &json!("cancelled")),
        "{cancelled}"
    );
    // It keeps what it printed and the calls it made.
    assert_eq!(
        (&cancelled["stdout"], &cancelled["error"]),
        (&json!("before\n"), &json!("Execution was cancelled"))
    );
    assert_eq!(cancelled["timeline"][0]["input"], "{\"city\":\"Kyiv\"}");
    assert_eq!(cancelled["timeline"][0]["state"], "pending");
    // Twice: still cancelled. An ended one: as it ended.
    let (status, again) = server.post(&path, &json!({}));
    assert_eq!((status, &again["status"]), (200, &json!("cancelled")));
    let done = finish(
        &server,
        start(
            &server,
            KEY,
            "w = await get_weather(city='Kyiv')\nprint(w['temp'])\n",
        ),
    );
    let (status, ended) = server.post(&format!("/executions/{}/cancel", id(&done)), &json!({}));
    assert_eq!(
        (status, &ended["status"]),
        (200, &json!("completed")),
        "{ended}"
    );
    assert_eq!(ended["stdout"], "14\n");
    let (status, refused) = continue_(&server, &paused, answers(&paused));
    assert_eq!(status, 409, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_a_keys_sessions_with_their_cells_and_names() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    let (_, created) = server.post("/sessions", &json!({}));
    let session = created["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut executions = Vec::new();
    for code in [
        "w = await get_weather(city='Nice')",
        &format!("label = {HOSTILE_LINE:?}\ntemps = [w['temp'], 1]"),
    ] {
        let (status, reply) = server.post(
            &format!("/sessions/{session}/exec"),
            &json!({"code": code, "tools": weather_tools()}),
        );
        assert_eq!(status, 200, "{reply}");
        let reply = finish(&server, reply);
        assert_eq!(reply["status"], "completed", "{reply}");
        executions.push(id(&reply));
    }
    let (_, other) = server.post_as("/sessions", &json!({}), Some(("x-api-key", OTHER_KEY)));
    let driver = Driver::start();
    let profile = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let client = browser(&driver, profile.path()).await;
    client
        .goto(&format!("{}/ui", server.base))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    type_key(&client, KEY).await;
    let listed = until(
        &client,
        "the sessions",
        "const rows = [...document.querySelectorAll('#sessions tbody tr')]; return rows.length ? rows.map(r => [r.dataset.sessionId, r.cells[2].textContent, r.cells[3].textContent]) : null;",
    )
    .await;
    assert_eq!(
        listed,
        json!([[session, "idle", "2"]]),
        "other key's {}",
        other["session_id"]
    );
    click(
        &client,
        &format!("#sessions tr[data-session-id='{session}']"),
    )
    .await;
    let shown = until(
        &client,
        "the session",
        "const box = document.getElementById('session-box'); if (box.hidden) return null;
         return {
           cells: [...document.querySelectorAll('#session-cells a')].map(a => a.textContent),
           names: [...document.querySelectorAll('#session-names tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
         };",
    )
    .await;
    assert_eq!(shown["cells"], json!(executions));
    assert_eq!(
        shown["names"],
        json!([
            ["label", "str", format!("'{HOSTILE_LINE}'")],
            ["temps", "list", "[14, 1]"],
            ["w", "dict", "{'city': 'Nice', 'temp': 14}"],
        ])
    );
    let injected = js(
        &client,
        "return [window.__pwned === undefined, document.querySelectorAll('#session-box img, #session-box script').length];",
    )
    .await;
    assert_eq!(injected, json!([true, 0]), "a name's value became markup");
    screenshot(&client, "6-session").await;
    // A cell opens as the execution it is.
    click(&client, "#session-cells li:last-child a").await;
    let cell = until(
        &client,
        "the cell's execution",
        &shown_status(&executions[1]),
    )
    .await;
    assert_eq!(cell, json!("completed"));
}

/// The status the detail pane shows once it shows execution `id`.
fn shown_status(id: &str) -> String {
    format!(
        "const pane = document.getElementById('detail-pane');
         if (pane.hidden || pane.dataset.executionId !== '{id}') return null;
         return document.querySelector(\"[data-fact='Status']\").textContent;"
    )
}
