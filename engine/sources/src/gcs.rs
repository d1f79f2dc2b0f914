//! Google Cloud Storage through its JSON API: a paged listing (`GET /storage/v1/b/B/o`)
//! and ranged media reads (`alt=media`) pinned to each object's listed generation, so a
//! sync can never mix two writes of one object.
//!
//! Why not object_store's GCS client, as for Azure: it lists through the XML API, which
//! names objects by an ETag rather than a generation, and it needs response headers the
//! GCS emulator the tests run (gcp-storage-emulator) does not send. What this module
//! does take from object_store is the credential chain (`GOOGLE_APPLICATION_CREDENTIALS`,
//! a service account's JSON key, the metadata server), so no Google auth flow is
//! written here: requests carry its bearer token.

use std::ops::Range;
use std::sync::Arc;

use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
use object_store::{ClientOptions, CredentialProvider};
use serde::Deserialize;

use crate::body::Body;
use crate::http::{Hints, percent, ranged_get, status_error, transport};
use base64::Engine as _;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_source::Access;
use sealvol_source::checks::Expected;
use sealvol_source::endpoints::{GCS_DEFAULT, Resolved};
use sealvol_source::listing::{Object, RawObject};
use sealvol_source::url::SourceUrl;

type Credentials = Arc<dyn CredentialProvider<Credential = GcpCredential>>;

pub struct Gcs {
    http: reqwest::Client,
    /// `https://storage.googleapis.com` or an emulator's address.
    base: String,
    bucket: String,
    /// "" or ending in `/`.
    prefix: String,
    /// `None` reads anonymously (an emulator, or a public bucket).
    credentials: Option<Credentials>,
    shown: String,
}

const HINTS: Hints = Hints {
    denied: "give credentials in the agent's environment (GOOGLE_APPLICATION_CREDENTIALS, or a \
metadata server), or store a service account's JSON key with `sealvol secret set NAME` and pass \
--secret NAME",
    missing: "check the bucket's name and the prefix; an object overwritten mid-sync needs the \
sync run again",
    endpoint: "check the endpoint (STORAGE_EMULATOR_HOST, SEALVOL_GCS_ENDPOINT or [endpoints] \
gcs) and the network",
};

/// One page of a JSON API listing.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    #[serde(default)]
    items: Vec<Item>,
    next_page_token: Option<String>,
}

/// The JSON API sends 64-bit numbers as strings.
#[derive(Deserialize)]
struct Item {
    name: String,
    size: String,
    generation: String,
    /// Base64 of the content's MD5 (absent for a composed object).
    #[serde(default, rename = "md5Hash")]
    md5_hash: Option<String>,
    /// Base64 of the content's CRC32C, big-endian.
    #[serde(default)]
    crc32c: Option<String>,
}

