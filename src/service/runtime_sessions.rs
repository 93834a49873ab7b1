//! Runtime sessions (LibreChat's `stateful` execution profile): the
//! `/mnt/data` of a principal's `runtime_session_hint`, kept from one call
//! to the next, durably, and used by one call at a time.
//!
//! Stored under `t/<owner 8><hint>`: the session's id, when it was made and
//! last used, the stored files its `/mnt/data` holds (by name), and the
//! call that holds it, if any, until when. A call takes the session by a
//! compare-and-swap (waiting, up to its limits' `wait`, while another holds it),
//! runs with its files and directories under `/mnt/data` (the request's own
//! files laid over them), and gives it back with what the code left: the
//! files it found, less those it removed, plus those it created or changed,
//! and the directories it left empty.
//!
//! Invariants:
//! - One call at a time: a session is taken only when no live hold is on
//!   it; a hold ends when its call gives the session back, or at its
//!   `until` (a call that died with its node), whichever comes first.
//! - Durable: the files a call leaves are stored and flushed before the
//!   session names them, and the session's new value is flushed before
//!   the call is answered. A call that is not answered (a crash) leaves
//!   the session as it was before it.
//! - A session is a principal's: its key starts with the principal's
//!   owner, so another principal's hint of the same text is another
//!   session.
//! - A session lives at most `max` seconds from its first call and `idle`
//!   seconds after its last; then the same hint starts a new one
//!   (`runtime_status: new`), and the sweep deletes the old value.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::auth::Principal;

use super::error::ServiceError;
use super::inputs::InputFile;
use super::messages::{Reply, StartRequest};
use super::sessions::CellInputs;
use super::{Service, now_secs};
use crate::program::Lang;

/// The store's prefix of runtime sessions.
pub const RUNTIME_SESSIONS: &[u8] = b"t/";
/// How often a waiting call looks again.
const POLL: Duration = Duration::from_millis(50);
/// How long past its run-time budget a call may hold its session (the
/// store's writes and the reply).
const HOLD_SLACK_SECS: u64 = 60;
/// The longest hint, characters (the official Code API's rule).
const MAX_HINT: usize = 128;

/// Whether a call made its session or found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeStatus {
    /// The session was made by this call (none, or an expired one).
    New,
    /// The session was there, with what earlier calls left.
    Reused,
}

impl RuntimeStatus {
    /// The status as the answer's `runtime_status` spells it.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeStatus::New => "new",
            RuntimeStatus::Reused => "reused",
        }
    }
}

/// The session a call ran in, for its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeSessionInfo {
    /// `rt_` and 40 hex digits: the same for a principal's hint, always.
    pub id: String,
    /// New or reused.
    pub status: RuntimeStatus,
}

/// Lifetimes of runtime sessions.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeSessionLimits {
    /// Seconds after the last call.
    pub idle_secs: u64,
    /// Seconds from the first call.
    pub max_secs: u64,
    /// How long a call waits for a session another call holds.
    pub wait: Duration,
}

/// A session as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RuntimeSession {
    /// `rt_…`.
    id: String,
    /// Unix seconds of its first call.
    created: u64,
    /// Unix seconds of its last call's end (or start, while held).
    last_used: u64,
    /// What `/mnt/data` holds: one stored file per name.
    files: Vec<InputFile>,
    /// Its empty directories (the others are those of its files).
    directories: Vec<String>,
    /// The call that holds it now.
    holder: Option<Hold>,
    /// The Python session its Python calls run in (their names carry over
    /// from call to call). Added last: a value stored before it decodes
    /// as [`RuntimeSessionV1`], and earlier builds read this one (bincode
    /// leaves the bytes after their fields unread).
    python: Option<[u8; 16]>,
}

/// The stored format of [`RuntimeSession`] before Python sessions.
#[derive(Deserialize)]
struct RuntimeSessionV1 {
    id: String,
    created: u64,
    last_used: u64,
    files: Vec<InputFile>,
    directories: Vec<String>,
    holder: Option<Hold>,
}

impl From<RuntimeSessionV1> for RuntimeSession {
    fn from(old: RuntimeSessionV1) -> Self {
        RuntimeSession {
            id: old.id,
            created: old.created,
            last_used: old.last_used,
            files: old.files,
            directories: old.directories,
            holder: old.holder,
            python: None,
        }
    }
}

/// A call's hold on its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Hold {
    /// The call (random).
    call: [u8; 16],
    /// Unix seconds after which the hold counts for nothing.
    until: u64,
}

