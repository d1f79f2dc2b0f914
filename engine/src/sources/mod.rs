//! Sync sources: where a sync's bytes come from (Hugging Face, S3 and its kin, GCS,
//! Azure Blob, local paths), what their addresses look like, and how their untrusted
//! keys become paths inside a version.

pub mod filter;
pub mod keys;
pub mod url;

pub use url::SourceUrl;
