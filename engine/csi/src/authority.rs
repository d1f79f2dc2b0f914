//! Any `:authority` on the plugin's socket. kubelet sends `localhost`; other gRPC
//! clients send what they were given (Python's grpcio: the socket's path), and the CSI
//! spec lets a client name any authority on a unix socket. h2, under tonic, resets a
//! stream whose authority does not parse as one (a path does not) before any handler
//! runs, and has no switch for it. So each connection passes through this shim: the
//! server's bytes go back untouched; the client's frames go on as they came, except
//! header blocks, which are decoded and encoded again, an authority that would not
//! parse (`/csi/csi.sock`) replaced by `localhost`.
//!
//! The encoder is a fresh HPACK context that only this shim feeds, so the server's
//! decoder stays in step with it whatever the client's encoder does. A header block is
//! bounded (`MAX_BLOCK`); a client that sends a larger one, breaks HPACK, or interleaves
//! frames inside a block loses its connection, as h2 would drop it.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::UnixStream;
use tonic::codegen::http::uri::Authority;

/// What a connection's client must send first (RFC 9113, 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The largest header block (all its frames) taken from a client.
const MAX_BLOCK: usize = 256 << 10;
/// The frame size every HTTP/2 peer takes (SETTINGS_MAX_FRAME_SIZE's initial value).
const MAX_FRAME: usize = 16 << 10;
/// The authority given in place of one that does not parse.
const STAND_IN: &[u8] = b"localhost";

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// The server's end of `client`'s connection, through the shim (two tasks, which end
/// with the connection).
pub fn accept(client: UnixStream) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(64 << 10);
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = tokio::io::split(ours);
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        let _ = to_client.shutdown().await;
    });
    tokio::spawn(async move {
        if let Err(e) = forward(&mut from_client, &mut to_server).await {
            tracing::debug!("a CSI client's connection ended: {e}");
        }
        let _ = to_server.shutdown().await;
    });
    theirs
}

/// One frame's header (RFC 9113, 4.1).
struct Head {
    len: usize,
    kind: u8,
    flags: u8,
    stream: [u8; 4],
}

impl Head {
    fn parse(b: &[u8; 9]) -> Head {
        Head {
            len: usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: [b[5], b[6], b[7], b[8]],
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[
            (self.len >> 16) as u8,
            (self.len >> 8) as u8,
            self.len as u8,
            self.kind,
            self.flags,
        ]);
        out.extend_from_slice(&self.stream);
    }
}

fn broken(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string())
}

