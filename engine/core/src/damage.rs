//! Damage records: what was found bad in the repository and by whom, kept until a
//! repair or a garbage collection settles it (docs/FORMAT.md, "Damage" and "List
//! damage"). A copy that fails its hash (`damage/<pack>/<chunk>`), a chunk list that
//! fails its file's proof (`damage/files/<file>`).

use serde::{Deserialize, Serialize};

use crate::digest::Hash;
use crate::error::Result;
use crate::health::DamageRecord;
use crate::keys::Key;
use crate::objects::{PackEntry, PackId};
use crate::repo::{Repository, json_error};

impl Repository {
    /// Every damage record: (pack, chunk, record). A record that cannot be parsed still
    /// counts, by its name: it was written only because something was found bad.
    pub fn damage_records(&self) -> Result<Vec<(PackId, Hash, Option<DamageRecord>)>> {
        let mut out = Vec::new();
        for o in self.store().list(DAMAGE_PREFIX)? {
            // Chunk lists' records share the folder; a name of neither kind is no record.
            let Ok(Key::Damage(pack, chunk)) = Key::parse(&o.key) else {
                continue;
            };
            let record = self
                .store()
                .get(&o.key)?
                .and_then(|b| serde_json::from_slice(&b).ok());
            out.push((pack, chunk, record));
        }
        Ok(out)
    }

    /// Writes down here that the copy of `entry` in `pack` fails its hash (found by
    /// `found_by`). Idempotent.
    pub(crate) fn record_damage_here(
        &self,
        pack: &PackId,
        entry: &PackEntry,
        found_by: &str,
    ) -> Result<()> {
        let rec = DamageRecord {
            pack: pack.hex(),
            chunk: entry.hash.hex(),
            offset: entry.offset,
            problem: "fails its hash check".into(),
            found_by: found_by.to_string(),
            by: crate::stamp::whoami(),
            at: crate::stamp::now_rfc3339(),
        };
        let bytes = serde_json::to_vec_pretty(&rec).map_err(json_error)?;
        self.store()
            .put_if_absent(&damage_key(pack, &entry.hash), &bytes)
            .map(|_| ())
    }

    /// Writes down here that the chunk list of file `hash` failed its proof. Idempotent.
    pub(crate) fn record_list_damage_here(
        &self,
        hash: &Hash,
        problem: &str,
        found_by: &str,
    ) -> Result<()> {
        let rec = ListDamage {
            file: hash.hex(),
            problem: problem.chars().take(1000).collect(),
            found_by: found_by.to_string(),
            by: crate::stamp::whoami(),
            at: crate::stamp::now_rfc3339(),
        };
        let bytes = serde_json::to_vec_pretty(&rec).map_err(json_error)?;
        self.store()
            .put_if_absent(&list_damage_key(hash), &bytes)
            .map(|_| ())
    }

    /// The files whose chunk lists are recorded as failing their proof, with what was
    /// found (a record that cannot be parsed still counts, by its name).
    pub fn list_damage(&self) -> Result<Vec<(Hash, Option<ListDamage>)>> {
        let mut out = Vec::new();
        for o in self.store().list(LIST_DAMAGE_PREFIX)? {
            let Ok(Key::ListDamage(hash)) = Key::parse(&o.key) else {
                continue;
            };
            let record = self
                .store()
                .get(&o.key)?
                .and_then(|b| serde_json::from_slice(&b).ok());
            out.push((hash, record));
        }
        Ok(out)
    }

    /// Removes the record of a chunk list that proves again (rebuilt by repair) or left.
    pub fn clear_list_damage(&self, hash: &Hash) -> Result<()> {
        self.store().delete(&list_damage_key(hash))
    }

    /// Removes the record of a copy that reads fine again, or whose pack left.
    pub fn clear_damage(&self, pack: &PackId, chunk: &Hash) -> Result<()> {
        self.store().delete(&damage_key(pack, chunk))
    }

    /// Removes every damage record of a pack that is gone.
    pub fn clear_pack_damage(&self, pack: &PackId) -> Result<()> {
        for o in self
            .store()
            .list(&format!("{DAMAGE_PREFIX}{}/", pack.hex()))?
        {
            self.store().delete(&o.key)?;
        }
        Ok(())
    }
}

const DAMAGE_PREFIX: &str = "damage/";

/// `damage/files/<file hash>`: a chunk list that failed its proof. `files` is no pack
/// id, so readers of chunk damage records pass these by.
const LIST_DAMAGE_PREFIX: &str = "damage/files/";

fn list_damage_key(hash: &Hash) -> String {
    Key::ListDamage(*hash).to_string()
}

/// A chunk list found failing its proof: `damage/files/<file hash>` (JSON).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ListDamage {
    pub file: String,
    pub problem: String,
    /// What found it: `read` (a mount, pull or diff), `verify`, `serve`.
    pub found_by: String,
    pub by: String,
    pub at: String,
}

fn damage_key(pack: &PackId, chunk: &Hash) -> String {
    Key::Damage(*pack, *chunk).to_string()
}
