//! Session files: what `POST /upload` stores, `GET /files/{session}` lists,
//! `GET /download/{session}/{id}` returns, what an execution finds under
//! `/mnt/data`, and what it leaves there.
//!
//! Keys in the store: `f/<owner 8 bytes><session length u8><session><file id
//! 12 bytes>` → a bincode [`StoredFile`]. Files are immutable: a changed file
//! is stored under a new id. The sweeper deletes files older than the
//! configured lifetime.
//!
//! Invariants:
//! - Every key starts with the owner's API key identity: one key can never
//!   list, read or use another key's files, and an unknown id and another
//!   key's id answer alike.
//! - Names follow [`check_name`], the same rules the Python runtime applies
//!   inside the child, so no name can leave `/mnt/data`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::journal::WorkspaceFile;
use crate::quota::{Item, KeyUsage};
use crate::store::{Store, StoreError};

/// The mount point code sees.
pub const MOUNT: &str = "/mnt/data";
/// The store's prefix of session files (the layout is in the module's doc).
const FILES: &[u8] = b"f/";
/// Longest name of one path component, bytes.
pub const MAX_COMPONENT: usize = 255;
/// Longest relative path, bytes.
pub const MAX_PATH: usize = 1024;

/// A stored file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    /// Path under `/mnt/data`.
    pub name: String,
    /// Unix seconds.
    pub created: u64,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// What a listing shows of a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// File id (hex).
    pub id: String,
    /// Path under `/mnt/data`.
    pub name: String,
    /// Session.
    pub session_id: String,
    /// Bytes.
    pub size: u64,
    /// Unix seconds.
    pub created: u64,
}

/// Why a file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// A bad name or session id.
    #[error("{0}")]
    Invalid(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored file does not decode.
    #[error("stored file is corrupt: {0}")]
    Corrupt(String),
}

/// Why a name under `/mnt/data` is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameProblem {
    /// Empty, or longer than [`MAX_PATH`] bytes.
    Length,
    /// A path part longer than [`MAX_COMPONENT`] bytes.
    PartTooLong,
    /// A control character (tab, newline...) or a backslash.
    Control,
    /// A bidirectional-text control character (they make a name display as
    /// another).
    Bidi,
    /// An empty part, or a part that is only dots once normalised (`..`,
    /// `．．`).
    Dots,
}

impl NameProblem {
    /// Whether the name is refused for its length.
    pub fn is_too_long(self) -> bool {
        matches!(self, NameProblem::Length | NameProblem::PartTooLong)
    }

    fn explain(self) -> &'static str {
        match self {
            NameProblem::Length => "it must have 1 to 1024 bytes",
            NameProblem::PartTooLong => "a path part is longer than 255 bytes",
            NameProblem::Control => "control characters and backslashes are not allowed",
            NameProblem::Bidi => "bidirectional text control characters are not allowed",
            NameProblem::Dots => {
                "empty path parts and parts made only of dots (`.`, `..`, `．．`) are not allowed"
            }
        }
    }
}

/// Bidirectional-text controls: embeddings, overrides, isolates and marks.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The first rule a name under `/mnt/data` breaks, if any. This is the one
/// implementation: the child's runtime asks it through `_baton.name_error`.
pub fn name_problem(name: &str) -> Option<NameProblem> {
    use unicode_normalization::UnicodeNormalization;
    if name.is_empty() || name.len() > MAX_PATH {
        return Some(NameProblem::Length);
    }
    if name.chars().any(|c| c.is_control() || c == '\\') {
        return Some(NameProblem::Control);
    }
    if name.chars().any(is_bidi_control) {
        return Some(NameProblem::Bidi);
    }
    for part in name.split('/') {
        if part.len() > MAX_COMPONENT {
            return Some(NameProblem::PartTooLong);
        }
        if part.is_empty() || part.nfkc().all(|c| c == '.') {
            return Some(NameProblem::Dots);
        }
    }
    None
}

/// Checks a path under `/mnt/data` (relative, `/`-separated); returns it.
pub fn check_name(name: &str) -> Result<&str, WorkspaceError> {
    match name_problem(name) {
        None => Ok(name),
        Some(problem) => Err(WorkspaceError::Invalid(format!(
            "invalid file name {name:?}: {}",
            problem.explain()
        ))),
    }
}

