//! Session files and the names they may have: the rules a name under
//! `/mnt/data` follows, and the store of session files ([`files`]: upload,
//! list, download, what an execution is given and leaves).
//!
//! Invariant: names follow [`check_name`], the same rules the Python runtime
//! applies inside the child, so no name can leave `/mnt/data`.

mod files;

pub use files::{
    CHUNK_LEN, FileMeta, FileWriter, Files, ID_LEN, INLINE_MAX, ORPHAN_GRACE_SECS, OpenFile,
    WrittenFile, format_id,
};

use crate::store::StoreError;

/// The mount point code sees.
pub const MOUNT: &str = "/mnt/data";
/// Longest name of one path component, bytes.
pub const MAX_COMPONENT: usize = 255;
/// Longest relative path, bytes.
pub const MAX_PATH: usize = 1024;

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
    /// A character that becomes `/` or `\` once normalised (`／`, `＼`):
    /// the name would read as another path wherever it is normalised.
    Slash,
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
            NameProblem::Slash => {
                "characters that normalise to a slash or a backslash (`／`, `＼`) are not allowed"
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
        if part.nfkc().any(|c| c == '/' || c == '\\') {
            return Some(NameProblem::Slash);
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

/// A new session id: 21 random characters of `[A-Za-z0-9_-]` (126 bits),
/// the nanoid shape LibreChat requires of the ids it is given.
pub fn new_session_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
    rand::random::<[u8; ID_LEN]>()
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 63)]))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

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
            "..／..／tmp／x",
            "a＼b",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_session("sess_1-A").is_ok());
        let fresh = new_session_id();
        assert_eq!(fresh.len(), ID_LEN);
        assert!(check_session(&fresh).is_ok());
        assert_ne!(fresh, new_session_id());
        assert!(check_session("../x").is_err());
        assert!(check_session("").is_err());
    }
}
