//! The operations a client asks its server for (`sealvol_core::ops::Registry`, `sealvol_core::remote::Remote`), over
//! the server's `/v1/ops/` routes (serve's `ops.rs`, which says what each checks).

use std::sync::Arc;

use reqwest::Method;
use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::objects::{PackEntry, PackId};
use sealvol_core::ops::{GcOptions, Registry, SealRequest, TagRequest};
use sealvol_core::possession::{Challenge, Evidence, Named};
use sealvol_core::refs::{Digest, Ref};
use sealvol_core::registry::{Sealed, TagMoved};
use sealvol_core::remote::{Held, HeldAnswer, Remote};
use sealvol_core::trash::{Deleted, Restored};

use super::link::Link;
use sealvol_wire::named::{encode_list, encode_small};
use sealvol_wire::ops::{
    DamageBody, GcBody, LabelBody, SealBody, SealedBody, SignedBody, StoredFiles, TagBody,
    TagMovedBody, TrashBody,
};

pub struct RemoteOps {
    link: Arc<Link>,
}

impl RemoteOps {
    pub fn new(link: Arc<Link>) -> RemoteOps {
        RemoteOps { link }
    }

    fn json<T: serde::de::DeserializeOwned>(
        &self,
        op: &str,
        body: &impl serde::Serialize,
    ) -> Result<T> {
        let body = serde_json::to_vec(body)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot write a request: {e}")))?;
        let (_, answer) = self.link.op(Method::POST, op, body)?;
        serde_json::from_slice(&answer).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "the remote engine at {} answered {op} with no JSON: {e}",
                    self.link.base
                ),
            )
        })
    }
}

fn hashes(hashes: &[Hash]) -> Vec<u8> {
    hashes.iter().flat_map(|h| h.0).collect()
}

fn by() -> Option<String> {
    Some(sealvol_core::stamp::whoami())
}

impl Remote for RemoteOps {
    fn have_chunks(&self, asked: &[Hash]) -> Result<HeldAnswer> {
        let mut held = Vec::with_capacity(asked.len());
        let mut challenge = None;
        for part in asked.chunks(sealvol_wire::ops::MAX_ASK) {
            let (_, headers, answer) =
                self.link
                    .op_with_headers(Method::POST, "have-chunks", hashes(part))?;
            if answer.len() != part.len() {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "the remote engine at {} answered for {} chunks, not {}",
                        self.link.base,
                        answer.len(),
                        part.len()
                    ),
                ));
            }
            if let Some(c) = headers
                .get(sealvol_wire::ops::CHALLENGE_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(Challenge::parse_hex)
            {
                challenge = Some(c);
            }
            for b in answer {
                held.push(match b {
                    0 => Held::No,
                    1 => Held::Yours,
                    2 => Held::Prove,
                    other => {
                        return Err(Error::new(
                            ErrorKind::Io,
                            format!(
                                "the remote engine at {} answered {other} for a chunk (0, 1 or 2)",
                                self.link.base
                            ),
                        ));
                    }
                });
            }
        }
        Ok(HeldAnswer { held, challenge })
    }

    fn stored_files(&self, asked: &[Hash]) -> Result<Vec<Option<u64>>> {
        let mut out = Vec::with_capacity(asked.len());
        for part in asked.chunks(sealvol_wire::ops::MAX_ASK) {
            let (_, answer) = self.link.op(Method::POST, "stored-files", hashes(part))?;
            let a: StoredFiles = serde_json::from_slice(&answer).map_err(|e| {
                Error::new(ErrorKind::Io, format!("stored-files answered no JSON: {e}"))
            })?;
            if a.chunks.len() != part.len() {
                return Err(Error::new(
                    ErrorKind::Io,
                    "stored-files answered for other files",
                ));
            }
            out.extend(a.chunks);
        }
        Ok(out)
    }

    fn put_list(&self, hash: &Hash, size: u64, chunks: &[Named]) -> Result<bool> {
        let (status, _) = self.link.op(
            Method::PUT,
            &format!("lists/{}", hash.hex()),
            encode_list(size, chunks),
        )?;
        Ok(status == 201)
    }

    fn put_small_files(&self, files: &[(Hash, u64, Evidence)]) -> Result<Vec<bool>> {
        let mut out = Vec::with_capacity(files.len());
        for part in files.chunks(sealvol_wire::ops::MAX_ASK) {
            let named: Vec<Named> = part
                .iter()
                .map(|(h, size, evidence)| Named {
                    hash: *h,
                    len: *size as u32,
                    evidence: *evidence,
                })
                .collect();
            let answer = match self
                .link
                .op(Method::POST, "small-files", encode_small(&named))
            {
                Ok((_, answer)) => answer,
                // A server from before small files: every list goes one by one.
                Err(e) if e.kind() == ErrorKind::NotFound => vec![0; part.len()],
                Err(e) => return Err(e),
            };
            if answer.len() != part.len() {
                return Err(Error::new(
                    ErrorKind::Io,
                    "small-files answered for other files",
                ));
            }
            out.extend(answer.into_iter().map(|b| b != 0));
        }
        Ok(out)
    }

    fn collect(&self, opts: &GcOptions) -> Result<sealvol_core::gc::GcReport> {
        opts.progress.note("garbage collection runs on the server");
        self.json(
            "gc",
            &GcBody {
                dry_run: opts.dry_run,
            },
        )
    }
}

