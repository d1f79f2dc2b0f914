//! The registry's operations made by the repository itself, on its own store
//! (`ops::Registry` for a folder or a bucket): each is the module's that keeps its
//! objects.

use crate::digest::Hash;
use crate::error::Result;
use crate::labels::LabelRequest;
use crate::objects::{PackEntry, PackId};
use crate::ops::{GcOptions, Registry, SealRequest, TagRequest};
use crate::outcomes::{Deleted, GcReport, LabelsChanged, Restored, Sealed, TagMoved};
use crate::refs::{Digest, Ref, VolumeName};
use crate::repo::Repository;

/// A repository making its own writes.
pub struct Here<'a>(pub &'a Repository);

impl Registry for Here<'_> {
    fn seal(&self, req: SealRequest) -> Result<Sealed> {
        super::seal::seal_here(self.0, req)
    }

    fn put_signature(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<(String, bool)> {
        self.0.put_signature_here(vol, digest, bytes)
    }

    fn change_tag(&self, req: &TagRequest) -> Result<TagMoved> {
        super::tags::change_here(self.0, req)
    }

    fn change_labels(&self, req: &LabelRequest) -> Result<LabelsChanged> {
        self.0.change_labels_here(req)
    }

    fn delete_version(&self, r: &Ref, untag: bool) -> Result<Deleted> {
        self.0.delete_here(r, untag)
    }

    fn restore_version(&self, r: &Ref) -> Result<Restored> {
        self.0.restore_here(r)
    }

    fn report_damage(&self, pack: &PackId, entry: &PackEntry, found_by: &str) -> Result<()> {
        self.0.record_damage_here(pack, entry, found_by)
    }

    fn report_list_damage(&self, hash: &Hash, problem: &str, found_by: &str) -> Result<()> {
        self.0.record_list_damage_here(hash, problem, found_by)
    }

    fn collect(&self, opts: &GcOptions) -> Result<GcReport> {
        crate::gc::collect(self.0, opts)
    }
}
