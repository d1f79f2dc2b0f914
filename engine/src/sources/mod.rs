//! Sync sources: where a sync's bytes come from (Hugging Face, S3 and its kin, GCS,
//! Azure Blob, local paths), what their addresses look like, and how their untrusted
//! keys become paths inside a version.

pub mod azure;
pub mod client;
pub mod endpoints;
pub mod fetch;
pub mod filter;
pub mod gcs;
pub mod hf;
pub mod http;
pub mod keys;
pub mod listing;
pub mod retry;
pub mod s3;
pub mod url;

pub use client::Client;
pub use endpoints::Endpoints;
pub use listing::{Listing, Object};
pub use url::SourceUrl;

/// A secret that holds text (a token, a key), trimmed.
pub(crate) fn secret_text(s: &crate::secrets::Secret) -> crate::error::Result<String> {
    std::str::from_utf8(s.expose())
        .map(|t| t.trim().to_string())
        .map_err(|_| crate::error::Error::usage(format!("{s} is not text (not UTF-8)")))
}
