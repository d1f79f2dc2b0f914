//! Sealed versions as OCI artifacts in the CNCF ModelPack format (`modelpack/model-spec`),
//! so the machinery clusters run for images (registries, pull secrets, mirrors, image
//! volumes) carries model data too.
//!
//! - `media`: the spec's media types and annotations, and which one a file is given;
//! - `artifact`: the artifact a version gives (config, manifest, one raw layer per
//!   file), the same bytes for the same version every time;
//! - `layout`: an OCI image layout on disk (`oci:DIR`);
//! - `export`: a version read from the repository, every byte proven, into a layout;
//! - `destination`: where a push goes (`docker://HOST/REPO:TAG`), read strictly;
//! - `push`: an artifact pushed to a registry over the distribution API, through a
//!   `session` with the registry, each blob by `upload` (mounted, whole, or in
//!   resumable pieces), what a push keeps between runs in `memory`;
//! - `auth`: a registry's challenge, token and credentials, for push and `oci://`.

pub mod artifact;
pub mod auth;
pub mod destination;
pub mod export;
pub mod layout;
pub mod media;
pub mod memory;
pub mod push;
mod session;
pub mod upload;

pub use artifact::{Artifact, Layer};
