//! A real `baton serve` process on a loopback port with its own data
//! directory, and a tiny HTTP client for it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// The API key every test server accepts.
pub(crate) const KEY: &str = "test-key-1";
/// A second accepted key (another tenant).
pub(crate) const OTHER_KEY: &str = "test-key-2";
/// The signing key of test servers (`id:hex`).
pub(crate) const SIGNING: &str =
    "t1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// A running server.
pub(crate) struct Server {
    child: Option<Child>,
    binary: PathBuf,
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub base: String,
    /// Its data directory (kept across restarts by the test).
    pub data_dir: PathBuf,
    extra: Vec<String>,
    /// Environment variables it starts with (beside the test's own).
    env: Vec<(String, String)>,
    /// What the server printed (its log), across restarts.
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts a server on a fresh data directory.
    pub(crate) fn start(data_dir: &Path, extra: &[&str]) -> Server {
        Server::start_binary(Path::new(env!("CARGO_BIN_EXE_baton")), data_dir, extra)
    }

    /// Starts `binary` (a `baton` build, perhaps an earlier one a bench
    /// compares with) on a fresh data directory.
    pub(crate) fn start_binary(binary: &Path, data_dir: &Path, extra: &[&str]) -> Server {
        Server::launch(binary, data_dir, extra, &[])
    }

