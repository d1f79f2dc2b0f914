//! S3 and the S3-compatible stores (R2, CoreWeave, private servers) as a sync source:
//! listed and read in ranges through the client `sealvol-s3` builds.

use std::ops::Range;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use crate::body::Body;
use sealvol_core::error::{Error, Result};
use sealvol_s3::{Keys, bucket_of, classify, client, endpoint_name, service_status};
use sealvol_source::Access;
use sealvol_source::checks::Expected;
use sealvol_source::endpoints::Resolved;
use sealvol_source::listing::{Object, RawObject};
use sealvol_source::url::SourceUrl;

pub struct S3 {
    client: aws_sdk_s3::Client,
    bucket: String,
    /// "" or ending in `/`.
    prefix: String,
    /// The source as the user wrote it, canonical, for messages.
    shown: String,
    endpoint: String,
}

impl S3 {
    pub async fn connect(url: &SourceUrl, at: &Resolved, access: Access<'_>) -> Result<S3> {
        let Some((bucket, prefix)) = bucket_of(url) else {
            return Err(Error::invalid(format!("{url} is not an S3 source")));
        };
        Ok(S3 {
            client: client(url, at, Keys::of(access)?).await?,
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            shown: url.to_string(),
            endpoint: endpoint_name(at),
        })
    }

    /// Every object under the prefix, a page (1,000 keys) at a time.
    pub async fn list(&self) -> Result<Vec<RawObject>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = sealvol_source::retry::retrying(&self.shown, || async {
                self.client
                    .list_objects_v2()
                    .bucket(&self.bucket)
                    .prefix(&self.prefix)
                    .set_continuation_token(token.clone())
                    .send()
                    .await
                    .map_err(|e| self.sdk_error("list", None, e))
            })
            .await?;
            for o in page.contents() {
                let Some(full) = o.key() else { continue };
                let Some(key) = full.strip_prefix(&self.prefix) else {
                    continue;
                };
                if key.is_empty() {
                    continue; // the prefix's own folder marker
                }
                let etag = o.e_tag().unwrap_or_default();
                out.push(RawObject {
                    key: key.to_string(),
                    size: u64::try_from(o.size().unwrap_or(0)).unwrap_or(0),
                    version: etag.to_string(),
                    // An object written in one part has its MD5 as ETag (32 hex digits;
                    // a multipart one's ends in `-N`), unless it is encrypted with KMS or
                    // a customer's key: the read's answer says so (`Body::voids`).
                    expect: Expected::parse_hex("md5", etag).into_iter().collect(),
                    exec: false,
                });
            }
            token = page.next_continuation_token().map(str::to_string);
            if token.is_none() || page.is_truncated() != Some(true) {
                return Ok(out);
            }
        }
    }

    /// A stream of bytes `range` of `obj`, only if it is still the version listed.
    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        let key = format!("{}{}", self.prefix, obj.key);
        let what = format!("{}{}", self.shown, obj.key);
        sealvol_source::retry::retrying(&what, || async {
            let mut req = self
                .client
                .get_object()
                .bucket(&self.bucket)
                .key(&key)
                .range(format!("bytes={}-{}", range.start, range.end - 1));
            if !obj.version.is_empty() {
                req = req.if_match(&obj.version);
            }
            let out = req
                .send()
                .await
                .map_err(|e| self.sdk_error("read", Some(&obj.key), e))?;
            use aws_sdk_s3::types::ServerSideEncryption as Sse;
            let etag_not_md5 = out.sse_customer_algorithm().is_some()
                || matches!(
                    out.server_side_encryption(),
                    Some(Sse::AwsKms | Sse::AwsKmsDsse)
                );
            Ok(Body::S3 {
                stream: out.body,
                etag_not_md5,
            })
        })
        .await
    }

    /// Turns an SDK failure into our error: transient ones as `Unavailable` (retried),
    /// the rest with what to fix.
    fn sdk_error<E>(&self, doing: &str, key: Option<&str>, e: SdkError<E>) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let at = format!("{}{}", self.shown, key.unwrap_or(""));
        match service_status(&at, doing, &self.endpoint, &e) {
            Ok((status, code)) => classify(&at, doing, status, &code, &self.bucket, &self.endpoint),
            Err(e) => e,
        }
    }
}
