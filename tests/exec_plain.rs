//! `POST /exec` (and `/v1/exec`): code with no tools, as LibreChat's
//! `execute_code` tool and its programmatic tool without tools send it,
//! against a real `baton serve`.

mod common;

use common::server::{KEY, Server};
use serde_json::{Value, json};

fn server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let server = Server::start(dir.path(), &[]);
    (dir, server)
}

fn exec(server: &Server, path: &str, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
    server.post_raw(path, &body.to_string(), Some(("x-api-key", KEY)), headers)
}

/// The shape LibreChat's programmatic tool sends when the code selects no
/// tools (`tool_manifest: []`; `@librechat/agents` 3.9.2,
/// `ProgrammaticToolCalling.ts`: each line indented by 4, blank lines
/// emptied).
fn wrapped(code: &str) -> String {
    let body: Vec<String> = code
        .split('\n')
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                format!("    {l}")
            }
        })
        .collect();
    format!(
        "async def __user_main__():\n    \"\"\"Auto-generated wrapper for user code to support top-level await\"\"\"\n{}\n\nif __name__ == \"__main__\":\n    import asyncio\n    asyncio.run(__user_main__())\n",
        body.join("\n")
    )
}

#[test]
fn plain_scripts_and_wrapped_programs_run() {
    let (_dir, server) = server();
    for path in ["/exec", "/v1/exec"] {
        let (status, reply) = exec(
            &server,
            path,
            &json!({"lang": "py", "code": "import sys\nprint(6 * 7, sys.argv[1:])", "args": ["a", "b"],
                    "runtime_session_hint": "x", "user_id": "ignored", "codeSessionKey": "k"}),
            &[("X-CodeAPI-Expected-Profile", "default")],
        );
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["stdout"], "42 ['a', 'b']\n", "{reply}");
        assert_eq!(reply["stderr"], "");
        assert_eq!(reply["files"], json!([]));
        assert_eq!(
            (reply["code"].as_i64(), &reply["status"]),
            (Some(0), &Value::Null)
        );
        assert!(
            reply["session_id"].as_str().is_some_and(|s| s.len() == 21),
            "a new session has a 21-character id: {reply}"
        );
    }
    let code = wrapped(
        "data = json.loads('[1, 2, 3]')\nawait asyncio.sleep(0)\nprint(sum(data), re.sub('a', 'b', 'aa'))",
    );
    let (status, reply) = exec(&server, "/exec", &json!({"lang": "py", "code": code}), &[]);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["stdout"], "6 bb\n", "{reply}");
    // The wrapper's body runs as the program: its names are globals and a
    // traceback names the code's own line in `<module>`.
    let code = wrapped("x = 1\nprint('x' in globals())\nraise KeyError(x)");
    let (_, reply) = exec(&server, "/exec", &json!({"lang": "py", "code": code}), &[]);
    assert_eq!(reply["stdout"], "True\n", "{reply}");
    let stderr = reply["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains("line 3, in <module>"), "{stderr}");
    assert_eq!(reply["code"], 1);
}

#[test]
fn failures_are_in_stderr_with_200() {
    let (_dir, server) = server();
    let (status, reply) = exec(
        &server,
        "/exec",
        &json!({"lang": "py", "code": "print('before')\n{}['k']"}),
        &[],
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["stdout"], "before\n");
    let stderr = reply["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.starts_with("Traceback (most recent call last):"),
        "{stderr}"
    );
    assert!(stderr.ends_with("KeyError: 'k'\n"), "{stderr}");
    // A limit has no traceback: its contract text is the stderr.
    let (status, reply) = exec(
        &server,
        "/exec",
        &json!({"lang": "py", "code": "while True: pass", "timeout": 1000}),
        &[],
    );
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply["stderr"]
            .as_str()
            .unwrap_or_default()
            .ends_with("Time limit exceeded\n"),
        "{reply}"
    );
}

