//! The bytes of one ranged read as each kind of client delivers them.

use bytes::Bytes;

use sealvol_core::error::{Error, ErrorKind, Result};

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
                ErrorKind::Unavailable,
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
