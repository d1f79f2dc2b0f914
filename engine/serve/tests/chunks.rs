//! The cache tier as a node meets it: a real server on loopback over a real repository,
//! asked over HTTP.

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

struct Server {
    dir: tempfile::TempDir,
    url: String,
    file: FileObject,
    rt: tokio::runtime::Runtime,
}

/// A repository holding one 4 MiB file, and a server over it with an empty cache.
fn server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let bytes = noise(4 << 20, 7);
    fs::write(src.join("w.bin"), &bytes).unwrap();
    let repo = Arc::new(Repository::open_local(&dir.path().join("repo"), true, false).unwrap());
    let opts = PushOptions {
        cancel: None,
        guard: None,
        source: None,
        stat_cache: None,
        progress: &Quiet,
    };
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
    let cache = Arc::new(ChunkCache::open(&dir.path().join("cache"), 1 << 30).unwrap());
    let service = Arc::new(ChunkService::new(repo, cache));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(sealvol_serve::run(listener, service));
    Server { dir, url, file, rt }
}

impl Server {
    fn get(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
        let url = format!("{}{path}", self.url);
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.rt.block_on(async move {
            let mut req = reqwest::Client::new().get(url);
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
    fn metric(&self, name: &str) -> u64 {
        let (_, _, body) = self.get("/metrics", &[]);
        let text = String::from_utf8(body).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("sealvol_serve_{name} ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
            .parse()
            .unwrap()
    }

    fn chunk_path(&self, i: usize) -> String {
        format!("/v1/chunks/{}", self.file.chunks[i].entry.hash.hex())
    }

    fn hinted_path(&self, i: usize) -> String {
        let c = &self.file.chunks[i];
        format!(
            "{}?pack={}&offset={}&len={}",
            self.chunk_path(i),
            self.file.packs[c.pack as usize].hex(),
            c.entry.offset,
            c.entry.stored_len
        )
    }
}

fn want(s: &Server, i: usize) -> Vec<u8> {
    let bytes = noise(4 << 20, 7);
    let start: u64 = s.file.chunks[..i]
        .iter()
        .map(|c| c.entry.raw_len as u64)
        .sum();
    bytes[start as usize..][..s.file.chunks[i].entry.raw_len as usize].to_vec()
}

#[test]
fn a_chunk_is_served_verified_immutable_and_cached() {
    let s = server();
    let (status, h, body) = s.get(&s.chunk_path(1), &[]);
    assert_eq!(status, 200);
    assert!(body == want(&s, 1));
    assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
    let etag = format!("\"{}\"", s.file.chunks[1].entry.hash.hex());
    assert_eq!(h["etag"], etag.as_str());
    // From the server's cache the second time, and a revalidation costs nothing.
    assert!(s.get(&s.chunk_path(1), &[]).2 == want(&s, 1));
    assert_eq!(s.metric("origin_fetches_total"), 1);
    assert_eq!(s.metric("cache_hits_total"), 1);
    assert_eq!(s.get(&s.chunk_path(1), &[("if-none-match", &etag)]).0, 304);
    // With the client's hint (its file's chunk list), the index is not needed.
    assert!(s.get(&s.hinted_path(2), &[]).2 == want(&s, 2));
    assert_eq!(s.metric("origin_fetches_total"), 2);
    assert_eq!(s.get("/healthz", &[]).0, 200);
    assert_eq!(s.get("/readyz", &[]).0, 200);
}

#[test]
fn sixteen_clients_asking_for_one_cold_chunk_cause_one_origin_fetch() {
    let s = server();
    let url = format!("{}{}", s.url, s.hinted_path(3));
    let bodies: Vec<Vec<u8>> = s.rt.block_on(async {
        let client = reqwest::Client::new();
        let asks = (0..16).map(|_| {
            let (c, u) = (client.clone(), url.clone());
            tokio::spawn(async move {
                c.get(u)
                    .send()
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
                    .to_vec()
            })
        });
        let mut out = Vec::new();
        for a in asks.collect::<Vec<_>>() {
            out.push(a.await.unwrap());
        }
        out
    });
    assert!(bodies.iter().all(|b| *b == want(&s, 3)));
    assert_eq!(s.metric("origin_fetches_total"), 1, "one fetch for all 16");
    assert_eq!(s.metric("chunk_requests_total"), 16);
    assert_eq!(
        s.metric("singleflight_waits_total") + s.metric("cache_hits_total"),
        15,
        "the others waited for it or found it cached"
    );
}

#[test]
fn bad_requests_get_one_line_and_bad_bytes_are_never_served() {
    let s = server();
    let one_line = |(status, _, body): (u16, reqwest::header::HeaderMap, Vec<u8>), want: u16| {
        let text = String::from_utf8(body).unwrap();
        assert_eq!(status, want, "{text}");
        assert_eq!(text.trim_end().lines().count(), 1, "{text}");
        text
    };
    let t = one_line(s.get("/v1/chunks/not-a-hash", &[]), 400);
    assert!(t.contains("64 hex digits"), "{t}");
    let t = one_line(s.get(&format!("/v1/chunks/{}", "ab".repeat(32)), &[]), 404);
    assert!(t.contains("no chunk"), "{t}");
    let huge = format!(
        "{}?pack={}&offset=0&len=4294967295",
        s.chunk_path(0),
        "cd".repeat(32)
    );
    let t = one_line(s.get(&huge, &[]), 400);
    assert!(t.contains("not a chunk's length"), "{t}");
    let t = one_line(
        s.get(&format!("{}?pack=zz&offset=0&len=5", s.chunk_path(0)), &[]),
        400,
    );
    assert!(t.contains("not a pack id"), "{t}");
    let t = one_line(s.get(&format!("{}?offset=0", s.chunk_path(0)), &[]), 400);
    assert!(t.contains("all of pack, offset and len"), "{t}");
    let t = one_line(s.get(&format!("{}?offset=x", s.chunk_path(0)), &[]), 400);
    assert!(!t.is_empty());

    // A hint that points at another chunk's bytes: detected, and the index finds the
    // right ones.
    let c = &s.file.chunks[5];
    let other = &s.file.chunks[4];
    let lying = format!(
        "{}?pack={}&offset={}&len={}",
        s.chunk_path(5),
        s.file.packs[other.pack as usize].hex(),
        other.entry.offset,
        c.entry.stored_len
    );
    assert!(s.get(&lying, &[]).2 == want(&s, 5));
    assert_eq!(s.metric("bad_bytes_total"), 1);

    // The origin's copy damaged: a gateway error naming it, never the bytes.
    let c = &s.file.chunks[6];
    let pack = s.file.packs[c.pack as usize].hex();
    let path = s.dir.path().join("repo/packs").join(&pack[..2]).join(&pack);
    let mut b = fs::read(&path).unwrap();
    b[c.entry.offset as usize + 10] ^= 0x40;
    fs::write(&path, &b).unwrap();
    let t = one_line(s.get(&s.chunk_path(6), &[]), 502);
    assert!(t.contains("fails its hash check"), "{t}");
    assert_eq!(s.metric("bad_bytes_total"), 2);
}

#[test]
fn only_a_loopback_address_may_be_served_without_tls() {
    use sealvol_serve::check_listen;
    assert!(check_listen(&"127.0.0.1:7420".parse().unwrap(), false).is_ok());
    assert!(check_listen(&"[::1]:7420".parse().unwrap(), false).is_ok());
    let e = check_listen(&"0.0.0.0:7420".parse().unwrap(), false).unwrap_err();
    assert!(e.contains("--insecure-http"), "{e}");
    assert!(check_listen(&"0.0.0.0:7420".parse().unwrap(), true).is_ok());
}
