//! Python sessions (`POST /sessions`, `POST /sessions/{id}/exec`): a
//! namespace that lives from cell to cell, durably. A session is the
//! ordered list of its ended cells' journals; each cell is an ordinary
//! execution (its record, its token, its rounds, paused and continued
//! through `/exec/programmatic` as any other) whose record says where it
//! stands in its session (`ExecutionRecord::cell`). A cell run in a fresh
//! child first runs the earlier cells again in the same globals, each
//! answered from its journal and checked against it (`vm/host.rs`), so the
//! namespace is back as it was, identical to one CPython process.
//!
//! Stored:
//! - `y/<owner 8><session 16>`: the [`SessionRecord`]: its lifetime, its
//!   files' storage session, its cells (execution, marker, bytes), the
//!   tools declared so far, the names of its last cell, its clocks, the
//!   cell that holds it now, and its last compaction;
//! - `z/<owner 8><session 16><position u32 BE><execution 16>`: a
//!   [`StoredCell`]: the ended cell's record parts, how it ended, what it
//!   left (keyed by its execution too: a cell that ended after its session
//!   went on without it never overwrites the one listed at its place).
//!
//! Invariants:
//! - One cell at a time: a cell is started only by a compare-and-swap that
//!   sets the session's holder while no live hold is on it. A hold is live
//!   while its execution's state is running or paused and not expired
//!   (a first round left running by a dead node is not live).
//! - A cell that ended by itself (completed, raised, exited) is committed:
//!   its journal is written in the same batch as its end (guarded by its
//!   running state), flushed before its answer, then the session lists it.
//!   A crash between the two is repaired by the next request that finds the
//!   dead hold (rolled forward). A cell stopped from outside (time, memory,
//!   output, a cancel, a crash, a replay that differs) is not committed: the
//!   session keeps its earlier cells.
//! - A session is a principal's: its keys start with the owner, so another
//!   principal's id answers exactly as a missing one (404).
//! - Site ids are unique among the listed cells: the cell at position `k`
//!   starts at `(k - 1) * CELL_SITE_STRIDE`.
//! - Past its caps a session is compacted before its next cell
//!   ([`Service::compact`]): a base cell, listed first, replaces every
//!   listed cell in one compare-and-swap made by the base's end (or its
//!   roll-forward), and only when the base completed; what it could not
//!   carry is named in `lost`, never dropped silently. Positions restart
//!   at 1, numbers go on (`SessionCell::offset`).

use serde::{Deserialize, Serialize};

use crate::auth::Principal;
use crate::engine::{EngineError, ExecutionSpec, ResumeKind, Step};
use crate::failure::Failure;
use crate::journal::{ClockBase, EndedCell, ExecutionRecord, NameInfo, SessionCell};
use crate::quota::Item;
use crate::state::{ExecState, Status};
use crate::tools::ToolDef;

use super::error::ServiceError;
use super::inputs::InputFile;
use super::messages::{Reply, StartRequest};
use super::records::slices;
use super::settle::Claimed;
use super::{Service, now_secs};

/// The store's prefix of Python sessions.
pub(super) const SESSIONS: &[u8] = b"y/";
/// The store's prefix of their cells' journals.
pub(super) const SESSION_CELLS: &[u8] = b"z/";
/// The most cells a session may be configured to hold (site ids of every
/// cell fit in a `u32`).
pub const MAX_SESSION_CELLS: u32 = 4095;
/// Site ids a cell may use: cell `k`'s are `(k - 1) * CELL_SITE_STRIDE`
/// and up (a cell's source, at most 256 KiB by default, has far fewer
/// call sites).
const CELL_SITE_STRIDE: u32 = 1 << 20;
/// How long a hold counts as live while its execution has no state yet
/// (the state is stored right after the hold is taken), seconds.
const STATELESS_HOLD_SECS: u64 = 30;
/// The first byte of a stored cell journal, and of a session stored
/// before compaction.
const FORMAT: u8 = 1;
/// The first byte of a stored session (format 1 is still read).
const SESSION_FORMAT: u8 = 2;

/// Lifetimes and size of Python sessions.
#[derive(Clone, Copy, Debug)]
pub struct SessionLimits {
    /// Seconds a session lives after its last cell, by default.
    pub ttl_secs: u64,
    /// The longest lifetime a creation may ask for.
    pub max_ttl_secs: u64,
    /// Cells per session.
    pub max_cells: u32,
    /// Run time the listed cells of a session may have taken in all,
    /// milliseconds: a cold start replays them (its allowance is twice
    /// this, plus two seconds).
    pub max_replay_ms: u64,
}

/// Whether a cell holds the session now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStatus {
    /// No cell runs or waits: the next may start.
    Idle,
    /// A cell runs or is paused at tool calls.
    Busy,
}

impl SessionStatus {
    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            SessionStatus::Idle => "idle",
            SessionStatus::Busy => "busy",
        }
    }
}

/// A session as its principal sees it.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// `ps_` and 32 hex digits.
    pub session_id: String,
    /// Cells it holds (ended by themselves).
    pub cells: u32,
    /// Idle or busy.
    pub status: SessionStatus,
    /// Unix seconds of its creation.
    pub created: u64,
    /// Unix seconds after which it is gone (unless a cell runs before).
    pub expires_at: u64,
    /// The names its last cell left.
    pub names: Vec<NameInfo>,
    /// The storage session of its files (`/mnt/data`).
    pub files_session: String,
    /// Each listed cell's execution (hex), in order (a compaction's base
    /// first).
    pub executions: Vec<String>,
    /// The cells the last compaction folded into the base (0: none).
    pub compacted_cells: u32,
    /// The names the last compaction could not carry.
    pub lost: Vec<String>,
}

/// What a session cell's answer says of its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellTag {
    /// The session.
    pub session_id: String,
    /// The cell's number, from 1.
    pub cell: u32,
    /// `new` (the first cell), `hot` (the child held the namespace) or
    /// `cold` (a fresh child rebuilt it by replay).
    pub resumed: &'static str,
    /// The first cell after a compaction: the names it could not carry.
    pub lost: Option<Vec<String>>,
}

impl CellTag {
    /// The tag of the cell `cell` resumed as `kind`.
    pub fn of(cell: &SessionCell, kind: ResumeKind) -> CellTag {
        CellTag {
            session_id: session_id_text(&cell.session),
            cell: cell.number(),
            resumed: kind.of_cell(cell.number()),
            lost: None,
        }
    }
}

/// A session as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SessionRecord {
    created: u64,
    ttl_secs: u64,
    last_used: u64,
    files_session: String,
    cells: Vec<CellRef>,
    tools: Vec<ToolDef>,
    names: Vec<NameInfo>,
    holder: Option<[u8; 16]>,
    /// The first cell's start clock and the last clock the last cell saw.
    clocks: Option<(ClockBase, ClockBase)>,
    /// The last compaction: its base is listed first, in place of the
    /// cells it folded.
    compaction: Option<Compaction>,
    /// While a compaction's base cell holds the session: the names its
    /// snapshot could not carry (listed with the base when it commits).
    pending_lost: Option<Vec<String>>,
}

