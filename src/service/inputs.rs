//! The files an execution starts with: the references of a request (and of
//! a runtime session) resolved for the principal that sends them, opened,
//! checked against the workspace's size, and read.
//!
//! Invariants:
//! - A reference reaches only what its principal may: its own files
//!   (`kind: user`, whatever `resource_id` says), or the files of the
//!   shared resource it names (`agent`, `skill`) in its own tenant
//!   ([`Principal::files_owner`]). Any other file answers "not found",
//!   exactly like a file that does not exist.
//! - Two references of one name: the last wins (as LibreChat's own merge
//!   does), so the workspace holds one file per name.

use crate::auth::{Principal, Resource};
use crate::journal::WorkspaceFile;
use crate::workspace::OpenFile;

use super::Service;
use super::error::ServiceError;
use super::messages::FileRef;

/// A stored file an execution is given, and the name it has there.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputFile {
    /// Whose file.
    pub owner: [u8; 8],
    /// Its storage session.
    pub session: String,
    /// Its id.
    pub id: String,
    /// Its path under `/mnt/data`.
    pub name: String,
    /// Whether code may only read it.
    pub read_only: bool,
}

/// The workspace of a start: its files, the read-only names among them,
/// and where each came from.
pub(super) struct Workspace {
    /// The files, read.
    pub files: Vec<WorkspaceFile>,
    /// Names code may not change.
    pub read_only: Vec<String>,
    /// The stored file of each name.
    pub inputs: Vec<InputFile>,
}

/// A skill's `version` as a file reference carries it (a JSON number).
fn version_text(version: Option<&serde_json::Value>) -> Option<String> {
    match version? {
        serde_json::Value::Null => None,
        serde_json::Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

impl Service {
    /// Opens the files `refs` name for `principal` (`session`: the
    /// storage session of refs that name none).
    async fn open_refs(
        &self,
        principal: &Principal,
        session: &str,
        refs: &[FileRef],
    ) -> Result<Vec<(InputFile, OpenFile)>, ServiceError> {
        let mut opened = Vec::with_capacity(refs.len());
        for (index, file) in refs.iter().enumerate() {
            let resource = Resource::parse(
                file.kind.as_deref(),
                file.resource_id.as_deref(),
                version_text(file.version.as_ref()).as_deref(),
            )
            .map_err(|problem| ServiceError::Invalid(format!("files[{index}]: {problem}")))?;
            let owner = principal.files_owner(&resource);
            let from = file.session().unwrap_or(session);
            let stored = self
                .files
                .open(owner, from, &file.id)
                .await
                .map_err(ServiceError::from)?
                .ok_or_else(|| {
                    ServiceError::Invalid(format!(
                        "file {:?} not found in session {from:?}",
                        file.id
                    ))
                })?;
            let name = match file.name.as_deref().filter(|n| !n.is_empty()) {
                Some(name) => crate::workspace::check_name(name)
                    .map_err(ServiceError::from)?
                    .to_owned(),
                None => stored.name.clone(),
            };
            let input = InputFile {
                owner,
                session: from.to_owned(),
                id: file.id.clone(),
                name,
                read_only: stored.read_only,
            };
            opened.push((input, stored));
        }
        Ok(opened)
    }

    /// Opens files kept for a runtime session; one that is gone (swept) is
    /// left out, with a log line.
    async fn open_kept(&self, kept: &[InputFile]) -> Vec<(InputFile, OpenFile)> {
        let mut opened = Vec::with_capacity(kept.len());
        for file in kept {
            match self.files.open(file.owner, &file.session, &file.id).await {
                Ok(Some(stored)) => opened.push((file.clone(), stored)),
                Ok(None) => {
                    tracing::warn!(name = %file.name, "a runtime session's file is gone (expired); it is left out")
                }
                Err(error) => {
                    tracing::warn!(name = %file.name, %error, "a runtime session's file cannot be read; it is left out")
                }
            }
        }
        opened
    }

    /// The workspace of a start: `kept` (a runtime session's files), then
    /// the files `refs` name (a name given twice: the last wins), within
    /// the workspace's size.
    pub(super) async fn workspace_of(
        &self,
        principal: &Principal,
        session: &str,
        kept: &[InputFile],
        refs: &[FileRef],
    ) -> Result<Workspace, ServiceError> {
        let mut opened = self.open_kept(kept).await;
        opened.extend(self.open_refs(principal, session, refs).await?);
        let mut by_name: Vec<(InputFile, OpenFile)> = Vec::with_capacity(opened.len());
        for (input, stored) in opened {
            by_name.retain(|(earlier, _)| earlier.name != input.name);
            by_name.push((input, stored));
        }
        let limit = self.engine.limits().workspace_bytes;
        let total = by_name
            .iter()
            .fold(0u64, |sum, (_, stored)| sum.saturating_add(stored.size));
        if total > limit {
            return Err(ServiceError::Invalid(format!(
                "the files of a request may have {limit} bytes at most"
            )));
        }
        let mut workspace = Workspace {
            files: Vec::with_capacity(by_name.len()),
            read_only: Vec::new(),
            inputs: Vec::with_capacity(by_name.len()),
        };
        for (input, stored) in by_name {
            let bytes = stored.read_all().await.map_err(ServiceError::from)?;
            if input.read_only {
                workspace.read_only.push(input.name.clone());
            }
            workspace.files.push(WorkspaceFile {
                name: input.name.clone(),
                bytes,
            });
            workspace.inputs.push(input);
        }
        Ok(workspace)
    }
}