    /// Starts a server with environment variables (`CODEAPI_*`, as an
    /// operator configures LibreChat's token keys).
    pub(crate) fn start_with_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::launch(Path::new(env!("CARGO_BIN_EXE_baton")), data_dir, extra, env)
    }

    fn launch(binary: &Path, data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (child, base) = spawn(binary, data_dir, &extra, &env, &log);
        Server {
            child: Some(child),
            binary: binary.to_owned(),
            base,
            data_dir: data_dir.to_owned(),
            extra,
            env,
            log,
        }
    }

    /// The lines the server printed so far.
    pub(crate) fn log_lines(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The server's process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The pid of the server's zygote (its child that runs `zygote`).
    pub(crate) fn zygote_pid(&self) -> Option<i32> {
        let server_pid = i32::try_from(self.pid()?).ok()?;
        children_of(server_pid).into_iter().find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == b"zygote"))
        })
    }

    /// The server's peak resident memory (`VmHWM`), bytes, while it runs.
    pub(crate) fn peak_memory(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let kib = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))?;
        let kib: u64 = kib.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    }

    /// SIGKILLs the server (and so its zygote and children).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts again on the same data directory with other extra flags.
    pub(crate) fn restart_with(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| (*s).to_owned()).collect();
        self.restart();
    }

    /// Starts again on the same data directory and flags.
    pub(crate) fn restart(&mut self) {
        self.kill();
        let (child, base) = spawn(
            &self.binary,
            &self.data_dir,
            &self.extra,
            &self.env,
            &self.log,
        );
        self.child = Some(child);
        self.base = base;
    }

    /// Sends SIGTERM and waits for a clean exit; returns whether it was clean.
    pub(crate) fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        // SAFETY: signalling our own child process.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        child.wait().map(|s| s.success()).unwrap_or(false)
    }

    /// Any request: `method` on `path` with `headers` and a JSON `body`.
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut request = agent().request(method, &format!("{}{}", self.base, path));
        for (name, value) in headers {
            request = request.set(name, value);
        }
        match body {
            Some(body) => respond(
                request
                    .set("content-type", "application/json")
                    .send_string(&body.to_string()),
            ),
            None => respond(request.call()),
        }
    }

    /// POST a JSON body with the test key.
    pub(crate) fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_as(path, body, Some(("x-api-key", KEY)))
    }

    /// POST with an explicit auth header (or none).
    pub(crate) fn post_as(
        &self,
        path: &str,
        body: &Value,
        auth: Option<(&str, &str)>,
    ) -> (u16, Value) {
        self.post_raw(path, &body.to_string(), auth, &[])
    }

    /// POST raw text with extra headers.
    pub(crate) fn post_raw(
        &self,
        path: &str,
        body: &str,
        auth: Option<(&str, &str)>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        self.post_raw_bytes(path, body.as_bytes(), auth, headers)
    }

    /// POST raw bytes with extra headers.
    pub(crate) fn post_raw_bytes(
        &self,
        path: &str,
        body: &[u8],
        auth: Option<(&str, &str)>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut request = agent()
            .post(&format!("{}{}", self.base, path))
            .set("content-type", "application/json");
        if let Some((name, value)) = auth {
            request = request.set(name, value);
        }
        for (name, value) in headers {
            request = request.set(name, value);
        }
        respond(request.send_bytes(body))
    }

    /// POST raw JSON text with the test key; the answer as text (a reply
    /// nested deeper than `serde_json`'s tree limit stays readable).
    pub(crate) fn post_text(&self, path: &str, body: &str) -> (u16, String) {
        let result = agent()
            .post(&format!("{}{}", self.base, path))
            .set("content-type", "application/json")
            .set("x-api-key", KEY)
            .send_string(body);
        match result {
            Ok(response) => (
                response.status(),
                response.into_string().unwrap_or_default(),
            ),
            Err(ureq::Error::Status(status, response)) => {
                (status, response.into_string().unwrap_or_default())
            }
            Err(error) => panic!("transport error: {error}"),
        }
    }

    /// POST JSON as `key`; also returns the value of the response header
    /// `header`.
    pub(crate) fn post_reading_header(
        &self,
        path: &str,
        body: &Value,
        key: &str,
        header: &str,
    ) -> (u16, Value, Option<String>) {
        let sent = agent()
            .post(&format!("{}{}", self.base, path))
            .set("content-type", "application/json")
            .set("x-api-key", key)
            .send_string(&body.to_string());
        let response = match sent {
            Ok(response) | Err(ureq::Error::Status(_, response)) => response,
            Err(error) => panic!("transport error: {error}"),
        };
        let value = response.header(header).map(str::to_owned);
        let status = response.status();
        let text = response.into_string().unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(json!({"raw": text}));
        (status, body, value)
    }

    /// POST a multipart form as `key`: `(field, file name, content)`; a part
    /// without a file name is a plain text field.
    pub(crate) fn post_multipart(
        &self,
        path: &str,
        parts: &[(&str, Option<&str>, &str)],
        key: &str,
    ) -> (u16, Value) {
        let parts: Vec<_> = parts
            .iter()
            .map(|(field, file, content)| (*field, *file, content.as_bytes()))
            .collect();
        self.post_multipart_bytes(path, &parts, key)
    }

    /// POST a `multipart/form-data` body of binary parts:
    /// `(field, file name, contents)`.
    pub(crate) fn post_multipart_bytes(
        &self,
        path: &str,
        parts: &[(&str, Option<&str>, &[u8])],
        key: &str,
    ) -> (u16, Value) {
        let boundary = "baton-test-boundary-7d1c";
        let mut body = Vec::new();
        for (field, file, content) in parts {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            let disposition = match file {
                Some(name) => format!(
                    "Content-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                ),
                None => format!("Content-Disposition: form-data; name=\"{field}\"\r\n\r\n"),
            };
            body.extend_from_slice(disposition.as_bytes());
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        let content_type = format!("multipart/form-data; boundary={boundary}");
        self.post_raw_bytes(
            path,
            &body,
            Some(("x-api-key", key)),
            &[("content-type", &content_type)],
        )
    }

    /// GET the raw body of a response, with its status.
    pub(crate) fn get_bytes(&self, path: &str, key: &str) -> (u16, Vec<u8>) {
        match agent()
            .get(&format!("{}{}", self.base, path))
            .set("x-api-key", key)
            .call()
        {
            Ok(response) | Err(ureq::Error::Status(_, response)) => {
                let status = response.status();
                let mut bytes = Vec::new();
                let _ = std::io::Read::read_to_end(&mut response.into_reader(), &mut bytes);
                (status, bytes)
            }
            Err(error) => panic!("transport error: {error}"),
        }
    }

    /// GET with the test key.
    pub(crate) fn get(&self, path: &str, key: Option<&str>) -> (u16, Value) {
        let mut request = agent().get(&format!("{}{}", self.base, path));
        if let Some(key) = key {
            request = request.set("x-api-key", key);
        }
        respond(request.call())
    }

    /// GET raw text.
    pub(crate) fn get_text(&self, path: &str) -> String {
        agent()
            .get(&format!("{}{}", self.base, path))
            .call()
            .ok()
            .and_then(|r| r.into_string().ok())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
}

fn respond(result: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    match result {
        Ok(response) => {
            let status = response.status();
            (status, response.into_json().unwrap_or(Value::Null))
        }
        Err(ureq::Error::Status(status, response)) => {
            let text = response.into_string().unwrap_or_default();
            (
                status,
                serde_json::from_str(&text).unwrap_or(json!({"raw": text})),
            )
        }
        Err(error) => panic!("transport error: {error}"),
    }
}

/// `[flag, value]` when `extra` does not set `flag` itself.
fn unless_given<'a>(extra: &[String], flag: &'a str, value: &'a str) -> Vec<&'a str> {
    if extra.iter().any(|a| a == flag) {
        Vec::new()
    } else {
        vec![flag, value]
    }
}

fn spawn(
    binary: &Path,
    data_dir: &Path,
    extra: &[String],
    env: &[(String, String)],
    log: &Arc<Mutex<Vec<String>>>,
) -> (Child, String) {
    let mut child = Command::new(binary)
        .arg("serve")
        .args(unless_given(extra, "--listen", "127.0.0.1:0"))
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--api-key")
        .arg(format!("{KEY},{OTHER_KEY}"))
        .args(unless_given(extra, "--signing-key", SIGNING))
        .args(unless_given(extra, "--pool-size", "2"))
        .args(extra)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("BATON_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start baton: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(address) = line.strip_prefix("baton: listening on ") {
                    break address.trim().to_owned();
                }
            }
            _ => panic!("baton exited before listening"),
        }
    };
    let log = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Ok(mut log) = log.lock()
                && log.len() < 100_000
            {
                log.push(line);
            }
        }
    });
    wait_until_ready(&base);
    (child, base)
}

