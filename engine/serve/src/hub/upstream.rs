//! The pull-through mirror's view of its upstream Hub (issue 63): which volume a Hub
//! repo is mirrored into, which commit a revision names upstream (asked at most once
//! per `refresh` for a branch or tag and never for a commit id), and the upstream's own
//! answer to a repo's info (`Upstream`), its errors read as the Hub's clients read them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sealvol_core::refs::{Name, VolumeName};

use super::missing::Missing;

/// The longest Hub repo id a mirror takes (the Hub's own limit is 96 characters a part).
pub const MAX_REPO_ID: usize = 200;

/// The volume Hub repo `repo_id` (`ORG/NAME`) is mirrored into: `NS/org--name`, a
/// dataset's `NS/datasets--org--name`, lowercased (the Hub's repo ids are
/// case-insensitive, and never hold `--` or `..`, so no two repos meet). One too long
/// for a volume name keeps its first 50 characters and a hash of the whole id. A repo
/// id of another shape is not one the Hub has.
pub fn mirror_volume(
    namespace: &Name,
    repo_id: &str,
    datasets: bool,
) -> Result<VolumeName, Missing> {
    let unknown = || Missing::Repo(format!("Repository Not Found for url: {repo_id:.100}"));
    let Some((org, name)) = repo_id.split_once('/') else {
        return Err(unknown());
    };
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && !p.contains("--")
            && !p.contains("..")
            && !p.starts_with(['-', '.'])
            && !p.ends_with(['-', '.'])
    };
    if repo_id.len() > MAX_REPO_ID || !part_ok(org) || !part_ok(name) {
        return Err(unknown());
    }
    let kind = if datasets { "datasets--" } else { "" };
    let mut flat = format!("{kind}{org}--{name}").to_ascii_lowercase();
    if flat.len() > 63 {
        let h = blake3::hash(flat.as_bytes()).to_hex();
        flat = format!(
            "{}-{}",
            &flat[..50].trim_end_matches(['-', '.', '_']),
            &h[..12]
        );
    }
    let name = Name::parse("volume name", &flat).map_err(|_| unknown())?;
    Ok(VolumeName {
        namespace: namespace.clone(),
        name,
    })
}

/// Whether `rev` is a commit id as the Hub writes one (40 lowercase hex digits).
pub fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Which commit each (repo, branch or tag) named upstream lately, and when it was asked.
pub struct Revisions {
    refresh: Duration,
    known: Mutex<HashMap<(String, String), (String, Instant)>>,
}

/// The most (repo, revision) pairs remembered: past it, the oldest answers are
/// forgotten (and asked again when named).
const KNOWN: usize = 10_000;

impl Revisions {
    pub fn new(refresh: Duration) -> Revisions {
        Revisions {
            refresh,
            known: Mutex::default(),
        }
    }

    /// The commit `rev` of `repo` names: itself for a commit id; else the answer of at
    /// most `refresh` ago, or `ask`'s now (asked with no lock held).
    pub fn commit(
        &self,
        repo: &str,
        rev: &str,
        now: Instant,
        ask: impl FnOnce() -> Result<String, Missing>,
    ) -> Result<String, Missing> {
        if is_commit(rev) {
            return Ok(rev.to_string());
        }
        let key = (repo.to_ascii_lowercase(), rev.to_string());
        if let Some((sha, at)) = sealvol_core::lock(&self.known).get(&key)
            && now.saturating_duration_since(*at) < self.refresh
        {
            return Ok(sha.clone());
        }
        let sha = ask()?;
        if !is_commit(&sha) {
            return Err(Missing::Failed(format!(
                "the upstream named {sha:.60} as the commit of {repo:.100}@{rev:.60}, which is not a commit id"
            )));
        }
        let mut known = sealvol_core::lock(&self.known);
        if known.len() >= KNOWN
            && let Some(oldest) = known
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
        {
            known.remove(&oldest);
        }
        known.insert(key, (sha.clone(), now));
        Ok(sha)
    }
}

/// The largest answer to a metadata request the mirror reads from its upstream.
pub const MAX_ANSWER: u64 = 16 << 20;

