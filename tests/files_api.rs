//! Session files over real HTTP: upload, read under `/mnt/data` in code,
//! write new files, download them; the same across a SIGKILL restart
//! between rounds; files belong to their API key; uploads are checked.

mod common;

use common::server::{
    KEY, OTHER_KEY, Server, answers, continue_, continue_until_done, weather_tools,
};
use serde_json::json;

const DATA: &str = "city,temp\nParis,20\nOslo,5\n";
const NOTES: &str = "first line\n";

const CODE: &str = r#"import csv, json, os
from pathlib import Path
with open('/mnt/data/data.csv') as f:
    rows = list(csv.DictReader(f))
print(len(rows), sorted(os.listdir('/mnt/data')))
w = await get_weather(city=rows[0]['city'])
os.makedirs('report', exist_ok=True)
with open('/mnt/data/out.json', 'w') as f:
    json.dump({'rows': rows, 'live': w['temp']}, f, sort_keys=True)
Path('report/summary.txt').write_text('\n'.join(r['city'] + '=' + r['temp'] for r in rows))
with open('notes.txt', 'a') as f:
    f.write('appended\n')
print(sorted(os.listdir('.')), os.path.getsize('out.json') > 0, os.path.isdir('report'))
"#;

fn server() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &[]);
    (dir, server)
}

/// Uploads the two input files into `session`; returns their ids.
fn upload_inputs(server: &Server, session: &str) -> (String, String) {
    let (status, reply) = server.post_multipart(
        "/upload",
        &[
            ("session_id", None, session),
            ("file", Some("data.csv"), DATA),
            ("file", Some("notes.txt"), NOTES),
        ],
        KEY,
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["session_id"], session);
    let id = |i: usize| {
        reply["files"][i]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(reply["files"][0]["name"], "data.csv");
    (id(0), id(1))
}

fn check_round_trip(restart: bool) {
    let (_dir, mut server) = server();
    let session = if restart {
        "sess_files_restart"
    } else {
        "sess_files"
    };
    let (data_id, notes_id) = upload_inputs(&server, session);
    let files = json!([
        {"id": data_id, "name": "data.csv", "session_id": session},
        {"id": notes_id, "name": "notes.txt", "session_id": session},
    ]);
    let (status, paused) = server.post(
        "/exec/programmatic",
        &json!({"code": CODE, "tools": weather_tools(), "session_id": session, "files": files}),
    );
    assert_eq!(
        (status, &paused["status"]),
        (200, &json!("tool_call_required")),
        "{paused}"
    );
    let (done, _) = continue_until_done(paused, |reply| {
        if restart {
            server.restart();
        }
        continue_(&server, reply, answers(reply))
    });
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["stdout"],
        "2 ['data.csv', 'notes.txt']\n['data.csv', 'notes.txt', 'out.json', 'report'] True True\n"
    );
    let produced: Vec<(String, String, String)> = done["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| {
                    let text = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
                    (text("name"), text("path"), text("id"))
                })
                .collect()
        })
        .unwrap_or_default();
    let names: Vec<&str> = produced.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["notes.txt", "out.json", "report/summary.txt"],
        "{done}"
    );
    assert_eq!(produced[1].1, "/mnt/data/out.json");
    let expected = [
        format!("{NOTES}appended\n"),
        r#"{"live": 15, "rows": [{"city": "Paris", "temp": "20"}, {"city": "Oslo", "temp": "5"}]}"#
            .to_owned(),
        "Paris=20\nOslo=5".to_owned(),
    ];
    for ((name, _, id), want) in produced.iter().zip(expected) {
        let (status, bytes) = server.get_bytes(&format!("/download/{session}/{id}"), KEY);
        assert_eq!(status, 200, "{name}");
        assert_eq!(String::from_utf8_lossy(&bytes), want, "{name}");
    }
    let (status, listing) = server.get(&format!("/v1/files/{session}"), Some(KEY));
    assert_eq!(status, 200);
    assert_eq!(
        listing["files"].as_array().map(Vec::len),
        Some(5),
        "{listing}"
    );
}

#[test]
fn session_files_round_trip() {
    check_round_trip(false);
}

#[test]
fn session_files_survive_a_sigkill_between_rounds() {
    check_round_trip(true);
}

#[test]
fn files_belong_to_their_api_key() {
    let (_dir, server) = server();
    let (data_id, _) = upload_inputs(&server, "sess_private");
    let (status, listing) = server.get("/files/sess_private", Some(OTHER_KEY));
    assert_eq!((status, &listing["files"]), (200, &json!([])));
    let (status, _) = server.get_bytes(&format!("/download/sess_private/{data_id}"), OTHER_KEY);
    assert_eq!(status, 404);
    let (status, _) = server.get_bytes("/download/sess_private/000000000000000000000000", KEY);
    assert_eq!(status, 404, "an unknown id answers like another key's");
    let (status, reply) = server.post_as(
        "/exec/programmatic",
        &json!({"code": "print(1)", "files": [{"id": data_id, "name": "data.csv", "session_id": "sess_private"}]}),
        Some(("x-api-key", OTHER_KEY)),
    );
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.contains("not found")),
        "{reply}"
    );
}

#[test]
fn uploads_refuse_bad_names_and_oversize() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--body-limit", "4096"]);
    for name in ["../evil.txt", "a/../../b", "back\\slash", "/abs.txt"] {
        let (status, reply) = server.post_multipart("/upload", &[("file", Some(name), "x")], KEY);
        assert_eq!(status, 400, "{name}: {reply}");
    }
    let (status, reply) = server.post_multipart("/upload", &[("session_id", None, "../s")], KEY);
    assert_eq!(status, 400, "{reply}");
    let big = "z".repeat(8192);
    let (status, reply) = server.post_multipart("/upload", &[("file", Some("big.txt"), &big)], KEY);
    assert_eq!(status, 413, "{reply}");
    let (status, _) =
        server.post_multipart("/upload", &[("file", Some("ok.txt"), "fine")], "wrong-key");
    assert_eq!(status, 401);
}

#[test]
fn session_files_expire() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--file-ttl-secs", "1", "--sweep-secs", "1"]);
    let (data_id, _) = upload_inputs(&server, "sess_short");
    assert_eq!(
        server.get("/files/sess_short", Some(KEY)).1["files"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    std::thread::sleep(std::time::Duration::from_millis(3200));
    assert_eq!(
        server.get("/files/sess_short", Some(KEY)).1["files"],
        json!([])
    );
    let (status, _) = server.get_bytes(&format!("/download/sess_short/{data_id}"), KEY);
    assert_eq!(status, 404);
}
