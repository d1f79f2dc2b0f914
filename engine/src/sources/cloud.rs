//! Google Cloud Storage and Azure Blob, through the `object_store` crate (Apache Arrow's
//! maintained client for both): its request signing, its credential discovery, and
//! endpoints that can point at an emulator. Listing is paginated by the crate; reads
//! are ranged and conditional on the listed ETag, like S3's.
//!
//! Credentials: GCS takes `GOOGLE_SERVICE_ACCOUNT`/`GOOGLE_APPLICATION_CREDENTIALS`, the
//! metadata server, or a secret holding a service account's JSON key; with a custom
//! endpoint and none of those it reads anonymously (emulators, public buckets). Azure
//! takes the `AZURE_STORAGE_*` environment, or a secret holding an account key or a
//! SAS token (starting with `?` or `sv=`).

use std::ops::Range;

use futures::StreamExt;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectStore};

use super::client::Body;
use super::endpoints::{AZURE_DEFAULT, GCS_DEFAULT, Resolved};
use super::listing::{Object, RawObject};
use super::url::SourceUrl;
use crate::error::{Error, ErrorKind, Result};
use crate::secrets::Secret;

pub struct Cloud {
    store: Box<dyn ObjectStore>,
    /// "" or ending in `/`.
    prefix: String,
    shown: String,
    hint: &'static str,
}

const GCS_HINT: &str = "give credentials in the agent's environment \
(GOOGLE_APPLICATION_CREDENTIALS, or a metadata server), or store a service account's JSON key \
with `sealvol secret set NAME` and pass --secret NAME";
const AZURE_HINT: &str = "give credentials in the agent's environment (AZURE_STORAGE_ACCOUNT_KEY, \
AZURE_STORAGE_SAS_KEY, or a managed identity), or store an account key or a SAS token with \
`sealvol secret set NAME` and pass --secret NAME";

fn secret_text(s: &Secret) -> Result<String> {
    std::str::from_utf8(s.expose())
        .map(|t| t.trim().to_string())
        .map_err(|_| Error::usage(format!("{s} is not text")))
}

impl Cloud {
    pub fn connect(url: &SourceUrl, at: &Resolved, secret: Option<&Secret>) -> Result<Cloud> {
        let built = match url {
            SourceUrl::Gcs { bucket, prefix } => {
                let mut b = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
                let endpoint = at.url.as_deref().unwrap_or(GCS_DEFAULT);
                let custom = endpoint != GCS_DEFAULT;
                if custom {
                    b = b.with_base_url(endpoint);
                }
                let has_env = [
                    "GOOGLE_SERVICE_ACCOUNT",
                    "GOOGLE_SERVICE_ACCOUNT_PATH",
                    "GOOGLE_SERVICE_ACCOUNT_KEY",
                    "GOOGLE_APPLICATION_CREDENTIALS",
                ]
                .iter()
                .any(|k| std::env::var_os(k).is_some());
                match secret {
                    Some(s) => b = b.with_service_account_key(secret_text(s)?),
                    None if custom && !has_env => b = b.with_skip_signature(true),
                    None => {}
                }
                b.build()
                    .map(|s| (Box::new(s) as Box<dyn ObjectStore>, prefix, GCS_HINT))
            }
            SourceUrl::Azure {
                account,
                container,
                prefix,
            } => {
                let mut b = MicrosoftAzureBuilder::from_env()
                    .with_account(account)
                    .with_container_name(container);
                let endpoint = at
                    .url
                    .clone()
                    .unwrap_or_else(|| AZURE_DEFAULT.replace("{account}", account));
                if endpoint != AZURE_DEFAULT.replace("{account}", account) {
                    // An emulator or a private cloud: the account is in the path.
                    b = b
                        .with_endpoint(format!("{}/{account}", endpoint.trim_end_matches('/')))
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                if let Some(s) = secret {
                    let text = secret_text(s)?;
                    let sas = text.trim_start_matches('?');
                    if text.starts_with('?') || sas.starts_with("sv=") {
                        let pairs: Vec<(String, String)> = sas
                            .split('&')
                            .filter_map(|kv| kv.split_once('='))
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect();
                        b = b.with_sas_authorization(pairs);
                    } else {
                        b = b.with_access_key(text);
                    }
                }
                b.build()
                    .map(|s| (Box::new(s) as Box<dyn ObjectStore>, prefix, AZURE_HINT))
            }
            other => {
                return Err(Error::usage(format!(
                    "{other} is not a GCS or Azure source"
                )));
            }
        };
        let (store, prefix, hint) = built.map_err(|e| {
            Error::usage(format!("{url}: cannot set up the client: {e}")).hint(match url {
                SourceUrl::Gcs { .. } => GCS_HINT,
                _ => AZURE_HINT,
            })
        })?;
        Ok(Cloud {
            store,
            prefix: prefix.clone(),
            shown: url.to_string(),
            hint,
        })
    }

    pub async fn list(&self) -> Result<Vec<RawObject>> {
        super::retry::retrying(&self.shown, || async {
            let prefix = StorePath::from(self.prefix.trim_end_matches('/'));
            let prefix = (!self.prefix.is_empty()).then_some(prefix);
            let mut stream = self.store.list(prefix.as_ref());
            let mut out = Vec::new();
            while let Some(meta) = stream.next().await {
                let meta = meta.map_err(|e| self.error("list", e))?;
                let full = meta.location.to_string();
                let Some(key) = full.strip_prefix(&self.prefix) else {
                    continue;
                };
                if key.is_empty() {
                    continue;
                }
                out.push(RawObject {
                    key: key.to_string(),
                    size: meta.size,
                    version: meta.e_tag.or(meta.version).unwrap_or_default(),
                });
            }
            Ok(out)
        })
        .await
    }

    /// A stream of bytes `range` of `obj`, only if it is still the version listed.
    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        let path = StorePath::from(format!("{}{}", self.prefix, obj.key));
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: (!obj.version.is_empty()).then(|| obj.version.clone()),
            ..GetOptions::default()
        };
        let got = self
            .store
            .get_opts(&path, opts)
            .await
            .map_err(|e| self.error("read", e))?;
        let shown = self.shown.clone();
        let stream = got
            .into_stream()
            .map(move |r| {
                r.map_err(|e| {
                    Error::new(ErrorKind::Unavailable, format!("{shown}: read failed: {e}"))
                })
            })
            .boxed();
        Ok(Body::Stream(stream))
    }

    fn error(&self, doing: &str, e: object_store::Error) -> Error {
        use object_store::Error as E;
        let at = &self.shown;
        match e {
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
                Error::new(ErrorKind::Denied, format!("{at}: access denied ({e})")).hint(self.hint)
            }
            E::NotFound { .. } => Error::not_found(format!("{at}: cannot {doing}: not found ({e})"))
                .hint("check the bucket or container and the prefix; an object deleted mid-sync needs the sync run again"),
            E::Precondition { .. } => Error::new(
                ErrorKind::Changed,
                format!("{at}: an object changed at the source while it was synced"),
            )
            .hint("run the sync again once the source is stable"),
            // The crate has already retried transient failures (timeouts, 5xx) with
            // backoff; what reaches us is final.
            other => Error::new(ErrorKind::Io, format!("{at}: cannot {doing}: {other}")),
        }
    }
}