/// Waits until `/health` says the sandbox can serve (a server listens
/// before its first child is ready).
fn wait_until_ready(base: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let ready = agent()
            .get(&format!("{base}/health"))
            .call()
            .is_ok_and(|r| r.status() == 200);
        if ready {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("baton at {base} was not ready within 30 s");
}

/// Tools of the HTTP tests, with names that need normalising.
pub(crate) fn weather_tools() -> Value {
    json!([
        {"name": "get-weather", "description": "Current weather",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}},
        {"name": "class", "parameters": {"type": "object", "properties": {"x": {}}}},
        {"name": "1st tool!", "parameters": {"type": "object", "properties": {}}}
    ])
}

/// A counter of a server's `/metrics` (`name` with its labels, as it is
/// printed; 0 when it has not counted yet).
pub(crate) fn counter(server: &Server, name: &str) -> f64 {
    server
        .get_text("/metrics")
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(name)?;
            rest.starts_with(' ')
                .then(|| rest.trim().parse::<f64>().ok())
                .flatten()
        })
        .unwrap_or(0.0)
}

/// The tool answers of the HTTP tests.
pub(crate) fn answer(call: &Value) -> Value {
    let name = call["name"].as_str().unwrap_or_default();
    let input = &call["input"];
    match name {
        "get-weather" => {
            let city = input["city"].as_str().unwrap_or("?");
            json!({"call_id": call["id"], "result": {"city": city, "temp": 10 + city.len()}, "is_error": false})
        }
        "class" => {
            json!({"call_id": call["id"], "result": null, "is_error": true, "error_message": "class tool is down"})
        }
        _ => json!({"call_id": call["id"], "result": name, "is_error": false}),
    }
}

