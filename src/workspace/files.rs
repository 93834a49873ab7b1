//! The session file store: what `POST /upload` stores, `GET /files/{session}`
//! lists, `GET /download/{session}/{id}` returns, what an execution is given
//! under `/mnt/data`, and what it leaves there. Contents move a chunk at a
//! time: an upload is stored as its parts arrive, a download is sent as it
//! is read.
//!
//! Keys in the store:
//! - `f/<owner 8 bytes><session length u8><session><file id 12 bytes>` → the
//!   file's head, the bincode of [`FileHead`] (name, creation time, size).
//!   A file of at most [`INLINE_MAX`] bytes follows its head in the same
//!   value; that is also how every file was stored before chunks, so such
//!   values read as before.
//! - `d/<owner 8 bytes><file id 12 bytes><chunk index u32 BE>` → [`CHUNK_LEN`]
//!   bytes of a larger file (the last chunk shorter), whose value in `f/`
//!   is then its head alone.
//! - A file id is the unix second its upload began (u32 BE) and 8 random
//!   bytes. Files are immutable: a changed file is stored under a new id.
//!
//! Invariants:
//! - A file's head is written after all its chunks, and the heads of one
//!   upload together, in one call: a file lists and reads exactly when its
//!   head is stored, and then all of it is.
//! - Every key starts with the owner's API key identity (a chunk's key is
//!   found only through its head's): one key can never list, read or use
//!   another key's files, and an unknown id and another key's id answer
//!   alike.
//! - The server holds a file whole only when it must: a file of at most
//!   [`INLINE_MAX`] bytes until its upload ends, and the files an execution
//!   is given or leaves (bounded by the workspace's size). Uploads and
//!   downloads hold a chunk at a time.
//! - Chunks no head names (an upload refused, cut short or interrupted by a
//!   crash) are deleted when the server sees the failure, and otherwise by
//!   the sweep once their id's second is older than the files' lifetime and
//!   [`ORPHAN_GRACE_SECS`] more: an upload never lasts that long.

use std::sync::Arc;

use futures_util::Stream;
use serde::{Deserialize, Serialize};

use super::{WorkspaceError, check_name, check_session};
use crate::journal::WorkspaceFile;
use crate::quota::{Item, KeyUsage};
use crate::store::Store;

/// The store's prefix of file heads (the layout is in the module's doc).
const FILES: &[u8] = b"f/";
/// The store's prefix of file chunks.
const CHUNKS: &[u8] = b"d/";
/// Bytes in one chunk of a file's contents.
pub const CHUNK_LEN: usize = 1 << 20;
/// The largest file kept in one value with its head.
pub const INLINE_MAX: usize = 64 << 10;
/// Seconds a chunk no head names is kept beyond the files' lifetime.
pub const ORPHAN_GRACE_SECS: u64 = 86_400;

/// What a listing shows of a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// File id: 21 characters (24 hex digits for files of earlier builds).
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

/// A file's head: all but its contents. Its encoding is the start of every
/// file's value; the contents' length is its last field, as bincode writes
/// a `Vec<u8>`'s length before its bytes. A read-only file's head is the
/// second format: [`HEAD_V2`] and then the bincode of [`FileHeadV2`] (a
/// writable file's is still the first, so every build reads it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct FileHead {
    name: String,
    created: u64,
    size: u64,
    /// Uploaded `read_only`: code sees it but cannot change it.
    #[serde(skip)]
    read_only: bool,
}

/// The first bytes of a head of the second format: a name length no name
/// can have, where the first format starts with its name's length.
const HEAD_V2: [u8; 8] = (u64::MAX - 1).to_le_bytes();

/// The second format of a head (after [`HEAD_V2`]).
#[derive(Serialize, Deserialize)]
struct FileHeadV2 {
    name: String,
    created: u64,
    size: u64,
    read_only: bool,
}

impl FileHead {
    /// Bytes of its encoding: three `u64`s and the name (and, in the
    /// second format, the marker and the flag).
    fn encoded_len(&self) -> u64 {
        let first = 24 + self.name.len() as u64;
        if self.read_only { first + 9 } else { first }
    }