/// A session as format 1 stored it (before compaction).
#[derive(Serialize, Deserialize)]
struct SessionRecordV1 {
    created: u64,
    ttl_secs: u64,
    last_used: u64,
    files_session: String,
    cells: Vec<CellRef>,
    tools: Vec<ToolDef>,
    names: Vec<NameInfo>,
    holder: Option<[u8; 16]>,
    clocks: Option<(ClockBase, ClockBase)>,
}

impl From<SessionRecordV1> for SessionRecord {
    fn from(v1: SessionRecordV1) -> Self {
        SessionRecord {
            created: v1.created,
            ttl_secs: v1.ttl_secs,
            last_used: v1.last_used,
            files_session: v1.files_session,
            cells: v1.cells,
            tools: v1.tools,
            names: v1.names,
            holder: v1.holder,
            clocks: v1.clocks,
            compaction: None,
            pending_lost: None,
        }
    }
}

/// What a session's last compaction did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Compaction {
    /// The cells its base stands for (the base's number).
    folded: u32,
    /// The names it could not carry.
    lost: Vec<String>,
}

/// An ended cell, as its session lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct CellRef {
    execution: [u8; 16],
    marker: String,
    bytes: u64,
    /// The run time it took, milliseconds (what replaying it costs).
    used_ms: u64,
}

/// An ended cell's journal and what it left.
#[derive(Debug, Serialize, Deserialize)]
struct StoredCell {
    execution: [u8; 16],
    start: Vec<u8>,
    rounds: Vec<Vec<u8>>,
    progress: Vec<u8>,
    ended: Option<Failure>,
    names: Vec<NameInfo>,
    last_clock: ClockBase,
    tools: Vec<ToolDef>,
    marker: String,
    used_ms: u64,
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    encode_as(FORMAT, value)
}

/// The format byte `format` and the bincode of `value`.
fn encode_as<T: Serialize>(format: u8, value: &T) -> Vec<u8> {
    let mut out = vec![format];
    // Plain data into memory: bincode does not fail on it.
    let _ = bincode::serialize_into(&mut out, value);
    out
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    decode_as(FORMAT, bytes)
}

/// `bytes` as `encode_as(format, ...)` wrote them, or None.
fn decode_as<T: serde::de::DeserializeOwned>(format: u8, bytes: &[u8]) -> Option<T> {
    match bytes.split_first() {
        Some((&first, body)) if first == format => bincode::deserialize(body).ok(),
        _ => None,
    }
}

impl SessionRecord {
    fn encode(&self) -> Vec<u8> {
        encode_as(SESSION_FORMAT, self)
    }

    fn decode(bytes: &[u8]) -> Option<SessionRecord> {
        decode_as(SESSION_FORMAT, bytes)
            .or_else(|| decode::<SessionRecordV1>(bytes).map(SessionRecord::from))
    }

    /// The names its compaction lost, for the answers of `cell` when it is
    /// the first cell after that compaction (listed right after the base).
    fn lost_for(&self, cell: &SessionCell) -> Option<Vec<String>> {
        let compaction = self.compaction.as_ref()?;
        cell.follows_compaction().then(|| compaction.lost.clone())
    }

    /// The cells folded into the base, less one: the listed cell at
    /// position `p` (from 1) is cell number `p + offset`.
    fn offset(&self) -> u32 {
        self.compaction
            .as_ref()
            .map_or(0, |c| c.folded.saturating_sub(1))
    }

    /// The cells it ran and holds, folded ones too: the last one's number.
    fn cell_count(&self) -> u32 {
        self.offset() + self.cells.len() as u32
    }

    /// The key a child holding its namespace as it stands is parked under
    /// (`SessionCell::park_key` of its last cell).
    fn park_key(&self) -> usize {
        crate::journal::session_park_key(self.offset(), self.cell_count())
    }

    /// Why its next cell cannot run on top of it as it stands (it must be
    /// compacted first), if it cannot.
    fn past_caps(&self, limits: &SessionLimits) -> Option<String> {
        if self.cells.len() as u32 >= limits.max_cells {
            return Some(format!(
                "a session replays {} cells at most (--session-max-cells)",
                limits.max_cells
            ));
        }
        // One cell is not folded (a base stands for two cells or more, so
        // its number is never 1): a rebuild replays it as it ran once.
        (self.cells.len() >= 2 && self.used_ms() > limits.max_replay_ms).then(|| {
            format!(
                "its cells ran {} ms in all, over the {} ms a session may replay when its namespace is rebuilt (--session-max-replay-secs)",
                self.used_ms(),
                limits.max_replay_ms
            )
        })
    }

    /// Whether its compaction's base alone took longer than a rebuild may
    /// replay (compacting it again would not help).
    fn base_alone_past(&self, limits: &SessionLimits) -> bool {
        self.compaction.is_some()
            && self
                .cells
                .first()
                .is_some_and(|base| base.used_ms > limits.max_replay_ms)
    }

    /// The session once its base `base` (a compaction's, `bytes` stored)
    /// replaces every cell listed: the names the snapshot could not carry
    /// are its compaction's.
    fn folded_into(&self, base: &StoredCell, number: u32, bytes: u64) -> SessionRecord {
        let mut session = SessionRecord {
            cells: Vec::new(),
            holder: None,
            last_used: now_secs(),
            compaction: Some(Compaction {
                folded: number,
                lost: self.pending_lost.clone().unwrap_or_default(),
            }),
            pending_lost: None,
            ..self.clone()
        };
        list_cell(&mut session, base, bytes);
        session
    }

    fn expires_at(&self) -> u64 {
        self.last_used.saturating_add(self.ttl_secs)
    }

    fn bytes(&self) -> u64 {
        self.cells.iter().map(|c| c.bytes).sum()
    }

    /// The run time its cells took in all, milliseconds.
    fn used_ms(&self) -> u64 {
        self.cells.iter().map(|c| c.used_ms).sum()
    }
}

fn session_key(owner: [u8; 8], id: &[u8; 16]) -> Vec<u8> {
    [SESSIONS, &owner[..], &id[..]].concat()
}

fn cells_prefix(owner: [u8; 8], id: &[u8; 16]) -> Vec<u8> {
    [SESSION_CELLS, &owner[..], &id[..]].concat()
}

/// The key of cell `index`'s journal as `execution` wrote it: a cell that
/// ended after its session went on without it (its hold judged dead) can
/// never overwrite the journal of the cell listed at its place.
fn cell_key(owner: [u8; 8], id: &[u8; 16], index: u32, execution: &[u8; 16]) -> Vec<u8> {
    [
        &cells_prefix(owner, id)[..],
        &index.to_be_bytes()[..],
        &execution[..],
    ]
    .concat()
}

/// `ps_` and the id's hex.
fn session_id_text(id: &[u8; 16]) -> String {
    format!("ps_{}", hex::encode(id))
}

/// A session id from its text; `NotFound` for anything else (an id that
/// cannot exist is a session this principal does not have).
pub fn parse_session_id(text: &str) -> Result<[u8; 16], ServiceError> {
    let hex_part = text.strip_prefix("ps_").ok_or(ServiceError::NotFound)?;
    let bytes = hex::decode(hex_part).map_err(|_| ServiceError::NotFound)?;
    bytes.try_into().map_err(|_| ServiceError::NotFound)
}

