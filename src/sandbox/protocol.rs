//! The typed messages between the server and a child, and their framing.
//!
//! A frame is a little-endian `u32` length followed by that many bytes of
//! bincode. The server sends [`ToChild`], the child answers [`FromChild`].
//! One request, one answer: `Start` or `Resume` is answered by exactly one
//! `Paused` or `Finished` (or the child dies).
//!
//! Architecture Invariant: a frame larger than [`MAX_FRAME`] is refused before
//! any allocation, so a hostile child cannot make the server allocate at will.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::failure::Failure;
use crate::journal::{CallResult, ClockBase, FrameSummary, NameInfo, Round, WorkspaceFile};

/// The largest frame either side accepts (64 MiB).
pub const MAX_FRAME: usize = 64 << 20;

/// Limits a child enforces on itself (the server enforces the hard ones too).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildLimits {
    /// Live run time left for this stretch, in milliseconds.
    pub budget_ms: u64,
    /// After the soft interrupt, how long before the child kills itself.
    pub grace_ms: u64,
    /// Maximum total stdout, in bytes.
    pub stdout_cap: u64,
    /// Maximum total stderr, in bytes.
    pub stderr_cap: u64,
    /// Maximum size of one call's input JSON, in bytes.
    pub max_input_bytes: u64,
}

/// Everything a fresh child needs to run (and, for a cold resume, replay) an execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartJob {
    /// JSON for the Python runtime: rewritten source, original source, sites, tools.
    pub program_json: String,
    /// Seed of the execution's entropy stream.
    pub seed: [u8; 32],
    /// The clock at the start of the code.
    pub clock0: ClockBase,
    /// Rounds to answer from the journal before going live.
    pub replay: Vec<Round>,
    /// Output recorded by the original run, checked during replay.
    pub recorded_stdout: String,
    /// Stderr recorded by the original run, checked during replay.
    pub recorded_stderr: String,
    /// Limits for the live part.
    pub limits: ChildLimits,
    /// The workspace the code starts with.
    pub files: Vec<WorkspaceFile>,
    /// A session's cell: when it ends by itself, the child keeps its
    /// globals and waits for the session's next cell ([`ToChild::Cell`]).
    pub session_cell: bool,
    /// For a session's cell run in a fresh child: the session's earlier
    /// cells, run first, in order, in the same globals, each answered from
    /// its journal and checked against it (their output is not sent).
    pub earlier: Vec<EarlierCell>,
}

/// A session's next cell, for the child that holds its namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NextCell {
    /// Its program.
    pub program_json: String,
    /// Its entropy seed.
    pub seed: [u8; 32],
    /// Its clock at its start.
    pub clock0: ClockBase,
    /// The files its request lays in the workspace.
    pub files: Vec<WorkspaceFile>,
    /// Its limits.
    pub limits: ChildLimits,
}

/// An ended cell of a session, run again to rebuild the namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EarlierCell {
    /// Its program (the same sites and marker as when it first ran).
    pub program_json: String,
    /// Its entropy seed.
    pub seed: [u8; 32],
    /// Its clock at its start.
    pub clock0: ClockBase,
    /// Its rounds, all answered.
    pub replay: Vec<Round>,
    /// All it wrote to stdout.
    pub stdout: String,
    /// All it wrote to stderr.
    pub stderr: String,
    /// The files its request laid in the workspace.
    pub files: Vec<WorkspaceFile>,
    /// How it ended: `None` completed, else the code's own failure.
    pub ended: Option<Failure>,
}

/// The server's messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToChild {
    /// Run a program.
    Start(Box<StartJob>),
    /// The next cell of the session whose last cell this child ran (it
    /// waits for it, its globals kept).
    Cell(Box<NextCell>),
    /// Results for the pending round.
    Resume {
        /// One result per pending call, in call order.
        results: Vec<CallResult>,
        /// The clock the code sees from now on.
        clock: ClockBase,
        /// Live run time left, in milliseconds.
        budget_ms: u64,
    },
}

/// One call of a pause, as the child reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The rewrite's site id.
    pub site: u32,
    /// The original tool name.
    pub tool: String,
    /// Keyword arguments as JSON text.
    pub input: String,
    /// The user's line of the call.
    pub line: u32,
}

/// How a program ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChildOutcome {
    /// Ran to the end.
    Completed,
    /// Ended with this failure.
    Failed(Failure),
}

