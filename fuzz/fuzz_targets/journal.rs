//! The journal decoder on arbitrary bytes.
//!
//! Properties: decoding never panics; a record that decodes re-encodes to
//! bytes that decode to the same record (compared as bytes, since clocks are
//! floats and may be NaN); and everything the server does with a record
//! before a child sees it works on it: the program is rebuilt, the replay
//! job is framed and read back as the child reads it, and the execution renders for
//! `/executions/{id}`.
#![no_main]

use baton::api::views::ExecutionView;
use baton::engine::program::program_json;
use baton::engine::{ExecLimits, start_job};
use baton::journal::ExecutionRecord;
use baton::sandbox::protocol::{ToChild, decode_body, encode_frame};
use baton::state::{ExecState, Status};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = ExecutionRecord::decode(data) else {
        return;
    };
    let encoded = record.encode();
    match ExecutionRecord::decode(&encoded) {
        Ok(again) => assert_eq!(again.encode(), encoded, "re-encoding changed the record"),
        Err(error) => panic!("a decoded record does not decode once re-encoded: {error}"),
    }
    let state = ExecState {
        status: Status::Paused,
        round: 1,
        owner: [0; 8],
        expires_at: 0,
        answered: None,
    };
    let view = ExecutionView::new(&record.id_hex(), &state, Some(&record), None);
    if let Err(error) = serde_json::to_string(&view) {
        panic!("the inspection view does not render: {error}");
    }
    let limits = ExecLimits::default();
    let Ok(program) = program_json(&record.source, &record.tools, &limits) else {
        return;
    };
    let message = ToChild::Start(Box::new(start_job(&record, program, &limits)));
    let frame = match encode_frame(&message) {
        Ok(frame) => frame,
        Err(error) => panic!("the replay job of a decoded record cannot be framed: {error}"),
    };
    match decode_body::<ToChild>(&frame[4..]) {
        Ok(read) => assert_eq!(
            encode_frame(&read).ok(),
            Some(frame),
            "the child reads another job"
        ),
        Err(error) => panic!("the child cannot read the replay job: {error}"),
    }
});
