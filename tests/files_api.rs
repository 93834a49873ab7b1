//! Session files over real HTTP: upload, read under `/mnt/data` in code,
//! write new files, download them; the same across a SIGKILL restart
//! between rounds; files belong to their API key; uploads are checked;
//! files larger than a stored chunk come back whole, stream through the
//! server in bounded memory, and a refused upload keeps nothing.

mod common;

use common::files::{CHUNK, check_large_files, download, noise, upload};

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
    let server = Server::start(dir.path(), &["--upload-limit", "4096"]);
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

#[test]
fn files_of_several_chunks_come_back_whole_after_a_sigkill() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &["--body-limit", "16000000"]);
    check_large_files(&mut server);
}

fn peak_memory(server: &Server) -> u64 {
    server
        .peak_memory()
        .unwrap_or_else(|| panic!("no VmHWM for the server"))
}

#[test]
fn a_large_upload_and_its_download_stream_through_bounded_memory() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--body-limit", "100000000"]);
    let warm = noise(2 * CHUNK + 1, 1);
    let ids = upload(&server, "sess_warm", &[("warm.bin", &warm)]);
    assert!(download(&server, "sess_warm", &ids[0]) == warm);
    let before = peak_memory(&server);
    let big = noise(48 << 20, 2);
    let ids = upload(&server, "sess_huge", &[("huge.bin", &big)]);
    assert!(
        download(&server, "sess_huge", &ids[0]) == big,
        "huge.bin changed"
    );
    let grown = peak_memory(&server).saturating_sub(before);
    // Holding the file whole once would grow the peak by 48 MiB; the
    // server holds a few chunks at a time.
    assert!(
        grown < 16 << 20,
        "the server's peak memory grew by {} MiB for a 48 MiB file",
        grown >> 20
    );
}

fn count_keys(store: &baton::store::SledStore, prefix: &[u8]) -> usize {
    store.scan_prefix(prefix).count()
}

#[test]
fn a_refused_upload_keeps_none_of_its_files() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &["--max-key-storage-mb", "3"]);
    let (first, second) = (noise(2 * CHUNK, 3), noise(2 * CHUNK, 4));
    let (status, reply) = server.post_multipart_bytes(
        "/upload",
        &[
            ("session_id", None, b"sess_refused"),
            ("file", Some("first.bin"), &first),
            ("file", Some("second.bin"), &second),
        ],
        KEY,
    );
    assert_eq!(status, 413, "{reply}");
    assert_eq!(
        server.get("/files/sess_refused", Some(KEY)).1["files"],
        json!([])
    );
    // What the refused upload wrote is not counted against the key.
    let kept = noise(2 * CHUNK + 70_000, 5);
    let ids = upload(&server, "sess_kept", &[("kept.bin", &kept)]);
    assert!(download(&server, "sess_kept", &ids[0]) == kept);
    server.kill();
    // On the host: the kept file's three chunks, each a file of its own, and
    // nothing of the refused upload.
    let store_dir = dir.path().join("store");
    let chunk_files = std::fs::read_dir(store_dir.join("large-values"))
        .unwrap_or_else(|e| panic!("{e}"))
        .count();
    assert_eq!(chunk_files, 3);
    let store = baton::store::SledStore::open(&store_dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(count_keys(&store, b"d/"), 3);
    assert_eq!(count_keys(&store, b"f/"), 1);
}

/// An upload of one file part sent by hand: the request's head, the part's
/// head and `content`, but not the body's last line (`finish` sends it).
struct UploadInFlight {
    stream: std::net::TcpStream,
    sender: std::thread::JoinHandle<std::io::Result<()>>,
}

const BOUNDARY: &str = "baton-held-upload";

impl UploadInFlight {
    fn begin(server: &Server, session: &str, content: &[u8]) -> UploadInFlight {
        use std::io::Write;
        let address = server.base.trim_start_matches("http://");
        let stream = std::net::TcpStream::connect(address).unwrap_or_else(|e| panic!("{e}"));
        let part = format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"session_id\"\r\n\r\n{session}\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"held.bin\"\r\n\r\n"
        );
        let length = part.len() + content.len() + Self::end().len();
        let head = format!(
            "POST /upload HTTP/1.1\r\nHost: {address}\r\nx-api-key: {KEY}\r\ncontent-type: multipart/form-data; boundary={BOUNDARY}\r\ncontent-length: {length}\r\n\r\n{part}"
        );
        let mut sender = stream.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(content);
        // Written from a thread: the server may answer (and close) before
        // it has read all of it.
        let sender = std::thread::spawn(move || sender.write_all(&bytes));
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap_or_else(|e| panic!("{e}"));
        UploadInFlight { stream, sender }
    }

    fn end() -> String {
        format!("\r\n--{BOUNDARY}--\r\n")
    }

    /// Sends the rest and reads the answer's status (`None` when the
    /// server closed the connection before it could be read).
    fn finish(mut self) -> Option<u16> {
        use std::io::{Read, Write};
        let _ = self.sender.join();
        let _ = self.stream.write_all(Self::end().as_bytes());
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match self.stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
        }
        let text = String::from_utf8_lossy(&answer);
        text.split_whitespace().nth(1).and_then(|s| s.parse().ok())
    }
}

#[test]
fn uploads_at_once_cannot_together_pass_the_keys_storage() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(dir.path(), &["--max-key-storage-mb", "3"]);
    let content = noise(2 * CHUNK, 6);
    let first = UploadInFlight::begin(&server, "sess_first", &content);
    // The first upload's 2 MiB reach the server and are held for it.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let second = UploadInFlight::begin(&server, "sess_second", &content);
    let refused = second.finish();
    assert!(
        matches!(refused, Some(429) | None),
        "the second upload was answered {refused:?}"
    );
    assert_eq!(first.finish(), Some(200));
    let listed =
        |session: &str| server.get(&format!("/files/{session}"), Some(KEY)).1["files"].clone();
    assert_eq!(listed("sess_first").as_array().map(Vec::len), Some(1));
    assert_eq!(listed("sess_second"), json!([]));
}
