//! The journal decoder on arbitrary bytes.
//!
//! Properties: decoding never panics; a record that decodes re-encodes to
//! bytes that decode to the same record (compared as bytes, since clocks are
//! floats and may be NaN), and stored in parts (format 4) it reassembles to
//! the same record; and everything the server does with a record
//! before a child sees it works on it: the program is rebuilt, the replay
//! job is framed and read back as the child reads it, and the execution renders for
//! `/executions/{id}`.
#![no_main]

use baton::api::views::ExecutionView;
use baton::engine::{ExecLimits, start_job};
use baton::journal::ExecutionRecord;
use baton::program::Program;
use baton::sandbox::protocol::{ToChild, decode_body, encode_frame};
use baton::service::Inspection;
use baton::state::{ExecState, Status};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = ExecutionRecord::decode(data) else {
        return;
    };
    let encoded = match record.encode() {
        Ok(encoded) => encoded,
        Err(error) => panic!("a decoded record does not encode: {error}"),
    };
    match ExecutionRecord::decode(&encoded) {
        Ok(again) => assert_eq!(
            again.encode().ok(),
            Some(encoded.clone()),
            "re-encoding changed the record"
        ),
        Err(error) => panic!("a decoded record does not decode once re-encoded: {error}"),
    }
    let parts = match record.new_parts() {
        Ok(parts) => parts,
        Err(error) => panic!("a decoded record does not encode in parts: {error}"),
    };
    let rounds: Vec<Vec<u8>> = parts.rounds.iter().map(|(_, r)| r.clone()).collect();
    match ExecutionRecord::from_parts(
        parts.start.as_deref().unwrap_or_default(),
        &parts.progress,
        &rounds,
    ) {
        Ok(again) => assert_eq!(
            again.encode().ok(),
            Some(encoded.clone()),
            "the parts reassemble to another record"
        ),
        Err(error) => panic!("a decoded record's parts do not reassemble: {error}"),
    }
    let state = ExecState {
        status: Status::Paused,
        round: 1,
        owner: [0; 8],
        expires_at: 0,
        answered: None,
        node: 0,
    };
    let id = record.id_hex();
    let inspection = Inspection {
        status: state.status.name(),
        state,
        record: Some(record),
        outcome: None,
    };
    let view = ExecutionView::new(&id, &inspection);
    let Some(record) = inspection.record else {
        return;
    };
    if let Err(error) = serde_json::to_string(&view) {
        panic!("the inspection view does not render: {error}");
    }
    let limits = ExecLimits::default();
    let Ok(program) = Program::build(
        &record.source,
        &record.tools,
        limits.program_limits(),
        &record.argv,
        &record.direct_only,
    ) else {
        return;
    };
    let message = ToChild::Start(Box::new(start_job(&record, program.to_json(), &limits)));
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
