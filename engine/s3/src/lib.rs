//! sealvol's S3 client, shared by the S3 source (`sealvol-sources`) and the S3
//! repository (`sealvol-s3repo`).
//!
//! Its one job is an S3 client as sealvol configures every one (S3 and its kin: R2,
//! CoreWeave, private servers): the region, the endpoint and path style, timeouts
//! within the request's patience, the SDK's own retries off, the default credential
//! chain (environment, profiles, web-identity/OIDC tokens, ECS and instance metadata)
//! asked once before any request, or a stored secret `KEY_ID:SECRET[:SESSION_TOKEN]`;
//! and the one way its failures are read: retry, fix or report, in one plain line.

use aws_config::BehaviorVersion;
use aws_config::meta::region::RegionProviderChain;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_source::endpoints::Resolved;
use sealvol_source::secrets::Secret;
use sealvol_source::url::SourceUrl;

/// What to do when no credentials are found or they are refused.
pub const CREDENTIALS_HINT: &str = "give credentials in the environment \
(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_WEB_IDENTITY_TOKEN_FILE), \
or store KEY_ID:SECRET with `sealvol secret set NAME` and pass --secret NAME \
(--repo-secret NAME for the repository)";

/// What a client signs its requests with.
pub enum Keys {
    /// A stored secret's (`credentials`).
    Given(Credentials),
    /// The default chain: environment, profile, web identity, instance metadata.
    Chain,
    /// Nothing: unsigned requests, for public buckets.
    Anonymous,
}

impl Keys {
    /// A source's access as the client's keys.
    pub fn of(access: sealvol_source::Access<'_>) -> Result<Keys> {
        Ok(match access {
            sealvol_source::Access::Secret(s) => Keys::Given(credentials(s)?),
            sealvol_source::Access::Ambient => Keys::Chain,
            sealvol_source::Access::Anonymous => Keys::Anonymous,
        })
    }
}

/// The bucket and prefix of an S3-kind address (`s3://`, `r2://`, `cw://`).
pub fn bucket_of(url: &SourceUrl) -> Option<(&str, &str)> {
    match url {
        SourceUrl::S3 { bucket, prefix }
        | SourceUrl::R2 { bucket, prefix, .. }
        | SourceUrl::CoreWeave { bucket, prefix } => Some((bucket, prefix)),
        _ => None,
    }
}

/// The endpoint as messages name it.
pub fn endpoint_name(at: &Resolved) -> String {
    at.url.clone().unwrap_or_else(|| "AWS".into())
}

/// A client for an S3-kind address as sealvol configures every one: the region from
/// the environment or the provider's default, the endpoint and path style `at`, our own
/// retries (the SDK's are off), and credentials as `keys` says.
pub async fn client(url: &SourceUrl, at: &Resolved, keys: Keys) -> Result<aws_sdk_s3::Client> {
    let default_region = match url {
        SourceUrl::R2 { .. } => "auto",
        _ => "us-east-1",
    };
    // The default chain asks instance metadata last; off AWS (a custom endpoint) that
    // only costs a timeout and a warning, so there it is the environment and profile.
    let chain = RegionProviderChain::first_try(
        aws_config::environment::EnvironmentVariableRegionProvider::new(),
    )
    .or_else(aws_config::profile::ProfileFileRegionProvider::new());
    let chain = match at.url {
        None => chain.or_else(
            aws_config::imds::region::ImdsRegionProvider::builder()
                .imds_client(imds())
                .build(),
        ),
        Some(_) => chain,
    };
    let region = chain
        .or_else(Region::new(default_region))
        .region()
        .await
        .unwrap_or_else(|| Region::new(default_region));
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(region.clone())
        // Our own retry (`sources::retry`) covers every source alike.
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(sealvol_core::patience::connect())
                .read_timeout(sealvol_core::patience::answer())
                .build(),
        );
    if let Some(u) = &at.url {
        loader = loader.endpoint_url(u);
    }
    let probe = matches!(keys, Keys::Chain);
    match keys {
        Keys::Given(keys) => loader = loader.credentials_provider(keys),
        Keys::Anonymous => loader = loader.no_credentials(),
        Keys::Chain => {
            let chain =
                aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                    .region(region)
                    .imds_client(imds())
                    .build()
                    .await;
            loader = loader.credentials_provider(chain);
        }
    }
    let shared = loader.load().await;
    // Found once, before any request: a missing credential is one line that says what
    // to set, not a request failure retried for seconds. The SDK caches what it found.
    if probe && let Some(provider) = shared.credentials_provider() {
        use aws_sdk_s3::config::ProvideCredentials;
        let found = tokio::time::timeout(
            sealvol_core::patience::connect(),
            provider.provide_credentials(),
        )
        .await;
        match found {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(no_credentials(url, &e)),
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "{url}: finding AWS credentials took over {} s",
                        sealvol_core::patience::connect().as_secs()
                    ),
                )
                .hint(CREDENTIALS_HINT));
            }
        }
    }
    let conf = aws_sdk_s3::config::Builder::from(&shared)
        .force_path_style(at.path_style)
        // Every byte read is checked against its BLAKE3 hash (or its source's ETag);
        // the SDK's own check cannot even validate a multipart object's checksum.
        .response_checksum_validation(aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired)
        .build();
    Ok(aws_sdk_s3::Client::from_conf(conf))
}