    /// Its encoding, in the first format unless it is read-only.
    fn encode(&self) -> Result<Vec<u8>, WorkspaceError> {
        let encoded = if self.read_only {
            let mut out = HEAD_V2.to_vec();
            bincode::serialize_into(
                &mut out,
                &FileHeadV2 {
                    name: self.name.clone(),
                    created: self.created,
                    size: self.size,
                    read_only: true,
                },
            )
            .map(|()| out)
        } else {
            bincode::serialize(self)
        };
        encoded.map_err(|e| WorkspaceError::Corrupt(e.to_string()))
    }

    /// What the file takes in the store, for the key's quota.
    fn stored_bytes(&self) -> u64 {
        self.encoded_len() + self.size
    }

    /// How many chunks a chunked file of this size has.
    fn chunk_count(&self) -> u32 {
        u32::try_from(self.size.div_ceil(CHUNK_LEN as u64)).unwrap_or(u32::MAX)
    }

    /// Where the contents of a file whose value has `value_len` bytes are.
    fn layout(&self, value_len: u64) -> Result<Layout, WorkspaceError> {
        if value_len == self.encoded_len() + self.size {
            Ok(Layout::Inline)
        } else if value_len == self.encoded_len() {
            Ok(Layout::Chunks(self.chunk_count()))
        } else {
            Err(WorkspaceError::Corrupt(format!(
                "the value of {:?} has {value_len} bytes for a file of {}",
                self.name, self.size
            )))
        }
    }
}

/// Where a file's contents are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// After its head, in the same value.
    Inline,
    /// In this many chunks.
    Chunks(u32),
}

/// Bytes of a head scan that hold a [`FileHead`]: two lengths, the longest
/// name, the creation time.
const HEAD_LEN: usize = 8 + 8 + super::MAX_PATH + 8 + 8 + 1;

fn decode_head(bytes: &[u8]) -> Result<FileHead, WorkspaceError> {
    let corrupt = |e: bincode::Error| WorkspaceError::Corrupt(e.to_string());
    match bytes.strip_prefix(&HEAD_V2[..]) {
        Some(rest) => {
            let head: FileHeadV2 = bincode::deserialize(rest).map_err(corrupt)?;
            Ok(FileHead {
                name: head.name,
                created: head.created,
                size: head.size,
                read_only: head.read_only,
            })
        }
        None => bincode::deserialize(bytes).map_err(corrupt),
    }
}

fn session_prefix(owner: [u8; 8], session: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(11 + session.len() + 12);
    key.extend_from_slice(FILES);
    key.extend_from_slice(&owner);
    key.push(session.len() as u8);
    key.extend_from_slice(session.as_bytes());
    key
}

fn file_key(owner: [u8; 8], session: &str, id: &[u8; 12]) -> Vec<u8> {
    let mut key = session_prefix(owner, session);
    key.extend_from_slice(id);
    key
}

/// Whose file, and which: what names its chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    owner: [u8; 8],
    id: [u8; 12],
}

impl FileId {
    /// The key of chunk `index`.
    fn chunk_key(self, index: u32) -> Vec<u8> {
        let mut key = Vec::with_capacity(CHUNKS.len() + 8 + 12 + 4);
        key.extend_from_slice(CHUNKS);
        key.extend_from_slice(&self.owner);
        key.extend_from_slice(&self.id);
        key.extend_from_slice(&index.to_be_bytes());
        key
    }

    /// Deletes chunks `0..count`, as far as the store allows (what it
    /// refuses the sweep deletes later).
    async fn delete_chunks(self, store: &dyn Store, count: u32) {
        for index in 0..count {
            if let Err(error) = store.delete(&self.chunk_key(index)).await {
                tracing::warn!(%error, "a chunk of an abandoned file was not deleted; the sweep will");
                return;
            }
        }
    }
}

/// The file a head's key names.
fn head_key_file(key: &[u8]) -> Option<FileId> {
    let owner = <[u8; 8]>::try_from(key.get(2..10)?).ok()?;
    let id = <[u8; 12]>::try_from(key.get(key.len().checked_sub(12)?..)?).ok()?;
    Some(FileId { owner, id })
}

/// The second a chunk's upload began, from its key.
fn chunk_born(key: &[u8]) -> Option<u64> {
    let at = CHUNKS.len() + 8;
    let secs = <[u8; 4]>::try_from(key.get(at..at + 4)?).ok()?;
    Some(u64::from(u32::from_be_bytes(secs)))
}