/// Checks a session id: 1 to 128 of `[A-Za-z0-9_-]`.
pub fn check_session(session: &str) -> Result<&str, WorkspaceError> {
    let ok = (1..=128).contains(&session.len())
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(session)
    } else {
        Err(WorkspaceError::Invalid(format!(
            "invalid session id {session:?}: 1 to 128 of A-Z a-z 0-9 _ -"
        )))
    }
}

/// The session file store.
#[derive(Clone)]
pub struct Files {
    store: Arc<dyn Store>,
    usage: Arc<KeyUsage>,
    ttl_secs: u64,
}

fn prefix(owner: [u8; 8], session: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(11 + session.len() + 12);
    key.extend_from_slice(FILES);
    key.extend_from_slice(&owner);
    key.push(session.len() as u8);
    key.extend_from_slice(session.as_bytes());
    key
}

fn decode(bytes: &[u8]) -> Result<StoredFile, WorkspaceError> {
    bincode::deserialize(bytes).map_err(|e| WorkspaceError::Corrupt(e.to_string()))
}

/// The start of a [`StoredFile`]'s encoding: all but the contents, whose
/// length bincode writes before them. Listings and sweeps read only this.
#[derive(Deserialize)]
struct StoredFileHead {
    name: String,
    created: u64,
    size: u64,
}

/// Bytes that hold a [`StoredFileHead`]: two lengths, the longest name, the
/// creation time.
const HEAD_LEN: usize = 8 + MAX_PATH + 8 + 8;

fn decode_head(head: &[u8]) -> Result<StoredFileHead, WorkspaceError> {
    bincode::deserialize(head).map_err(|e| WorkspaceError::Corrupt(e.to_string()))
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Files {
    /// Files kept in `store` for `ttl_secs`, counted in `usage`.
    pub fn new(store: Arc<dyn Store>, usage: Arc<KeyUsage>, ttl_secs: u64) -> Self {
        Self {
            store,
            usage,
            ttl_secs,
        }
    }

    /// Counts every stored file for its key into `usage` (a recount).
    pub async fn count_usage(&self, usage: &KeyUsage) -> Result<(), WorkspaceError> {
        let mut scan = crate::store::scan_heads(self.store.as_ref(), FILES, HEAD_LEN);
        while let Some(head) = scan.next().await {
            let head = head?;
            let owner = head
                .key
                .get(2..10)
                .and_then(|o| <[u8; 8]>::try_from(o).ok());
            if let (Some(owner), Ok(file)) = (owner, decode_head(&head.head)) {
                let expires_at = file.created.saturating_add(self.ttl_secs);
                usage.set(Item::File(head.key), owner, head.len, expires_at);
            }
        }
        Ok(())
    }

    /// Stores a file in a session; returns what a listing shows of it.
    pub async fn put(
        &self,
        owner: [u8; 8],
        session: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<FileMeta, WorkspaceError> {
        check_session(session)?;
        check_name(name)?;
        let id: [u8; 12] = rand::random();
        let stored = StoredFile {
            name: name.to_owned(),
            created: now_secs(),
            bytes,
        };
        let mut key = prefix(owner, session);
        key.extend_from_slice(&id);
        let value =
            bincode::serialize(&stored).map_err(|e| WorkspaceError::Corrupt(e.to_string()))?;
        self.store.put(&key, &value).await?;
        let expires_at = stored.created.saturating_add(self.ttl_secs);
        self.usage
            .set(Item::File(key), owner, value.len() as u64, expires_at);
        Ok(meta(&id, session, &stored))
    }

    /// The files of a session, oldest first.
    pub async fn list(
        &self,
        owner: [u8; 8],
        session: &str,
    ) -> Result<Vec<FileMeta>, WorkspaceError> {
        check_session(session)?;
        let prefix = prefix(owner, session);
        let mut files = Vec::new();
        let mut scan = crate::store::scan_heads(self.store.as_ref(), &prefix, HEAD_LEN);
        while let Some(head) = scan.next().await {
            let head = head?;
            let Some(id) = head.key.get(prefix.len()..).filter(|id| id.len() == 12) else {
                continue;
            };
            let stored = decode_head(&head.head)?;
            files.push(FileMeta {
                id: hex::encode(id),
                name: stored.name,
                session_id: session.to_owned(),
                size: stored.size,
                created: stored.created,
            });
        }
        files.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name)));
        Ok(files)
    }

    /// One file, or `None` when this owner has no such file in the session.
    pub async fn get(
        &self,
        owner: [u8; 8],
        session: &str,
        id: &str,
    ) -> Result<Option<StoredFile>, WorkspaceError> {
        if check_session(session).is_err() {
            return Ok(None);
        }
        let Some(id) = hex::decode(id).ok().filter(|id| id.len() == 12) else {
            return Ok(None);
        };
        let mut key = prefix(owner, session);
        key.extend_from_slice(&id);
        self.store
            .get(&key)
            .await?
            .map(|bytes| decode(&bytes))
            .transpose()
    }

    /// Deletes the files created before `cutoff` (unix seconds); returns how
    /// many. A file that does not decode is deleted too.
    pub async fn sweep(&self, cutoff: u64) -> Result<usize, WorkspaceError> {
        let mut swept = 0;
        let mut scan = crate::store::scan_heads(self.store.as_ref(), FILES, HEAD_LEN);
        while let Some(head) = scan.next().await {
            let head = head?;
            let expired = decode_head(&head.head).map_or(true, |f| f.created < cutoff);
            if expired {
                self.store.delete(&head.key).await?;
                self.usage.remove(&Item::File(head.key));
                swept += 1;
            }
        }
        self.store.flush().await?;
        Ok(swept)
    }

    /// Stores what an execution produced, in its session.
    pub async fn keep_produced(
        &self,
        owner: [u8; 8],
        session: &str,
        produced: Vec<WorkspaceFile>,
    ) -> Result<Vec<FileMeta>, WorkspaceError> {
        let mut kept = Vec::with_capacity(produced.len());
        for file in produced {
            kept.push(self.put(owner, session, &file.name, file.bytes).await?);
        }
        Ok(kept)
    }
}