impl RuntimeSession {
    fn decode(bytes: &[u8]) -> Option<RuntimeSession> {
        use bincode::Options;
        // Whole: a value of the first format ends before `python`.
        let whole = bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .reject_trailing_bytes()
            .deserialize(bytes);
        whole.ok().or_else(|| {
            bincode::deserialize::<RuntimeSessionV1>(bytes)
                .ok()
                .map(Into::into)
        })
    }

    fn encode(&self) -> Vec<u8> {
        // Plain data into memory: bincode does not fail on it.
        bincode::serialize(self).unwrap_or_default()
    }

    fn expired(&self, now: u64, limits: RuntimeSessionLimits) -> bool {
        now >= self.created.saturating_add(limits.max_secs)
            || now >= self.last_used.saturating_add(limits.idle_secs)
    }

    fn held_at(&self, now: u64) -> bool {
        self.holder.is_some_and(|hold| hold.until > now)
    }
}

/// The key of `owner`'s session `hint`.
fn session_key(owner: [u8; 8], hint: &str) -> Vec<u8> {
    [RUNTIME_SESSIONS, &owner[..], hint.as_bytes()].concat()
}

/// The id of `owner`'s session `hint`.
fn session_id(owner: [u8; 8], hint: &str) -> String {
    let digest = Sha256::digest([&b"baton/runtime-session"[..], &owner, hint.as_bytes()].concat());
    format!("rt_{}", &hex::encode(digest)[..40])
}