fn new_id(now: u64) -> [u8; 12] {
    let mut id = [0u8; 12];
    id[..4].copy_from_slice(&u32::try_from(now).unwrap_or(u32::MAX).to_be_bytes());
    id[4..].copy_from_slice(&rand::random::<[u8; 8]>());
    id
}

/// Characters of a file id's text: LibreChat's 21-character nanoid shape.
pub const ID_LEN: usize = 21;

/// The check characters of an id's text: 5 characters of its digest, so
/// that one id has one text.
fn id_check(id: &[u8; 12]) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest([&b"baton/file-id"[..], id].concat());
    let mut check = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..4]);
    check.truncate(ID_LEN - 16);
    check
}

/// An id's text: its 12 bytes in base64url (16 characters) and 5 check
/// characters, 21 of `[A-Za-z0-9_-]` as LibreChat requires of ids.
pub fn format_id(id: &[u8; 12]) -> String {
    use base64::Engine;
    let mut text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id);
    text.push_str(&id_check(id));
    text
}

/// An id from its text: the 21-character form, or the 24 hex digits
/// earlier builds gave.
fn parse_id(text: &str) -> Option<[u8; 12]> {
    use base64::Engine;
    if text.len() == ID_LEN {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text.get(..16)?)
            .ok()?;
        let id = <[u8; 12]>::try_from(bytes).ok()?;
        return (id_check(&id) == text[16..]).then_some(id);
    }
    hex::decode(text)
        .ok()
        .and_then(|id| <[u8; 12]>::try_from(id).ok())
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The session file store.
#[derive(Clone)]
pub struct Files {
    store: Arc<dyn Store>,
    usage: Arc<KeyUsage>,
    ttl_secs: u64,
}

/// A file being written: its chunks go to the store as they fill
/// ([`Files::writer`]).
pub struct FileWriter {
    store: Arc<dyn Store>,
    file: FileId,
    head: FileHead,
    pending: Vec<u8>,
    chunks: u32,
}

/// A file whose contents are stored (or held, when small) and whose head is
/// not yet: [`Files::keep`] makes it a file, [`Files::discard`] deletes it.
pub struct WrittenFile {
    file: FileId,
    head: FileHead,
    inline: Vec<u8>,
    chunks: u32,
}

/// A stored file, opened for reading ([`Files::open`]).
pub struct OpenFile {
    store: Arc<dyn Store>,
    file: FileId,
    /// Path under `/mnt/data`.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// When it was stored, unix seconds.
    pub created: u64,
    /// Uploaded read-only.
    pub read_only: bool,
    inline: Vec<u8>,
    layout: Layout,
}

impl FileWriter {
    /// Appends `bytes` to the file.
    pub async fn write(&mut self, mut bytes: &[u8]) -> Result<(), WorkspaceError> {
        while !bytes.is_empty() {
            if self.pending.len() == CHUNK_LEN {
                self.store_pending().await?;
            }
            let take = (CHUNK_LEN - self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..take]);
            self.head.size += take as u64;
            bytes = &bytes[take..];
        }
        Ok(())
    }

    async fn store_pending(&mut self) -> Result<(), WorkspaceError> {
        let key = self.file.chunk_key(self.chunks);
        self.store.put(&key, &self.pending).await?;
        self.chunks += 1;
        self.pending.clear();
        Ok(())
    }

    /// The contents are all written: stores the last chunk, unless the
    /// whole file is small enough to go with its head. On a failure the
    /// chunks written are deleted.
    pub async fn close(mut self) -> Result<WrittenFile, WorkspaceError> {
        let chunked = self.chunks > 0 || self.pending.len() > INLINE_MAX;
        if chunked
            && !self.pending.is_empty()
            && let Err(error) = self.store_pending().await
        {
            self.discard().await;
            return Err(error);
        }
        Ok(WrittenFile {
            file: self.file,
            head: self.head,
            inline: if chunked { Vec::new() } else { self.pending },
            chunks: self.chunks,
        })
    }

    /// Deletes the chunks written (the file is abandoned).
    pub async fn discard(self) {
        // A put that failed may still have been applied: its index too.
        self.file
            .delete_chunks(self.store.as_ref(), self.chunks + 1)
            .await;
    }
}