fn meta(id: &[u8], session: &str, stored: &StoredFile) -> FileMeta {
    FileMeta {
        id: hex::encode(id),
        name: stored.name.clone(),
        session_id: session.to_owned(),
        size: stored.bytes.len() as u64,
        created: stored.created,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SledStore;

    #[test]
    fn names_cannot_leave_the_workspace() {
        for good in ["a.csv", "dir/b.json", "ü n i c o d e.txt", &"x".repeat(255)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long_part = "y".repeat(256);
        let long_path = ["z"; 600].join("/");
        for bad in [
            "",
            "../etc/passwd",
            "a/../../b",
            "/abs",
            "a//b",
            ".",
            "a/./b",
            "nul\0.txt",
            "back\\slash",
            &long_part,
            &long_path,
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_session("sess_1-A").is_ok());
        assert!(check_session("../x").is_err());
        assert!(check_session("").is_err());
    }

    #[tokio::test]
    async fn owners_see_only_their_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let files = Files::new(
            Arc::new(SledStore::open(dir.path()).unwrap()),
            Arc::new(KeyUsage::new(u64::MAX)),
            86_400,
        );
        let a = files
            .put([1; 8], "s1", "data.csv", b"x,y\n".to_vec())
            .await
            .unwrap();
        files
            .put([1; 8], "s1", "more.txt", b"more".to_vec())
            .await
            .unwrap();
        let names: Vec<_> = files
            .list([1; 8], "s1")
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names.len(), 2);
        assert!(names.contains(&"data.csv".to_owned()));
        assert!(files.list([2; 8], "s1").await.unwrap().is_empty());
        assert!(
            files.list([1; 8], "s").await.unwrap().is_empty(),
            "a session is not a prefix of another"
        );
        assert_eq!(
            files
                .get([1; 8], "s1", &a.id)
                .await
                .unwrap()
                .map(|f| f.bytes),
            Some(b"x,y\n".to_vec())
        );
        assert_eq!(files.get([2; 8], "s1", &a.id).await.unwrap(), None);
        assert_eq!(files.get([1; 8], "s1", "zz").await.unwrap(), None);
        let now = now_secs();
        assert_eq!(files.sweep(now.saturating_sub(60)).await.unwrap(), 0);
        assert_eq!(files.sweep(now + 1).await.unwrap(), 2);
        assert!(files.list([1; 8], "s1").await.unwrap().is_empty());
    }
}