/// One result per call of a paused reply, from [`answer`].
pub(crate) fn answers(reply: &Value) -> Vec<Value> {
    reply["tool_calls"]
        .as_array()
        .map(|calls| calls.iter().map(answer).collect())
        .unwrap_or_default()
}

/// Continues a paused reply with `results`.
pub(crate) fn continue_(server: &Server, reply: &Value, results: Vec<Value>) -> (u16, Value) {
    server.post(
        "/exec/programmatic",
        &json!({"continuation_token": reply["continuation_token"], "tool_results": results}),
    )
}

/// Loops while `reply` is paused, replacing it by `continue_round(reply)`
/// (which must answer 200). Returns the final reply and the number of rounds.
pub(crate) fn continue_until_done(
    mut reply: Value,
    mut continue_round: impl FnMut(&Value) -> (u16, Value),
) -> (Value, usize) {
    let mut rounds = 0;
    while reply["status"] == "tool_call_required" {
        rounds += 1;
        let (status, next) = continue_round(&reply);
        assert_eq!(status, 200, "{next}");
        reply = next;
    }
    (reply, rounds)
}

/// Loops while `reply` is paused, killing the server with `SIGKILL` and
/// starting it again before each continuation (answered with
/// [`answers`]). Returns the final reply and the number of rounds.
pub(crate) fn continue_across_restarts(server: &mut Server, reply: Value) -> (Value, usize) {
    let mut reply = reply;
    let mut rounds = 0;
    while reply["status"] == "tool_call_required" {
        server.restart();
        let (status, next) = continue_(server, &reply, answers(&reply));
        assert_eq!(status, 200, "{next}");
        reply = next;
        rounds += 1;
    }
    (reply, rounds)
}

/// Starts `code` and loops until the end, answering with [`answer`].
/// Returns the final response and the number of rounds.
pub(crate) fn run_program(server: &Server, code: &str) -> (Value, usize) {
    let (status, reply) = server.post(
        "/exec/programmatic",
        &json!({"code": code, "tools": weather_tools()}),
    );
    assert_eq!(status, 200, "{reply}");
    continue_until_done(reply, |paused| continue_(server, paused, answers(paused)))
}

/// `code` run under CPython 3.11 with `get_weather(city)` answering
/// `{"city": city, "temp": 10 + len(city)}`, as `answers` does.
pub(crate) fn cpython_stdout(code: &str) -> String {
    let harness = format!(
        "import ast, asyncio\n\
         async def get_weather(city, unit=None):\n    return {{'city': city, 'temp': 10 + len(city)}}\n\
         code = compile({code:?}, '<code>', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)\n\
         result = eval(code, {{'get_weather': get_weather, 'asyncio': asyncio}})\n\
         if result is not None:\n    asyncio.run(result)\n"
    );
    let output = std::process::Command::new("python3")
        .args(["-c", &harness])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Programs of the weather tool, each of several rounds.
pub(crate) const PROGRAMS: &[&str] = &[
    "total = 0\nfor city in ['a', 'bb', 'ccc', 'dddd']:\n    w = await get_weather(city=city)\n    total += w['temp']\n    print(city, w['temp'], total)\nprint('total', total)\n",
    "a, b = await asyncio.gather(get_weather(city='Oslo'), get_weather(city='Rome'))\nc = await get_weather(city=a['city'] + b['city'])\nprint(sorted([a['temp'], b['temp'], c['temp']]))\n",
    "seen = {}\nasync def look(city):\n    w = await get_weather(city=city)\n    seen[city] = w['temp']\n    return w\nfor c in ['x', 'yy']:\n    await look(c)\nprint(seen, sum(seen.values()))\n",
];

/// The processes whose parent is `parent`.
pub(crate) fn children_of(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: i32 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (ppid == parent).then_some(pid)
        })
        .collect()
}

/// Polls `check` every 100 ms for up to 10 s; whether it held.
pub(crate) fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..100 {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}