impl OpenFile {
    /// The whole contents.
    pub async fn read_all(self) -> Result<Vec<u8>, WorkspaceError> {
        let Layout::Chunks(count) = self.layout else {
            return Ok(self.inline);
        };
        let mut bytes = Vec::with_capacity(usize::try_from(self.size).unwrap_or(0));
        for index in 0..count {
            bytes.extend_from_slice(&self.chunk(index).await?);
        }
        Ok(bytes)
    }

    /// The contents a chunk at a time, each read when the last was taken.
    pub fn into_stream(self) -> impl Stream<Item = Result<Vec<u8>, WorkspaceError>> + Send {
        let count = match self.layout {
            Layout::Inline => 1,
            Layout::Chunks(count) => count,
        };
        futures_util::stream::unfold((self, 0u32), move |(mut file, index)| async move {
            if index >= count {
                return None;
            }
            let next = match file.layout {
                Layout::Inline => Ok(std::mem::take(&mut file.inline)),
                Layout::Chunks(_) => file.chunk(index).await,
            };
            Some((next, (file, index + 1)))
        })
    }

    /// Chunk `index`, checked against the length the head gives it.
    async fn chunk(&self, index: u32) -> Result<Vec<u8>, WorkspaceError> {
        let start = u64::from(index) * CHUNK_LEN as u64;
        let expected = self.size.saturating_sub(start).min(CHUNK_LEN as u64);
        let bytes = self
            .store
            .get(&self.file.chunk_key(index))
            .await?
            .ok_or_else(|| {
                WorkspaceError::Corrupt(format!("chunk {index} of {:?} is missing", self.name))
            })?;
        if bytes.len() as u64 != expected {
            return Err(WorkspaceError::Corrupt(format!(
                "chunk {index} of {:?} has {} bytes, not {expected}",
                self.name,
                bytes.len()
            )));
        }
        Ok(bytes)
    }
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
            if let (Some(id), Ok(file)) = (head_key_file(&head.key), decode_head(&head.head)) {
                let expires_at = file.created.saturating_add(self.ttl_secs);
                usage.set(
                    Item::File(head.key),
                    id.owner,
                    file.stored_bytes(),
                    expires_at,
                );
            }
        }
        Ok(())
    }

    /// A new file named `name` (checked) for `owner`; `read_only`: code
    /// given it may read it and nothing else.
    pub fn writer(
        &self,
        owner: [u8; 8],
        name: &str,
        read_only: bool,
    ) -> Result<FileWriter, WorkspaceError> {
        check_name(name)?;
        let created = now_secs();
        Ok(FileWriter {
            store: self.store.clone(),
            file: FileId {
                owner,
                id: new_id(created),
            },
            head: FileHead {
                name: name.to_owned(),
                created,
                size: 0,
                read_only,
            },
            pending: Vec::new(),
            chunks: 0,
        })
    }

    /// Makes written files files of `session`: their heads, in one call.
    /// On a failure they are deleted.
    pub async fn keep(
        &self,
        session: &str,
        written: Vec<WrittenFile>,
    ) -> Result<Vec<FileMeta>, WorkspaceError> {
        if let Err(error) = check_session(session) {
            self.discard(written).await;
            return Err(error);
        }
        let mut heads = Vec::with_capacity(written.len());
        for file in &written {
            let mut value = file.head.encode()?;
            value.extend_from_slice(&file.inline);
            heads.push((file_key(file.file.owner, session, &file.file.id), value));
        }
        let puts: Vec<(&[u8], &[u8])> = heads
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_slice()))
            .collect();
        if let Err(error) = self.store.put_all(&puts).await {
            self.discard(written).await;
            return Err(error.into());
        }
        let mut kept = Vec::with_capacity(written.len());
        for (file, (key, _)) in written.iter().zip(heads) {
            let expires_at = file.head.created.saturating_add(self.ttl_secs);
            self.usage.set(
                Item::File(key),
                file.file.owner,
                file.head.stored_bytes(),
                expires_at,
            );
            kept.push(meta(&file.file.id, session, &file.head));
        }
        Ok(kept)
    }

    /// Deletes written files that will not be kept.
    pub async fn discard(&self, written: Vec<WrittenFile>) {
        for written in written {
            written
                .file
                .delete_chunks(self.store.as_ref(), written.chunks)
                .await;
        }
    }

    /// Makes every file kept so far durable.
    pub async fn flush(&self) -> Result<(), WorkspaceError> {
        Ok(self.store.flush().await?)
    }

    /// Stores a file held whole in a session; returns what a listing shows
    /// of it (the tests' shorthand for [`Files::keep_produced`] of one).
    #[cfg(test)]
    async fn put(
        &self,
        owner: [u8; 8],
        session: &str,
        name: &str,
        bytes: &[u8],
    ) -> Result<FileMeta, WorkspaceError> {
        let mut kept = self
            .keep_produced(
                owner,
                session,
                vec![WorkspaceFile {
                    name: name.to_owned(),
                    bytes: bytes.to_vec(),
                }],
            )
            .await?;
        kept.pop()
            .ok_or_else(|| WorkspaceError::Corrupt("a stored file went missing".into()))
    }

    /// Stores what an execution produced, in its session.
    pub async fn keep_produced(
        &self,
        owner: [u8; 8],
        session: &str,
        produced: Vec<WorkspaceFile>,
    ) -> Result<Vec<FileMeta>, WorkspaceError> {
        let mut written = Vec::with_capacity(produced.len());
        for file in produced {
            match self.write_whole(owner, &file.name, &file.bytes).await {
                Ok(file) => written.push(file),
                Err(error) => {
                    self.discard(written).await;
                    return Err(error);
                }
            }
        }
        self.keep(session, written).await
    }

    async fn write_whole(
        &self,
        owner: [u8; 8],
        name: &str,
        bytes: &[u8],
    ) -> Result<WrittenFile, WorkspaceError> {
        let mut writer = self.writer(owner, name, false)?;
        match writer.write(bytes).await {
            Ok(()) => writer.close().await,
            Err(error) => {
                writer.discard().await;
                Err(error)
            }
        }
    }

    /// The files of a session, oldest first.
    pub async fn list(
        &self,
        owner: [u8; 8],
        session: &str,
    ) -> Result<Vec<FileMeta>, WorkspaceError> {
        check_session(session)?;
        let prefix = session_prefix(owner, session);
        let mut files = Vec::new();
        let mut scan = crate::store::scan_heads(self.store.as_ref(), &prefix, HEAD_LEN);
        while let Some(head) = scan.next().await {
            let head = head?;
            let Some(id) = head
                .key
                .get(prefix.len()..)
                .and_then(|id| <[u8; 12]>::try_from(id).ok())
            else {
                continue;
            };
            files.push(meta(&id, session, &decode_head(&head.head)?));
        }
        files.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name)));
        Ok(files)
    }

    /// One file, opened, or `None` when this owner has no such file in the
    /// session.
    pub async fn open(
        &self,
        owner: [u8; 8],
        session: &str,
        id: &str,
    ) -> Result<Option<OpenFile>, WorkspaceError> {
        let (Ok(session), Some(id)) = (check_session(session), parse_id(id)) else {
            return Ok(None);
        };
        let Some(mut value) = self.store.get(&file_key(owner, session, &id)).await? else {
            return Ok(None);
        };
        let head = decode_head(&value)?;
        let layout = head.layout(value.len() as u64)?;
        let inline = match layout {
            Layout::Inline => value.split_off(usize::try_from(head.encoded_len()).unwrap_or(0)),
            Layout::Chunks(_) => Vec::new(),
        };
        Ok(Some(OpenFile {
            store: self.store.clone(),
            file: FileId { owner, id },
            name: head.name,
            size: head.size,
            created: head.created,
            read_only: head.read_only,
            inline,
            layout,
        }))
    }

    /// Deletes one file of `owner` in `session`; whether there was one.
    pub async fn remove(
        &self,
        owner: [u8; 8],
        session: &str,
        id: &str,
    ) -> Result<bool, WorkspaceError> {
        let (Ok(session), Some(id)) = (check_session(session), parse_id(id)) else {
            return Ok(false);
        };
        let key = file_key(owner, session, &id);
        let Some(value) = self.store.get(&key).await? else {
            return Ok(false);
        };
        let chunks = match decode_head(&value).and_then(|h| h.layout(value.len() as u64)) {
            Ok(Layout::Chunks(count)) => count,
            _ => 0,
        };
        self.delete(&key, chunks).await?;
        self.store.flush().await?;
        Ok(true)
    }

    /// Deletes the files created before `cutoff` (unix seconds) and the
    /// chunks no head names that began long before it; returns how many
    /// files. A head that does not decode is deleted too.
    pub async fn sweep(&self, cutoff: u64) -> Result<usize, WorkspaceError> {
        let mut swept = 0;
        let mut scan = crate::store::scan_heads(self.store.as_ref(), FILES, HEAD_LEN);
        while let Some(head) = scan.next().await {
            let head = head?;
            let file = decode_head(&head.head).ok();
            if file.as_ref().is_some_and(|f| f.created >= cutoff) {
                continue;
            }
            let chunks =
                file.and_then(|f| f.layout(head.len).ok())
                    .map_or(0, |layout| match layout {
                        Layout::Inline => 0,
                        Layout::Chunks(count) => count,
                    });
            self.delete(&head.key, chunks).await?;
            swept += 1;
        }
        self.sweep_orphans(cutoff.saturating_sub(ORPHAN_GRACE_SECS))
            .await?;
        self.store.flush().await?;
        Ok(swept)
    }

    /// Deletes a file's head and its chunks, at once.
    async fn delete(&self, head_key: &[u8], chunks: u32) -> Result<(), WorkspaceError> {
        let chunk_keys: Vec<Vec<u8>> = head_key_file(head_key)
            .map(|file| (0..chunks).map(|i| file.chunk_key(i)).collect())
            .unwrap_or_default();
        let mut deletes: Vec<&[u8]> = vec![head_key];
        deletes.extend(chunk_keys.iter().map(Vec::as_slice));
        self.store.apply_batch(&[], &deletes).await?;
        self.usage.remove(&Item::File(head_key.to_vec()));
        Ok(())
    }

    /// Deletes the chunks whose upload began before `cutoff`: their file
    /// was deleted, or never kept.
    async fn sweep_orphans(&self, cutoff: u64) -> Result<(), WorkspaceError> {
        let mut scan = crate::store::scan_heads(self.store.as_ref(), CHUNKS, 0);
        while let Some(chunk) = scan.next().await {
            let chunk = chunk?;
            if chunk_born(&chunk.key).is_none_or(|born| born < cutoff) {
                self.store.delete(&chunk.key).await?;
            }
        }
        Ok(())
    }
}

