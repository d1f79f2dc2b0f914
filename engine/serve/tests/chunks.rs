//! The cache tier as a node meets it: a real server on loopback over a real repository,
//! asked over HTTP.

mod common;

use std::fs;

use common::{server, server_with, want, want_run};

#[test]
fn a_chunk_is_served_verified_proven_immutable_and_cached() {
    let s = server();
    let (status, h, body) = s.get(&s.chunk_path(1), &[]);
    assert_eq!(status, 200);
    assert!(body == want(&s, 1));
    assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
    let etag = format!("\"{}\"", s.file.chunks[1].entry.hash.hex());
    assert_eq!(h["etag"], etag.as_str());
    // The chunk, and the neighbours its proof blocks reach into, once each.
    let span = s.proof_span(1..2).len() as u64;
    assert_eq!(s.metric("origin_fetches_total"), span);
    // From the server's cache the second time, and a revalidation costs nothing.
    assert!(s.get(&s.chunk_path(1), &[]).2 == want(&s, 1));
    assert_eq!(s.metric("origin_fetches_total"), span);
    assert_eq!(s.get(&s.chunk_path(1), &[("if-none-match", &etag)]).0, 304);
    assert_eq!(s.get("/healthz", &[]).0, 200);
    assert_eq!(s.get("/readyz", &[]).0, 200);
}

