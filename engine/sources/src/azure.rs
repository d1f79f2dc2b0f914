//! Azure Blob, through the `object_store` crate (Apache Arrow's maintained client): its
//! request signing, its credential discovery, and endpoints that can point at an
//! emulator. Listing is paginated by the crate; reads are ranged and conditional on the
//! listed ETag, like S3's.
//!
//! Credentials: the `AZURE_STORAGE_*` environment, a managed identity, or a secret
//! holding an account key or a SAS token (starting with `?` or `sv=`).

use std::ops::Range;

use futures::StreamExt;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::path::Path as StorePath;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, RetryConfig};

use crate::body::Body;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_source::Access;
use sealvol_source::endpoints::{AZURE_DEFAULT, Resolved};
use sealvol_source::listing::{Object, RawObject};
use sealvol_source::url::SourceUrl;

pub struct Azure {
    store: Box<dyn ObjectStore>,
    /// "" or ending in `/`.
    prefix: String,
    shown: String,
}

const HINT: &str = "give credentials in the agent's environment (AZURE_STORAGE_ACCOUNT_KEY, \
AZURE_STORAGE_SAS_KEY, or a managed identity), or store an account key or a SAS token with \
`sealvol secret set NAME` and pass --secret NAME";

impl Azure {
    pub fn connect(url: &SourceUrl, at: &Resolved, access: Access<'_>) -> Result<Azure> {
        let SourceUrl::Azure {
            account,
            container,
            prefix,
        } = url
        else {
            return Err(Error::invalid(format!("{url} is not an Azure source")));
        };
        let public = AZURE_DEFAULT.replace("{account}", account);
        let endpoint = at.url.clone().unwrap_or_else(|| public.clone());
        // Waits bounded as for every source (`patience`): no total per request, which
        // would cut a long read that is making progress, and no retries of its own
        // (`retry` covers every source alike).
        let options = ClientOptions::new()
            .with_allow_http(endpoint.starts_with("http://"))
            .with_connect_timeout(sealvol_core::patience::connect())
            .with_read_timeout(sealvol_core::patience::answer())
            .with_timeout_disabled();
        // Anonymous: nothing from this process's environment, and unsigned requests.
        let builder = match access {
            Access::Anonymous => MicrosoftAzureBuilder::new().with_skip_signature(true),
            _ => MicrosoftAzureBuilder::from_env(),
        };
        let mut b = builder
            .with_account(account)
            .with_container_name(container)
            .with_client_options(options)
            .with_retry(RetryConfig {
                max_retries: 0,
                ..RetryConfig::default()
            });
        if endpoint != public {
            // An emulator or a private cloud: the account is in the path.
            b = b.with_endpoint(format!("{}/{account}", endpoint.trim_end_matches('/')));
        }
        if let Some(s) = access.secret() {
            let text = s.text()?;
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
        let store = b.build().map_err(|e| {
            Error::invalid(format!("{url}: cannot set up the client: {e}")).hint(HINT)
        })?;
        Ok(Azure {
            store: Box::new(store),
            prefix: prefix.clone(),
            shown: url.to_string(),
        })
    }

    pub async fn list(&self) -> Result<Vec<RawObject>> {
        sealvol_source::retry::retrying(&self.shown, || async {
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
                    // The listing's Content-MD5 is not in what object_store gives:
                    // Azure's bytes are checked only by their length (docs/SEMANTICS.md).
                    expect: Vec::new(),
                    exec: false,
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
                Error::new(ErrorKind::Denied, format!("{at}: access denied ({e})")).hint(HINT)
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
