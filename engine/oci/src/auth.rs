//! A registry's credentials, as the OCI distribution API's clients speak them: the
//! challenge of a `401` (`WWW-Authenticate: Basic …` or `Bearer realm=…,service=…`),
//! the token endpoint a bearer challenge names (asked with basic credentials, scoped to
//! the repositories asked for), the token it answers, and `USER:PASSWORD` from the auth file the
//! container tools write. Shared by the push (`push.rs`) and the `oci://` source.

use std::io::Read;

use base64::Engine as _;
use sealvol_core::{Error, ErrorKind, Result};

/// What a registry's challenge asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Challenge {
    /// Basic credentials on every request.
    Basic,
    /// A token from this URL (realm, service and scope in its query).
    Bearer { token_url: reqwest::Url },
}

/// `Authorization: Basic …` of `USER:PASSWORD`.
pub fn basic(credentials: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    )
}

/// The challenge of a `401`, as its `WWW-Authenticate` says it ("" when it says none,
/// or not in ASCII: `read_challenge` then refuses it).
pub fn challenge_of(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// The challenge `header` states, for the `scopes` a token must grant: `(repo, actions)`
/// with actions `pull` or `pull,push` (a push that mounts blobs from other repositories
/// also asks to pull those).
pub fn read_challenge(header: &str, scopes: &[(&str, &str)]) -> Result<Challenge> {
    let denied = |m: String| Error::new(ErrorKind::Denied, m);
    let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Ok(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(denied(format!(
            "the registry asks for {scheme:.40} credentials: only basic and bearer tokens are spoken here"
        )));
    }
    let param = |name: &str| {
        params.split(',').find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            k.eq_ignore_ascii_case(name)
                .then(|| v.trim_matches('"').to_string())
        })
    };
    let realm = param("realm")
        .filter(|r| r.starts_with("https://") || r.starts_with("http://"))
        .ok_or_else(|| {
            denied("the registry's bearer challenge names no http(s) token realm".into())
        })?;
    let mut query: Vec<(String, String)> = scopes
        .iter()
        .map(|(repo, actions)| ("scope".to_string(), format!("repository:{repo}:{actions}")))
        .collect();
    if let Some(service) = param("service") {
        query.push(("service".to_string(), service));
    }
    let token_url = reqwest::Url::parse_with_params(&realm, &query)
        .map_err(|e| denied(format!("the registry's token realm {realm:.100}: {e}")))?;
    Ok(Challenge::Bearer { token_url })
}

/// `Authorization: Bearer …` of a token endpoint's answer.
pub fn bearer(answer: &[u8]) -> Result<String> {
    let v: serde_json::Value = serde_json::from_slice(answer).unwrap_or_default();
    let token = v["token"]
        .as_str()
        .or(v["access_token"].as_str())
        .filter(|t| !t.is_empty() && t.len() <= 16 << 10)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Denied,
                "the registry's token answer has no token",
            )
        })?;
    Ok(format!("Bearer {token}"))
}

/// `host`'s `USER:PASSWORD` in the auth file container tools write
/// (`$REGISTRY_AUTH_FILE`, else `~/.docker/config.json`), if it has an entry.
pub fn credentials_from_auth_file(host: &str) -> Result<Option<String>> {
    let file = match std::env::var_os("REGISTRY_AUTH_FILE") {
        Some(f) => std::path::PathBuf::from(f),
        None => match std::env::var_os("HOME") {
            Some(h) => std::path::PathBuf::from(h).join(".docker/config.json"),
            None => return Ok(None),
        },
    };
    let mut bytes = Vec::new();
    match std::fs::File::open(&file) {
        Ok(f) => f
            .take(1 << 20)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("cannot read", &file, e))?,
        Err(_) => return Ok(None),
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(format!("{} is not JSON: {e:.100}", file.display())))?;
    let Some(auth) = v["auths"][host]["auth"].as_str() else {
        return Ok(None);
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .filter(|s| s.contains(':'))
        .ok_or_else(|| {
            Error::invalid(format!(
                "{}: the entry of {host} is not base64 of USER:PASSWORD",
                file.display()
            ))
        })?;
    Ok(Some(decoded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read_and_what_is_not_spoken_is_refused() {
        assert_eq!(
            read_challenge("Basic realm=\"x\"", &[("m", "pull")]).unwrap(),
            Challenge::Basic
        );
        let Challenge::Bearer { token_url } = read_challenge(
            "Bearer realm=\"https://auth.example/token\",service=\"reg\"",
            &[("a/b", "pull,push"), ("c", "pull")],
        )
        .unwrap() else {
            panic!("bearer")
        };
        assert_eq!(
            token_url.as_str(),
            "https://auth.example/token?scope=repository%3Aa%2Fb%3Apull%2Cpush&scope=repository%3Ac%3Apull&service=reg"
        );
        for bad in [
            "Negotiate x",
            "Bearer service=x",
            "Bearer realm=\"file:///etc\"",
        ] {
            assert!(read_challenge(bad, &[("m", "pull")]).is_err(), "{bad}");
        }
        assert_eq!(bearer(br#"{"token":"t"}"#).unwrap(), "Bearer t");
        assert_eq!(bearer(br#"{"access_token":"u"}"#).unwrap(), "Bearer u");
        assert!(bearer(b"{}").is_err() && bearer(b"junk").is_err());
    }
}
