//! Signatures of sealed versions in the OpenSSF model-signing format (model-signing
//! 1.x on PyPI): a Sigstore bundle holding a DSSE envelope over an in-toto statement
//! whose predicate lists every file of the version with its digest, signed with an
//! EC P-256 key. sealvol's manifests already hold each file's plain BLAKE3 hash, so a
//! version is signed without reading its bytes.
//!
//! - `statement`: the in-toto statement a version's files give, and the one a
//!   signature carries, parsed strictly and bounded;
//! - `bundle`: the Sigstore bundle and DSSE envelope around it (PAE, base64);
//! - `keys`: PEM keys, P-256 only, and the key hint the bundle carries;
//! - `check`: a verified statement against a version's files (missing, extra, other);
//! - `version`: a sealed version's files and digests, the statement it gives;
//! - `verdict`: a version's stored signatures checked against keys, and why none counts;
//! - `policy`: which keys each namespace's versions must be signed by (config.toml,
//!   deployment files), and the one refusal every reader gives.
//!
//! Where signatures are stored is core's; where the policy is written is the embedder's.

pub mod bundle;
pub mod check;
pub mod keys;
pub mod policy;
pub mod statement;
pub mod verdict;
pub mod version;

pub use bundle::{Signed, sign, verify};
pub use keys::{PublicKey, SigningKey};
pub use policy::{Admitted, Policy, Rules, Standing};
pub use statement::{Algorithm, Resource, Statement};