/// The tools of a session after a cell that declares `declared`: each
/// replaces the one of its name, the others are added.
fn merge_tools(known: &[ToolDef], declared: Vec<ToolDef>) -> Vec<ToolDef> {
    let mut tools: Vec<ToolDef> = known
        .iter()
        .filter(|tool| declared.iter().all(|d| d.name != tool.name))
        .cloned()
        .collect();
    tools.extend(declared);
    tools
}

/// The last clock a record's code saw: its last round's, or its start's.
fn last_clock(record: &ExecutionRecord) -> ClockBase {
    record
        .rounds
        .last()
        .map_or(record.clock0, |r| r.resume_clock)
}

/// What a cell's `/mnt/data` starts with beside its request's files.
#[derive(Clone, Copy, Default)]
pub(super) struct CellInputs<'a> {
    /// Stored files laid first (a runtime session's).
    pub kept: &'a [InputFile],
    /// Empty directories (a runtime session's).
    pub directories: &'a [String],
    /// Whether these are all of `/mnt/data` (a runtime session's cell),
    /// rather than laid over what the earlier cells left.
    pub fresh_workspace: bool,
}

/// An ended cell's journal, as its end writes it.
pub(super) struct CellJournal {
    /// Its key.
    pub key: Vec<u8>,
    /// Its value.
    pub bytes: Vec<u8>,
}

/// Where a cell being prepared goes in its session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// After the listed cells: the code of a request.
    Next,
    /// After the listed cells: a compaction's look at the namespace.
    Snapshot,
    /// First, in place of every listed cell: a compaction's base.
    Base,
}

/// What a compaction's snapshot writes: the base source, the names it
/// cannot carry, and the read-only files of `/mnt/data`; and what it
/// reports: every file there, and the directories left empty.
#[derive(Deserialize)]
struct Snapshot {
    source: String,
    lost: Vec<String>,
    read_only: Vec<String>,
    #[serde(skip)]
    files: Vec<crate::journal::WorkspaceFile>,
    #[serde(skip)]
    directories: Vec<String>,
}

/// Run time a compaction's snapshot or base may take, milliseconds.
const COMPACTION_TIMEOUT_MS: u64 = 60_000;

/// The request of a compaction's snapshot or base cell: `code`, no tools
/// of its own (the session's are merged in), no files.
fn compaction_request(code: String) -> StartRequest {
    StartRequest {
        code,
        tools: Vec::new(),
        session_id: None,
        timeout_ms: COMPACTION_TIMEOUT_MS,
        request_id: None,
        files: Vec::new(),
        argv: Vec::new(),
        policy: Default::default(),
        lang: crate::program::Lang::Python,
    }
}

/// A stored session and the bytes it was read as (for the swap).
struct Found {
    bytes: Vec<u8>,
    session: SessionRecord,
}

impl Service {
    /// Makes a session for `owner`, living `ttl_secs` after its last cell
    /// (the default when `None`; at most the configured maximum).
    pub async fn create_session(
        &self,
        owner: [u8; 8],
        ttl_secs: Option<u64>,
    ) -> Result<SessionInfo, ServiceError> {
        let limits = self.config.sessions;
        let ttl_secs = match ttl_secs {
            None => limits.ttl_secs,
            Some(0) => {
                return Err(ServiceError::Invalid(
                    "ttl_seconds must be at least 1".into(),
                ));
            }
            Some(asked) if asked > limits.max_ttl_secs => {
                return Err(ServiceError::Invalid(format!(
                    "ttl_seconds may be {} at most",
                    limits.max_ttl_secs
                )));
            }
            Some(asked) => asked,
        };
        let (id, session) = self.make_session(owner, ttl_secs).await?;
        Ok(self.info_of(&id, &session, SessionStatus::Idle))
    }

    /// Stores a new session of `owner` living `ttl_secs` after its last
    /// cell, durably.
    async fn make_session(
        &self,
        owner: [u8; 8],
        ttl_secs: u64,
    ) -> Result<([u8; 16], SessionRecord), ServiceError> {
        let id: [u8; 16] = rand::random();
        let now = now_secs();
        let session = SessionRecord {
            created: now,
            ttl_secs,
            last_used: now,
            files_session: crate::workspace::new_session_id(),
            cells: Vec::new(),
            tools: Vec::new(),
            names: Vec::new(),
            holder: None,
            clocks: None,
            compaction: None,
            pending_lost: None,
        };
        let key = session_key(owner, &id);
        self.store
            .compare_and_swap(&key, None, Some(&session.encode()))
            .await
            .map_err(ServiceError::store)?
            .map_err(|_| ServiceError::Unavailable("a session id was drawn twice".into()))?;
        self.durability
            .durable()
            .await
            .map_err(ServiceError::store)?;
        metrics::counter!("baton_sessions_created_total").increment(1);
        Ok((id, session))
    }

