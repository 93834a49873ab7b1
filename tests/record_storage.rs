//! How an execution's record lies in the store, read from the real sled
//! database of a real server killed (`SIGKILL`) mid-execution: a pause
//! appends the round it completed and rewrites only the small progress
//! part, so no pause writes an earlier round's results again; a record of
//! the previous format (stored whole) still continues, and is stored in
//! parts from its next pause on; a swept pause leaves no part and no
//! listing entry behind.

mod common;

use baton::journal::ExecutionRecord;
use baton::state::{
    ExecState, Status, progress_key, record_key, round_key, rounds_prefix, state_key,
};
use baton::store::SledStore;
use common::server::{KEY, Server};
use serde_json::{Value, json};

/// Five rounds, each answered with a distinct 200 KB string.
const CODE: &str = "sizes = []\nfor i in range(5):\n    blob = await fetch(i=i)\n    sizes.append((blob[0], len(blob)))\nprint(sizes)\n";
const BLOB: usize = 200_000;

fn tools() -> Value {
    json!([{"name": "fetch", "parameters": {"type": "object", "properties": {"i": {"type": "integer"}}}}])
}

fn blob(round: usize) -> String {
    char::from(b'a' + round as u8).to_string().repeat(BLOB)
}

fn start(server: &Server) -> Value {
    let (status, reply) = server.post(
        "/exec/programmatic",
        &json!({"code": CODE, "tools": tools()}),
    );
    assert_eq!(
        (status, &reply["status"]),
        (200, &json!("tool_call_required")),
        "{reply}"
    );
    reply
}

/// Continues `reply` (paused at `round`, from 1) with that round's blob.
fn continue_round(server: &Server, reply: &Value, round: usize) -> Value {
    let call = &reply["tool_calls"][0];
    let (status, next) = server.post(
        "/exec/programmatic",
        &json!({"continuation_token": reply["continuation_token"],
            "tool_results": [{"call_id": call["id"], "result": blob(round - 1), "is_error": false}]}),
    );
    assert_eq!(status, 200, "{next}");
    next
}

fn execution_id(reply: &Value) -> [u8; 16] {
    let bytes = hex::decode(reply["execution_id"].as_str().unwrap_or_default()).unwrap_or_default();
    <[u8; 16]>::try_from(bytes.as_slice()).unwrap_or_else(|_| panic!("bad id in {reply}"))
}

/// The store of a killed server.
fn open_store(dir: &tempfile::TempDir) -> SledStore {
    SledStore::open(&dir.path().join("store")).unwrap_or_else(|e| panic!("{e}"))
}

/// The value of `key`, empty when absent.
fn value(store: &SledStore, key: &[u8]) -> Vec<u8> {
    store.get(key).ok().flatten().unwrap_or_default()
}

fn expected_stdout() -> String {
    let sizes: Vec<String> = (0..5)
        .map(|i| format!("('{}', {BLOB})", char::from(b'a' + i as u8)))
        .collect();
    format!("[{}]\n", sizes.join(", "))
}

#[test]
fn a_pause_appends_its_round_and_rewrites_only_its_progress() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &[]);
    let mut reply = start(&server);
    let id = execution_id(&reply);
    for round in 1..=3 {
        reply = continue_round(&server, &reply, round);
    }
    // Paused at round 4: rounds 1..3 complete, one part each.
    server.kill();
    {
        let store = open_store(&dir);
        let rounds: Vec<(Vec<u8>, Vec<u8>)> = store
            .scan_prefix(&rounds_prefix(&id))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        let keys: Vec<Vec<u8>> = rounds.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, (0..3).map(|i| round_key(&id, i)).collect::<Vec<_>>());
        for (index, (_, part)) in rounds.iter().enumerate() {
            assert!(
                part.len() > BLOB && part.len() < BLOB + 4096,
                "round {index} holds its own result only: {} bytes",
                part.len()
            );
            let own = blob(index);
            assert!(
                part.windows(64).any(|w| w == &own.as_bytes()[..64]),
                "round {index} holds its result"
            );
        }
        let progress = store
            .get(&progress_key(&id))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no progress part"));
        assert!(
            progress.len() < 4096,
            "the part rewritten at each pause holds no results: {} bytes",
            progress.len()
        );
        let start = store
            .get(&record_key(&id))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no start part"));
        assert!(start.len() < 4096, "start part: {} bytes", start.len());
        assert_eq!(&start[4..6], &baton::journal::FORMAT_VERSION.to_le_bytes());
    }
    // Restarted, the parts rebuild the record: the execution goes on cold.
    server.restart();
    for round in 4..=5 {
        reply = continue_round(&server, &reply, round);
    }
    assert_eq!(reply["status"], "completed", "{reply}");
    assert_eq!(reply["stdout"], expected_stdout());
    // An end is flushed after its reply: a clean stop waits for it.
    assert!(server.terminate(), "a clean stop");
    let store = open_store(&dir);
    let left = store.scan_prefix(&rounds_prefix(&id)).count();
    assert_eq!(left, 0, "an ended execution keeps no round parts");
    assert_eq!(store.get(&progress_key(&id)).ok().flatten(), None);
    assert_eq!(store.get(&record_key(&id)).ok().flatten(), None);
}

