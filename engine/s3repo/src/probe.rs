//! Before a bucket is used, the store proves that the service honours conditional
//! writes, the only thing that keeps many writers from losing each other's work: a
//! probe object is created with `If-None-Match: *`, then created again (which must be
//! refused), then overwritten with a wrong `If-Match` (which must be refused too). A
//! service that lets either through is refused for good, never used unsafely. The
//! probe's `LastModified` also tells the service's clock, which garbage collection
//! measures ages by.

use std::time::SystemTime;

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::store::ETag;

use crate::requests::Condition;
use crate::store::{PROBE_PREFIX, S3Store};

/// How the probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probed {
    /// Both conditions are honoured.
    Safe,
    /// These credentials may not write: nothing can be written, so nothing is unsafe.
    ReadOnly,
}

pub fn conditional_writes(store: &S3Store) -> Result<Probed> {
    let key = format!(
        "{PROBE_PREFIX}{}",
        sealvol_core::store::unique_temp_name().trim_end_matches(".tmp")
    );
    let shown = store.inner.shown.clone();
    let k = key.clone();
    let outcome = store.run(|i| async move {
        let first = match i.put(&k, b"probe 1", Condition::Absent).await {
            Ok(created) => created,
            Err(e) if e.kind() == ErrorKind::Denied => return Ok(None),
            Err(e) => return Err(e),
        };
        let local = SystemTime::now();
        let again = i.put(&k, b"probe 2", Condition::Absent).await?;
        let wrong = ETag("\"00000000000000000000000000000000\"".into());
        let mismatched = i.put(&k, b"probe 3", Condition::Matches(&wrong)).await?;
        let modified = i.head(&k).await?.and_then(|(_, m)| m);
        Ok(Some((first, again, mismatched, modified, local)))
    });
    let k = key.clone();
    let _ = store.run(|i| async move { i.delete(&k).await });
    let Some((first, again, mismatched, modified, local)) = outcome? else {
        return Ok(Probed::ReadOnly);
    };
    if !first {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!("{shown}{key}: a probe object of this process already exists"),
        )
        .hint("try again"));
    }
    let ignored = match (again, mismatched) {
        (false, false) => None,
        (true, _) => Some("If-None-Match: *"),
        (false, true) => Some("If-Match"),
    };
    if let Some(header) = ignored {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!(
                "{shown}: this object store ignores conditional writes ({header}); \
                 with it, two writers could overwrite each other's tags"
            ),
        )
        .hint(
            "use a service that honours If-None-Match and If-Match on PutObject \
             (AWS S3, Cloudflare R2, recent MinIO and Ceph RGW do), or a local repository",
        ));
    }
    if let Some(m) = modified {
        store.set_clock(m, local);
    }
    Ok(Probed::Safe)
}