impl Gcs {
    pub fn connect(url: &SourceUrl, at: &Resolved, access: Access<'_>) -> Result<Gcs> {
        let secret = access.secret();
        let SourceUrl::Gcs { bucket, prefix } = url else {
            return Err(Error::invalid(format!("{url} is not a GCS source")));
        };
        let base = at
            .url
            .as_deref()
            .unwrap_or(GCS_DEFAULT)
            .trim_end_matches('/');
        let in_env = [
            "GOOGLE_SERVICE_ACCOUNT",
            "GOOGLE_SERVICE_ACCOUNT_PATH",
            "GOOGLE_SERVICE_ACCOUNT_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ]
        .iter()
        .any(|k| std::env::var_os(k).is_some());
        // A custom endpoint with no credentials given is an emulator or a private
        // server that needs none; the public one always gets the chain's token.
        let anonymous = matches!(access, Access::Anonymous)
            || (secret.is_none() && !in_env && base != GCS_DEFAULT);
        let credentials = if anonymous {
            None
        } else {
            let mut b = GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_client_options(
                    ClientOptions::new()
                        .with_allow_http(base.starts_with("http://"))
                        .with_connect_timeout(sealvol_core::patience::connect())
                        .with_read_timeout(sealvol_core::patience::answer()),
                );
            if let Some(s) = secret {
                b = b.with_service_account_key(s.text()?);
            }
            let store = b.build().map_err(|e| {
                Error::invalid(format!("{url}: cannot set up GCS credentials: {e}"))
                    .hint(HINTS.denied)
            })?;
            Some(store.credentials().clone())
        };
        Ok(Gcs {
            http: crate::http::client()?,
            base: base.to_string(),
            bucket: bucket.clone(),
            prefix: prefix.clone(),
            credentials,
            shown: url.to_string(),
        })
    }

    async fn authorized(&self, req: reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder> {
        let Some(c) = &self.credentials else {
            return Ok(req);
        };
        let token = c.get_credential().await.map_err(|e| {
            Error::new(
                ErrorKind::Denied,
                format!("{}: no GCS credentials: {e}", self.shown),
            )
            .hint(HINTS.denied)
        })?;
        Ok(req.bearer_auth(&token.bearer))
    }

    /// Every object under the prefix, with its key relative to it and its generation.
    pub async fn list(&self) -> Result<Vec<RawObject>> {
        sealvol_source::retry::retrying(&self.shown, || async {
            let url = format!("{}/storage/v1/b/{}/o", self.base, percent(&self.bucket));
            let mut out = Vec::new();
            let mut page_token: Option<String> = None;
            loop {
                let mut query = vec![
                    ("prefix", self.prefix.clone()),
                    ("maxResults", "1000".to_string()),
                    (
                        "fields",
                        "items(name,size,generation),nextPageToken".to_string(),
                    ),
                ];
                query.extend(page_token.take().map(|t| ("pageToken", t)));
                let req = self.authorized(self.http.get(&url).query(&query)).await?;
                let resp = req
                    .send()
                    .await
                    .map_err(|e| transport(&self.shown, &e, &HINTS))?;
                let status = resp.status().as_u16();
                if status != 200 {
                    return Err(status_error(&self.shown, status, "", &HINTS));
                }
                let body = resp
                    .bytes()
                    .await
                    .map_err(|e| transport(&self.shown, &e, &HINTS))?;
                let page: Page = serde_json::from_slice(&body).map_err(|e| {
                    Error::new(
                        ErrorKind::Io,
                        format!("{}: the listing is not the JSON API's: {e}", self.shown),
                    )
                })?;
                for item in page.items {
                    out.extend(self.raw_object(item)?);
                }
                match page.next_page_token.filter(|t| !t.is_empty()) {
                    Some(t) => page_token = Some(t),
                    None => return Ok(out),
                }
            }
        })
        .await
    }

    fn raw_object(&self, item: Item) -> Result<Option<RawObject>> {
        let Some(key) = item.name.strip_prefix(&self.prefix) else {
            return Ok(None);
        };
        if key.is_empty() {
            return Ok(None);
        }
        let size = item.size.parse().map_err(|_| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "{}: {:?} has a size that is not a number",
                    self.shown, item.name
                ),
            )
        })?;
        // The listing's own hashes of the content; one that is not what the JSON API
        // sends (bad base64, the wrong length) is refused, not skipped.
        let mut expect = Vec::new();
        for (kind, value) in [("md5", &item.md5_hash), ("crc32c", &item.crc32c)] {
            let Some(v) = value else { continue };
            let parsed = base64::engine::general_purpose::STANDARD
                .decode(v)
                .ok()
                .and_then(|b| Expected::parse_hex(kind, &hex::encode(b)));
            expect.push(parsed.ok_or_else(|| {
                Error::new(
                    ErrorKind::Io,
                    format!(
                        "{}: the listing gives {:?} a {kind} that is not one: {v:.60}",
                        self.shown, item.name
                    ),
                )
                .hint("the endpoint is not a GCS JSON API, or it is damaged")
            })?);
        }
        Ok(Some(RawObject {
            key: key.to_string(),
            size,
            version: item.generation,
            expect,
            exec: false,
        }))
    }

    /// A stream of bytes `range` of `obj` at its listed generation.
    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        let what = format!("{}/{}", self.shown.trim_end_matches('/'), obj.key);
        let url = format!(
            "{}/storage/v1/b/{}/o/{}",
            self.base,
            percent(&self.bucket),
            percent(&format!("{}{}", self.prefix, obj.key))
        );
        let mut query = vec![("alt", "media")];
        if !obj.version.is_empty() {
            query.push(("generation", obj.version.as_str()));
        }
        sealvol_source::retry::retrying(&what, || async {
            let req = self.authorized(self.http.get(&url).query(&query)).await?;
            ranged_get(req, &what, &range, obj.size, &HINTS, "").await
        })
        .await
    }
}
