//! Session files larger than one stored chunk, over real HTTP: what the
//! sled and PostgreSQL tests both check.

#![allow(dead_code)]

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::server::{KEY, Server};

/// One stored chunk of a file's contents (`baton::workspace::CHUNK_LEN`).
pub(crate) const CHUNK: usize = 1 << 20;

/// `len` bytes that no compression or run-length trick shortens
/// (xorshift64 from `seed`).
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// Uploads `files` (name, contents) into `session`; returns their ids.
pub(crate) fn upload(server: &Server, session: &str, files: &[(&str, &[u8])]) -> Vec<String> {
    let mut parts = vec![("session_id", None, session.as_bytes())];
    parts.extend(
        files
            .iter()
            .map(|(name, bytes)| ("file", Some(*name), *bytes)),
    );
    let (status, reply) = server.post_multipart_bytes("/upload", &parts, KEY);
    assert_eq!(status, 200, "{reply}");
    reply["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| f["id"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The bytes of a stored file.
pub(crate) fn download(server: &Server, session: &str, id: &str) -> Vec<u8> {
    let (status, bytes) = server.get_bytes(&format!("/download/{session}/{id}"), KEY);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    bytes
}

fn sizes(server: &Server, session: &str) -> Vec<(String, u64)> {
    let (status, listing) = server.get(&format!("/files/{session}"), Some(KEY));
    assert_eq!(status, 200, "{listing}");
    listing["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| {
                    (
                        f["name"].as_str().unwrap_or_default().to_owned(),
                        f["size"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A file of several chunks (and one of exactly one chunk, and an empty
/// one) uploaded, the server SIGKILLed and restarted, the files downloaded
/// whole, read by code under `/mnt/data` (its hash against the test's own),
/// and a multi-chunk file the code wrote downloaded whole. The server
/// takes a body of 5 MB.
pub(crate) fn check_large_files(server: &mut Server) {
    let big = noise(3 * CHUNK + 12_345, 7);
    let exact = noise(CHUNK, 8);
    let session = "sess_large";
    let ids = upload(
        server,
        session,
        &[("big.bin", &big), ("exact.bin", &exact), ("empty.bin", b"")],
    );
    assert_eq!(ids.len(), 3);
    let mut listed = sizes(server, session);
    listed.sort();
    assert_eq!(
        listed,
        [
            ("big.bin".to_owned(), big.len() as u64),
            ("empty.bin".to_owned(), 0),
            ("exact.bin".to_owned(), exact.len() as u64),
        ]
    );
    server.restart();
    assert!(download(server, session, &ids[0]) == big, "big.bin changed");
    assert!(
        download(server, session, &ids[1]) == exact,
        "exact.bin changed"
    );
    assert!(download(server, session, &ids[2]).is_empty());

    let code = "import hashlib\n\
        data = open('/mnt/data/big.bin', 'rb').read()\n\
        print(len(data), hashlib.sha256(data).hexdigest())\n\
        with open('/mnt/data/out.bin', 'wb') as f:\n    f.write(bytes(range(256)) * 10240)\n";
    let files = json!([{"id": ids[0], "name": "big.bin", "session_id": session}]);
    let (status, done) = server.post(
        "/exec/programmatic",
        &json!({"code": code, "session_id": session, "files": files}),
    );
    assert_eq!(
        (status, &done["status"]),
        (200, &json!("completed")),
        "{done}"
    );
    let digest = hex_digest(&big);
    assert_eq!(done["stdout"], format!("{} {digest}\n", big.len()));
    let produced = produced_id(&done, "out.bin");
    let written: Vec<u8> = (0..10240).flat_map(|_| 0..=255u8).collect();
    assert!(
        download(server, session, &produced) == written,
        "out.bin changed"
    );
}

fn hex_digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn produced_id(done: &Value, name: &str) -> String {
    done["files"]
        .as_array()
        .and_then(|files| files.iter().find(|f| f["name"] == name))
        .and_then(|f| f["id"].as_str())
        .unwrap_or_else(|| panic!("{name} not among the produced files: {done}"))
        .to_owned()
}
