//! What the Hub's routes share: the server's chunks, the versions asked for lately,
//! and a version as a request named it.

use std::sync::Arc;

use sealvol_core::error::ErrorKind;
use sealvol_core::manifest::Manifest;
use sealvol_core::refs::{Digest, VolumeName};

use super::asked::At;
use super::ids;
use super::kept;
use super::lookup::volume_for;
use super::mirror;
use super::missing::Missing;
use super::revision;
use crate::chunks::ChunkService;
use crate::keys::Grant;

/// What the Hub's routes share: the server's chunks (and through them its
/// repository), and the versions' manifests and ids asked for lately.
pub struct Hub {
    pub chunks: Arc<ChunkService>,
    pub kept: Arc<kept::Kept>,
    /// The server speaks TLS (its absolute links say `https`).
    pub https: bool,
    /// The pull-through mirror of an upstream Hub, when the server has one.
    pub mirror: Option<Arc<mirror::Mirror>>,
}

/// A version as a request named it.
pub struct Version {
    pub volume: VolumeName,
    pub digest: Digest,
    pub manifest: Arc<Manifest>,
    /// Named by a digest or commit id, not by a tag that may move.
    pub pinned: bool,
    /// The repo id clients are told (`NS/VOL`; a mirrored repo's upstream id).
    pub id: String,
    /// The commit id clients are told (`ids::commit_id`; a mirrored repo's upstream
    /// commit).
    pub commit: String,
}

impl Hub {
    pub fn new(chunks: Arc<ChunkService>, https: bool, mirror: Option<Arc<mirror::Mirror>>) -> Hub {
        Hub {
            chunks,
            kept: Arc::default(),
            https,
            mirror,
        }
    }

    /// The version `at` names, as the key sees it. Blocking.
    pub fn version_at(&self, grant: &Grant, at: &At) -> Result<Version, Missing> {
        let repo = self.chunks.repository();
        let rev = at.rev.as_str();
        let volume = volume_for(repo, grant, &at.ns, &at.vol)?;
        let digest = revision::resolve(repo, &volume, rev).map_err(|e| match e.kind() {
            ErrorKind::NotFound | ErrorKind::Invalid => Missing::Revision(format!(
                "Invalid rev id: {rev:.100}: {}",
                e.to_string().replace('\n', " ")
            )),
            _ => Missing::Failed(e.to_string()),
        })?;
        let manifest = self
            .kept
            .manifest(repo, &volume, &digest)
            .map_err(|e| Missing::Failed(e.to_string()))?;
        let (id, commit, pinned) = match &at.mirrored {
            Some(m) => (m.repo.clone(), m.commit.clone(), m.pinned),
            None => (
                volume.to_string(),
                ids::commit_id(&digest),
                rev.len() == 40 || rev.len() == 64 || rev.starts_with("b3:"),
            ),
        };
        Ok(Version {
            volume,
            digest,
            manifest,
            pinned,
            id,
            commit,
        })
    }

    /// The ids of `v`'s files (computed the first time they are asked for). Blocking.
    pub fn ids(&self, v: &Version) -> Result<Arc<kept::VersionIds>, Missing> {
        self.kept
            .of(&self.chunks, &v.volume, &v.digest, &v.manifest)
            .map_err(|e| Missing::Failed(e.to_string()))
    }
}
