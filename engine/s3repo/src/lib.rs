//! sealvol's repository on S3-compatible object storage.
//!
//! Its one job is `S3Store`, the `ObjectStore` over a bucket prefix (AWS S3, MinIO,
//! Ceph RGW, Cloudflare R2, CoreWeave, GCS through its S3 interoperability), and
//! opening a repository by its address (`Address`: a directory or a bucket). The
//! layout, formats and digests are the local repository's; the only coordination
//! between writers on many machines is the service's conditional writes, which the
//! store proves it has before it is used (`probe`). The S3 client and its error
//! sorting are the S3 source's (`sealvol_sources::s3`).

mod address;
pub mod probe;
mod requests;
mod store;
mod upload;

use std::path::Path;

use sealvol_core::Repository;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::store::ObjectStore;
use sealvol_source::Endpoints;
use sealvol_source::secrets::Secret;

pub use address::Address;
pub use store::S3Store;

/// What opening a repository needs besides its address.
pub struct Options<'a> {
    /// Where S3-kind endpoints are (config.toml's `[endpoints]`, the environment).
    pub endpoints: &'a Endpoints,
    /// A stored `KEY_ID:SECRET` for the bucket, instead of the default credential chain.
    pub secret: Option<&'a Secret>,
    /// A local directory where packs are built before they are uploaded.
    pub staging: &'a Path,
    /// fsync a local repository's writes before they become visible.
    pub durable: bool,
}

/// How a command wants the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// It must exist.
    Existing,
    /// A local directory is made a repository if it is missing or empty (a first
    /// push). A bucket is never made one implicitly: `sealvol init` does that.
    CreateLocal,
    /// `sealvol init`: make a new one; an existing repository is an error.
    Init,
}

/// Opens the repository at `address`.
pub fn open(address: &Address, mode: Mode, opts: &Options) -> Result<Repository> {
    match address {
        Address::Local(path) => {
            if mode == Mode::Init && path.join(sealvol_core::repo::CONFIG_KEY).exists() {
                return Err(already(&address.to_string()));
            }
            Repository::open_local(path, mode != Mode::Existing, opts.durable)
        }
        Address::Bucket(url) => {
            let at = opts.endpoints.resolve(url);
            let store = S3Store::connect(url, &at, opts.secret, opts.staging)?;
            let location = url.to_string();
            let has_config = store.size(sealvol_core::repo::CONFIG_KEY)?.is_some();
            match (has_config, mode) {
                (true, Mode::Init) => return Err(already(&location)),
                (false, Mode::Init) => {
                    if !store.list_page("", None)?.objects.is_empty() {
                        return Err(not_a_repository(&location));
                    }
                }
                (false, _) => {
                    if !store.list_page("", None)?.objects.is_empty() {
                        return Err(not_a_repository(&location));
                    }
                    return Err(Error::not_found(format!("no repository at {location}"))
                        .hint(format!("create one with `sealvol init --repo {location}`")));
                }
                (true, _) => {}
            }
            probe::conditional_writes(&store)?;
            Repository::open(Box::new(store), location, mode == Mode::Init)
        }
    }
}

fn already(location: &str) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("{location} already holds a sealvol repository"),
    )
    .hint("nothing to do: use it with --repo")
}

fn not_a_repository(location: &str) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("{location} holds objects, but no sealvol repository"),
    )
    .hint("pass --repo with an empty prefix, or a prefix that holds a repository")
}