/// An upstream Hub (`serve --hf-upstream URL`), asked with the server's own token.
pub struct Upstream {
    base: String,
    http: reqwest::blocking::Client,
    token: Option<String>,
    /// Where the token is read for each request, when it is a stored secret (which
    /// may be set or changed while the server runs).
    token_from: Option<Box<dyn Fn() -> Option<String> + Send + Sync>>,
}

impl Upstream {
    /// The Hub at `base` (`http://` or `https://`, nothing else: a path is not read as
    /// one), asked within `patience`.
    pub fn new(base: &str, token: Option<String>, patience: Duration) -> Result<Upstream, String> {
        let ok = (base.starts_with("https://") || base.starts_with("http://"))
            && base.len() <= 1024
            && !base.chars().any(|c| c.is_whitespace() || c.is_control());
        if !ok {
            return Err(format!(
                "{base:.100} is not an upstream Hub's address: give http://HOST[:PORT][/PATH] or https://…"
            ));
        }
        let http = sealvol_client::tls::client(Duration::from_secs(10).min(patience), patience)
            .map_err(|e| e.to_string())?;
        Ok(Upstream {
            base: base.trim_end_matches('/').to_string(),
            http,
            token,
            token_from: None,
        })
    }

    /// Reads the token with `f` for each request.
    pub fn with_token_from(
        mut self,
        f: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.token_from = Some(Box::new(f));
        self
    }

    /// The upstream's address, as given (no trailing `/`).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET /api/{models,datasets}/REPO/revision/REV?blobs=true` upstream: the commit
    /// it names, and the whole answer (what the mirror's clients are told, with each
    /// file's size and ids). Blocking.
    pub fn revision(
        &self,
        datasets: bool,
        repo: &str,
        rev: &str,
    ) -> Result<(String, serde_json::Value), Missing> {
        let shown = format!("{repo:.100}@{rev:.60}");
        let path = format!(
            "/api/{}/{repo}/revision/{}?blobs=true",
            kind(datasets),
            part(rev)
        );
        let answer = self.ask(&path, None, &shown)?;
        let json = answer.json(&shown)?;
        let sha = json["sha"].as_str().unwrap_or_default().to_string();
        if !is_commit(&sha) {
            return Err(Missing::Failed(format!(
                "the upstream named {sha:.60} as the commit of {shown}, which is not a commit id"
            )));
        }
        Ok((sha, json))
    }

    /// `GET` (or, with a form body, `POST`) `path` upstream (a path and query after
    /// its address): its answer, within `MAX_ANSWER` bytes, or the Hub's own error
    /// for what it refused. `shown`: what was asked, for messages. Blocking.
    pub fn ask(&self, path: &str, form: Option<Vec<u8>>, shown: &str) -> Result<Answer, Missing> {
        let url = format!("{}{path}", self.base);
        let mut req = match form {
            None => self.http.get(&url),
            Some(body) => self
                .http
                .post(&url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body),
        };
        let token = match &self.token_from {
            Some(f) => f(),
            None => self.token.clone(),
        };
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().map_err(|e| {
            Missing::Failed(format!("the upstream Hub did not answer for {shown}: {e}"))
        })?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let code = header("x-error-code");
        let link = header("link");
        match (status, code.as_str()) {
            (200, _) => {}
            (_, "RevisionNotFound") => {
                return Err(Missing::Revision(format!(
                    "Invalid rev id: {shown} (upstream)"
                )));
            }
            (_, "EntryNotFound") => {
                return Err(Missing::Entry(format!(
                    "{shown} has no such entry (upstream)"
                )));
            }
            (401 | 404, _) => {
                return Err(Missing::Repo(format!(
                    "Repository Not Found for url: {shown} (upstream)"
                )));
            }
            _ => {
                return Err(Missing::Failed(format!(
                    "the upstream Hub answered {status} for {shown}"
                )));
            }
        }
        let mut body = Vec::new();
        use std::io::Read;
        resp.take(MAX_ANSWER + 1)
            .read_to_end(&mut body)
            .map_err(|e| {
                Missing::Failed(format!("the upstream's answer for {shown} was cut: {e}"))
            })?;
        if body.len() as u64 > MAX_ANSWER {
            return Err(Missing::Failed(format!(
                "the upstream's answer for {shown} is over {MAX_ANSWER} bytes"
            )));
        }
        Ok(Answer { body, link })
    }
}

