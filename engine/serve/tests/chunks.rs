//! The cache tier as a node meets it: a real server on loopback over a real repository,
//! asked over HTTP.

mod common;

use std::fs;

use common::{server, want, want_run};

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
    assert_eq!(s.metric("origin_fetches_total"), 1, "one fetch for all 16");
    assert_eq!(s.metric("chunk_requests_total"), 16);
    // Every answer timed, the one origin read too.
    assert_eq!(s.metric("request_seconds_count"), 16);
    assert_eq!(s.metric("origin_request_seconds_count"), 1);
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
    // Chunk 2 cached first: the run reads the stretches on either side of it.
    assert!(s.get(&s.hinted_path(2), &[]).2 == want(&s, 2));
    let (status, body) = s.post("/v1/runs", s.run_body(0..n));
    assert_eq!(status, 200);
    assert!(body == want_run(&s, 0..n), "the run's bytes, in order");
    assert_eq!(s.metric("origin_fetches_total"), 1 + 2);
    assert_eq!(s.metric("run_requests_total"), 1);
    // All cached now: no origin read at all.
    assert!(s.post("/v1/runs", s.run_body(1..n - 1)).1 == want_run(&s, 1..n - 1));
    assert_eq!(s.metric("origin_fetches_total"), 3);
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
    // Requests that came while the first was reading waited for its chunks; none
    // read them again.
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
    refused(serde_json::to_vec(&v).unwrap(), 400, "not a pack id");
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
    // A chunk the repository does not hold.
    let mut v = good.clone();
    v["chunks"][0][0] = "ab".repeat(32).into();
    refused(serde_json::to_vec(&v).unwrap(), 404, "no chunk");
    // None of it cost an origin read, and the good request still works.
    let (status, body) = s.post("/v1/runs", serde_json::to_vec(&good).unwrap());
    assert_eq!(status, 200);
    assert!(body == want_run(&s, 0..n));
}

#[test]
fn a_run_not_where_the_client_says_is_found_by_the_index() {
    let s = server();
    let mut v: serde_json::Value = serde_json::from_slice(&s.run_body(3..5)).unwrap();
    // Off by one chunk: the bytes fail their hashes, and the index has the right ones.
    v["offset"] = s.file.chunks[2].entry.offset.into();
    let (status, body) = s.post("/v1/runs", serde_json::to_vec(&v).unwrap());
    assert_eq!(status, 200);
    assert!(body == want_run(&s, 3..5));
    assert!(s.metric("bad_bytes_total") >= 1);
}