/// Checks a `runtime_session_hint` as the official Code API does.
fn check_hint(hint: &str) -> Result<(), ServiceError> {
    if hint.chars().count() > MAX_HINT {
        return Err(ServiceError::Invalid(format!(
            "runtime_session_hint must be at most {MAX_HINT} characters"
        )));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if !hint.chars().all(allowed) {
        return Err(ServiceError::Invalid(
            "runtime_session_hint may only contain letters, digits, \".\", \"_\", \":\", and \"-\""
                .into(),
        ));
    }
    Ok(())
}

/// A session taken by a call: what it held when taken, and the bytes
/// stored (to give it back by a compare-and-swap).
struct Taken {
    key: Vec<u8>,
    session: RuntimeSession,
    stored: Vec<u8>,
    status: RuntimeStatus,
}

/// What a call leaves in its session: its `/mnt/data`, and the Python
/// session its names live in.
struct Left {
    files: Vec<InputFile>,
    directories: Vec<String>,
    python: Option<[u8; 16]>,
}

impl Left {
    /// What a call that did not run leaves: the session as it was.
    fn unchanged(session: &RuntimeSession) -> Left {
        Left {
            files: session.files.clone(),
            directories: session.directories.clone(),
            python: session.python,
        }
    }
}

/// The empty directories a session holds after a call that found `before`
/// and answered `reply`: those it left empty, when it ended itself (a
/// call stopped from outside changes nothing).
fn directories_after(before: &[String], reply: &Reply) -> Vec<String> {
    match reply {
        Reply::Ended {
            directories,
            ending,
            ..
        } if ending.exit_status.is_some() => directories.clone(),
        _ => before.to_vec(),
    }
}

/// The files a session holds after a call that started with `inputs` and
/// answered `reply`: those it found, less the ones it removed, with the
/// ones it created or changed (stored under `owner`).
fn files_after(inputs: Vec<InputFile>, reply: &Reply, owner: [u8; 8]) -> Vec<InputFile> {
    let Reply::Ended {
        files,
        deleted_files,
        ..
    } = reply
    else {
        return inputs;
    };
    let mut kept: Vec<InputFile> = inputs
        .into_iter()
        .filter(|input| !deleted_files.contains(&input.name))
        .filter(|input| !files.iter().any(|file| file.name == input.name))
        .collect();
    kept.extend(files.iter().map(|file| InputFile {
        owner,
        session: file.session_id.clone(),
        id: file.id.clone(),
        name: file.name.clone(),
        read_only: false,
    }));
    kept
}

impl Service {
    /// Runs a start in `principal`'s runtime session `hint`: with the files
    /// the session's earlier calls left under `/mnt/data`, one call at a
    /// time (409 `runtime_session_busy` after the limits' `wait`).
    pub async fn start_in_runtime_session(
        &self,
        principal: &Principal,
        hint: &str,
        request: StartRequest,
    ) -> Result<(Reply, RuntimeSessionInfo), ServiceError> {
        check_hint(hint)?;
        let hold_secs = request.timeout_ms.div_ceil(1000) + HOLD_SLACK_SECS;
        let taken = self.take_session(principal.owner, hint, hold_secs).await?;
        let info = RuntimeSessionInfo {
            id: taken.session.id.clone(),
            status: taken.status,
        };
        let python = match request.lang {
            Lang::Python => Some(
                self.python_session_for(
                    principal.owner,
                    taken.session.python,
                    self.config.runtime_sessions.idle_secs,
                )
                .await,
            )
            .transpose(),
            Lang::Bash => Ok(None),
        };
        let python = match python {
            Ok(python) => python,
            Err(error) => {
                let left = Left::unchanged(&taken.session);
                self.give_back(taken, left).await;
                return Err(error);
            }
        };
        let ran = match python {
            // A Python call is a cell of the linked Python session: its
            // names carry over; `/mnt/data` is the runtime session's.
            Some(python) => {
                let inputs = CellInputs {
                    kept: &taken.session.files,
                    directories: &taken.session.directories,
                    fresh_workspace: true,
                };
                self.run_cell(principal, &python, request, None, inputs)
                    .await
            }
            None => {
                self.start_with(
                    principal,
                    request,
                    &taken.session.files,
                    &taken.session.directories,
                )
                .await
            }
        };
        let mut left = match &ran {
            Ok((reply, inputs)) => Left {
                files: files_after(inputs.clone(), reply, principal.owner),
                directories: directories_after(&taken.session.directories, reply),
                python: taken.session.python,
            },
            Err(_) => Left::unchanged(&taken.session),
        };
        left.python = python.or(taken.session.python);
        self.give_back(taken, left).await;
        ran.map(|(reply, _)| (reply, info))
    }

    /// Takes `owner`'s session `hint` for `hold_secs`, waiting while
    /// another call holds it; a missing or expired session is made anew.
    async fn take_session(
        &self,
        owner: [u8; 8],
        hint: &str,
        hold_secs: u64,
    ) -> Result<Taken, ServiceError> {
        let key = session_key(owner, hint);
        let waited_until = Instant::now() + self.config.runtime_sessions.wait;
        loop {
            let current = self.store.get(&key).await.map_err(ServiceError::store)?;
            let now = now_secs();
            let found = current.as_deref().and_then(RuntimeSession::decode);
            let (session, status) = match found {
                Some(session) if session.held_at(now) => {
                    if Instant::now() >= waited_until {
                        metrics::counter!("baton_runtime_session_busy_total").increment(1);
                        return Err(ServiceError::RuntimeSessionBusy);
                    }
                    tokio::time::sleep(POLL).await;
                    continue;
                }
                Some(session) if !session.expired(now, self.config.runtime_sessions) => {
                    (session, RuntimeStatus::Reused)
                }
                _ => (
                    RuntimeSession {
                        id: session_id(owner, hint),
                        created: now,
                        last_used: now,
                        files: Vec::new(),
                        directories: Vec::new(),
                        holder: None,
                        python: None,
                    },
                    RuntimeStatus::New,
                ),
            };
            let held = RuntimeSession {
                last_used: now,
                holder: Some(Hold {
                    call: rand::random(),
                    until: now + hold_secs,
                }),
                ..session
            };
            let stored = held.encode();
            match self
                .store
                .compare_and_swap(&key, current.as_deref(), Some(&stored))
                .await
                .map_err(ServiceError::store)?
            {
                Ok(()) => {
                    return Ok(Taken {
                        key,
                        session: held,
                        stored,
                        status,
                    });
                }
                // Another call took or changed it meanwhile: look again.
                Err(_) => continue,
            }
        }
    }

    /// Gives a session back with what a call `left`, durably; a session
    /// taken over meanwhile (its hold ran out) is left to its new holder.
    async fn give_back(&self, taken: Taken, left: Left) {
        let released = RuntimeSession {
            last_used: now_secs(),
            files: left.files,
            directories: left.directories,
            holder: None,
            python: left.python,
            ..taken.session
        };
        let swapped = self
            .store
            .compare_and_swap(&taken.key, Some(&taken.stored), Some(&released.encode()))
            .await;
        match swapped {
            Ok(Ok(())) => {
                if let Err(error) = self.store.flush().await {
                    tracing::warn!(%error, "a runtime session's files were not flushed");
                }
            }
            Ok(Err(_)) => tracing::warn!(
                session = %released.id,
                "a runtime session was taken over before its call gave it back (the call outlived its hold); the call's files are not kept in it"
            ),
            Err(error) => {
                tracing::warn!(session = %released.id, %error, "a runtime session could not be given back; it is free again when its hold ends")
            }
        }
    }

    /// Whether the stored runtime session `bytes` is over at `now`: expired
    /// and not held. A value this build cannot read is kept.
    pub(super) fn runtime_session_is_gone(&self, bytes: &[u8], now: u64) -> bool {
        RuntimeSession::decode(bytes).is_some_and(|session| {
            !session.held_at(now) && session.expired(now, self.config.runtime_sessions)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, id: &str) -> crate::workspace::FileMeta {
        crate::workspace::FileMeta {
            id: id.into(),
            name: name.into(),
            session_id: "out".into(),
            size: 1,
            created: 0,
        }
    }

    fn input(name: &str, id: &str) -> InputFile {
        InputFile {
            owner: [1; 8],
            session: "in".into(),
            id: id.into(),
            name: name.into(),
            read_only: false,
        }
    }

    #[test]
    fn a_calls_files_replace_remove_and_add_to_the_sessions() {
        let reply = Reply::Ended {
            execution_id: String::new(),
            session_id: "out".into(),
            error: None,
            stdout: String::new(),
            stderr: String::new(),
            files: vec![meta("b.txt", "new-b"), meta("c.txt", "new-c")],
            deleted_files: vec!["a.txt".into()],
            round: 0,
            failure: None,
            history: None,
            ending: Default::default(),
            directories: Vec::new(),
            cell: None,
        };
        let after = files_after(
            vec![
                input("a.txt", "a"),
                input("b.txt", "b"),
                input("d.txt", "d"),
            ],
            &reply,
            [2; 8],
        );
        let names: Vec<(&str, &str)> = after
            .iter()
            .map(|f| (f.name.as_str(), f.id.as_str()))
            .collect();
        assert_eq!(
            names,
            [("d.txt", "d"), ("b.txt", "new-b"), ("c.txt", "new-c")]
        );
        assert_eq!(after[1].owner, [2; 8]);
    }

    #[test]
    fn hints_follow_the_official_rule_and_ids_are_stable_per_principal() {
        assert!(check_hint("v2:user:0123456789abcdef0123456789abcdef").is_ok());
        assert!(check_hint("v3:0a1b2c3d4e5f:agent-user:x.y_z").is_ok());
        assert!(check_hint("a b").is_err());
        assert!(check_hint(&"x".repeat(129)).is_err());
        assert_eq!(session_id([1; 8], "h"), session_id([1; 8], "h"));
        assert_ne!(session_id([1; 8], "h"), session_id([2; 8], "h"));
        assert_eq!(session_id([1; 8], "h").len(), 43);
    }

    #[test]
    fn a_session_expires_when_idle_or_old_and_a_hold_lapses() {
        let limits = RuntimeSessionLimits {
            idle_secs: 10,
            max_secs: 100,
            wait: Duration::from_secs(1),
        };
        let mut session = RuntimeSession {
            id: "rt_x".into(),
            created: 1000,
            last_used: 1050,
            files: vec![],
            directories: vec!["empty".into()],
            holder: Some(Hold {
                call: [0; 16],
                until: 1055,
            }),
            python: Some([7; 16]),
        };
        assert!(!session.expired(1059, limits));
        assert!(session.expired(1060, limits));
        session.last_used = 1099;
        assert!(session.expired(1100, limits));
        assert!(session.held_at(1054));
        assert!(!session.held_at(1055));
        assert_eq!(
            RuntimeSession::decode(&session.encode()),
            Some(session.clone())
        );
        // A value of the first format (no link to a Python session) still
        // reads; a value of this one reads as the first by earlier builds.
        #[derive(Serialize)]
        struct First<'a> {
            id: &'a str,
            created: u64,
            last_used: u64,
            files: &'a [InputFile],
            directories: &'a [String],
            holder: Option<Hold>,
        }
        let first = bincode::serialize(&First {
            id: &session.id,
            created: session.created,
            last_used: session.last_used,
            files: &session.files,
            directories: &session.directories,
            holder: session.holder,
        })
        .unwrap_or_default();
        let read = RuntimeSession::decode(&first);
        assert_eq!(
            read.map(|s| (s.python, s.directories)),
            Some((None, session.directories.clone()))
        );
        let by_earlier: Option<RuntimeSessionV1> = bincode::deserialize(&session.encode()).ok();
        assert_eq!(by_earlier.map(|s| s.id), Some(session.id));
    }
}
