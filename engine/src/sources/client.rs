//! One type over every remote source, so that the sync runner is written once.

use std::ops::Range;

use bytes::Bytes;

use super::azure::Azure;
use super::endpoints::Resolved;
use super::filter::Filter;
use super::gcs::Gcs;
use super::hf::Hf;
use super::listing::{Listing, Object};
use super::s3::S3;
use super::url::SourceUrl;
use crate::error::{Error, Result};
use crate::secrets::Secret;

pub enum Client {
    S3(S3),
    Hf(Hf),
    Gcs(Gcs),
    Azure(Azure),
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
            SourceUrl::Gcs { .. } => Ok(Client::Gcs(Gcs::connect(url, at, secret)?)),
            SourceUrl::Azure { .. } => Ok(Client::Azure(Azure::connect(url, at, secret)?)),
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
            Client::Gcs(c) => Listing::build(c.list().await?, filter, None),
            Client::Azure(c) => Listing::build(c.list().await?, filter, None),
            Client::Hf(c) => {
                let (sha, objects) = c.list().await?;
                Listing::build(objects, filter, Some(sha))
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
        }
    }
}

/// The bytes of one ranged read as they arrive.
pub enum Body {
    S3(aws_sdk_s3::primitives::ByteStream),
    Http(reqwest::Response),
    Stream(futures::stream::BoxStream<'static, Result<Bytes>>),
}

impl Body {
    /// The next piece, or `None` at the end. A failure mid-body is transient: the
    /// caller reads on from where it stopped.
    pub async fn next(&mut self, what: &str) -> Result<Option<Bytes>> {
        let cut = |e: &dyn std::fmt::Display| {
            Error::new(
                crate::error::ErrorKind::Unavailable,
                format!("{what}: the connection failed mid-read: {e}"),
            )
        };
        match self {
            Body::S3(b) => b.try_next().await.map_err(|e| cut(&e)),
            Body::Http(r) => r.chunk().await.map_err(|e| cut(&e)),
            Body::Stream(s) => futures::StreamExt::next(s).await.transpose(),
        }
    }
}
