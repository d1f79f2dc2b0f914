//! A push's conversation with one registry: the version check and its challenge
//! answered (basic, or a bearer token for every repository the push touches), asked
//! again when a token runs out mid-push, and each answer read with the registry's own
//! words in the error. Credentials go only to the registry's own host, whatever place
//! an answer names.

use std::io::Read;
use std::time::Duration;

use sealvol_core::{Error, ErrorKind, Result};

use crate::auth;

pub(crate) struct Session {
    pub http: reqwest::blocking::Client,
    /// `http(s)://HOST[:PORT]`.
    pub base: String,
    pub repo: String,
    /// Repositories blobs may be mounted from: the token is asked to pull them too.
    pub also_pull: Vec<String>,
    pub credentials: Option<String>,
    pub timeout: Duration,
    auth: Option<String>,
    challenge: Option<String>,
}

/// A request's outcome where trying again may help: the registry did not answer, or
/// answered 5xx, 408 or 429, or its token ran out (401; asked again before the retry).
pub(crate) enum Failed {
    Retry(Error),
    /// 416: the registry holds other bytes than the request assumed.
    Range(Error),
    Stop(Error),
}

impl Failed {
    pub fn into_error(self) -> Error {
        match self {
            Failed::Retry(e) | Failed::Range(e) | Failed::Stop(e) => e,
        }
    }
}

impl Session {
    pub fn new(
        base: String,
        repo: String,
        also_pull: Vec<String>,
        credentials: Option<String>,
        timeout: Duration,
    ) -> Result<Session> {
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(30)))
            // Each request is bounded by the timeout, an upload also by its size at 1 MiB/s.
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| Error::invalid(format!("cannot make an HTTP client: {e}")))?;
        Ok(Session {
            http,
            base,
            repo,
            also_pull,
            credentials,
            timeout,
            auth: None,
            challenge: None,
        })
    }

    /// `GET /v2/`: the registry's version check, and its challenge answered.
    pub fn login(&mut self) -> Result<()> {
        let url = format!("{}/v2/", self.base);
        let resp = self
            .http
            .get(&url)
            .send()
            .map_err(|e| unreachable(&url, e))?;
        if resp.status().as_u16() != 401 {
            return expect(resp, &[200], "the API version check").map(|_| ());
        }
        self.challenge = Some(auth::challenge_of(resp.headers()));
        self.renew()?;
        let resp = self.send(|c| c.get(&url))?;
        expect(resp, &[200], "the API version check").map(|_| ())
    }

    /// Answers the registry's challenge again (a token lasts minutes; a push may not).
    pub fn renew(&mut self) -> Result<()> {
        let Some(challenge) = self.challenge.clone() else {
            return Err(Error::new(
                ErrorKind::Denied,
                "the registry refused a request it had not asked credentials for",
            ));
        };
        self.auth = Some(self.answer(&challenge)?);
        Ok(())
    }

    /// The `Authorization` a challenge asks for.
    fn answer(&self, challenge: &str) -> Result<String> {
        let basic = self.credentials.as_deref().map(auth::basic);
        let mut scopes = vec![(self.repo.as_str(), "pull,push")];
        scopes.extend(self.also_pull.iter().map(|r| (r.as_str(), "pull")));
        let token_url = match auth::read_challenge(challenge, &scopes)? {
            auth::Challenge::Basic => return basic.ok_or_else(no_credentials),
            auth::Challenge::Bearer { token_url } => token_url,
        };
        let shown = token_url.to_string();
        let mut req = self.http.get(token_url);
        if let Some(b) = &basic {
            req = req.header("authorization", b);
        }
        let resp = req.send().map_err(|e| unreachable(&shown, e))?;
        // Asked with none, a refusal means credentials are wanted: say how to give them.
        if basic.is_none() && matches!(resp.status().as_u16(), 401 | 403) {
            return Err(no_credentials());
        }
        let body = expect(resp, &[200], "a token")?;
        auth::bearer(&body)
    }

    /// A place the registry named (`Location`), made absolute.
    pub fn place(&self, location: &str) -> String {
        match location.starts_with('/') {
            true => format!("{}{location}", self.base),
            false => location.to_string(),
        }
    }

    /// `req` with the session's credentials, if it goes to the registry itself.
    pub fn authorised(
        &self,
        url: &str,
        req: reqwest::blocking::RequestBuilder,
    ) -> reqwest::blocking::RequestBuilder {
        let ours = url
            .strip_prefix(&self.base)
            .is_some_and(|rest| rest.starts_with('/'));
        match (&self.auth, ours) {
            (Some(a), true) => req.header("authorization", a),
            _ => req,
        }
    }

    /// Sends a request to the registry with the session's credentials.
    pub fn send(
        &mut self,
        make: impl Fn(&reqwest::blocking::Client) -> reqwest::blocking::RequestBuilder,
    ) -> Result<reqwest::blocking::Response> {
        let req = make(&self.http);
        let req = match &self.auth {
            Some(a) => req.header("authorization", a),
            None => req,
        };
        req.send().map_err(|e| unreachable(&self.base, e))
    }

    /// Whether `repo` holds `digest`.
    pub fn has_blob(&mut self, repo: &str, digest: &str) -> Result<bool> {
        let url = format!("{}/v2/{repo}/blobs/{digest}", self.base);
        let resp = self.send(|c| c.head(&url))?;
        match resp.status().as_u16() {
            200 => Ok(true),
            // Not there, or not ours to read (a repository remembered, since deleted).
            404 | 401 | 403 => Ok(false),
            _ => expect(resp, &[200], "a blob's presence").map(|_| false),
        }
    }
}