    /// The Python session a runtime session's Python calls run in: the
    /// one `linked` names while it lives, else a new one living `ttl_secs`
    /// after its last cell. Says whether it is new.
    pub(super) async fn python_session_for(
        &self,
        owner: [u8; 8],
        linked: Option<[u8; 16]>,
        ttl_secs: u64,
    ) -> Result<[u8; 16], ServiceError> {
        if let Some(id) = linked {
            match self.found_session(owner, &id).await {
                Ok(_) => return Ok(id),
                Err(ServiceError::NotFound) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(self.make_session(owner, ttl_secs.max(1)).await?.0)
    }

    fn info_of(
        &self,
        id: &[u8; 16],
        session: &SessionRecord,
        status: SessionStatus,
    ) -> SessionInfo {
        SessionInfo {
            session_id: session_id_text(id),
            cells: session.cell_count(),
            status,
            created: session.created,
            expires_at: session.expires_at(),
            names: session.names.clone(),
            files_session: session.files_session.clone(),
            executions: session
                .cells
                .iter()
                .map(|cell| hex::encode(cell.execution))
                .collect(),
            compacted_cells: session.compaction.as_ref().map_or(0, |c| c.folded),
            lost: session
                .compaction
                .as_ref()
                .map(|c| c.lost.clone())
                .unwrap_or_default(),
        }
    }

    /// The session `id_text` of `owner`, as it stands.
    pub async fn session_info(
        &self,
        owner: [u8; 8],
        id_text: &str,
    ) -> Result<SessionInfo, ServiceError> {
        let id = parse_session_id(id_text)?;
        let found = self.settled_session(owner, &id).await?;
        let status = self.status_of(&found.session).await?;
        Ok(self.info_of(&id, &found.session, status))
    }

    /// `owner`'s sessions, oldest first (without their names).
    pub async fn list_sessions(&self, owner: [u8; 8]) -> Result<Vec<SessionInfo>, ServiceError> {
        let prefix = [SESSIONS, &owner[..]].concat();
        let mut scan = crate::store::scan_prefix(self.store.as_ref(), &prefix);
        let now = now_secs();
        let mut sessions = Vec::new();
        while let Some(pair) = scan.next().await {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            let Some(id) = key
                .get(prefix.len()..)
                .and_then(|rest| <[u8; 16]>::try_from(rest).ok())
            else {
                continue;
            };
            let Some(session) = SessionRecord::decode(&bytes) else {
                continue;
            };
            if session.expires_at() <= now && self.live_holder(&session).await?.is_none() {
                continue;
            }
            let status = self.status_of(&session).await?;
            let mut info = self.info_of(&id, &session, status);
            info.names.clear();
            info.executions.clear();
            sessions.push(info);
        }
        sessions.sort_by_key(|info| info.created);
        Ok(sessions)
    }

    /// Deletes the session `id_text` of `owner`: a cell that holds it is
    /// cancelled, its journals go with it (its files expire with their
    /// storage session).
    pub async fn delete_session(&self, owner: [u8; 8], id_text: &str) -> Result<(), ServiceError> {
        let id = parse_session_id(id_text)?;
        let found = self.found_session(owner, &id).await?;
        if let Some(holder) = found.session.holder {
            match self.cancel_execution(owner, holder).await {
                Ok(_) | Err(ServiceError::NotFound) => {}
                Err(error) => return Err(error),
            }
        }
        self.delete_session_keys(owner, &id).await?;
        self.engine.evict(&id);
        Ok(())
    }

    async fn delete_session_keys(&self, owner: [u8; 8], id: &[u8; 16]) -> Result<(), ServiceError> {
        let mut keys = vec![session_key(owner, id)];
        keys.extend(self.journal_keys(owner, id).await?);
        self.store
            .apply_batch(&[], &slices(&keys))
            .await
            .map_err(ServiceError::store)?;
        self.usage.remove(&Item::Session(*id));
        Ok(())
    }

    /// The stored session, or `NotFound` (missing, another principal's,
    /// or expired with no cell holding it).
    async fn found_session(&self, owner: [u8; 8], id: &[u8; 16]) -> Result<Found, ServiceError> {
        let bytes = self
            .store
            .get(&session_key(owner, id))
            .await
            .map_err(ServiceError::store)?
            .ok_or(ServiceError::NotFound)?;
        let session = SessionRecord::decode(&bytes)
            .ok_or_else(|| ServiceError::Corrupt("Session record is corrupt".into()))?;
        if session.expires_at() <= now_secs() && self.live_holder(&session).await?.is_none() {
            return Err(ServiceError::NotFound);
        }
        Ok(Found { bytes, session })
    }

    /// The stored session with a dead hold settled: the cell of a holder
    /// that ended by itself but was not listed (a crash between its end
    /// and the session's update) is listed, any other dead hold dropped.
    async fn settled_session(&self, owner: [u8; 8], id: &[u8; 16]) -> Result<Found, ServiceError> {
        loop {
            let found = self.found_session(owner, id).await?;
            let Some(holder) = found.session.holder else {
                return Ok(found);
            };
            if self.live_holder(&found.session).await?.is_some() {
                return Ok(found);
            }
            let mut session = SessionRecord {
                holder: None,
                pending_lost: None,
                ..found.session.clone()
            };
            // A compaction's base is at position 1; any other cell next.
            let base = found.session.pending_lost.is_some();
            let index = if base {
                1
            } else {
                session.cells.len() as u32 + 1
            };
            let stored = self
                .store
                .get(&cell_key(owner, id, index, &holder))
                .await
                .map_err(ServiceError::store)?
                .and_then(|bytes| decode::<StoredCell>(&bytes).map(|cell| (bytes.len(), cell)));
            let stored = stored.filter(|(_, cell)| cell.execution == holder);
            match stored {
                Some((bytes, cell)) if base => {
                    let number = found.session.cell_count();
                    session = found.session.folded_into(&cell, number, bytes as u64);
                }
                Some((bytes, cell)) => list_cell(&mut session, &cell, bytes as u64),
                None => {}
            }
            let swapped = self
                .store
                .compare_and_swap(
                    &session_key(owner, id),
                    Some(&found.bytes),
                    Some(&session.encode()),
                )
                .await
                .map_err(ServiceError::store)?;
            if swapped.is_ok() {
                self.count_session(id, owner, &session);
                if base {
                    self.delete_folded(owner, id, &session).await;
                }
            }
        }
    }

    /// The holder of `session` when its hold is live.
    async fn live_holder(&self, session: &SessionRecord) -> Result<Option<[u8; 16]>, ServiceError> {
        let Some(holder) = session.holder else {
            return Ok(None);
        };
        let Some(bytes) = self
            .store
            .get(&crate::state::state_key(&holder))
            .await
            .map_err(ServiceError::store)?
        else {
            // The hold is taken just before its execution's state is
            // stored: live for a moment without one (a server that died in
            // between leaves a hold that lapses).
            let taken_lately = now_secs() < session.last_used.saturating_add(STATELESS_HOLD_SECS);
            return Ok(taken_lately.then_some(holder));
        };
        let Some(state) = ExecState::decode(&bytes) else {
            return Ok(None);
        };
        let live = match state.status {
            _ if state.expires_at <= now_secs() => false,
            Status::Paused => true,
            Status::Running if state.round > 0 => true,
            // A first round: live unless its node died (nothing can
            // continue it then).
            Status::Running => self
                .store
                .node_alive(state.node)
                .await
                .map_err(ServiceError::store)?,
            _ => false,
        };
        Ok(live.then_some(holder))
    }

    async fn status_of(&self, session: &SessionRecord) -> Result<SessionStatus, ServiceError> {
        Ok(match self.live_holder(session).await? {
            Some(_) => SessionStatus::Busy,
            None => SessionStatus::Idle,
        })
    }

    /// Runs `request` as the next cell of the session `id_text` of
    /// `principal`, to its first pause or its end (continued through
    /// `/exec/programmatic` as any execution). `expected_cell`, when
    /// given, is the cell the client means: a cell already ended is
    /// answered again (a retry whose answer was lost), never run twice.
    pub async fn exec_cell(
        &self,
        principal: &Principal,
        id_text: &str,
        request: StartRequest,
        expected_cell: Option<u32>,
    ) -> Result<Reply, ServiceError> {
        let id = parse_session_id(id_text)?;
        self.run_cell(
            principal,
            &id,
            request,
            expected_cell,
            CellInputs::default(),
        )
        .await
        .map(|(reply, _)| reply)
    }

    /// [`Service::exec_cell`] for the session `id`, with `inputs` beside
    /// the request's files; also answers the stored file of each name the
    /// cell was given.
    pub(super) async fn run_cell(
        &self,
        principal: &Principal,
        id: &[u8; 16],
        request: StartRequest,
        expected_cell: Option<u32>,
        inputs: CellInputs<'_>,
    ) -> Result<(Reply, Vec<InputFile>), ServiceError> {
        let owner = principal.owner;
        let id = *id;
        let _in_flight = self.engine.hold_for_request();
        let mut found = self.settled_session(owner, &id).await?;
        if let Some(expected) = expected_cell
            && expected != found.session.cell_count() + 1
        {
            return Ok((
                self.answer_cell_again(&id, &found, expected).await?,
                Vec::new(),
            ));
        }
        if self.live_holder(&found.session).await?.is_some() {
            return Err(ServiceError::SessionBusy);
        }
        let compacted = match found.session.past_caps(&self.config.sessions) {
            Some(reason) => {
                found = self.compact(principal, &id, found, &reason).await?;
                true
            }
            None => false,
        };
        self.admit(owner, request.code.len() as u64)?;
        let client_request_id = request.request_id.clone();
        let request_id = self
            .begin_request(owner, client_request_id.as_deref())
            .await?;
        let (mut record, given) = self
            .prepare_cell(principal, &id, &found.session, request, inputs, Slot::Next)
            .await?;
        let held = self.take_hold(owner, &id, &found, &record, None).await?;
        let (state, flushing) = self.store_held_start(&mut record, owner, &id).await?;
        self.link_request(owner, &request_id, record.id).await?;
        if request_id.cancelled_early {
            return Ok((self.cancel_now(record, state).await?, given));
        }
        metrics::counter!("baton_executions_started_total").increment(1);
        let (step, kind) = self.start_held(&mut record, &state, &id, &held).await?;
        // A compaction rebuilt the namespace for this cell: cold, though
        // the base's child runs it.
        let kind = if compacted { ResumeKind::Cold } else { kind };
        // The first cell after a compaction names what it could not carry.
        let tag = record.cell.as_ref().map(|cell| CellTag {
            lost: found.session.lost_for(cell),
            ..CellTag::of(cell, kind)
        });
        if let Some(tag) = &tag {
            metrics::counter!("baton_session_cells_total", "resumed" => tag.resumed).increment(1);
        }
        let reply = self.settle(record, state, step, flushing).await?;
        Ok((reply.tagged(tag), given))
    }

    /// Stores the start of `record`, a cell of `owner` that holds the
    /// session `id`, as running its first round; the hold is let go when
    /// it cannot be.
    async fn store_held_start(
        &self,
        record: &mut ExecutionRecord,
        owner: [u8; 8],
        id: &[u8; 16],
    ) -> Result<(ExecState, Claimed), ServiceError> {
        let state = self.first_round_running(record, owner);
        match self.store_start(record, &state).await {
            Ok(flushing) => Ok((state, flushing)),
            Err(error) => {
                self.let_go(owner, id, &record.id).await;
                Err(error)
            }
        }
    }

    /// [`Service::start_in_session`] for `record`, whose start is stored
    /// as `state`: when it cannot start, its state is released and the
    /// hold let go.
    async fn start_held(
        &self,
        record: &mut ExecutionRecord,
        state: &ExecState,
        id: &[u8; 16],
        held: &SessionRecord,
    ) -> Result<(Step, ResumeKind), ServiceError> {
        let started = self.start_in_session(record, id, held).await;
        if started.is_err() {
            self.release(&record.id, state).await;
            self.let_go(record.owner, id, &record.id).await;
        }
        started
    }

    /// Starts `record`, a cell of the session `held` (which it holds): hot
    /// in the child that holds the namespace, else cold after its earlier
    /// cells (a compaction's base has none: it starts in fresh globals).
    async fn start_in_session(
        &self,
        record: &mut ExecutionRecord,
        id: &[u8; 16],
        held: &SessionRecord,
    ) -> Result<(Step, ResumeKind), ServiceError> {
        let none: &[EndedCell] = &[];
        let known = record
            .cell
            .as_ref()
            .is_some_and(SessionCell::is_base)
            .then_some(none);
        let started = match self.engine.start_cell(record, known).await {
            Err(EngineError::HistoryNeeded) => {
                let earlier = self.earlier_cells(record.owner, id, held).await?;
                self.engine.start_cell(record, Some(&earlier)).await
            }
            other => other,
        };
        started.map_err(|error| ServiceError::Unavailable(error.to_string()))
    }

    /// The tag of a continued cell: on the first cell after a compaction,
    /// with the names the compaction lost (read from its session).
    pub(super) async fn cell_tag(
        &self,
        record: &ExecutionRecord,
        kind: ResumeKind,
    ) -> Option<CellTag> {
        let cell = record.cell.as_ref()?;
        let mut tag = CellTag::of(cell, kind);
        if cell.follows_compaction() {
            let found = self.found_session(record.owner, &cell.session).await.ok();
            tag.lost = found.and_then(|found| found.session.lost_for(cell));
        }
        Some(tag)
    }

    /// Folds the cells of the session `found` (past its caps, for
    /// `reason`) into one base cell: a snapshot of its namespace writes the
    /// base's source, the base runs in a fresh child and, once it ended by
    /// itself, the session lists it alone. Returns the session then.
    /// `SessionFull` when it cannot be compacted (the session stays as it
    /// was).
    async fn compact(
        &self,
        principal: &Principal,
        id: &[u8; 16],
        found: Found,
        reason: &str,
    ) -> Result<Found, ServiceError> {
        let full = |why: &str| {
            ServiceError::SessionFull(format!(
                "This session is full ({reason}) and could not be compacted: {why}; start a new session"
            ))
        };
        if found.session.base_alone_past(&self.config.sessions) {
            return Err(full(
                "its compacted base alone takes longer to rebuild than a session may replay",
            ));
        }
        let cells = found.session.cells.clone();
        let snapshot = self.snapshot(principal, id, found).await?;
        let snapshot = snapshot.map_err(|why| full(&why))?;
        let folded = self.run_base(principal, id, &cells, snapshot).await?;
        folded.map_err(|why| full(&why))?;
        metrics::counter!("baton_session_compactions_total").increment(1);
        self.settled_session(principal.owner, id).await
    }

    /// Looks at the namespace of the session `found` (in the child that
    /// holds it, or one that runs its cells again) and answers the base
    /// source that carries it and the names it cannot carry; `Err(why)`
    /// when the look failed. The child is not kept.
    async fn snapshot(
        &self,
        principal: &Principal,
        id: &[u8; 16],
        found: Found,
    ) -> Result<Result<Snapshot, String>, ServiceError> {
        let owner = principal.owner;
        let (mut record, _) = self
            .prepare_cell(
                principal,
                id,
                &found.session,
                compaction_request(String::new()),
                CellInputs::default(),
                Slot::Snapshot,
            )
            .await?;
        record.owner = owner;
        let held = self.take_hold(owner, id, &found, &record, None).await?;
        let started = self.start_in_session(&mut record, id, &held).await;
        self.engine.evict(id);
        self.let_go(owner, id, &record.id).await;
        Ok(match started? {
            (Step::Completed, _) => serde_json::from_str::<Snapshot>(&record.stdout)
                .map(|snapshot| Snapshot {
                    files: std::mem::take(&mut record.produced),
                    directories: std::mem::take(&mut record.directories_left),
                    ..snapshot
                })
                .map_err(|e| format!("its snapshot did not read back ({e})")),
            (Step::Failed(failure), _) => Err(format!("its snapshot failed ({failure})")),
            (Step::Paused(_), _) => Err("its snapshot paused".into()),
        })
    }

    /// Runs the base cell of `snapshot` (taken of the session listing
    /// `cells`) in a fresh child, holding the session: once it ended by itself its end lists it alone
    /// ([`Service::settle_cell`]); `Err(why)` when it did not.
    async fn run_base(
        &self,
        principal: &Principal,
        id: &[u8; 16],
        cells: &[CellRef],
        snapshot: Snapshot,
    ) -> Result<Result<(), String>, ServiceError> {
        let owner = principal.owner;
        let found = self.settled_session(owner, id).await?;
        // Another cell ran since the snapshot (its hold lapsed meanwhile):
        // the snapshot is not of the session as it stands.
        if found.session.cells != cells || self.live_holder(&found.session).await?.is_some() {
            return Err(ServiceError::SessionBusy);
        }
        let prepared = self
            .prepare_cell(
                principal,
                id,
                &found.session,
                compaction_request(snapshot.source),
                CellInputs::default(),
                Slot::Base,
            )
            .await;
        let mut record = match prepared {
            Ok((record, _)) => record,
            Err(ServiceError::Invalid(why)) => {
                return Ok(Err(format!("its base cannot run ({why})")));
            }
            Err(error) => return Err(error),
        };
        // The base starts with `/mnt/data` as the cells left it.
        record.files = snapshot.files;
        record.read_only = snapshot.read_only;
        record.directories = snapshot.directories;
        let held = self
            .take_hold(owner, id, &found, &record, Some(snapshot.lost))
            .await?;
        let (state, flushing) = self.store_held_start(&mut record, owner, id).await?;
        let (step, _) = self.start_held(&mut record, &state, id, &held).await?;
        Ok(match self.settle(record, state, step, flushing).await? {
            Reply::Ended { error: None, .. } => Ok(()),
            Reply::Ended {
                error: Some(error), ..
            } => Err(format!("its base cell failed ({error})")),
            Reply::Paused { .. } => Err("its base cell paused".into()),
        })
    }

    /// Takes the session `found` for `record` by compare-and-swap (a
    /// compaction's base with the names its snapshot lost); answers the
    /// session as held.
    async fn take_hold(
        &self,
        owner: [u8; 8],
        id: &[u8; 16],
        found: &Found,
        record: &ExecutionRecord,
        pending_lost: Option<Vec<String>>,
    ) -> Result<SessionRecord, ServiceError> {
        let held = SessionRecord {
            holder: Some(record.id),
            last_used: now_secs(),
            pending_lost,
            ..found.session.clone()
        };
        self.store
            .compare_and_swap(
                &session_key(owner, id),
                Some(&found.bytes),
                Some(&held.encode()),
            )
            .await
            .map_err(ServiceError::store)?
            .map_err(|_| ServiceError::SessionBusy)?;
        Ok(held)
    }

    /// The record of the next cell of `session`: its tools merged with the
    /// session's, its files laid over the session's, its marker and sites
    /// its own, its clock after the last cell's.
    async fn prepare_cell(
        &self,
        principal: &Principal,
        id: &[u8; 16],
        session: &SessionRecord,
        request: StartRequest,
        inputs: CellInputs<'_>,
        slot: Slot,
    ) -> Result<(ExecutionRecord, Vec<InputFile>), ServiceError> {
        // A base replaces every listed cell: it runs first, in fresh globals.
        let (index, offset, markers) = match slot {
            Slot::Base => (1, session.cell_count().saturating_sub(1), Vec::new()),
            Slot::Next | Slot::Snapshot => (
                session.cells.len() as u32 + 1,
                session.offset(),
                session.cells.iter().map(|c| c.marker.clone()).collect(),
            ),
        };
        if let Some(marker) = crate::rewrite::uses_marker(&request.code, &markers) {
            return Err(ServiceError::Invalid(format!(
                "`{marker}` is reserved in this session (an earlier cell's tool calls are reached by it)"
            )));
        }
        let marker = crate::rewrite::choose_cell_marker(&request.code, index, &markers);
        let workspace = self
            .workspace_of(
                principal,
                &session.files_session,
                inputs.kept,
                &request.files,
            )
            .await?;
        let spec = ExecutionSpec {
            source: request.code,
            tools: merge_tools(&session.tools, request.tools),
            timeout_ms: request.timeout_ms,
            session_id: session.files_session.clone(),
            seed: None,
            files: workspace.files,
            argv: Vec::new(),
            policy: request.policy,
            lang: crate::program::Lang::Python,
            read_only: workspace.read_only,
            directories: inputs.directories.to_vec(),
        };
        let mut record = self
            .engine
            .prepare(spec)
            .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        let cell = SessionCell {
            session: *id,
            index,
            site_base: (index - 1).saturating_mul(CELL_SITE_STRIDE),
            marker,
            fresh_workspace: inputs.fresh_workspace,
            offset,
            snapshot: slot == Slot::Snapshot,
        };
        self.engine.place_cell(&mut record, cell, session.clocks);
        Ok((record, workspace.inputs))
    }

    /// The answer to a cell request that names another cell than the
    /// next: an ended cell's stored answer, or 409.
    async fn answer_cell_again(
        &self,
        id: &[u8; 16],
        found: &Found,
        expected: u32,
    ) -> Result<Reply, ServiceError> {
        let offset = found.session.offset();
        if found.session.compaction.is_some() && expected <= offset {
            return Err(ServiceError::Invalid(format!(
                "cell {expected} was folded into this session's base by a compaction; its answer is no longer kept"
            )));
        }
        let listed = expected
            .checked_sub(offset + 1)
            .and_then(|at| found.session.cells.get(at as usize));
        let Some(cell) = listed else {
            return Err(ServiceError::SessionBusy);
        };
        let outcome = self
            .load_outcome(&cell.execution)
            .await?
            .ok_or(ServiceError::NotFound)?;
        let tag = CellTag {
            session_id: session_id_text(id),
            cell: expected,
            resumed: ResumeKind::Cold.of_cell(expected),
            lost: None,
        };
        let reply = Reply::from_outcome(hex::encode(cell.execution), outcome, 0, None);
        Ok(reply.tagged(Some(tag)))
    }

    /// Clears the session's hold of `execution` (a cell that did not run,
    /// or was stopped from outside); a failure is logged (the hold then
    /// lapses with its execution's state).
    async fn let_go(&self, owner: [u8; 8], id: &[u8; 16], execution: &[u8; 16]) {
        let updated = self
            .update_session(owner, id, |session| {
                (session.holder == Some(*execution)).then(|| SessionRecord {
                    holder: None,
                    pending_lost: None,
                    ..session.clone()
                })
            })
            .await;
        if let Err(error) = updated {
            tracing::warn!(%error, "a session's hold was not cleared; it lapses with its cell");
        }
    }

    /// Applies `change` to the stored session by compare-and-swap (again
    /// while another request changes it); `change` answering `None` leaves
    /// it. Returns the session written, if any.
    async fn update_session(
        &self,
        owner: [u8; 8],
        id: &[u8; 16],
        change: impl Fn(&SessionRecord) -> Option<SessionRecord>,
    ) -> Result<Option<SessionRecord>, ServiceError> {
        let key = session_key(owner, id);
        loop {
            let Some(bytes) = self.store.get(&key).await.map_err(ServiceError::store)? else {
                return Ok(None);
            };
            let Some(changed) = SessionRecord::decode(&bytes).and_then(|s| change(&s)) else {
                return Ok(None);
            };
            let swapped = self
                .store
                .compare_and_swap(&key, Some(&bytes), Some(&changed.encode()))
                .await
                .map_err(ServiceError::store)?;
            if swapped.is_ok() {
                return Ok(Some(changed));
            }
        }
    }

    /// The earlier cells of the session `held` (all its listed cells), as
    /// a cold start or resume runs them again.
    async fn earlier_cells(
        &self,
        owner: [u8; 8],
        id: &[u8; 16],
        held: &SessionRecord,
    ) -> Result<Vec<EndedCell>, ServiceError> {
        let mut cells = Vec::with_capacity(held.cells.len());
        for (at, listed) in held.cells.iter().enumerate() {
            let index = at as u32 + 1;
            let bytes = self
                .store
                .get(&cell_key(owner, id, index, &listed.execution))
                .await
                .map_err(ServiceError::store)?
                .ok_or_else(|| ServiceError::Corrupt(format!("session cell {index} is missing")))?;
            let stored = decode::<StoredCell>(&bytes)
                .filter(|cell| cell.execution == listed.execution)
                .ok_or_else(|| ServiceError::Corrupt(format!("session cell {index} is corrupt")))?;
            let record =
                ExecutionRecord::from_parts(&stored.start, &stored.progress, &stored.rounds)
                    .map_err(|e| ServiceError::Corrupt(format!("session cell {index}: {e}")))?;
            cells.push(EndedCell {
                record,
                ended: stored.ended,
            });
        }
        Ok(cells)
    }

    /// The earlier cells of the session of `record`, a cell (none for any
    /// other execution).
    pub(super) async fn earlier_cells_of(
        &self,
        record: &ExecutionRecord,
    ) -> Result<Vec<EndedCell>, ServiceError> {
        let Some(cell) = &record.cell else {
            return Ok(Vec::new());
        };
        let found = self.found_session(record.owner, &cell.session).await?;
        if found.session.holder != Some(record.id) {
            // The session went on without this cell (its hold lapsed).
            return Err(ServiceError::SessionBusy);
        }
        self.earlier_cells(record.owner, &cell.session, &found.session)
            .await
    }

    /// Resumes `record` (answered) through the engine: a cell that must go
    /// cold gets its session's earlier cells.
    pub(super) async fn resume_with_history(
        &self,
        record: &mut ExecutionRecord,
    ) -> Result<Result<(crate::engine::Step, ResumeKind), EngineError>, ServiceError> {
        match self.engine.resume_answered(record).await {
            Err(EngineError::HistoryNeeded) => {
                let earlier = self.earlier_cells_of(record).await?;
                Ok(self
                    .engine
                    .resume_answered_with(record, Some(&earlier))
                    .await)
            }
            other => Ok(other),
        }
    }

    /// The journal of an ended cell, to be written with its end (`None`
    /// for a record that is no cell, or a cell stopped from outside).
    pub(super) fn cell_journal(
        &self,
        record: &ExecutionRecord,
        owner: [u8; 8],
        failure: Option<&Failure>,
    ) -> Result<Option<CellJournal>, ServiceError> {
        let Some(cell) = &record.cell else {
            return Ok(None);
        };
        // A compaction's base is kept only when it completed: a statement
        // of it that raised would leave names out without naming them.
        let kept = match failure {
            None => true,
            Some(failure) => !cell.is_base() && failure.is_the_codes_own(),
        };
        if !kept {
            return Ok(None);
        }
        let mut whole = record.clone();
        whole.stored = Default::default();
        whole.pending = None;
        let parts = whole
            .new_parts()
            .map_err(|e| ServiceError::Corrupt(e.to_string()))?;
        let stored = StoredCell {
            execution: record.id,
            start: parts.start.unwrap_or_default(),
            rounds: parts.rounds.into_iter().map(|(_, bytes)| bytes).collect(),
            progress: parts.progress,
            ended: failure.cloned(),
            names: record.names.clone(),
            last_clock: last_clock(record),
            tools: record.tools.clone(),
            marker: cell.marker.clone(),
            used_ms: record.used_ms,
        };
        Ok(Some(CellJournal {
            key: cell_key(owner, &cell.session, cell.index, &record.id),
            bytes: encode(&stored),
        }))
    }

    /// After a cell's end was written (with its journal, `journal_bytes`,
    /// when it ended by itself): the session lists it and lets it go; a
    /// cell stopped from outside only lets it go.
    pub(super) async fn settle_cell(
        &self,
        record: &ExecutionRecord,
        owner: [u8; 8],
        journal: Option<&[u8]>,
    ) {
        let Some(cell) = &record.cell else {
            return;
        };
        let Some(stored) = journal.and_then(decode::<StoredCell>) else {
            self.engine.evict(&cell.session);
            self.let_go(owner, &cell.session, &record.id).await;
            return;
        };
        let bytes = journal.map_or(0, |j| j.len() as u64);
        let listed = self
            .update_session(owner, &cell.session, |session| {
                if session.holder != Some(record.id) {
                    return None;
                }
                if cell.is_base() {
                    return Some(session.folded_into(&stored, cell.number(), bytes));
                }
                let next = session.cells.len() as u32 + 1;
                (next == cell.index).then(|| {
                    let mut session = session.clone();
                    session.holder = None;
                    session.last_used = now_secs();
                    list_cell(&mut session, &stored, bytes);
                    session
                })
            })
            .await;
        match listed {
            Ok(Some(session)) => {
                self.count_session(&cell.session, owner, &session);
                if cell.is_base() {
                    self.delete_folded(owner, &cell.session, &session).await;
                }
            }
            // Another request found the hold dead between this end and
            // now (the end's flush) and listed the cell already.
            Ok(None) if self.lists_cell(owner, cell, &record.id).await => {}
            Ok(None) => {
                self.engine.evict(&cell.session);
                // Its journal was written with its end: nothing lists it.
                let key = cell_key(owner, &cell.session, cell.index, &record.id);
                if let Err(error) = self.store.delete(&key).await {
                    tracing::warn!(%error, "an unlisted cell's journal was not deleted");
                }
                tracing::warn!(
                    execution = %record.id_hex(),
                    "a cell ended after its session went on without it (deleted, or its hold lapsed); it is not listed"
                )
            }
            Err(error) => tracing::warn!(
                execution = %record.id_hex(), %error,
                "a cell's session was not updated; the next request to it lists the cell"
            ),
        }
    }

    /// Deletes the journals of the cells a compaction folded into
    /// `session`'s base (every one it does not list); a failure is logged
    /// (they go with the session).
    async fn delete_folded(&self, owner: [u8; 8], id: &[u8; 16], session: &SessionRecord) {
        let listed: Vec<Vec<u8>> = session
            .cells
            .iter()
            .enumerate()
            .map(|(at, cell)| cell_key(owner, id, at as u32 + 1, &cell.execution))
            .collect();
        let deleted = match self.journal_keys(owner, id).await {
            Ok(mut folded) => {
                folded.retain(|key| !listed.contains(key));
                self.store
                    .apply_batch(&[], &slices(&folded))
                    .await
                    .map_err(ServiceError::store)
            }
            Err(error) => Err(error),
        };
        if let Err(error) = deleted {
            tracing::warn!(%error, "a compacted session's folded cells were not deleted");
        }
    }

    /// The keys of every cell journal stored for the session `id`.
    async fn journal_keys(
        &self,
        owner: [u8; 8],
        id: &[u8; 16],
    ) -> Result<Vec<Vec<u8>>, ServiceError> {
        let mut keys = Vec::new();
        let mut scan = crate::store::scan_prefix(self.store.as_ref(), &cells_prefix(owner, id));
        while let Some(pair) = scan.next().await {
            keys.push(pair.map_err(ServiceError::store)?.0);
        }
        Ok(keys)
    }

    /// Whether the session of `cell` lists `execution` at `cell`'s place.
    async fn lists_cell(&self, owner: [u8; 8], cell: &SessionCell, execution: &[u8; 16]) -> bool {
        let at = cell.index.saturating_sub(1) as usize;
        self.store
            .get(&session_key(owner, &cell.session))
            .await
            .ok()
            .flatten()
            .and_then(|bytes| SessionRecord::decode(&bytes))
            .is_some_and(|session| {
                session
                    .cells
                    .get(at)
                    .is_some_and(|listed| listed.execution == *execution)
            })
    }

    /// Whether a child parked under `key` for the session `id` still holds
    /// its namespace as it stands (the session is there, and no cell was
    /// listed, nor the session compacted, since, here or on another node).
    pub(super) async fn session_child_is_current(
        &self,
        owner: [u8; 8],
        id: &[u8; 16],
        key: usize,
    ) -> Result<bool, ServiceError> {
        match self.found_session(owner, id).await {
            Ok(found) => Ok(found.session.park_key() == key),
            Err(ServiceError::NotFound | ServiceError::Corrupt(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Counts what a session stores for its owner's cap.
    fn count_session(&self, id: &[u8; 16], owner: [u8; 8], session: &SessionRecord) {
        self.usage.set(
            Item::Session(*id),
            owner,
            session.bytes(),
            session.expires_at(),
        );
    }

    /// Counts every stored session into `usage` (when the usage is counted
    /// anew).
    pub(super) async fn count_sessions(
        &self,
        usage: &crate::quota::KeyUsage,
    ) -> Result<(), ServiceError> {
        let mut scan = crate::store::scan_prefix(self.store.as_ref(), SESSIONS);
        while let Some(pair) = scan.next().await {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            if let (Some((owner, id)), Some(session)) =
                (split_session_key(&key), SessionRecord::decode(&bytes))
            {
                usage.set(
                    Item::Session(id),
                    owner,
                    session.bytes(),
                    session.expires_at(),
                );
            }
        }
        Ok(())
    }

    /// Deletes the sessions expired at `now` that no cell holds, with
    /// their journals; returns how many.
    pub(super) async fn sweep_sessions(&self, now: u64) -> Result<usize, ServiceError> {
        let mut gone = Vec::new();
        let mut scan = crate::store::scan_prefix(self.store.as_ref(), SESSIONS);
        while let Some(pair) = scan.next().await {
            let (key, bytes) = pair.map_err(ServiceError::store)?;
            let Some((owner, id)) = split_session_key(&key) else {
                continue;
            };
            let Some(session) = SessionRecord::decode(&bytes) else {
                continue;
            };
            if session.expires_at() <= now && self.live_holder(&session).await?.is_none() {
                gone.push((owner, id));
            }
        }
        for (owner, id) in &gone {
            self.delete_session_keys(*owner, id).await?;
        }
        Ok(gone.len())
    }
}

/// The owner and id a session key names.
fn split_session_key(key: &[u8]) -> Option<([u8; 8], [u8; 16])> {
    let rest = key.strip_prefix(SESSIONS)?;
    let owner = <[u8; 8]>::try_from(rest.get(..8)?).ok()?;
    let id = <[u8; 16]>::try_from(rest.get(8..)?).ok()?;
    Some((owner, id))
}

/// Lists an ended cell in its session: its names become the session's,
/// its tools the session's, its last clock the session's.
fn list_cell(session: &mut SessionRecord, cell: &StoredCell, bytes: u64) {
    let first = session.clocks.map_or(cell.last_clock, |(first, _)| first);
    session.clocks = Some((first, cell.last_clock));
    session.names.clone_from(&cell.names);
    session.tools.clone_from(&cell.tools);
    session.cells.push(CellRef {
        execution: cell.execution,
        marker: cell.marker.clone(),
        bytes,
        used_ms: cell.used_ms,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: Some(description.into()),
            parameters: None,
        }
    }

    #[test]
    fn session_ids_round_trip_and_anything_else_is_not_found() {
        let id = [7u8; 16];
        let text = session_id_text(&id);
        assert!(text.starts_with("ps_") && text.len() == 35);
        assert_eq!(parse_session_id(&text).ok(), Some(id));
        for bad in [
            "",
            "ps_",
            "ps_00",
            &text[3..],
            "rt_0707",
            &format!("{text}00"),
        ] {
            assert!(
                matches!(parse_session_id(bad), Err(ServiceError::NotFound)),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_cells_tools_replace_those_of_their_name_and_add_the_others() {
        let known = vec![tool("a", "old a"), tool("b", "b")];
        let merged = merge_tools(&known, vec![tool("a", "new a"), tool("c", "c")]);
        let described: Vec<(&str, &str)> = merged
            .iter()
            .map(|t| (t.name.as_str(), t.description.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(described, [("b", "b"), ("a", "new a"), ("c", "c")]);
    }

    #[test]
    fn stored_values_round_trip_and_other_bytes_do_not_decode() {
        let session = SessionRecord {
            created: 1,
            ttl_secs: 60,
            last_used: 5,
            files_session: "s".into(),
            cells: vec![CellRef {
                execution: [1; 16],
                marker: "_Bc1".into(),
                bytes: 10,
                used_ms: 5,
            }],
            tools: vec![tool("a", "a")],
            names: vec![NameInfo::cut("x".into(), "int".into(), "1".into())],
            holder: Some([2; 16]),
            clocks: None,
            compaction: None,
            pending_lost: None,
        };
        let bytes = session.encode();
        assert_eq!(SessionRecord::decode(&bytes), Some(session.clone()));
        assert_eq!(session.expires_at(), 65);
        assert_eq!((session.bytes(), session.used_ms()), (10, 5));
        assert_eq!(SessionRecord::decode(&bytes[1..]), None);
        assert_eq!(SessionRecord::decode(&[]), None);
        // A session stored by a build before compaction reads as one never
        // compacted.
        let v1 = SessionRecordV1 {
            created: 1,
            ttl_secs: 60,
            last_used: 5,
            files_session: "s".into(),
            cells: session.cells.clone(),
            tools: session.tools.clone(),
            names: session.names.clone(),
            holder: session.holder,
            clocks: None,
        };
        assert_eq!(SessionRecord::decode(&encode(&v1)), Some(session.clone()));
        let compacted = SessionRecord {
            compaction: Some(Compaction {
                folded: 64,
                lost: vec!["gen".into()],
            }),
            ..session.clone()
        };
        assert_eq!(
            (compacted.offset(), compacted.cell_count()),
            (63, 64),
            "the base stands for 64 cells"
        );
        assert_eq!((session.offset(), session.cell_count()), (0, 1));
        let key = session_key([3; 8], &[4; 16]);
        assert_eq!(split_session_key(&key), Some(([3; 8], [4; 16])));
        let journal = cell_key([3; 8], &[4; 16], 2, &[5; 16]);
        assert!(journal.starts_with(&cells_prefix([3; 8], &[4; 16])));
        assert_ne!(journal, cell_key([3; 8], &[4; 16], 2, &[6; 16]));
    }
}
