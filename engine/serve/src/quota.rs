//! A push past its namespace's quota, refused before its packs are stored.
//!
//! The quota itself is kept where versions are sealed (`sealvol_core::usage`): a seal
//! past it is refused, whoever pushed. This only refuses earlier, and saves the upload:
//! a pack from a key that writes one namespace only is refused when that namespace
//! already stores its quota's worth, or this pack would take it past. (A key of several
//! namespaces does not say which its pack is for; its seal is checked.)
//!
//! What a namespace stores is counted by reading its versions, so it is kept for
//! `FRESH` after it is counted, and counted again after a seal in the namespace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::error::Result;
use sealvol_core::refs::Name;
use sealvol_core::repo::Repository;

use crate::keys::Grant;

/// How long a namespace's counted usage stands.
const FRESH: Duration = Duration::from_secs(10);

pub struct Quotas {
    repo: Arc<Repository>,
    counted: Mutex<HashMap<String, (u64, Instant)>>,
}

impl Quotas {
    pub fn new(repo: Arc<Repository>) -> Quotas {
        Quotas {
            repo,
            counted: Mutex::default(),
        }
    }

    /// Refuses a pack of `bytes` from `grant` when it writes one namespace only, and
    /// that namespace's quota would be passed. Blocking (it may count the namespace).
    pub fn admit_pack(&self, grant: &Grant, bytes: u64) -> Result<()> {
        let [ns] = grant.namespaces.as_slice() else {
            return Ok(());
        };
        if grant.admin {
            return Ok(());
        }
        let Some(quota) = self.repo.quota(ns)? else {
            return Ok(());
        };
        let used = self.used(ns)?;
        if used.saturating_add(bytes) > quota {
            return Err(sealvol_core::usage::over_quota(ns, quota, used, bytes));
        }
        Ok(())
    }

    /// What namespace `ns` stores, counted at most `FRESH` ago.
    fn used(&self, ns: &str) -> Result<u64> {
        if let Some((used, at)) = sealvol_core::lock(&self.counted).get(ns)
            && at.elapsed() < FRESH
        {
            return Ok(*used);
        }
        let name = Name::parse("namespace", ns)?;
        let used = self.repo.namespace_usage(&name)?.bytes;
        sealvol_core::lock(&self.counted).insert(ns.to_string(), (used, Instant::now()));
        Ok(used)
    }

    /// Each namespace with a quota: the quota, and what it stores (counted at most
    /// `FRESH` ago), for `/metrics`. A namespace that cannot be counted is left out.
    pub fn report(&self) -> Vec<(String, u64, u64)> {
        let quotas = match self.repo.current_config() {
            Ok(c) => c.quotas,
            Err(e) => {
                tracing::warn!("quotas: {e}");
                return Vec::new();
            }
        };
        quotas
            .into_iter()
            .filter_map(|(ns, quota)| match self.used(&ns) {
                Ok(used) => Some((ns, quota, used)),
                Err(e) => {
                    tracing::warn!("usage of {ns}: {e}");
                    None
                }
            })
            .collect()
    }

    /// A version was sealed in `ns`: count it again when next asked.
    pub fn sealed(&self, ns: &str) {
        sealvol_core::lock(&self.counted).remove(ns);
    }
}
