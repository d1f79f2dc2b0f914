//! Uploading a finished pack file: one request when it is small, a multipart upload
//! when it is large, its parts read from the file and sent several at once (bounded
//! by the store's `parts` semaphore, shared by every upload). The object appears only
//! when the upload is completed, with `If-None-Match: *`: a cut or failed upload leaves
//! no object, and is aborted so that the service frees its parts.

use std::path::Path;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use sealvol_core::error::{Error, ErrorKind, IoContext, Result};
use sealvol_source::retry::retrying;

use crate::requests::{Condition, Expect, Inner};

/// Bytes per part; files up to this size go in one request.
pub(crate) const PART: u64 = 16 << 20;

pub(crate) async fn file_if_absent(inner: &Inner, key: &str, path: &Path) -> Result<bool> {
    let size = std::fs::metadata(path).ctx("cannot read", path)?.len();
    if size <= PART {
        let data = std::fs::read(path).ctx("cannot read", path)?;
        return inner.put(key, &data, Condition::Absent).await;
    }
    let full = inner.key(key);
    let at = format!("{}{key}", inner.shown);
    let id = retrying(&at, || async {
        inner.traffic.put(0);
        let out = inner
            .client
            .create_multipart_upload()
            .bucket(&inner.bucket)
            .key(&full)
            .send()
            .await
            .map_err(|e| inner.fail("start uploading", key, Expect::Plain, e).error())?;
        out.upload_id().map(str::to_string).ok_or_else(|| {
            Error::new(
                ErrorKind::Io,
                format!("{at}: the service gave no upload id"),
            )
        })
    })
    .await?;
    let result = parts_then_complete(inner, key, &full, &id, path, size).await;
    if !matches!(result, Ok(true)) {
        // Nothing references an unfinished upload; abort it so its parts are freed.
        inner.traffic.delete();
        let _ = inner
            .client
            .abort_multipart_upload()
            .bucket(&inner.bucket)
            .key(&full)
            .upload_id(&id)
            .send()
            .await;
    }
    result
}

async fn parts_then_complete(
    inner: &Inner,
    key: &str,
    full: &str,
    id: &str,
    path: &Path,
    size: u64,
) -> Result<bool> {
    let count = size.div_ceil(PART);
    let uploads = (0..count).map(|n| async move {
        let _permit = inner
            .parts
            .acquire()
            .await
            .map_err(|_| Error::new(ErrorKind::Io, "the S3 client stopped"))?;
        let offset = n * PART;
        let len = PART.min(size - offset);
        let data = read_at(path, offset, len)?;
        let number = i32::try_from(n + 1)
            .map_err(|_| Error::invalid(format!("{} is too large to upload", path.display())))?;
        let at = format!("{}{key} (part {number})", inner.shown);
        let part = retrying(&at, || async {
            inner.traffic.put(data.len() as u64);
            let out = inner
                .client
                .upload_part()
                .bucket(&inner.bucket)
                .key(full)
                .upload_id(id)
                .part_number(number)
                .body(ByteStream::from(data.clone()))
                .send()
                .await
                .map_err(|e| inner.fail("upload", key, Expect::Plain, e).error())?;
            // The part's checksum, if the SDK sent one, is named again at the end.
            Ok(CompletedPart::builder()
                .part_number(number)
                .e_tag(out.e_tag().unwrap_or_default())
                .set_checksum_crc32(out.checksum_crc32().map(str::to_string))
                .set_checksum_crc32_c(out.checksum_crc32_c().map(str::to_string))
                .set_checksum_crc64_nvme(out.checksum_crc64_nvme().map(str::to_string))
                .set_checksum_sha1(out.checksum_sha1().map(str::to_string))
                .set_checksum_sha256(out.checksum_sha256().map(str::to_string))
                .build())
        })
        .await?;
        Ok::<_, Error>(part)
    });
    let parts: Vec<CompletedPart> = futures::future::try_join_all(uploads).await?;
    let done = CompletedMultipartUpload::builder()
        .set_parts(Some(parts))
        .build();
    retrying(&format!("{}{key}", inner.shown), || async {
        inner.traffic.put(0);
        match inner
            .client
            .complete_multipart_upload()
            .bucket(&inner.bucket)
            .key(full)
            .upload_id(id)
            .multipart_upload(done.clone())
            .if_none_match("*")
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if answered_ok(&e) => completed_anyway(inner, key, size).await,
            Err(e) => inner
                .fail("finish uploading", key, Expect::Conditional, e)
                .raced(),
        }
    })
    .await
}

/// A `200 OK` the SDK calls a failure: moto answers a completed upload with a
/// `CompleteMultipartUploadResponse` root where S3 says `…Result`. (An S3 error after
/// a 200 has an `<Error>` body, which the SDK reads as the service error it is.)
fn answered_ok<E: aws_sdk_s3::error::ProvideErrorMetadata>(
    e: &aws_sdk_s3::error::SdkError<E>,
) -> bool {
    matches!(e, aws_sdk_s3::error::SdkError::ServiceError(se)
        if se.raw().status().as_u16() == 200 && se.err().code().is_none())
}

/// After such an answer: whether the object is there, whole.
async fn completed_anyway(inner: &Inner, key: &str, size: u64) -> Result<bool> {
    match inner.head(key).await? {
        Some((stored, _)) if stored == size => Ok(true),
        _ => Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "{}{key}: the upload was answered, but is not there",
                inner.shown
            ),
        )),
    }
}

/// Aborts the multipart uploads under the prefix that `stale` says were started long
/// ago: a process killed mid-upload leaves one behind.
pub(crate) async fn abort_stale(
    inner: &Inner,
    stale: impl Fn(Option<std::time::SystemTime>) -> bool,
) -> Result<()> {
    let out = retrying(&inner.shown, || async {
        inner.traffic.list();
        inner
            .client
            .list_multipart_uploads()
            .bucket(&inner.bucket)
            .prefix(&inner.prefix)
            .send()
            .await
            .map_err(|e| inner.fail("list uploads", "", Expect::Plain, e).error())
    })
    .await?;
    for u in out.uploads() {
        let started = u
            .initiated()
            .and_then(|t| std::time::SystemTime::try_from(*t).ok());
        let (Some(key), Some(id)) = (u.key(), u.upload_id()) else {
            continue;
        };
        if stale(started) {
            inner.traffic.delete();
            let _ = inner
                .client
                .abort_multipart_upload()
                .bucket(&inner.bucket)
                .key(key)
                .upload_id(id)
                .send()
                .await;
            tracing::info!("aborted an upload of {key} left unfinished since {started:?}");
        }
    }
    Ok(())
}

fn read_at(path: &Path, offset: u64, len: u64) -> Result<bytes::Bytes> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).ctx("cannot read", path)?;
    let mut buf = vec![0; len as usize];
    f.read_exact_at(&mut buf, offset).ctx("cannot read", path)?;
    Ok(bytes::Bytes::from(buf))
}
