//! One type over every remote source, so that the sync runner is written once.

use std::ops::Range;

use bytes::Bytes;

use super::endpoints::Resolved;
use super::filter::Filter;
use super::hf::Hf;
use super::listing::{Listing, Object};
use super::s3::S3;
use super::url::SourceUrl;
use crate::error::{Error, Result};
use crate::secrets::Secret;

pub enum Client {
    S3(S3),
    Hf(Hf),
}

impl Client {
    pub async fn connect(
        url: &SourceUrl,
        at: &Resolved,
        secret: Option<&Secret>,
    ) -> Result<Client> {
        match url {
            SourceUrl::S3 { .. } | SourceUrl::R2 { .. } | SourceUrl::CoreWeave { .. } => {
                Ok(Client::S3(S3::connect(url, at, secret).await?))
            }
            SourceUrl::HuggingFace { .. } => Ok(Client::Hf(Hf::connect(url, at, secret)?)),
            SourceUrl::Gcs { .. } | SourceUrl::Azure { .. } => Err(Error::usage(format!(
                "{url}: this kind of source is not supported yet"
            ))
            .hint("hf://, s3://, r2://, cw:// and local paths sync today")),
            SourceUrl::Local(p) => Err(Error::usage(format!(
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
            Client::Hf(c) => {
                let (sha, objects) = c.list().await?;
                Listing::build(objects, filter, Some(sha))
            }
        }
    }

    /// Bytes `range` of `obj`, failing if it is no longer the listed version.
    pub async fn get(&self, obj: &Object, range: Range<u64>) -> Result<Bytes> {
        match self {
            Client::S3(c) => c.get(obj, range).await,
            Client::Hf(c) => c.get(obj, range).await,
        }
    }
}
