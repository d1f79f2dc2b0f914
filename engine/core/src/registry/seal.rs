//! Sealing a version on the repository's own store (`Registry::seal` as `Here` makes
//! it): its manifest written after a barrier, protected from a garbage collection
//! that condemned what it names, its listing and summary, then its tags.

use crate::digest::version_digest;
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::{Manifest, manifest_format};
use crate::ops::SealRequest;
use crate::outcomes::{Sealed, TagChange};
use crate::repo::{Repository, json_error, manifest_key};
use crate::stamp::now_rfc3339;
use crate::trash::Unbin;

/// How long a seal waits for a purge of the same version to finish before giving up.
const PURGE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Seals `req` here.
pub(crate) fn seal_here(repo: &Repository, req: SealRequest) -> Result<Sealed> {
    let SealRequest {
        volume,
        tags,
        entries,
        stats,
        provenance,
        since,
        created,
        small_packs,
    } = req;
    let volume = &volume;
    let digest = version_digest(&entries);
    let mut small: Vec<String> = small_packs.iter().map(|p| p.hex()).collect();
    small.sort_unstable();
    small.dedup();
    let manifest = Manifest {
        format: manifest_format(&small),
        volume: volume.to_string(),
        digest: digest.to_string(),
        created: created.map_or_else(now_rfc3339, crate::stamp::rfc3339),
        provenance,
        stats,
        entries,
        small_packs: small,
    };
    let bytes = serde_json::to_vec(&manifest).map_err(json_error)?;
    // Held until the seal is done: the next seal of the namespace counts this one.
    let _quota = repo.keep_quota(volume, &manifest)?;
    repo.barrier()?;
    let key = manifest_key(volume, &digest);
    let mut restored = false;
    let purge_wait = std::time::Instant::now();
    let sealed_new = loop {
        // Garbage collection must not sweep what this manifest names: the files
        // and packs are rescued from any collection that condemned them, or the
        // seal fails for the push to run again (docs/GC.md).
        let protected = crate::gc::protect(repo, &manifest, since)?;
        let created = repo.store().put_if_absent(&key, &bytes)?;
        protected.sealed();
        if created {
            break true;
        }
        let stored = match repo.manifest(volume, &digest) {
            Ok(m) => m,
            // Purged from the trash since it was found: seal it anew.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            // The version was sealed before, but its manifest is damaged: this push
            // of the same bytes seals it again, the damaged one kept in quarantine.
            Err(e) if e.kind() == ErrorKind::Corrupt => {
                let at = repo.quarantine(&key)?;
                tracing::warn!("{}; kept at {at}, sealed again", e.message());
                continue;
            }
            Err(e) => return Err(e),
        };
        let live = match repo.unbin_for_seal(volume, &digest)? {
            Unbin::WasLive => true,
            Unbin::Restored => {
                restored = true;
                true
            }
            Unbin::Again => continue,
            Unbin::Purging if purge_wait.elapsed() < PURGE_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(100));
                false
            }
            Unbin::Purging => {
                return Err(Error::new(
                    ErrorKind::Race,
                    format!(
                        "vol:{volume}@{} is being purged from the trash by a garbage collection",
                        digest.short(16)
                    ),
                )
                .hint("push again once it has finished (`sealvol volume gc` holds its lease meanwhile)"));
            }
        };
        if !live {
            continue;
        }
        // Sealed before: it keeps (or gets) its listing and summary, unless a purge
        // took the version meanwhile (between the check above and now), which is
        // sealed anew.
        if repo
            .store()
            .size(&crate::listing::listing_key(volume, &digest))?
            .is_none()
        {
            repo.put_listing(volume, &digest, &crate::digest::encode(&stored.entries))?;
        }
        if repo.summary(volume, &digest)?.is_none() {
            match repo.store().size(&key)? {
                Some(size) => {
                    repo.put_summary(volume, &stored.summary(size), false)?;
                }
                None => continue,
            }
        }
        break false;
    };
    // After the manifest, before the tags: a crash in between leaves a version
    // that lists and mounts from its manifest until they are written.
    if sealed_new {
        repo.put_listing(volume, &digest, &crate::digest::encode(&manifest.entries))?;
        repo.put_summary(volume, &manifest.summary(bytes.len() as u64), false)?;
    }
    repo.barrier()?;
    let mut changes = Vec::with_capacity(tags.len());
    for tag in &tags {
        let m = repo.move_tag(volume, tag, &digest, None)?;
        changes.push(TagChange {
            tag: tag.to_string(),
            from: m.from,
            to: digest.to_string(),
            moved: m.moved,
            kept_damaged: m.kept_damaged,
        });
    }
    Ok(Sealed {
        digest,
        new: sealed_new,
        restored,
        tags: changes,
    })
}