/// The registry's operations, asked of the server: it checks each and makes it.
impl Registry for RemoteOps {
    /// The server dates the version and finds its small files' packs itself; what a
    /// writer built on, it knows of its own (`since`).
    fn seal(&self, req: SealRequest) -> Result<Sealed> {
        let body = SealBody {
            volume: req.volume.to_string(),
            tags: req.tags.iter().map(|t| t.to_string()).collect(),
            entries: req.entries,
            stats: req.stats,
            provenance: req.provenance,
        };
        let s: SealedBody = self.json("seal", &body)?;
        Ok(Sealed {
            digest: Digest::parse(&s.digest)?,
            new: s.new,
            restored: s.restored,
            tags: s.tags,
        })
    }

    fn put_signature(
        &self,
        vol: &sealvol_core::refs::VolumeName,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<(String, bool)> {
        let (_, answer) = self.link.op(
            Method::PUT,
            &format!("signatures/{vol}/{}", digest.hex()),
            bytes.to_vec(),
        )?;
        let s: SignedBody = serde_json::from_slice(&answer).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "the remote engine at {} answered a signature with no JSON: {e}",
                    self.link.base
                ),
            )
        })?;
        Ok((s.key, s.new))
    }

    fn change_tag(&self, req: &TagRequest) -> Result<TagMoved> {
        let body = TagBody {
            volume: req.volume.to_string(),
            tag: req.tag.to_string(),
            to: req.to.map(|d| d.to_string()),
            expected: req.expected.map(|e| e.map(|d| d.to_string())),
            by: by(),
            expires: req.expires.clone(),
        };
        let m: TagMovedBody = self.json("tag", &body)?;
        Ok(TagMoved {
            file: m.file,
            from: m.from,
            moved: m.moved,
            kept_damaged: m.kept_damaged,
        })
    }

    fn change_labels(
        &self,
        req: &sealvol_core::labels::LabelRequest,
    ) -> Result<sealvol_core::labels::LabelsChanged> {
        self.json(
            "labels",
            &LabelBody {
                volume: req.volume.to_string(),
                digest: req.digest.to_string(),
                set: req.set.clone(),
                remove: req.remove.clone(),
                by: by(),
            },
        )
    }

    fn delete_version(&self, r: &Ref, untag: bool) -> Result<Deleted> {
        self.json(
            "delete",
            &TrashBody {
                r: r.to_string(),
                untag,
                by: by(),
            },
        )
    }

    fn restore_version(&self, r: &Ref) -> Result<Restored> {
        self.json(
            "restore",
            &TrashBody {
                r: r.to_string(),
                untag: false,
                by: by(),
            },
        )
    }

    /// The server reads the copy itself, and records it only if it fails there too.
    fn report_damage(&self, pack: &PackId, entry: &PackEntry, _found_by: &str) -> Result<()> {
        let body = DamageBody {
            pack: pack.hex(),
            chunk: entry.hash.hex(),
            offset: entry.offset,
            len: entry.stored_len,
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot write a report: {e}")))?;
        self.link.op(Method::POST, "damage", body).map(|_| ())
    }

    /// The server proves what it sends and records what fails there itself.
    fn report_list_damage(&self, _hash: &Hash, _problem: &str, _found_by: &str) -> Result<()> {
        Ok(())
    }
}
