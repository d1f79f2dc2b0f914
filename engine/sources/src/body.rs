//! The bytes of one ranged read as each kind of client delivers them.

use bytes::Bytes;

use sealvol_core::error::{Error, ErrorKind, Result};

/// The bytes of one ranged read as they arrive.
pub enum Body {
    S3 {
        stream: aws_sdk_s3::primitives::ByteStream,
        /// The object's ETag is not the MD5 of its bytes (encrypted with KMS or a
        /// customer's key), whatever it looks like.
        etag_not_md5: bool,
    },
    Http(reqwest::Response),
    Stream(futures::stream::BoxStream<'static, Result<Bytes>>),
}

impl Body {
    /// The kinds of check the source said, as it answered, do not hold for this
    /// object (`verify::Checker::void`).
    pub fn voids(&self) -> Vec<&'static str> {
        match self {
            Body::S3 {
                etag_not_md5: true, ..
            } => vec!["md5"],
            _ => Vec::new(),
        }
    }

    /// The next piece, or `None` at the end. A failure mid-body is transient: the
    /// caller reads on from where it stopped.
    pub async fn next(&mut self, what: &str) -> Result<Option<Bytes>> {
        let cut = |e: &dyn std::fmt::Display| {
            Error::new(
                ErrorKind::Unavailable,
                format!("{what}: the connection failed mid-read: {e}"),
            )
        };
        match self {
            Body::S3 { stream, .. } => stream.try_next().await.map_err(|e| cut(&e)),
            Body::Http(r) => r.chunk().await.map_err(|e| cut(&e)),
            Body::Stream(s) => futures::StreamExt::next(s).await.transpose(),
        }
    }
}