#[test]
fn sixteen_clients_asking_for_one_cold_chunk_cause_one_origin_fetch_each() {
    let s = server();
    let url = format!("{}{}", s.url, s.chunk_path(3));
    let bodies: Vec<Vec<u8>> = s.rt.block_on(async {
        let client = reqwest::Client::new();
        let asks = (0..16).map(|_| {
            let (c, u, key) = (client.clone(), url.clone(), s.key.clone());
            tokio::spawn(async move {
                c.get(u)
                    .bearer_auth(&key)
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
    // The chunk and the neighbours its proof needs, each fetched once for all 16.
    let span = s.proof_span(3..4).len() as u64;
    assert_eq!(
        s.metric("origin_fetches_total"),
        span,
        "one fetch each for all 16"
    );
    // Every answer timed (proofs ask for neighbours as requests of their own).
    assert!(s.metric("request_seconds_count") >= 16);
    assert_eq!(s.metric("origin_request_seconds_count"), span);
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
    let file = s.file.hash.hex();
    let t = one_line(
        s.get(&format!("/v1/chunks/not-a-hash?file={file}"), &[]),
        400,
    );
    assert!(t.contains("64 hex digits"), "{t}");
    // No file named: the server serves chunks only as some file's.
    let t = one_line(
        s.get(
            &format!("/v1/chunks/{}", s.file.chunks[0].entry.hash.hex()),
            &[],
        ),
        400,
    );
    assert!(t.contains("?file="), "{t}");
    // A chunk the file does not hold, and a file the repository does not hold.
    let t = one_line(
        s.get(&format!("/v1/chunks/{}?file={file}", "ab".repeat(32)), &[]),
        400,
    );
    assert!(t.contains("is not one of file"), "{t}");
    let t = one_line(
        s.get(
            &format!(
                "/v1/chunks/{}?file={}",
                s.file.chunks[0].entry.hash.hex(),
                "cd".repeat(32)
            ),
            &[],
        ),
        400,
    );
    assert!(t.contains("no chunk list"), "{t}");

    // The origin's copy damaged: a gateway error naming it, never the bytes.
    let c = &s.file.chunks[6];
    let pack = s.file.packs[c.pack as usize].hex();
    let path = s.dir.path().join("repo/packs").join(&pack[..2]).join(&pack);
    let mut b = fs::read(&path).unwrap();
    b[c.entry.offset as usize + 10] ^= 0x40;
    fs::write(&path, &b).unwrap();
    let t = one_line(s.get(&s.chunk_path(6), &[]), 502);
    assert!(t.contains("fails its hash check"), "{t}");
    assert!(s.metric("bad_bytes_total") >= 1);
}

#[test]
fn only_a_loopback_address_may_be_served_without_tls() {
    use sealvol_serve::check_listen;
    assert!(check_listen(&"127.0.0.1:7420".parse().unwrap(), false, false).is_ok());
    assert!(check_listen(&"[::1]:7420".parse().unwrap(), false, false).is_ok());
    let e = check_listen(&"0.0.0.0:7420".parse().unwrap(), false, false).unwrap_err();
    assert!(
        e.contains("--insecure-http") && e.contains("--tls-cert"),
        "{e}"
    );
    assert!(check_listen(&"0.0.0.0:7420".parse().unwrap(), true, false).is_ok());
    assert!(check_listen(&"0.0.0.0:7420".parse().unwrap(), false, true).is_ok());
}

#[test]
fn a_run_of_adjacent_chunks_comes_in_one_origin_read() {
    let s = server();
    let n = s.file.chunks.len();
    assert!(s.file.chunks.iter().all(|c| c.pack == 0), "one pack");
    // Chunks 2..5 cached first (one run); proving them fetched their neighbours too.
    assert!(s.post("/v1/runs", s.run_body(2..5)).1 == want_run(&s, 2..5));
    let first = s.metric("origin_fetches_total");
    let span = s.proof_span(2..5);
    assert_eq!(first, 1 + (span.len() - 3) as u64);
    // The whole file: read in the stretches on either side of what is cached.
    let (status, body) = s.post("/v1/runs", s.run_body(0..n));
    assert_eq!(status, 200);
    assert!(body == want_run(&s, 0..n), "the run's bytes, in order");
    let sides = (span.start > 0) as u64 + (span.end < n) as u64;
    assert_eq!(s.metric("origin_fetches_total"), first + sides);
    assert_eq!(s.metric("run_requests_total"), 2);
    // All cached now: no origin read at all.
    let before = s.metric("origin_fetches_total");
    assert!(s.post("/v1/runs", s.run_body(1..n - 1)).1 == want_run(&s, 1..n - 1));
    assert_eq!(s.metric("origin_fetches_total"), before);
}

#[test]
fn without_a_cache_runs_are_served_checked_from_the_packs_and_nothing_is_written() {
    let s = server_with(false);
    let n = s.file.chunks.len();
    let c = &s.file.chunks[2];
    let pack = s.file.packs[c.pack as usize].hex();
    let path = s.dir.path().join("repo/packs").join(&pack[..2]).join(&pack);
    // Written long ago, as packs are: the damage below moves its modified time however
    // coarse the filesystem's clock.
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    for round in 1..=2 {
        let (status, body) = s.post("/v1/runs", s.run_body(0..n));
        assert_eq!(status, 200);
        assert!(body == want_run(&s, 0..n), "round {round}: the run's bytes");
        // Each answer reads the packs again: there is no second copy to read.
        assert_eq!(s.metric("origin_fetches_total"), round);
        assert_eq!(s.metric("cache_hits_total"), 0);
        // The second reads the same places of the same pack files: not hashed again.
        assert_eq!(s.metric("hashes_spared_total"), (round - 1) * n as u64);
    }
    assert!(!s.dir.path().join("cache").exists(), "no cache folder made");
    // A chunk whose bytes in the pack are damaged is still never served: the pack file
    // written to is another file to the server, and its bytes are hashed again.
    let mut bytes = fs::read(&path).unwrap();
    bytes[c.entry.offset as usize + 10] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    let (status, body) = s.post("/v1/runs", s.run_body(2..3));
    assert_eq!(status, 502, "{}", String::from_utf8_lossy(&body));
    assert!(body != want_run(&s, 2..3));
}

#[test]
fn sixteen_nodes_asking_for_one_cold_run_cause_one_origin_read() {
    let s = server();
    let n = s.file.chunks.len();
    let url = format!("{}/v1/runs", s.url);
    let body = s.run_body(0..n);
    let bodies: Vec<Vec<u8>> = s.rt.block_on(async {
        let client = reqwest::Client::new();
        let asks: Vec<_> = (0..16)
            .map(|_| {
                let (c, u, b, k) = (client.clone(), url.clone(), body.clone(), s.key.clone());
                tokio::spawn(async move {
                    let r = c.post(u).bearer_auth(k).body(b).send().await.unwrap();
                    r.bytes().await.unwrap().to_vec()
                })
            })
            .collect();
        let mut out = Vec::new();
        for a in asks {
            out.push(a.await.unwrap());
        }
        out
    });
    let whole = want_run(&s, 0..n);
    assert!(bodies.iter().all(|b| *b == whole));
    // Whatever the interleaving: a request that comes while a chunk is being read
    // waits on that read's flight, and the flight stays until the chunk is in the
    // cache, so a later one finds it there. One read, however the 16 fall.
    assert_eq!(s.metric("origin_fetches_total"), 1, "one read for all 16");
    assert_eq!(s.metric("origin_bytes_total"), 4 << 20);
}

#[test]
fn bad_run_requests_get_one_line_and_lose_nothing() {
    let s = server();
    let n = s.file.chunks.len();
    let refused = |body: Vec<u8>, status: u16, says: &str| {
        let (got, text) = s.post("/v1/runs", body);
        let text = String::from_utf8_lossy(&text).to_string();
        assert_eq!(got, status, "{text}");
        assert_eq!(text.trim_end().lines().count(), 1, "{text}");
        assert!(text.contains(says), "{says:?} in {text}");
    };
    refused(b"{not json".to_vec(), 400, "not a run request");
    refused(b"[]".to_vec(), 400, "not a run request");
    let mut v: serde_json::Value = serde_json::from_slice(&s.run_body(0..n)).unwrap();
    let good = v.clone();
    v["pack"] = "zz".into();
    refused(
        serde_json::to_vec(&v).unwrap(),
        400,
        "not a file hash and pack id",
    );
    let mut v = good.clone();
    v.as_object_mut().unwrap().remove("file");
    refused(serde_json::to_vec(&v).unwrap(), 400, "missing field `file`");
    let mut v = good.clone();
    v["chunks"][1][0] = "xyz".into();
    refused(serde_json::to_vec(&v).unwrap(), 400, "not a chunk hash");
    let mut v = good.clone();
    v["chunks"][1][1] = 0.into();
    refused(serde_json::to_vec(&v).unwrap(), 400, "not a chunk's length");
    let mut v = good.clone();
    v["chunks"][1] = v["chunks"][0].clone();
    refused(serde_json::to_vec(&v).unwrap(), 400, "appears twice");
    let mut v = good.clone();
    v["chunks"] = serde_json::json!([]);
    refused(serde_json::to_vec(&v).unwrap(), 400, "1 to 8192 chunks");
    // More bytes than one request may ask for: 200 chunks of 1 MiB.
    let mut v = good.clone();
    v["chunks"] = (0..200)
        .map(|i| serde_json::json!([format!("{i:064x}"), 1 << 20]))
        .collect();
    refused(
        serde_json::to_vec(&v).unwrap(),
        400,
        "more than one request",
    );
    // A body past the limit is refused before it is read whole.
    let (status, _) = s.post("/v1/runs", vec![b' '; 2 << 20]);
    assert_eq!(status, 413);
    // A chunk the file does not hold.
    let mut v = good.clone();
    v["chunks"][0][0] = "ab".repeat(32).into();
    refused(serde_json::to_vec(&v).unwrap(), 400, "is not one of file");
    // None of it cost an origin read, and the good request still works.
    let (status, body) = s.post("/v1/runs", serde_json::to_vec(&good).unwrap());
    assert_eq!(status, 200);
    assert!(body == want_run(&s, 0..n));
}

#[test]
fn a_run_not_where_the_files_list_says_is_refused() {
    let s = server();
    let mut v: serde_json::Value = serde_json::from_slice(&s.run_body(3..5)).unwrap();
    // Off by one chunk: not where the file's list has these chunks.
    v["offset"] = s.file.chunks[2].entry.offset.into();
    let (status, body) = s.post("/v1/runs", serde_json::to_vec(&v).unwrap());
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("is not one of file"));
    // Named as another file's (one the repository does not hold).
    let mut v: serde_json::Value = serde_json::from_slice(&s.run_body(3..5)).unwrap();
    v["file"] = "ab".repeat(32).into();
    let (status, _) = s.post("/v1/runs", serde_json::to_vec(&v).unwrap());
    assert_eq!(status, 400);
    assert_eq!(
        s.metric("origin_fetches_total"),
        0,
        "nothing was read for them"
    );
}

#[test]
fn a_damaged_chunk_in_the_servers_cache_is_never_served_and_is_counted() {
    let s = server();
    let hash = s.file.chunks[1].entry.hash;
    assert!(s.get(&s.chunk_path(1), &[]).2 == want(&s, 1));
    let fetched = s.metric("origin_fetches_total");
    // The server's cache opened a second time, as another process would, to find where
    // the chunk lies (the server stores it after answering).
    let look = sealvol_core::cache::ChunkCache::open(&s.dir.path().join("cache"), 1 << 30).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (seg, offset, _) = loop {
        if let Some(at) = look.locate(&hash) {
            break at;
        }
        assert!(std::time::Instant::now() < deadline, "never cached");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let mut b = fs::read(&seg).unwrap();
    b[offset as usize] ^= 1;
    fs::write(&seg, b).unwrap();
    assert_eq!(s.metric("cache_damaged_chunks_total"), 0);
    // The right bytes, read again from the repository, and the damage counted.
    assert!(s.get(&s.chunk_path(1), &[]).2 == want(&s, 1));
    assert_eq!(s.metric("cache_damaged_chunks_total"), 1);
    assert!(s.metric("origin_fetches_total") > fetched);
}
