//! OCI image layouts on this machine (`oci:DIR[:NAME]`, as skopeo and `volume export`
//! write them): the image's manifest is found and checked as `sealvol_oci::layout`
//! reads it, its layers taken as files exactly as from a registry (`oci::layers`: the
//! same refusals), and each blob read from `blobs/sha256/`, checked against its
//! SHA-256 as it streams. A blob of another size than its descriptor says is refused
//! before a byte is read.

use std::io::SeekFrom;
use std::ops::Range;
use std::path::PathBuf;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::body::Body;
use sealvol_core::error::{Error, Result};
use sealvol_source::listing::{Object, RawObject};
use sealvol_source::url::SourceUrl;

/// The most read from a blob file at once.
const PIECE: usize = 1 << 20;

pub struct Layout {
    dir: PathBuf,
    name: Option<String>,
    shown: String,
}

impl Layout {
    pub fn connect(url: &SourceUrl) -> Result<Layout> {
        let SourceUrl::OciLayout { dir, name } = url else {
            return Err(Error::invalid(format!("{url} is not an OCI image layout")));
        };
        Ok(Layout {
            dir: dir.clone(),
            name: name.clone(),
            shown: url.to_string(),
        })
    }

    /// The manifest's digest, and its layers as files.
    pub fn list(&self) -> Result<(String, Vec<RawObject>)> {
        let found = sealvol_oci::layout::find(&self.dir, self.name.as_deref())?;
        let objects = crate::oci::layers(&self.shown, &found.manifest)?;
        Ok((found.digest, objects))
    }

    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        let path = sealvol_oci::layout::blob(&self.dir, &obj.version)?;
        let what = format!("{} {}", self.shown, obj.key);
        let io = |e: std::io::Error| Error::io(&format!("{what}: cannot read"), &path, e);
        let mut f = tokio::fs::File::open(&path).await.map_err(io)?;
        let len = f.metadata().await.map_err(io)?.len();
        if len != obj.size {
            return Err(Error::corrupt(format!(
                "{what}: the blob is {len} bytes, its descriptor says {}",
                obj.size
            ))
            .hint("the layout is damaged: copy it again"));
        }
        f.seek(SeekFrom::Start(range.start)).await.map_err(io)?;
        let left = range.end.saturating_sub(range.start);
        let stream = futures::stream::try_unfold((f, left), move |(mut f, left)| {
            let path = path.clone();
            async move {
                if left == 0 {
                    return Ok(None);
                }
                let mut buf = vec![0u8; (left as usize).min(PIECE)];
                let n = f
                    .read(&mut buf)
                    .await
                    .map_err(|e| Error::io("cannot read", &path, e))?;
                if n == 0 {
                    return Err(Error::corrupt(format!(
                        "{}: the blob ended {left} bytes early",
                        path.display()
                    )));
                }
                buf.truncate(n);
                Ok(Some((Bytes::from(buf), (f, left - n as u64))))
            }
        });
        Ok(Body::Stream(Box::pin(stream)))
    }
}
