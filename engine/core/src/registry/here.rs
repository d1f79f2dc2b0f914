//! The registry's operations and its writers' needs made by the repository itself, on
//! its own store (`ops::Registry` and `owner::Owner` for a folder or a bucket): each is
//! the module's that keeps its objects.

use crate::chunk_index::{ChunkIndex, HashedFile};
use crate::digest::Hash;
use crate::error::Result;
use crate::labels::LabelRequest;
use crate::objects::{FileObject, PackEntry, PackId};
use crate::ops::Stored;
use crate::ops::{Registry, SealRequest, TagRequest};
use crate::outcomes::{Deleted, LabelsChanged, Restored, Sealed, TagMoved};
use crate::owner::Owner;
use crate::refs::{Digest, Name, Ref, VolumeName};
use crate::remote::{Held, HeldAnswer};
use crate::repo::Repository;
use crate::usage::Allowance;

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
}

impl Owner for Here<'_> {
    fn chunk_index(&self) -> Result<ChunkIndex> {
        crate::push::stored::index_here(self.0)
    }

    fn asks_held(&self) -> bool {
        false
    }

    /// Never asked (`asks_held`): a push here knows what is held from its index, so
    /// this answers that nothing may be skipped on its word.
    fn held(&self, hashes: &[Hash]) -> Result<HeldAnswer> {
        Ok(HeldAnswer {
            held: vec![Held::No; hashes.len()],
            challenge: None,
        })
    }

    fn stored_files(&self, index: &ChunkIndex, hashes: &[Hash]) -> Result<Vec<Option<u64>>> {
        crate::push::stored::stored_files_here(self.0, index, hashes)
    }

    fn store_lists(&self, index: &ChunkIndex, files: Vec<&HashedFile>) -> Result<u64> {
        crate::push::lists::store_lists_here(self.0, index, files)
    }

    fn store_copied_list(
        &self,
        src: &Repository,
        index: &ChunkIndex,
        hash: &Hash,
        obj: &FileObject,
    ) -> Result<()> {
        crate::mirror::store_copied_list_here(src, self.0, index, hash, obj)
    }

    fn needs_no_list(&self, size: u64, chunks: usize) -> bool {
        crate::small::is_small(self.0, size, chunks)
    }

    /// The index knows already.
    fn learn_held(&self, _index: &mut ChunkIndex, _chunks: &[(Hash, u32)]) -> Result<()> {
        Ok(())
    }

    fn seal_stored(&self, index: &ChunkIndex, version: Stored) -> Result<(Sealed, u64)> {
        crate::small::seal_stored_here(self.0, index, version)
    }

    fn allowance(&self, ns: &Name) -> Result<Option<Allowance>> {
        self.0.allowance_here(ns)
    }

    fn publish_index(&self, id: &PackId, entries: &[PackEntry]) -> Result<()> {
        self.0.put_index(id, entries).map(drop)
    }

    fn put_list(&self, hash: &Hash, obj: &FileObject) -> Result<bool> {
        self.0.put_file_object_here(hash, obj)
    }

    fn replace_list(&self, hash: &Hash, obj: &FileObject) -> Result<()> {
        self.0.replace_file_object_here(hash, obj)
    }

    fn other_copy(&self, pack: &PackId, entry: &PackEntry) -> Result<Option<(PackId, PackEntry)>> {
        self.0.other_copy_here(pack, entry)
    }

    fn locate(&self, hash: &Hash) -> Result<Option<(PackId, PackEntry)>> {
        self.0.locate_here(hash)
    }
}
