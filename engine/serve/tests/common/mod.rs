//! A real server on loopback over a real repository, for the tests of this crate.

#![allow(dead_code)]

use std::fs;
use std::sync::Arc;

use sealvol_core::cache::ChunkCache;
use sealvol_core::digest::Hash;
use sealvol_core::objects::FileObject;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::VolumeName;
use sealvol_core::repo::Repository;
use sealvol_core::testutil::noise;
use sealvol_serve::ChunkService;

pub struct Server {
    pub repo: Arc<Repository>,
    /// The admin key the server made on its first start.
    pub key: String,
    /// Where the server's keys are: its own folder, until a test shares them.
    pub keys_dir: std::path::PathBuf,
    pub keys: Arc<sealvol_serve::keys::Keys>,
    pub dir: tempfile::TempDir,
    pub url: String,
    pub file: FileObject,
    pub rt: tokio::runtime::Runtime,
}

/// A repository holding one 4 MiB file, and a server over it with an empty cache.
pub fn server() -> Server {
    server_with(true)
}

/// A repository holding one 4 MiB file, and a server over it with an empty cache when
/// `cache`, else none (`serve` over a local repository).
pub fn server_with(cache: bool) -> Server {
    server_with_policy(cache, sealvol_serve::Policy::default())
}

/// A server started over a repository, as `sealvol serve` starts one.
pub struct Listening {
    /// The admin key the server made on its first start.
    pub key: String,
    pub keys_dir: std::path::PathBuf,
    pub keys: Arc<sealvol_serve::keys::Keys>,
    pub url: String,
    pub rt: tokio::runtime::Runtime,
}

/// Starts a server over `repo` on loopback, its keys (and its cache when `cache`) in
/// `dir`, keeping to `policy`.
pub fn listen(
    repo: &Arc<Repository>,
    dir: &std::path::Path,
    cache: bool,
    policy: sealvol_serve::Policy,
) -> Listening {
    let cache = cache.then(|| Arc::new(ChunkCache::open(&dir.join("cache"), 1 << 30).unwrap()));
    let service = Arc::new(ChunkService::new(Arc::clone(repo), cache));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let keys_dir = dir.join("keys");
    let (keys, made) = sealvol_serve::keys::Keys::open(&keys_dir, Some(Arc::clone(repo))).unwrap();
    let keys2 = Arc::clone(&keys);
    let key = fs::read_to_string(made.unwrap())
        .unwrap()
        .trim()
        .to_string();
    // As `sealvol serve` does before it says it listens.
    sealvol_serve::take_credential(&service);
    rt.spawn(async move {
        sealvol_serve::run_with(listener, service, Arc::clone(&keys2), None, &policy).await
    });
    Listening {
        key,
        keys_dir,
        keys,
        url,
        rt,
    }
}

/// `server_with`, the server keeping to `policy`.
pub fn server_with_policy(cache: bool, policy: sealvol_serve::Policy) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let bytes = noise(4 << 20, 7);
    fs::write(src.join("w.bin"), &bytes).unwrap();
    let repo = Arc::new(Repository::open_local(&dir.path().join("repo"), true, false).unwrap());
    let opts = PushOptions::new(&Quiet);
    push(
        &repo,
        &src,
        &VolumeName::parse("t/serve").unwrap(),
        &[],
        &opts,
    )
    .unwrap();
    let file = repo.file_object(&Hash::of(&bytes)).unwrap();
    assert!(file.chunks.len() > 4);
    let Listening {
        key,
        keys_dir,
        keys,
        url,
        rt,
    } = listen(&repo, dir.path(), cache, policy);
    Server {
        repo,
        key,
        keys_dir,
        keys,
        dir,
        url,
        file,
        rt,
    }
}

impl Server {
    /// One request with `key`: its status, its challenge header (a have-chunks
    /// answer's), and its body.
    pub fn ask(
        &self,
        key: &str,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> (u16, Option<String>, Vec<u8>) {
        let url = format!("{}{path}", self.url);
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let key = key.to_string();
        self.rt.block_on(async move {
            let r = reqwest::Client::new()
                .request(method, url)
                .bearer_auth(key)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let challenge = r
                .headers()
                .get(sealvol_wire::ops::CHALLENGE_HEADER)
                .map(|v| v.to_str().unwrap().to_string());
            (status, challenge, r.bytes().await.unwrap().to_vec())
        })
    }

    /// The key list `sealvol key` would change for this server.
    pub fn place(&self) -> sealvol_serve::keys::Place {
        sealvol_serve::keys::Place::of(&self.keys_dir, Arc::clone(&self.repo)).unwrap()
    }

    pub fn get(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
        self.request("GET", path, headers)
    }

    /// One request with the admin key, unless `headers` name an `authorization`:
    /// status, headers and body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
        let url = format!("{}{path}", self.url);
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.rt.block_on(async move {
            let mut req = reqwest::Client::new().request(method, url);
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            {
                req = req.bearer_auth(&self.key);
            }
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            let h = r.headers().clone();
            (status, h, r.bytes().await.unwrap().to_vec())
        })
    }

    /// A counter from `/metrics`.
    pub fn metric(&self, name: &str) -> u64 {
        let (_, _, body) = self.get("/metrics", &[]);
        let text = String::from_utf8(body).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("sealvol_serve_{name} ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
            .parse()
            .unwrap()
    }

    /// Chunk `i` of the file, asked for as the file's.
    pub fn chunk_path(&self, i: usize) -> String {
        format!(
            "/v1/chunks/{}?file={}",
            self.file.chunks[i].entry.hash.hex(),
            self.file.hash.hex()
        )
    }

    /// The chunks whose bytes proving chunks `range` needs: those of the proof blocks
    /// they lie in (`sealvol_core::proof`), each fetched once.
    pub fn proof_span(&self, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let g = 1u64 << sealvol_core::proof::BLOCK_LOG;
        let f = &self.file;
        let (start, end) = (f.start_of(range.start), f.start_of(range.end));
        let s = (start / g) * g;
        let e = (end.div_ceil(g) * g).min(f.size);
        f.chunk_at(s)..f.chunk_at(e - 1) + 1
    }
}

pub fn want(s: &Server, i: usize) -> Vec<u8> {
    let bytes = noise(4 << 20, 7);
    let start: u64 = s.file.chunks[..i]
        .iter()
        .map(|c| c.entry.raw_len as u64)
        .sum();
    bytes[start as usize..][..s.file.chunks[i].entry.raw_len as usize].to_vec()
}

impl Server {
    /// A run request for chunks `range` of the file, which must lie in one pack.
    pub fn run_body(&self, range: std::ops::Range<usize>) -> Vec<u8> {
        let chunks = &self.file.chunks[range];
        assert!(chunks.iter().all(|c| c.pack == chunks[0].pack));
        let list: Vec<(String, u32)> = chunks
            .iter()
            .map(|c| (c.entry.hash.hex(), c.entry.stored_len))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "file": self.file.hash.hex(),
            "pack": self.file.packs[chunks[0].pack as usize].hex(),
            "offset": chunks[0].entry.offset,
            "chunks": list,
        }))
        .unwrap()
    }

    pub fn post(&self, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
        let url = format!("{}{path}", self.url);
        self.rt.block_on(async move {
            let r = reqwest::Client::new()
                .post(url)
                .bearer_auth(&self.key)
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
        })
    }
}

/// The file's bytes for chunks `range`.
pub fn want_run(s: &Server, range: std::ops::Range<usize>) -> Vec<u8> {
    range.flat_map(|i| want(s, i)).collect()
}