/// What an upstream answered: its body, and its `Link` header (a listing's next page).
pub struct Answer {
    pub body: Vec<u8>,
    pub link: String,
}

impl Answer {
    pub fn json(&self, shown: &str) -> Result<serde_json::Value, Missing> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Missing::Failed(format!(
                "the upstream's answer for {shown} is not JSON: {e:.100}"
            ))
        })
    }

    /// The query of the next page's URL in `Link: <URL>; rel="next"`, if any: the
    /// mirror's own `Link` names its own address with it.
    pub fn next_query(&self) -> Option<String> {
        let next = self.link.split(',').find(|l| l.contains("rel=\"next\""))?;
        let url = next.split_once('<')?.1.split_once('>')?.0;
        let (_, query) = url.split_once('?')?;
        let ok = query.len() <= 2048
            && query
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'<' | b'>' | b'"'));
        ok.then(|| query.to_string())
    }
}

/// The API's word for a repo's kind.
pub fn kind(datasets: bool) -> &'static str {
    if datasets { "datasets" } else { "models" }
}

/// One path segment, percent-encoded.
pub fn part(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).collect()
}

/// A path in a repo, each segment percent-encoded.
pub fn path_parts(p: &str) -> String {
    p.split('/').map(part).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns() -> Name {
        Name::parse("namespace", "hf").unwrap()
    }

    #[test]
    fn a_hub_repo_is_mirrored_into_one_volume_whatever_its_case() {
        let v = mirror_volume(&ns(), "Qwen/Qwen3-8B", false).unwrap();
        assert_eq!(v.to_string(), "hf/qwen--qwen3-8b");
        assert_eq!(mirror_volume(&ns(), "qwen/QWEN3-8b", false).unwrap(), v);
        let d = mirror_volume(&ns(), "Qwen/Qwen3-8B", true).unwrap();
        assert_eq!(d.to_string(), "hf/datasets--qwen--qwen3-8b");
        // A model of org `datasets` has two parts, never three.
        assert_ne!(mirror_volume(&ns(), "datasets/qwen", false).unwrap(), d);
        let long = format!("org/{}", "a".repeat(90));
        let v = mirror_volume(&ns(), &long, false).unwrap();
        assert!(v.name.as_str().len() <= 63, "{v}");
        assert_ne!(
            v,
            mirror_volume(&ns(), &format!("org/{}b", "a".repeat(89)), false).unwrap()
        );
        assert_ne!(v, mirror_volume(&ns(), &long, true).unwrap());
        for bad in [
            "noslash",
            "a/b/c",
            "a--b/c",
            "a/b..c",
            "-a/b",
            "a/b.",
            "a/b c",
            "a/",
            "/b",
            "a/b%2F",
            "a/\u{0}",
            "ünï/code",
        ] {
            assert!(
                matches!(mirror_volume(&ns(), bad, false), Err(Missing::Repo(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_branch_is_asked_upstream_once_per_refresh_and_a_commit_never() {
        let revs = Revisions::new(Duration::from_secs(600));
        let t0 = Instant::now();
        let sha = "ab".repeat(20);
        let asked = std::cell::Cell::new(0);
        let ask = |s: &str| {
            let s = s.to_string();
            let asked = &asked;
            move || {
                asked.set(asked.get() + 1);
                Ok(s)
            }
        };
        assert_eq!(revs.commit("Org/M", "main", t0, ask(&sha)).unwrap(), sha);
        assert_eq!(
            revs.commit("org/m", "main", t0 + Duration::from_secs(599), ask("x"))
                .unwrap(),
            sha
        );
        assert_eq!(asked.get(), 1);
        let newer = "cd".repeat(20);
        assert_eq!(
            revs.commit("org/m", "main", t0 + Duration::from_secs(600), ask(&newer))
                .unwrap(),
            newer
        );
        assert_eq!(asked.get(), 2);
        assert_eq!(revs.commit("org/m", &sha, t0, ask("x")).unwrap(), sha);
        assert_eq!(asked.get(), 2, "a commit id is never asked");
        // An upstream that names no commit id is not believed.
        let e = revs
            .commit("org/m", "v1", t0, ask("../../etc"))
            .unwrap_err();
        assert!(matches!(e, Missing::Failed(_)));
    }
}