fn meta(id: &[u8; 12], session: &str, head: &FileHead) -> FileMeta {
    FileMeta {
        id: format_id(id),
        name: head.name.clone(),
        session_id: session.to_owned(),
        size: head.size,
        created: head.created,
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;
    use crate::store::SledStore;

    fn files(dir: &std::path::Path) -> (Arc<dyn Store>, Files) {
        let store: Arc<dyn Store> = Arc::new(SledStore::open(dir).unwrap());
        let files = Files::new(store.clone(), Arc::new(KeyUsage::new(u64::MAX)), 86_400);
        (store, files)
    }

    async fn keys(store: &dyn Store, prefix: &[u8]) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        let mut scan = crate::store::scan_heads(store, prefix, 0);
        while let Some(head) = scan.next().await {
            keys.push(head.unwrap().key);
        }
        keys
    }

    fn contents(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn files_of_every_size_read_back_whole_and_chunk_by_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = files(dir.path());
        let sizes = [
            0,
            1,
            INLINE_MAX,
            INLINE_MAX + 1,
            CHUNK_LEN,
            CHUNK_LEN + 1,
            3 * CHUNK_LEN + 5,
        ];
        let mut chunks = 0;
        for size in sizes {
            let bytes = contents(size);
            let kept = files.put([1; 8], "s", "f.bin", &bytes).await.unwrap();
            assert_eq!(kept.size, size as u64);
            let open = files.open([1; 8], "s", &kept.id).await.unwrap().unwrap();
            assert_eq!(open.read_all().await.unwrap(), bytes, "{size}");
            let open = files.open([1; 8], "s", &kept.id).await.unwrap().unwrap();
            let pieces: Vec<Vec<u8>> = open.into_stream().map(|c| c.unwrap()).collect().await;
            assert!(pieces.iter().all(|p| p.len() <= CHUNK_LEN), "{size}");
            assert_eq!(pieces.concat(), bytes, "{size}");
            if size > INLINE_MAX {
                chunks += size.div_ceil(CHUNK_LEN);
            }
        }
        assert_eq!(keys(store.as_ref(), CHUNKS).await.len(), chunks);
        assert_eq!(files.list([1; 8], "s").await.unwrap().len(), sizes.len());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_file_stored_whole_before_chunks_still_reads() {
        #[derive(Serialize)]
        struct StoredFile {
            name: String,
            created: u64,
            bytes: Vec<u8>,
        }
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = files(dir.path());
        let bytes = contents(3 * CHUNK_LEN);
        let id = new_id(now_secs());
        let old = StoredFile {
            name: "old.bin".into(),
            created: now_secs(),
            bytes: bytes.clone(),
        };
        let key = file_key([1; 8], "s", &id);
        store
            .put(&key, &bincode::serialize(&old).unwrap())
            .await
            .unwrap();
        let listed = files.list([1; 8], "s").await.unwrap();
        assert_eq!(
            (listed[0].size, listed[0].name.as_str()),
            (bytes.len() as u64, "old.bin")
        );
        let open = files
            .open([1; 8], "s", &hex::encode(id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(open.read_all().await.unwrap(), bytes);
        assert_eq!(files.sweep(now_secs() + 1).await.unwrap(), 1);
        assert!(keys(store.as_ref(), FILES).await.is_empty());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn owners_see_only_their_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let (_, files) = files(dir.path());
        let a = files.put([1; 8], "s1", "data.csv", b"x,y\n").await.unwrap();
        files.put([1; 8], "s1", "more.txt", b"more").await.unwrap();
        let big = files
            .put([1; 8], "s1", "big.bin", &contents(CHUNK_LEN + 3))
            .await
            .unwrap();
        let names: Vec<_> = files
            .list([1; 8], "s1")
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names.len(), 3);
        assert!(names.contains(&"data.csv".to_owned()));
        assert!(files.list([2; 8], "s1").await.unwrap().is_empty());
        assert!(
            files.list([1; 8], "s").await.unwrap().is_empty(),
            "a session is not a prefix of another"
        );
        let read = |owner, id: String| {
            let files = files.clone();
            async move {
                match files.open(owner, "s1", &id).await.unwrap() {
                    Some(open) => Some(open.read_all().await.unwrap()),
                    None => None,
                }
            }
        };
        assert_eq!(read([1; 8], a.id.clone()).await, Some(b"x,y\n".to_vec()));
        assert_eq!(read([2; 8], a.id.clone()).await, None);
        assert_eq!(read([2; 8], big.id.clone()).await, None);
        assert_eq!(read([1; 8], "zz".into()).await, None);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_sweep_deletes_expired_files_with_their_chunks_and_old_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = files(dir.path());
        files
            .put([1; 8], "s", "kept.bin", &contents(2 * CHUNK_LEN))
            .await
            .unwrap();
        // An upload cut short long ago, and one under way now.
        let now = now_secs();
        let long_ago = now - 86_400 - ORPHAN_GRACE_SECS - 10;
        let (old, fresh) = (new_id(long_ago), new_id(now));
        for id in [old, fresh] {
            store
                .put(
                    &FileId { owner: [1; 8], id }.chunk_key(0),
                    &contents(CHUNK_LEN),
                )
                .await
                .unwrap();
        }
        assert_eq!(files.sweep(now - 86_400).await.unwrap(), 0);
        let left = keys(store.as_ref(), CHUNKS).await;
        assert_eq!(
            left.len(),
            3,
            "the kept file's two chunks and the fresh orphan"
        );
        assert!(
            left.contains(
                &FileId {
                    owner: [1; 8],
                    id: fresh
                }
                .chunk_key(0)
            )
        );
        assert!(
            !left.contains(
                &FileId {
                    owner: [1; 8],
                    id: old
                }
                .chunk_key(0)
            )
        );
        assert_eq!(files.sweep(now + 1).await.unwrap(), 1);
        assert_eq!(
            keys(store.as_ref(), CHUNKS).await,
            [FileId {
                owner: [1; 8],
                id: fresh
            }
            .chunk_key(0)]
        );
        assert!(keys(store.as_ref(), FILES).await.is_empty());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_discarded_upload_leaves_no_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = files(dir.path());
        let mut writer = files.writer([1; 8], "cut.bin", false).unwrap();
        writer.write(&contents(2 * CHUNK_LEN + 9)).await.unwrap();
        assert_eq!(
            keys(store.as_ref(), CHUNKS).await.len(),
            2,
            "full chunks go as they fill"
        );
        let written = writer.close().await.unwrap();
        assert_eq!(keys(store.as_ref(), CHUNKS).await.len(), 3);
        files.discard(vec![written]).await;
        assert!(keys(store.as_ref(), CHUNKS).await.is_empty());
        let mut writer = files.writer([1; 8], "cut.bin", false).unwrap();
        writer.write(&contents(CHUNK_LEN + 1)).await.unwrap();
        writer.discard().await;
        assert!(keys(store.as_ref(), CHUNKS).await.is_empty());
        assert!(files.writer([1; 8], "../x", false).is_err());
        assert!(files.keep("../s", Vec::new()).await.is_err());
    }

    #[test]
    fn ids_are_21_characters_with_one_text_each_and_old_hex_ids_still_parse() {
        for _ in 0..200 {
            let id = new_id(now_secs());
            let text = format_id(&id);
            assert_eq!(text.len(), ID_LEN);
            assert!(
                text.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{text}"
            );
            assert_eq!(parse_id(&text), Some(id));
            assert_eq!(parse_id(&hex::encode(id)), Some(id));
            // Another check, or another first part: no file.
            let mut wrong = text.clone().into_bytes();
            wrong[20] = if wrong[20] == b'A' { b'B' } else { b'A' };
            assert_eq!(parse_id(std::str::from_utf8(&wrong).unwrap()), None);
        }
        assert_eq!(parse_id("short"), None);
        assert_eq!(parse_id(&"é".repeat(10)), None);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_read_only_file_keeps_its_flag_in_the_second_head_format_and_plain_ones_stay_first() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = files(dir.path());
        let mut sealed = files.writer([1; 8], "skills/pdf/SKILL.md", true).unwrap();
        sealed.write(b"# Skill").await.unwrap();
        let mut big = files.writer([1; 8], "big.bin", true).unwrap();
        big.write(&contents(CHUNK_LEN + 7)).await.unwrap();
        let mut plain = files.writer([1; 8], "notes.txt", false).unwrap();
        plain.write(b"plain").await.unwrap();
        let written = vec![
            sealed.close().await.unwrap(),
            big.close().await.unwrap(),
            plain.close().await.unwrap(),
        ];
        let kept = files.keep("s1", written).await.unwrap();
        for (meta, read_only, bytes) in [
            (&kept[0], true, b"# Skill".to_vec()),
            (&kept[1], true, contents(CHUNK_LEN + 7)),
            (&kept[2], false, b"plain".to_vec()),
        ] {
            let open = files.open([1; 8], "s1", &meta.id).await.unwrap().unwrap();
            assert_eq!(open.read_only, read_only, "{}", meta.name);
            assert_eq!(open.read_all().await.unwrap(), bytes);
        }
        let heads = keys(store.as_ref(), FILES).await;
        let mut firsts = 0;
        for key in heads {
            let value = store.get(&key).await.unwrap().unwrap();
            if !value.starts_with(&HEAD_V2) {
                firsts += 1;
                // The first format is what earlier builds read.
                let old: FileHead = bincode::deserialize(&value).unwrap();
                assert_eq!(old.name, "notes.txt");
            }
        }
        assert_eq!(firsts, 1);
        assert_eq!(files.list([1; 8], "s1").await.unwrap().len(), 3);
        // Removed with its chunks; another owner's remove finds nothing.
        assert!(!files.remove([2; 8], "s1", &kept[1].id).await.unwrap());
        assert!(files.remove([1; 8], "s1", &kept[1].id).await.unwrap());
        assert!(!files.remove([1; 8], "s1", &kept[1].id).await.unwrap());
        assert_eq!(keys(store.as_ref(), CHUNKS).await.len(), 0);
        assert_eq!(files.sweep(0).await.unwrap(), 0);
        assert_eq!(files.list([1; 8], "s1").await.unwrap().len(), 2);
    }
}