/// The client's bytes to the server, header blocks made acceptable.
async fn forward(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
) -> std::io::Result<()> {
    let mut preface = [0u8; 24];
    from.read_exact(&mut preface).await?;
    to.write_all(&preface).await?;
    if &preface != PREFACE {
        // Not HTTP/2 with prior knowledge: the server says so; nothing to rewrite.
        tokio::io::copy(from, to).await?;
        return Ok(());
    }
    let mut decoder = loona_hpack::Decoder::new();
    // What the server lets a client's encoder use (it announces no other size).
    decoder.set_max_allowed_table_size(4096);
    let mut encoder = loona_hpack::Encoder::new();
    let mut head = [0u8; 9];
    loop {
        match from.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let h = Head::parse(&head);
        if h.kind != HEADERS {
            // Any other frame as it came, streamed (a DATA frame is not held whole).
            to.write_all(&head).await?;
            let copied = tokio::io::copy(&mut from.take(h.len as u64), to).await?;
            if copied < h.len as u64 {
                return Ok(());
            }
            continue;
        }
        if h.len > MAX_BLOCK {
            return Err(broken("a header block over the limit"));
        }
        let mut payload = vec![0u8; h.len];
        from.read_exact(&mut payload).await?;
        let (priority, mut block) = fragment(&h, &payload)?;
        let mut end = h.flags & END_HEADERS != 0;
        while !end {
            from.read_exact(&mut head).await?;
            let c = Head::parse(&head);
            if c.kind != CONTINUATION || c.stream != h.stream {
                return Err(broken("a frame inside a header block"));
            }
            if block.len() + c.len > MAX_BLOCK {
                return Err(broken("a header block over the limit"));
            }
            let at = block.len();
            block.resize(at + c.len, 0);
            from.read_exact(&mut block[at..]).await?;
            end = c.flags & END_HEADERS != 0;
        }
        let fields = decoder
            .decode(&block)
            .map_err(|e| broken(&format!("a header block HPACK cannot read: {e:?}")))?;
        let fields: Vec<(Vec<u8>, Vec<u8>)> = fields
            .into_iter()
            .map(|(name, value)| match name.as_slice() {
                b":authority" if Authority::try_from(value.as_slice()).is_err() => {
                    (name, STAND_IN.to_vec())
                }
                _ => (name, value),
            })
            .collect();
        let encoded = encoder.encode(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        to.write_all(&frames(&h, priority, &encoded)).await?;
    }
}

/// A HEADERS frame's priority fields (if any) and its block fragment, padding dropped.
fn fragment<'a>(h: &Head, payload: &'a [u8]) -> std::io::Result<(Option<&'a [u8]>, Vec<u8>)> {
    let mut at = 0;
    let mut end = payload.len();
    if h.flags & PADDED != 0 {
        let pad = usize::from(
            *payload
                .first()
                .ok_or_else(|| broken("a padded frame with no pad length"))?,
        );
        at = 1;
        end = end
            .checked_sub(pad)
            .filter(|e| *e >= at)
            .ok_or_else(|| broken("more padding than frame"))?;
    }
    let mut priority = None;
    if h.flags & PRIORITY != 0 {
        priority = Some(
            payload
                .get(at..at + 5)
                .filter(|_| at + 5 <= end)
                .ok_or_else(|| broken("a priority frame too short"))?,
        );
        at += 5;
    }
    Ok((priority, payload[at..end].to_vec()))
}