#[test]
fn other_languages_and_profiles_are_refused_as_the_client_expects() {
    let (_dir, server) = server();
    let (status, reply) = exec(
        &server,
        "/exec",
        &json!({"lang": "js", "code": "console.log(1)"}),
        &[],
    );
    assert_eq!(status, 400, "{reply}");
    // The code LibreChat's client takes as permanent.
    assert_eq!(reply["error"], "unsupported_capability", "{reply}");
    assert!(
        reply["message"]
            .as_str()
            .is_some_and(|m| m.contains("lang \"py\"") && m.contains("lang \"bash\"")),
        "{reply}"
    );
    let (status, reply) = exec(&server, "/exec", &json!({"code": "print(1)"}), &[]);
    assert_eq!(status, 400, "{reply}");
    let (status, reply) = exec(
        &server,
        "/exec/programmatic",
        &json!({"lang": "bash", "code": "echo 1", "tools": []}),
        &[],
    );
    assert_eq!(
        (status, &reply["error"]),
        (400, &json!("unsupported_capability")),
        "{reply}"
    );
    // Both profiles are served; anything else is named invalid.
    for path in ["/exec", "/exec/programmatic"] {
        for profile in ["default", "stateful"] {
            let (status, reply, served) = exec_reading(
                &server,
                path,
                &json!({"lang": "py", "code": "print(1)", "tools": []}),
                profile,
            );
            assert_eq!(status, 200, "{path} {profile}: {reply}");
            assert_eq!(served.as_deref(), Some(profile));
        }
        let (status, reply, served) = exec_reading(
            &server,
            path,
            &json!({"lang": "py", "code": "1"}),
            "Stateful",
        );
        assert_eq!(status, 400, "{path}: {reply}");
        assert_eq!(reply["error"], "invalid_execution_profile", "{reply}");
        assert_eq!(served.as_deref(), Some("default"));
    }
}

/// `exec` with `X-CodeAPI-Expected-Profile: profile`; also the profile the
/// answer says it was served in.
fn exec_reading(
    server: &Server,
    path: &str,
    body: &Value,
    profile: &str,
) -> (u16, Value, Option<String>) {
    let sent = ureq::post(&format!("{}{path}", server.base))
        .set("x-api-key", KEY)
        .set("x-codeapi-expected-profile", profile)
        .send_json(body.clone());
    let response = match sent {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(error) => panic!("{error}"),
    };
    let served = response
        .header("x-codeapi-execution-profile")
        .map(str::to_owned);
    let status = response.status();
    (status, response.into_json().unwrap_or(Value::Null), served)
}

#[test]
fn files_in_changed_new_and_deleted() {
    let (_dir, server) = server();
    let (status, uploaded) = server.post_multipart(
        "/upload",
        &[
            ("session_id", None, "sess-plain"),
            ("file", Some("keep.txt"), "keep"),
            ("file", Some("gone.csv"), "a,b\n"),
            ("file", Some("edit.txt"), "old"),
        ],
        KEY,
    );
    assert_eq!(status, 200, "{uploaded}");
    let files: Vec<Value> = uploaded["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| {
                    json!({"id": f["id"], "resource_id": f["id"], "name": f["name"],
                                "storage_session_id": "sess-plain", "kind": "user"})
                })
                .collect()
        })
        .unwrap_or_default();
    let code = "import os\nos.remove('/mnt/data/gone.csv')\nopen('/mnt/data/edit.txt', 'w').write('new')\nopen('/mnt/data/made.txt', 'w').write('made')\nprint(sorted(os.listdir('/mnt/data')))\n";
    let (status, reply) = exec(
        &server,
        "/exec",
        &json!({"lang": "py", "code": code, "files": files, "session_id": "sess-plain"}),
        &[],
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["stdout"], "['edit.txt', 'keep.txt', 'made.txt']\n",
        "{reply}"
    );
    let mut names: Vec<&str> = reply["files"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    names.sort();
    assert_eq!(names, vec!["edit.txt", "made.txt"], "{reply}");
    assert_eq!(reply["deleted_files"], json!(["gone.csv"]), "{reply}");
    assert_eq!(reply["session_id"], "sess-plain");
}

#[test]
fn an_exec_is_cancelled_by_its_request_id() {
    let (_dir, server) = server();
    let running = std::thread::scope(|scope| {
        let running = scope.spawn(|| {
            exec(
                &server,
                "/exec",
                &json!({"lang": "py", "code": "import time\nprint('begun', flush=True)\ntime.sleep(20)\nprint('never')"}),
                &[("X-LibreChat-Code-Request-ID", "exec-1")],
            )
        });
        let mut cancelled = Value::Null;
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let (_, body) = server.post_raw(
                "/exec/programmatic/cancel",
                &json!({"request_id": "exec-1"}).to_string(),
                Some(("x-api-key", KEY)),
                &[],
            );
            if body["status"] == "cancelled" {
                cancelled = body;
                break;
            }
        }
        assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
        running.join()
    });
    let (status, reply) = running.unwrap_or_else(|_| panic!("the exec thread panicked"));
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply["stderr"]
            .as_str()
            .is_some_and(|e| e.ends_with("Execution was cancelled\n")),
        "{reply}"
    );
    assert!(
        !reply["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("never")
    );
}
