//! Which objects a key may touch, and how: object keys parsed (`parse_key`), the
//! grant checked against them (`authorize`), the bodies' limits, and the store's
//! work run off the async threads (`on_store`).

use std::sync::Arc;

use axum::response::Response;
use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind};
use sealvol_core::store::ObjectStore;

use crate::keys::Grant;
use crate::ops::Steward;
use crate::reply::failed;

/// The largest object a client may write: a pack is about the repository's target
/// size (64 MiB) plus one chunk. Packs are streamed to disk, never held whole.
pub const MAX_OBJECT: usize = crate::reply::MAX_DRAIN;

/// The largest read-ahead profile a key may write (262,144 steps of about 100 bytes).
pub const MAX_PROFILE: usize = 32 << 20;

/// What a request does to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    /// Create if absent.
    Create,
    /// Overwrite, or compare-and-swap.
    Replace,
    Delete,
}

/// An object key, by kind, checked against its kind's exact shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    Config,
    Pack(Hash),
    Index(Hash),
    File(Hash),
    /// `manifests/`, `listings/`, … of namespace `ns`.
    Namespaced {
        kind: &'static str,
        ns: String,
    },
    /// `damage/`, `gc/`: records others build decisions on.
    Records,
    /// `quarantine/`, `tmp/`, `probe/`: the server's own.
    Private,
    /// `access/keys.json`, `access/ring.json`: the keys every server accepts, and the
    /// ring's private keys. No key, an admin's neither, reads or writes them over HTTP:
    /// a key that could would make itself any key, or any server.
    Access,
    /// `access/ring-public.json`: the ring's public keys, which every key may read (a
    /// node reaching the repository through its remote engine checks peers with them),
    /// and no key writes.
    RingPublic,
}

/// A key a client may name, by kind: read by core's one key parser (`keys.rs`:
/// relative, printable, at most 1 KiB, each kind in its exact shape), then sorted into
/// what a key's scope is checked against.
pub fn parse_key(key: &str) -> Result<Object, String> {
    use sealvol_core::keys::Key;
    let k = Key::parse(key)?;
    Ok(match &k {
        Key::Config => Object::Config,
        Key::Pack(h) => Object::Pack(*h),
        Key::Index(h) => Object::Index(*h),
        Key::File(h) => Object::File(*h),
        Key::Manifest(..)
        | Key::Listing(..)
        | Key::Summary(..)
        | Key::Profile(..)
        | Key::Signature(..)
        | Key::Sha256s(..)
        | Key::Labels(..)
        | Key::Tag(..)
        | Key::Trash(..) => Object::Namespaced {
            kind: k.folder(),
            ns: k.namespace().map(|n| n.to_string()).unwrap_or_default(),
        },
        Key::Damage(..) | Key::ListDamage(_) | Key::GcRound(_) | Key::GcLease => Object::Records,
        // A server's own record of what it proved: a client that wrote it would name
        // the ids the Hub's clients check.
        Key::Quarantine(..) | Key::Tmp(_) | Key::Probe(_) | Key::HubIds(..) => Object::Private,
        Key::AccessList | Key::RingKeys => Object::Access,
        Key::RingPublic => Object::RingPublic,
    })
}

/// Whether `grant` may do `op` to `obj` as far as it can be told without reading the
/// repository (files and pack ranges of a scoped key need `reach.rs` too); the refusal
/// says why.
pub fn authorize(grant: &Grant, key: &str, obj: &Object, op: Op) -> Result<(), String> {
    let refuse = |what: &str| {
        Err(format!(
            "key {} ({}) may not {what} {key:.120}",
            grant.name,
            grant.scope()
        ))
    };
    if *obj == Object::Access {
        return Err(format!(
            "no key may touch {key} over HTTP: change the keys with `sealvol key` where the repository is reachable"
        ));
    }
    if *obj == Object::RingPublic {
        return match op {
            Op::Read => Ok(()),
            _ => refuse("write (the servers keep the ring's keys)"),
        };
    }
    if grant.admin {
        return Ok(());
    }
    let everything = grant.namespaces.is_empty();
    match (obj, op) {
        (Object::Private | Object::Access, _) => refuse("touch"),
        (Object::Config, Op::Read) => Ok(()),
        (Object::Namespaced { ns, .. }, Op::Read) if grant.sees(ns) => Ok(()),
        (Object::Namespaced { .. }, Op::Read) => refuse("read"),
        (Object::File(_) | Object::Pack(_), Op::Read) => Ok(()),
        (Object::Index(_) | Object::Records, Op::Read) if everything => Ok(()),
        (_, Op::Read) => refuse("read"),
        (Object::Pack(_), Op::Create) if !grant.read_only => Ok(()),
        (
            Object::Namespaced {
                kind: "profiles",
                ns,
            },
            Op::Create,
        ) if grant.writes(ns) => Ok(()),
        // Checked as an operation (`ops::put_signature`), never written as an object.
        (
            Object::Namespaced {
                kind: "signatures", ..
            },
            Op::Create | Op::Replace,
        ) => refuse("write (signatures are stored with PUT /v1/ops/signatures/NS/VOL/DIGEST)"),
        (_, Op::Create | Op::Replace) if grant.read_only => refuse("write"),
        // Chunk lists, indexes, manifests, tags, trash and damage records, rounds:
        // the server writes them, when asked for an operation (`ops.rs`).
        (_, Op::Create | Op::Replace) => {
            refuse("write (the server writes it, asked for an operation)")
        }
        (_, Op::Delete) => refuse("delete"),
    }
}

/// Runs `f` on the repository's store on a blocking thread.
pub(super) async fn on_store<T: Send + 'static>(
    s: &Arc<Steward>,
    f: impl FnOnce(&dyn ObjectStore) -> sealvol_core::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let repo = Arc::clone(&s.repo);
    tokio::task::spawn_blocking(move || f(repo.object_store()))
        .await
        .map_err(|_| failed(Error::new(ErrorKind::Io, "a read failed on the server")))?
        .map_err(failed)
}