/// Sorts a request's outcome: the answer if its status is one of `ok`, else whether
/// trying again may help.
pub(crate) fn judge(
    sent: std::result::Result<reqwest::blocking::Response, reqwest::Error>,
    base: &str,
    ok: &[u16],
    what: &str,
) -> std::result::Result<reqwest::blocking::Response, Failed> {
    let resp = sent.map_err(|e| Failed::Retry(unreachable(base, e)))?;
    let status = resp.status().as_u16();
    if ok.contains(&status) {
        return Ok(resp);
    }
    let retry = matches!(status, 401 | 408 | 429 | 500..=599);
    let e = match expect(resp, ok, what) {
        Err(e) => e,
        Ok(_) => Error::invalid(format!("the registry answered {status} for {what}")),
    };
    Err(match status {
        416 => Failed::Range(e),
        _ if retry => Failed::Retry(e),
        _ => Failed::Stop(e),
    })
}

pub(crate) fn no_credentials() -> Error {
    Error::new(ErrorKind::Denied, "the registry asks for credentials")
        .hint("log in (docker login / skopeo login write ~/.docker/config.json or $REGISTRY_AUTH_FILE), or pass --registry-secret NAME (a stored secret USER:PASSWORD)")
}

pub(crate) fn unreachable(url: &str, e: reqwest::Error) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("the registry at {url:.200} did not answer: {e}"),
    )
    .hint("check the address; a registry without TLS needs --tls-verify=false")
}

/// The body of `resp` (at most 1 MiB), if its status is one of `ok`; else an error that
/// names what was asked and the registry's own words.
pub(crate) fn expect(resp: reqwest::blocking::Response, ok: &[u16], what: &str) -> Result<Vec<u8>> {
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    let _ = resp.take(1 << 20).read_to_end(&mut body);
    if ok.contains(&status) {
        return Ok(body);
    }
    let words = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["errors"][0]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
    let e = Error::new(
        match status {
            401 | 403 => ErrorKind::Denied,
            404 => ErrorKind::NotFound,
            _ => ErrorKind::Unavailable,
        },
        format!("the registry answered {status} for {what}: {words}"),
    );
    Err(match status {
        401 | 403 => e.hint("check the credentials and that they may push to this repository"),
        _ => e,
    })
}
