//! A sealed version exported as a ModelPack artifact: its SHA-256s (kept beside the
//! version once computed, `sealvol_sign::version`), then each distinct file read from
//! the repository, every byte proven against the version before it is written, into
//! the destination.

use std::path::Path;
use std::sync::Arc;

use sealvol_core::manifest::Manifest;
use sealvol_core::read::{Chunks, Tiers};
use sealvol_core::{Digest, Repository, Result, VolumeName};

use crate::artifact::{self, Artifact};
use crate::layout::{self, Written};

/// The artifact of `volume@digest` (whose manifest is `m`), its SHA-256s read once.
pub fn artifact_of(
    repo: &Arc<Repository>,
    volume: &VolumeName,
    digest: &Digest,
    m: &Manifest,
) -> Result<Artifact> {
    let sha = sealvol_sign::version::sha256s_kept_or_read(repo, volume, digest, m)?;
    artifact::of_version(m, &sha)
}

/// Writes `art` (of a version whose manifest is `m`) into the layout at `dir` under
/// `name`, its bytes read through `tiers`.
pub fn to_layout(
    tiers: &Tiers,
    m: &Manifest,
    art: &Artifact,
    dir: &Path,
    name: Option<&str>,
) -> Result<Written> {
    let small = m.small_files();
    layout::write(dir, art, name, &mut |layer, sink| {
        if layer.size == 0 {
            return Ok(());
        }
        let obj = tiers.repo().file_list(&layer.hash, layer.size, &small)?;
        // Every byte proven to be the file's before the sink sees it.
        tiers.for_each(&obj, 0..obj.chunks.len(), &mut |c| sink(c))
    })
}

/// A reader of `layer`'s bytes from `offset` on, proven as they are read through
/// `tiers` on a thread of its own (a few chunks ahead of the reader, never the file).
pub fn layer_reader(
    tiers: Arc<Tiers>,
    m: &Manifest,
    layer: &crate::Layer,
    offset: u64,
) -> Result<Box<dyn std::io::Read + Send>> {
    if offset >= layer.size {
        return Ok(Box::new(std::io::empty()));
    }
    let obj = tiers
        .repo()
        .file_list(&layer.hash, layer.size, &m.small_files())?;
    let first = obj.chunk_at(offset);
    // The first chunk's bytes before `offset` are proven with it, then left out.
    let mut skip = (offset - obj.start_of(first)) as usize;
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<Vec<u8>>>(4);
    std::thread::Builder::new()
        .name("sealvol-oci-layer".into())
        .spawn(move || {
            let read = tiers.for_each(&obj, first..obj.chunks.len(), &mut |c| {
                let piece = c[skip.min(c.len())..].to_vec();
                skip = 0;
                tx.send(Ok(piece))
                    .map_err(|_| sealvol_core::Error::cancelled())
            });
            if let Err(e) = read
                && e.kind() != sealvol_core::ErrorKind::Cancelled
            {
                let _ = tx.send(Err(std::io::Error::other(e.to_string())));
            }
        })
        .map_err(|e| sealvol_core::Error::invalid(format!("cannot start a reader: {e}")))?;
    Ok(Box::new(ChannelReader {
        rx,
        piece: Vec::new(),
        at: 0,
    }))
}

struct ChannelReader {
    rx: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    piece: Vec<u8>,
    at: usize,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.piece.len() {
            match self.rx.recv() {
                Ok(Ok(p)) => {
                    self.piece = p;
                    self.at = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.piece.len() - self.at);
        buf[..n].copy_from_slice(&self.piece[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