/// The instance metadata service as the credential and region chains ask it: one
/// second to answer, one retry (its default is four tries, seconds off EC2).
fn imds() -> aws_config::imds::Client {
    aws_config::imds::Client::builder()
        .max_attempts(2)
        .connect_timeout(std::time::Duration::from_secs(1))
        .read_timeout(std::time::Duration::from_secs(1))
        .build()
}

/// The credential chain found nothing: one line and what to set. The chain's last
/// answer (most often instance metadata refusing, off EC2) is logged for `-v`; a broken
/// configuration is the user's to fix, so its cause is in the line.
fn no_credentials(
    url: &SourceUrl,
    e: &aws_credential_types::provider::error::CredentialsError,
) -> Error {
    use aws_credential_types::provider::error::CredentialsError as E;
    tracing::debug!("{url}: the AWS credential chain: {}", plain(e));
    match e {
        E::CredentialsNotLoaded(_) | E::ProviderError(_) => Error::new(
            ErrorKind::Invalid,
            format!("{url}: no AWS credentials found"),
        ),
        E::ProviderTimedOut(_) => Error::new(
            ErrorKind::Unavailable,
            format!("{url}: finding AWS credentials timed out"),
        ),
        other => Error::new(
            ErrorKind::Invalid,
            format!("{url}: cannot load AWS credentials: {}", plain(other)),
        ),
    }
    .hint(CREDENTIALS_HINT)
}

/// A service's answer as its HTTP status and error code, or our error for a failure
/// that got no answer: a timeout or a cut connection (`Unavailable`, retried), an
/// endpoint that cannot be reached, or a request that could not be made (credentials).
pub fn service_status<E>(
    at: &str,
    doing: &str,
    endpoint: &str,
    e: &SdkError<E>,
) -> Result<(u16, String)>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match e {
        SdkError::ServiceError(se) => Ok((
            se.raw().status().as_u16(),
            se.err().code().unwrap_or("").to_string(),
        )),
        SdkError::TimeoutError(_) => Err(no_answer(at, endpoint)),
        SdkError::DispatchFailure(d) if d.is_timeout() => Err(no_answer(at, endpoint)),
        SdkError::ResponseError(_) => Err(Error::new(
            ErrorKind::Unavailable,
            format!("{at}: cannot {doing}: {}", plain(e)),
        )),
        SdkError::DispatchFailure(d) if d.is_io() => Err(Error::new(
            ErrorKind::Unavailable,
            format!("{at}: cannot reach {endpoint}: {}", plain(e)),
        )
        .hint("check the endpoint (AWS_ENDPOINT_URL) and the network")),
        // Not our request's fault (that is `is_user`): a connection cut mid-request.
        SdkError::DispatchFailure(d) if !d.is_user() => Err(Error::new(
            ErrorKind::Unavailable,
            format!("{at}: the connection was cut: {}", plain(e)),
        )),
        _ => Err(Error::new(
            ErrorKind::Invalid,
            format!("{at}: cannot {doing}: {}", plain(e)),
        )
        .hint(CREDENTIALS_HINT)),
    }
}

/// A try that got no answer in time (connect or first byte or the next byte).
fn no_answer(at: &str, endpoint: &str) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!(
            "{at}: {endpoint} did not answer within {} s",
            sealvol_core::patience::answer().as_secs()
        ),
    )
    .hint("check the endpoint (AWS_ENDPOINT_URL) and the network")
}