/// `block` as a HEADERS frame (with `priority` and the first frame's END_STREAM) and as
/// many CONTINUATION frames as it needs.
fn frames(first: &Head, priority: Option<&[u8]>, block: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + 64);
    let room = MAX_FRAME - priority.map_or(0, <[u8]>::len);
    let (head, mut rest) = block.split_at(block.len().min(room));
    let mut flags = first.flags & (END_STREAM | PRIORITY);
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    Head {
        len: head.len() + priority.map_or(0, <[u8]>::len),
        kind: HEADERS,
        flags,
        stream: first.stream,
    }
    .write(&mut out);
    if let Some(p) = priority {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(head);
    while !rest.is_empty() {
        let (part, after) = rest.split_at(rest.len().min(MAX_FRAME));
        Head {
            len: part.len(),
            kind: CONTINUATION,
            flags: if after.is_empty() { END_HEADERS } else { 0 },
            stream: first.stream,
        }
        .write(&mut out);
        out.extend_from_slice(part);
        rest = after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's request head, HPACK-encoded by a context of its own.
    fn request(enc: &mut loona_hpack::Encoder, authority: &[u8]) -> Vec<u8> {
        let fields: [(&[u8], &[u8]); 5] = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/csi.v1.Identity/Probe"),
            (b":authority", authority),
            (b"content-type", b"application/grpc"),
        ];
        enc.encode(fields)
    }

    fn frame(kind: u8, flags: u8, stream: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Head {
            len: payload.len(),
            kind,
            flags,
            stream: [0, 0, 0, stream],
        }
        .write(&mut out);
        out.extend_from_slice(payload);
        out
    }

    /// What the server receives for `client`'s bytes, and its header blocks decoded.
    async fn through(client: Vec<u8>) -> (Vec<u8>, Vec<Vec<(Vec<u8>, Vec<u8>)>>) {
        let mut out = Vec::new();
        forward(&mut client.as_slice(), &mut out).await.unwrap();
        let mut blocks = Vec::new();
        let mut dec = loona_hpack::Decoder::new();
        let mut at = 24;
        let mut block = Vec::new();
        while at < out.len() {
            let h = Head::parse(out[at..at + 9].try_into().unwrap());
            let payload = &out[at + 9..at + 9 + h.len];
            if h.kind == HEADERS || h.kind == CONTINUATION {
                let skip = if h.flags & PRIORITY != 0 && h.kind == HEADERS {
                    5
                } else {
                    0
                };
                block.extend_from_slice(&payload[skip..]);
                if h.flags & END_HEADERS != 0 {
                    blocks.push(dec.decode(&block).unwrap());
                    block.clear();
                }
            }
            at += 9 + h.len;
        }
        (out, blocks)
    }

    fn authority(fields: &[(Vec<u8>, Vec<u8>)]) -> &[u8] {
        &fields.iter().find(|(n, _)| n == b":authority").unwrap().1
    }

    #[tokio::test]
    async fn a_path_for_an_authority_becomes_localhost_and_the_rest_goes_on_as_it_came() {
        let mut enc = loona_hpack::Encoder::new();
        let mut client = PREFACE.to_vec();
        client.extend(frame(0x4, 0, 0, &[])); // SETTINGS
        // grpcio's way: the socket's path; then kubelet's, on the same connection (the
        // client's dynamic table now holds the first request's fields).
        client.extend(frame(
            HEADERS,
            END_HEADERS,
            1,
            &request(&mut enc, b"/csi/csi.sock"),
        ));
        client.extend(frame(0x0, END_STREAM, 1, b"\0\0\0\0\0")); // DATA
        let second = request(&mut enc, b"localhost");
        // Padded, with priority, split over a CONTINUATION.
        let mut payload = vec![3u8];
        payload.extend_from_slice(&[0, 0, 0, 0, 15]);
        payload.extend_from_slice(&second[..4]);
        payload.extend_from_slice(&[0, 0, 0]);
        client.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 3, &payload));
        client.extend(frame(CONTINUATION, END_HEADERS, 3, &second[4..]));
        let (out, blocks) = through(client.clone()).await;
        assert_eq!(&out[..24], PREFACE);
        assert_eq!(blocks.len(), 2);
        assert_eq!(authority(&blocks[0]), b"localhost");
        assert_eq!(authority(&blocks[1]), b"localhost");
        assert_eq!(blocks[0][2].1, b"/csi.v1.Identity/Probe");
        // The DATA frame is byte for byte what the client sent.
        let data = frame(0x0, END_STREAM, 1, b"\0\0\0\0\0");
        assert!(out.windows(data.len()).any(|w| w == data.as_slice()));
        // A good authority is kept as it is.
        let mut enc = loona_hpack::Encoder::new();
        let mut client = PREFACE.to_vec();
        client.extend(frame(
            HEADERS,
            END_HEADERS,
            1,
            &request(&mut enc, b"csi.example:1"),
        ));
        let (_, blocks) = through(client).await;
        assert_eq!(authority(&blocks[0]), b"csi.example:1");
    }

    #[tokio::test]
    async fn a_hostile_header_block_ends_the_connection() {
        let mut enc = loona_hpack::Encoder::new();
        let good = request(&mut enc, b"x");
        let cases: Vec<Vec<u8>> = vec![
            // A frame of another stream inside a block.
            [frame(HEADERS, 0, 1, &good[..3]), frame(0x0, 0, 3, b"x")].concat(),
            // Over the limit, in CONTINUATION frames.
            [
                frame(HEADERS, 0, 1, &good[..3]),
                frame(CONTINUATION, 0, 1, &vec![0u8; MAX_FRAME]),
            ]
            .into_iter()
            .chain(
                (0..MAX_BLOCK / MAX_FRAME)
                    .map(|_| frame(CONTINUATION, 0, 1, &vec![0u8; MAX_FRAME])),
            )
            .collect::<Vec<_>>()
            .concat(),
            // Not HPACK.
            frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff, 0xff, 0xff, 0xff]),
            // More padding than frame.
            frame(HEADERS, END_HEADERS | PADDED, 1, &[9, 1]),
        ];
        for c in cases {
            let mut client = PREFACE.to_vec();
            client.extend(c);
            let mut out = Vec::new();
            assert!(forward(&mut client.as_slice(), &mut out).await.is_err());
        }
    }
}
