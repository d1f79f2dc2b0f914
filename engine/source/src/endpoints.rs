//! Where each kind of source is reached. Every endpoint can be moved (private clouds,
//! emulators in tests): by the standard environment variables, by `[endpoints]` in
//! config.toml, or left at the provider's public address.

use serde::{Deserialize, Serialize};

use super::url::SourceUrl;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoints {
    /// S3 (`s3://`); the AWS SDK's own choice when unset.
    pub s3: Option<String>,
    /// Cloudflare R2; `{account}` is replaced by the URL's account.
    pub r2: Option<String>,
    /// CoreWeave AI Object Storage.
    pub cw: Option<String>,
    pub gcs: Option<String>,
    /// Azure Blob; `{account}` is replaced by the URL's account.
    pub azure: Option<String>,
    pub hf: Option<String>,
    /// Path-style S3 addressing (`host/bucket/key`). Unset: on for a custom S3 endpoint,
    /// which emulators and most private S3 servers need; off for AWS, R2 and CoreWeave.
    pub s3_path_style: Option<bool>,
    /// OCI registries (`oci://`) spoken to over plain HTTP, by `HOST[:PORT]` (a
    /// registry on loopback); every other one over HTTPS. `SEALVOL_OCI_PLAIN_HTTP`
    /// adds hosts, comma-separated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oci_plain_http: Vec<String>,
}

pub const R2_DEFAULT: &str = "https://{account}.r2.cloudflarestorage.com";
pub const CW_DEFAULT: &str = "https://cwobject.com";
pub const GCS_DEFAULT: &str = "https://storage.googleapis.com";
pub const AZURE_DEFAULT: &str = "https://{account}.blob.core.windows.net";
pub const HF_DEFAULT: &str = "https://huggingface.co";

/// The endpoint a job uses, fixed when it is queued so that an agent started later, in
/// another environment, reaches the same place.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// `None`: the provider's default as its SDK finds it (AWS only).
    pub url: Option<String>,
    pub path_style: bool,
}

impl Endpoints {
    /// These settings, overridden by the standard environment variables where set:
    /// `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, `HF_ENDPOINT`, `STORAGE_EMULATOR_HOST`
    /// (GCS), and `SEALVOL_{R2,CW,GCS,AZURE}_ENDPOINT`, `SEALVOL_S3_PATH_STYLE`.
    pub fn with_env(mut self) -> Endpoints {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if let Some(v) = var("AWS_ENDPOINT_URL_S3").or_else(|| var("AWS_ENDPOINT_URL")) {
            self.s3 = Some(v);
        }
        if let Some(v) = var("SEALVOL_OCI_PLAIN_HTTP") {
            self.oci_plain_http.extend(
                v.split(',')
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty()),
            );
        }
        for (key, slot) in [
            ("SEALVOL_R2_ENDPOINT", &mut self.r2),
            ("SEALVOL_CW_ENDPOINT", &mut self.cw),
            ("SEALVOL_AZURE_ENDPOINT", &mut self.azure),
            ("HF_ENDPOINT", &mut self.hf),
        ] {
            if let Some(v) = var(key) {
                *slot = Some(v);
            }
        }
        if let Some(v) = var("SEALVOL_GCS_ENDPOINT").or_else(|| {
            var("STORAGE_EMULATOR_HOST").map(|h| {
                if h.contains("://") {
                    h
                } else {
                    format!("http://{h}")
                }
            })
        }) {
            self.gcs = Some(v);
        }
        if let Some(v) = var("SEALVOL_S3_PATH_STYLE") {
            self.s3_path_style = Some(!matches!(v.as_str(), "0" | "false" | "no" | "off"));
        }
        self
    }

    /// The addresses these settings set (each as given, without a trailing `/`, and
    /// its `host:port`): what a server keeps out of what its callers are told.
    pub fn addresses(&self) -> Vec<String> {
        let mut out = Vec::new();
        for set in [
            &self.s3,
            &self.r2,
            &self.cw,
            &self.gcs,
            &self.azure,
            &self.hf,
        ] {
            let Some(url) = set.as_deref().map(|s| s.trim_end_matches('/')) else {
                continue;
            };
            out.push(url.to_string());
            let rest = url.split_once("://").map_or(url, |(_, r)| r);
            let authority = rest.split('/').next().unwrap_or(rest);
            if !authority.is_empty() && !authority.contains('{') {
                out.push(authority.to_string());
            }
        }
        out
    }

    /// Where `url` is reached.
    pub fn resolve(&self, url: &SourceUrl) -> Resolved {
        fn custom(set: &Option<String>) -> Option<&str> {
            set.as_deref().map(|s| s.trim_end_matches('/'))
        }
        let path_style = |custom_url: bool| self.s3_path_style.unwrap_or(custom_url);
        match url {
            SourceUrl::S3 { .. } => Resolved {
                url: custom(&self.s3).map(str::to_string),
                path_style: path_style(self.s3.is_some()),
            },
            SourceUrl::R2 { account, .. } => Resolved {
                url: Some(
                    custom(&self.r2)
                        .unwrap_or(R2_DEFAULT)
                        .replace("{account}", account),
                ),
                path_style: path_style(self.r2.is_some()),
            },
            SourceUrl::CoreWeave { .. } => Resolved {
                url: Some(custom(&self.cw).unwrap_or(CW_DEFAULT).to_string()),
                path_style: path_style(self.cw.is_some()),
            },
            SourceUrl::Gcs { .. } => Resolved {
                url: Some(custom(&self.gcs).unwrap_or(GCS_DEFAULT).to_string()),
                path_style: true,
            },
            SourceUrl::Azure { account, .. } => Resolved {
                url: Some(
                    custom(&self.azure)
                        .unwrap_or(AZURE_DEFAULT)
                        .replace("{account}", account),
                ),
                path_style: true,
            },
            SourceUrl::HuggingFace { .. } => Resolved {
                url: Some(custom(&self.hf).unwrap_or(HF_DEFAULT).to_string()),
                path_style: true,
            },
            SourceUrl::Oci { host, .. } => Resolved {
                url: Some(match self.oci_plain_http.iter().any(|h| h == host) {
                    true => format!("http://{host}"),
                    false => format!("https://{host}"),
                }),
                path_style: true,
            },
            SourceUrl::Local(_) | SourceUrl::OciLayout { .. } => Resolved::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_s3_endpoints_default_to_path_style() {
        let s3 = SourceUrl::parse("s3://bucket/p").unwrap();
        let r2 = SourceUrl::parse("r2://acct/bucket/p").unwrap();
        let none = Endpoints::default();
        assert_eq!(none.resolve(&s3), Resolved::default());
        let r = none.resolve(&r2);
        assert_eq!(
            r.url.as_deref(),
            Some("https://acct.r2.cloudflarestorage.com")
        );
        assert!(!r.path_style);

        let custom = Endpoints {
            s3: Some("http://127.0.0.1:9000/".into()),
            ..Endpoints::default()
        };
        let r = custom.resolve(&s3);
        assert_eq!(r.url.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(r.path_style, "emulators need path style");
        let told = Endpoints {
            s3_path_style: Some(false),
            ..custom
        };
        assert!(!told.resolve(&s3).path_style, "unless told otherwise");
    }
}