/// An SDK error as one plain line: each cause's own words, outermost first, without
/// the SDK's debug dump of its types (`DispatchFailure(…)`).
fn plain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}

/// What every S3 answer means alike, whoever asked: throttling and 5xx (`Unavailable`,
/// retried), refused credentials, a missing bucket, a bucket in another region. `None`
/// for the answers whose meaning depends on the request (404 of a key, 412).
pub fn common_status(
    at: &str,
    doing: &str,
    status: u16,
    code: &str,
    bucket: &str,
    endpoint: &str,
) -> Option<Error> {
    let code_text = code_text(status, code);
    Some(match (status, code) {
        (_, "SlowDown" | "RequestTimeout" | "InternalError" | "ServiceUnavailable")
        | (429 | 500..=599, _) => Error::new(
            ErrorKind::Unavailable,
            format!("{at}: cannot {doing} ({code_text})"),
        ),
        (401 | 403, _) => Error::new(
            ErrorKind::Denied,
            format!("{at}: access denied ({code_text})"),
        )
        .hint(CREDENTIALS_HINT),
        (_, "NoSuchBucket") => Error::not_found(format!("no bucket {bucket} at {endpoint}"))
            .hint("check the bucket name, and the endpoint (AWS_ENDPOINT_URL)"),
        (301 | 307, _) | (_, "PermanentRedirect" | "AuthorizationHeaderMalformed") => {
            Error::invalid(format!(
                "{at}: the bucket is in another region ({code_text})"
            ))
            .hint("set AWS_REGION to the bucket's region")
        }
        _ => return None,
    })
}

/// `NoSuchKey, HTTP 404`, or `HTTP 404` when the answer had no code.
pub fn code_text(status: u16, code: &str) -> String {
    if code.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("{code}, HTTP {status}")
    }
}

pub fn classify(
    at: &str,
    doing: &str,
    status: u16,
    code: &str,
    bucket: &str,
    endpoint: &str,
) -> Error {
    if let Some(e) = common_status(at, doing, status, code, bucket, endpoint) {
        return e;
    }
    let code_text = code_text(status, code);
    match status {
        404 => Error::not_found(format!("{at}: not found ({code_text})"))
            .hint("it was deleted at the source while the sync ran; run the sync again"),
        412 => Error::new(
            ErrorKind::Changed,
            format!("{at} changed at the source while it was synced"),
        )
        .hint("run the sync again once the source is stable"),
        _ => Error::invalid(format!("{at}: cannot {doing} ({code_text})")),
    }
}

/// The key pair a stored secret holds: `KEY_ID:SECRET[:SESSION_TOKEN]`.
pub fn credentials(s: &Secret) -> Result<Credentials> {
    let bad = || {
        Error::invalid(format!("{s} is not an S3 key pair"))
            .hint("store it as KEY_ID:SECRET (or KEY_ID:SECRET:SESSION_TOKEN)")
    };
    let text = std::str::from_utf8(s.expose()).map_err(|_| bad())?.trim();
    let mut parts = text.splitn(3, ':');
    let (Some(id), Some(key)) = (parts.next(), parts.next()) else {
        return Err(bad());
    };
    if id.is_empty() || key.is_empty() {
        return Err(bad());
    }
    Ok(Credentials::new(
        id,
        key,
        parts.next().map(str::to_string),
        None,
        "sealvol-secret",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_sorted_into_retry_fix_or_report() {
        let c = |status, code| classify("s3://b/k", "read", status, code, "b", "http://x").kind();
        assert_eq!(c(503, "SlowDown"), ErrorKind::Unavailable);
        assert_eq!(c(500, ""), ErrorKind::Unavailable);
        assert_eq!(c(400, "RequestTimeout"), ErrorKind::Unavailable);
        assert_eq!(c(403, "AccessDenied"), ErrorKind::Denied);
        assert_eq!(c(403, "InvalidAccessKeyId"), ErrorKind::Denied);
        assert_eq!(c(404, "NoSuchBucket"), ErrorKind::NotFound);
        assert_eq!(c(404, "NoSuchKey"), ErrorKind::NotFound);
        assert_eq!(c(412, "PreconditionFailed"), ErrorKind::Changed);
        assert_eq!(c(301, "PermanentRedirect"), ErrorKind::Invalid);
    }
}