/// The child's messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FromChild {
    /// The code waits on these calls.
    Paused {
        /// The batch, in the order the code made the calls.
        calls: Vec<PendingCall>,
        /// The frame of the first call, for inspection.
        frame: FrameSummary,
        /// Stdout written since the last report.
        stdout: String,
        /// Stderr written since the last report.
        stderr: String,
        /// Live run time of this stretch, in microseconds.
        run_us: u64,
    },
    /// The code ended.
    Finished {
        /// Completed or failed.
        outcome: ChildOutcome,
        /// Workspace files the code created or changed (when completed).
        files: Vec<WorkspaceFile>,
        /// Names of the request's files the code removed (when completed).
        removed: Vec<String>,
        /// Directories left empty (a runtime session keeps them).
        directories: Vec<String>,
        /// Stdout written since the last report.
        stdout: String,
        /// Stderr written since the last report.
        stderr: String,
        /// Live run time of this stretch, in microseconds.
        run_us: u64,
        /// A session's cell: the names its globals hold at its end.
        names: Vec<NameInfo>,
    },
    /// Memory allocation failed; the child is about to abort.
    OutOfMemory,
    /// A new child finished its rehearsal and waits for its job (sent once,
    /// before anything else; last so the pre-encoded `OutOfMemory` keeps its
    /// index).
    Ready,
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the socket.
    #[error("peer closed the connection")]
    Closed,
    /// A length prefix above [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// Socket failure.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// Bytes that do not decode.
    #[error("undecodable frame: {0}")]
    Decode(String),
}

/// Serializes a message into a length-prefixed frame.
pub fn encode_frame<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let body = bincode::serialize(message).map_err(|e| FrameError::Decode(e.to_string()))?;
    if body.len() > MAX_FRAME {
        return Err(FrameError::TooLarge(body.len()));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes a frame body.
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    use bincode::Options;
    // The encoding `bincode::serialize` writes (fixed-width integers), read
    // whole: a frame with bytes after its message is refused, and no length
    // inside it may claim more than the frame holds.
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .with_limit(body.len() as u64)
        .deserialize(body)
        .map_err(|e| FrameError::Decode(e.to_string()))
}

/// Checks a length prefix.
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

/// Writes one frame to a blocking stream.
pub fn write_frame<T: Serialize>(out: &mut impl Write, message: &T) -> Result<(), FrameError> {
    out.write_all(&encode_frame(message)?)?;
    Ok(())
}

/// Reads one frame from a blocking stream.
pub fn read_frame<T: DeserializeOwned>(input: &mut impl Read) -> Result<T, FrameError> {
    let mut prefix = [0u8; 4];
    read_exact_or_closed(input, &mut prefix)?;
    let mut body = vec![0u8; frame_len(prefix)?];
    read_exact_or_closed(input, &mut body)?;
    decode_body(&body)
}

fn read_exact_or_closed(input: &mut impl Read, buf: &mut [u8]) -> Result<(), FrameError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => FrameError::Closed,
        _ => FrameError::Io(e),
    })
}

/// Async framing for the server side.
pub mod nonblocking {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Writes one frame.
    pub async fn write_frame<T: Serialize>(
        out: &mut (impl AsyncWriteExt + Unpin),
        message: &T,
    ) -> Result<(), FrameError> {
        out.write_all(&encode_frame(message)?).await?;
        Ok(())
    }

    /// Reads one frame.
    pub async fn read_frame<T: DeserializeOwned>(
        input: &mut (impl AsyncReadExt + Unpin),
    ) -> Result<T, FrameError> {
        let mut prefix = [0u8; 4];
        read_exact_or_closed(input, &mut prefix).await?;
        let mut body = vec![0u8; frame_len(prefix)?];
        read_exact_or_closed(input, &mut body).await?;
        decode_body(&body)
    }

    async fn read_exact_or_closed(
        input: &mut (impl AsyncReadExt + Unpin),
        buf: &mut [u8],
    ) -> Result<(), FrameError> {
        match input.read_exact(buf).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(FrameError::Closed),
            Err(e) => Err(FrameError::Io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_oversize() {
        let message = FromChild::Paused {
            calls: vec![PendingCall {
                site: 2,
                tool: "t".into(),
                input: "{}".into(),
                line: 4,
            }],
            frame: FrameSummary::default(),
            stdout: "hi\n".into(),
            stderr: String::new(),
            run_us: 12,
        };
        let frame = encode_frame(&message).unwrap_or_default();
        let back: FromChild = read_frame(&mut &frame[..]).unwrap_or(FromChild::OutOfMemory);
        assert_eq!(back, message);
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(matches!(
            read_frame::<FromChild>(&mut &huge[..]),
            Err(FrameError::TooLarge(_))
        ));
        assert!(matches!(
            read_frame::<FromChild>(&mut &[][..]),
            Err(FrameError::Closed)
        ));
    }

    #[test]
    fn a_frame_is_read_whole_or_refused() {
        let message = FromChild::Ready;
        let mut frame = encode_frame(&message).unwrap_or_default();
        // One byte more in the body (and in the length): refused.
        frame.push(0);
        let len = u32::try_from(frame.len() - 4).unwrap_or(0);
        frame[..4].copy_from_slice(&len.to_le_bytes());
        assert!(matches!(
            read_frame::<FromChild>(&mut &frame[..]),
            Err(FrameError::Decode(_))
        ));
        // A string whose length says more than the frame has: refused
        // without allocating it.
        let mut lying = vec![1u8, 0, 0, 0];
        lying.extend_from_slice(&u64::MAX.to_le_bytes());
        let framed = [&(lying.len() as u32).to_le_bytes()[..], &lying].concat();
        assert!(read_frame::<FromChild>(&mut &framed[..]).is_err());
    }
}
