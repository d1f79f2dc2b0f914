//! Sync sources: where a sync's bytes come from (Hugging Face, S3 and its kin, GCS,
//! Azure Blob, local paths), what their addresses look like, and how their untrusted
//! keys become paths inside a version.

pub mod client;
pub mod cloud;
pub mod endpoints;
pub mod fetch;
pub mod filter;
pub mod hf;
pub mod keys;
pub mod listing;
pub mod retry;
pub mod s3;
pub mod url;

pub use client::Client;
pub use endpoints::Endpoints;
pub use listing::{Listing, Object};
pub use url::SourceUrl;
