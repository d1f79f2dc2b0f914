//! A file's bytes as a response body, for the routes that send whole files (the Hub's
//! `resolve`, the registry's blobs): bytes `[start, end)` proven a window at a time on
//! a blocking thread (`held::HeldChunks`) and queued while the one before is sent, so a
//! slow reader holds a window or two, never the file, within its share of the runs'
//! budget. Bytes that fail their proof end the body early (the client's length check
//! fails) and are written down, never sent; a client that goes away stops the reads.

use std::ops::Range;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use futures::StreamExt;
use sealvol_core::objects::FileObject;
use sealvol_core::read::Chunks as _;

use crate::chunks::ChunkService;
use crate::held::HeldChunks;

/// The bytes one window of a body holds.
pub const WINDOW: u64 = 4 << 20;

/// Bytes `range` of `obj`; `on_sent` is told how many bytes each window held.
pub fn proven(
    chunks: Arc<ChunkService>,
    obj: FileObject,
    range: Range<u64>,
    share: crate::budget::Share,
    on_sent: Box<dyn Fn(u64) + Send>,
) -> Body {
    let (start, end) = (range.start, range.end);
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<Bytes>>>(1);
    tokio::task::spawn_blocking(move || {
        let _share = share;
        let held = HeldChunks::new(&chunks, chunks.repository());
        let mut pos = start;
        while pos < end {
            let first = obj.chunk_at(pos);
            let mut last = first + 1;
            while last < obj.chunks.len()
                && obj.start_of(last) < end
                && obj.start_of(last + 1) - pos <= WINDOW
            {
                last += 1;
            }
            let wend = obj.start_of(last).min(end);
            let window = match held.fetch_covering(&obj, pos, wend) {
                Ok(got) => {
                    let mut pieces = Vec::with_capacity(got.len());
                    let mut at = obj.start_of(first);
                    for c in got {
                        let c_end = at + c.len() as u64;
                        let (a, b) = (pos.max(at), wend.min(c_end));
                        if a < b {
                            let piece = c.sub((a - at) as usize..(b - at) as usize);
                            pieces.push(Bytes::from_owner(piece));
                        }
                        at = c_end;
                    }
                    Ok(pieces)
                }
                Err(e) => {
                    tracing::warn!(
                        "a download of file {} stopped at byte {pos}: {e}",
                        obj.hash.hex()
                    );
                    Err(std::io::Error::other(e.to_string()))
                }
            };
            if let Ok(pieces) = &window {
                let n = pieces.iter().map(Bytes::len).sum::<usize>() as u64;
                sealvol_core::read::add(&chunks.counters.bytes_served, n);
                on_sent(n);
            }
            let failed = window.is_err();
            // The client went away: nothing more is read for it.
            if tx.blocking_send(window).is_err() || failed {
                return;
            }
            pos = wend;
        }
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx).flat_map(|w| {
        futures::stream::iter(match w {
            Ok(pieces) => pieces.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        })
    });
    Body::from_stream(frames)
}
