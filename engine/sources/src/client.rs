//! One type over every remote source, so that connecting, listing and reading are
//! written once.

use std::ops::Range;

use crate::azure::Azure;
use crate::body::Body;
use crate::gcs::Gcs;
use crate::hf::Hf;
use crate::layout::Layout;
use crate::oci::Oci;
use crate::s3::S3;
use sealvol_core::error::{Error, Result};
use sealvol_source::Access;
use sealvol_source::endpoints::Resolved;
use sealvol_source::filter::Filter;
use sealvol_source::listing::{Listing, Object};
use sealvol_source::url::SourceUrl;

pub enum Client {
    S3(S3),
    Hf(Hf),
    Gcs(Gcs),
    Azure(Azure),
    Oci(Oci),
    Layout(Layout),
}

impl Client {
    pub async fn connect(url: &SourceUrl, at: &Resolved, access: Access<'_>) -> Result<Client> {
        match url {
            SourceUrl::S3 { .. } | SourceUrl::R2 { .. } | SourceUrl::CoreWeave { .. } => {
                Ok(Client::S3(S3::connect(url, at, access).await?))
            }
            SourceUrl::HuggingFace { .. } => Ok(Client::Hf(Hf::connect(url, at, access)?)),
            SourceUrl::Gcs { .. } => Ok(Client::Gcs(Gcs::connect(url, at, access)?)),
            SourceUrl::Azure { .. } => Ok(Client::Azure(Azure::connect(url, at, access)?)),
            SourceUrl::Oci { .. } => Ok(Client::Oci(Oci::connect(url, at, access)?)),
            SourceUrl::OciLayout { .. } => Ok(Client::Layout(Layout::connect(url)?)),
            SourceUrl::Local(p) => Err(Error::invalid(format!(
                "{} is a local path: it is pushed, not listed",
                p.display()
            ))),
        }
    }

    /// The objects to sync, filtered, mapped to paths, sorted, checked. A source with
    /// revisions (Hugging Face) is pinned to the commit it lists.
    pub async fn list(&mut self, filter: &Filter) -> Result<Listing> {
        match self {
            Client::S3(c) => Listing::build(c.list().await?, filter, None),
            Client::Gcs(c) => Listing::build(c.list().await?, filter, None),
            Client::Azure(c) => Listing::build(c.list().await?, filter, None),
            Client::Hf(c) => {
                let (sha, objects) = c.list().await?;
                Listing::build(objects, filter, Some(sha))
            }
            Client::Oci(c) => {
                let (digest, objects) = c.list().await?;
                Listing::build(objects, filter, Some(digest))
            }
            Client::Layout(c) => {
                let (digest, objects) = c.list()?;
                Listing::build(objects, filter, Some(digest))
            }
        }
    }

    /// A stream of bytes `range` of `obj`, failing if it is no longer the listed version.
    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        match self {
            Client::S3(c) => c.open(obj, range).await,
            Client::Hf(c) => c.open(obj, range).await,
            Client::Gcs(c) => c.open(obj, range).await,
            Client::Azure(c) => c.open(obj, range).await,
            Client::Oci(c) => c.open(obj, range).await,
            Client::Layout(c) => c.open(obj, range).await,
        }
    }
}
