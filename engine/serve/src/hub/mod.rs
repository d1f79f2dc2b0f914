//! The Hugging Face Hub's read API over the repository (`/hf/`): what HF tools
//! (`huggingface_hub`, `transformers`, `hf download`) ask, answered with sealed, proven
//! versions, so that pointing `HF_ENDPOINT` at a server is the whole change a loader
//! needs. Being built (issue 62); so far:
//!
//! - `revision`: a Hub revision (`main`, a tag, a digest, a 40-hex commit id) as the
//!   version it names (docs/SEMANTICS.md, "The Hugging Face Hub's API");
//! - `ids`: the ids the Hub's clients check: a version's commit id, a small file's git
//!   blob id, and which files the Hub would keep in LFS;
//! - `info`: a repo at a revision (`/hf/api/models/NS/VOL[/revision/REV]`).

pub mod ids;
pub mod info;
pub mod revision;