#[test]
fn a_record_stored_whole_by_the_previous_format_continues() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &[]);
    let mut reply = start(&server);
    let id = execution_id(&reply);
    reply = continue_round(&server, &reply, 1);
    // A clean stop: the pause is flushed (a SIGKILL could leave it to be
    // reached again by running its round again).
    assert!(server.terminate(), "a clean stop");
    {
        // Rewrite the stored record as the previous build stored it: whole,
        // format 3, under the start part's key, with no other part.
        let store = open_store(&dir);
        let start = value(&store, &record_key(&id));
        let progress = value(&store, &progress_key(&id));
        let rounds: Vec<Vec<u8>> = store
            .scan_prefix(&rounds_prefix(&id))
            .map(|pair| pair.map(|(_, v)| v))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        let record = ExecutionRecord::from_parts(&start, &progress, &rounds)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(record.round_count(), 2);
        let whole = record.encode().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&whole[4..6], &3u16.to_le_bytes());
        let mut deletes = vec![progress_key(&id)];
        deletes.extend((0..rounds.len() as u32).map(|i| round_key(&id, i)));
        let deletes: Vec<&[u8]> = deletes.iter().map(Vec::as_slice).collect();
        store
            .apply_batch(&[(&record_key(&id), &whole)], &deletes)
            .unwrap_or_else(|e| panic!("{e}"));
        store.flush().unwrap_or_else(|e| panic!("{e}"));
    }
    server.restart();
    let (status, paused) = server.get(&format!("/executions/{}", hex::encode(id)), Some(KEY));
    assert_eq!(
        (status, &paused["status"]),
        (200, &json!("paused")),
        "{paused}"
    );
    reply = continue_round(&server, &reply, 2);
    assert_eq!(reply["status"], "tool_call_required", "{reply}");
    server.kill();
    {
        let store = open_store(&dir);
        let start = value(&store, &record_key(&id));
        assert_eq!(
            &start[4..6],
            &baton::journal::FORMAT_VERSION.to_le_bytes(),
            "stored in parts from its next pause on"
        );
        assert_eq!(store.scan_prefix(&rounds_prefix(&id)).count(), 2);
    }
    server.restart();
    for round in 3..=5 {
        reply = continue_round(&server, &reply, round);
    }
    assert_eq!(reply["stdout"], expected_stdout(), "{reply}");
}

#[test]
fn a_swept_pause_leaves_no_part_and_no_listing_entry() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &["--paused-ttl-secs", "1", "--sweep-secs", "1"]);
    let mut reply = start(&server);
    let id = execution_id(&reply);
    reply = continue_round(&server, &reply, 1);
    assert_eq!(reply["status"], "tool_call_required", "{reply}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (status, _) = server.get(&format!("/executions/{}", hex::encode(id)), Some(KEY));
        if status == 404 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never swept");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(server.terminate(), "a clean stop");
    let store = open_store(&dir);
    for prefix in [
        baton::state::RECORDS,
        baton::state::PROGRESS,
        baton::state::ROUNDS,
        baton::state::LISTINGS,
    ] {
        let left: Vec<Vec<u8>> = store
            .scan_prefix(prefix)
            .filter_map(Result::ok)
            .map(|(key, _)| key)
            .collect();
        assert!(
            left.is_empty(),
            "{} keys left under {:?}",
            left.len(),
            String::from_utf8_lossy(prefix)
        );
    }
}

/// A pause writes its parts, then swaps its state from running to paused:
/// a crash between the two leaves the round running with the pause it led
/// to stored. That execution is paused there after a restart, and the
/// client, which never got that pause, gets it by sending the round's
/// continuation again; then it runs to CPython's answer.
#[test]
fn a_pause_stored_without_its_state_is_that_pause_after_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &[]);
    let first = start(&server);
    let id = execution_id(&first);
    let second = continue_round(&server, &first, 1);
    assert_eq!(second["status"], "tool_call_required", "{second}");
    assert!(server.terminate(), "a clean stop");
    {
        let store = open_store(&dir);
        let stored = value(&store, &state_key(&id));
        let mut state = ExecState::decode(&stored).unwrap_or_else(|| panic!("no state"));
        assert_eq!((state.status, state.round), (Status::Paused, 2));
        state.status = Status::Running;
        state.round = 1;
        store
            .put(&state_key(&id), &state.encode())
            .unwrap_or_else(|e| panic!("{e}"));
        store.flush().unwrap_or_else(|e| panic!("{e}"));
    }
    server.restart();
    let again = continue_round(&server, &first, 1);
    assert_eq!(again["status"], "tool_call_required", "{again}");
    assert_eq!(again["tool_calls"], second["tool_calls"], "the same pause");
    let (status, shown) = server.get(&format!("/executions/{}", hex::encode(id)), Some(KEY));
    assert_eq!(
        (status, &shown["status"]),
        (200, &json!("paused")),
        "{shown}"
    );
    let mut reply = again;
    for round in 2..=5 {
        reply = continue_round(&server, &reply, round);
    }
    assert_eq!(reply["stdout"], expected_stdout(), "{reply}");
}
