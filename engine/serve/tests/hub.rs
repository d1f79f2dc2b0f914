//! The Hugging Face Hub's API over the repository (`hub/`): revisions as versions, a
//! repo's info, its tree and its files as the Hub's clients read them. (The clients
//! themselves, `huggingface_hub`, `hf` and `transformers`, are driven against a real
//! `sealvol serve` in tests/hf_clients.)

mod common;

use sealvol_core::error::ErrorKind;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Digest, Name, VolumeName};
use sealvol_core::repo::Repository;
use sealvol_core::testutil::{folder, noise};
use sealvol_serve::hub::{ids, revision};

fn sealed(
    repo: &Repository,
    root: &std::path::Path,
    vol: &VolumeName,
    seed: u64,
    tags: &[&str],
) -> Digest {
    let dir = folder(root, &format!("v{seed}"), &[("w.bin", noise(5000, seed))]);
    let tags: Vec<Name> = tags
        .iter()
        .map(|t| Name::parse("tag", t).unwrap())
        .collect();
    push(repo, &dir, vol, &tags, &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

#[test]
fn a_revision_names_a_version_by_tag_digest_commit_id_or_main() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
    let vol = VolumeName::parse("team/model").unwrap();
    let first = sealed(&repo, dir.path(), &vol, 1, &["prod"]);
    let second = sealed(&repo, dir.path(), &vol, 2, &[]);
    let at = |rev: &str| revision::resolve(&repo, &vol, rev);

    assert_eq!(at("prod").unwrap(), first);
    assert_eq!(at(&first.to_string()).unwrap(), first);
    assert_eq!(at(&first.hex()).unwrap(), first);
    assert_eq!(at(&ids::commit_id(&first)).unwrap(), first);
    // No tag `main`: the newest sealed version; then the tag, once there is one.
    assert_eq!(at("main").unwrap(), second);
    sealed(&repo, dir.path(), &vol, 1, &["main"]);
    assert_eq!(at("main").unwrap(), first);

    // Names of no version: not found, never read as anything else.
    for rev in [
        "refs/pr/1",
        "refs%2Fpr%2F1",
        "..",
        "../../etc",
        "a\0b",
        "",
        "nope",
        &"0".repeat(40),
        &"0".repeat(64),
        "b3:zz",
        &ids::commit_id(&first).to_uppercase(),
    ] {
        let e = at(rev).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{rev:?}: {e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

#[test]
fn a_repos_info_names_its_commit_and_files_and_hides_what_the_key_may_not_see() {
    let s = common::server();
    let vol = VolumeName::parse("t/serve").unwrap();
    let digest = s
        .repo
        .resolve(&sealvol_core::Ref::parse("t/serve").unwrap())
        .unwrap();
    let commit = ids::commit_id(&digest);
    for path in [
        "/hf/api/models/t/serve".to_string(),
        format!("/hf/api/models/t/serve/revision/{commit}"),
        format!("/hf/api/datasets/t/serve/revision/{}", digest.hex()),
    ] {
        let (status, _, body) = s.get(&path, &[]);
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], vol.to_string());
        assert_eq!(v["sha"], commit);
        assert_eq!(v["siblings"][0]["rfilename"], "w.bin");
        assert_eq!(v["siblings"][0]["size"], s.file.size);
    }
    let code = |path: &str, key: &str| {
        let auth = format!("Bearer {key}");
        let (status, h, _) = s.get(path, &[("authorization", &auth)]);
        let code = h
            .get("x-error-code")
            .map(|v| v.to_str().unwrap().to_string());
        (status, code)
    };
    let not = |what: &str| (404, Some(what.to_string()));
    assert_eq!(code("/hf/api/models/t/nope", &s.key), not("RepoNotFound"));
    assert_eq!(
        code("/hf/api/models/t/serve/revision/refs%2Fpr%2F1", &s.key),
        not("RevisionNotFound")
    );
    assert_eq!(
        code(
            &format!("/hf/api/models/t/serve/revision/{}", "0".repeat(40)),
            &s.key
        ),
        not("RevisionNotFound")
    );
    // A key of another namespace is told nothing more than of a repo that is not there.
    let other = sealvol_serve::keys::create(&s.place(), "b", false, vec!["b".into()]).unwrap();
    assert_eq!(code("/hf/api/models/t/serve", &other), not("RepoNotFound"));
}

/// One request with the admin key (or the `authorization` given): status, headers, body.
fn ask(
    s: &common::Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    s.request(method, path, headers)
}

/// The status of a GET of `path` sent byte for byte as written.
fn raw_status(s: &common::Server, path: &str) -> u16 {
    use std::io::{Read, Write};
    let addr = s.url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        s.key
    )
    .unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

fn header(h: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    h.get(name).map(|v| v.to_str().unwrap().to_string())
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref())
}

/// `t/hf`: a small JSON file, a large (LFS-sized) file, an empty one, nested folders
/// and an empty folder.
fn hf_volume(s: &common::Server) -> (Digest, Vec<u8>, Vec<u8>) {
    let config = br#"{"model_type": "bert", "hidden_size": 384}"#.to_vec();
    let big = noise((ids::LFS_MIN + 12345) as usize, 3);
    let src = s.dir.path().join("hf-src");
    std::fs::create_dir_all(src.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(src.join("empty")).unwrap();
    std::fs::write(src.join("config.json"), &config).unwrap();
    std::fs::write(src.join("model.safetensors"), &big).unwrap();
    std::fs::write(src.join("sub/empty.txt"), b"").unwrap();
    std::fs::write(src.join("sub/deeper/a.txt"), b"hello\n").unwrap();
    let vol = VolumeName::parse("t/hf").unwrap();
    let tags = [Name::parse("tag", "prod").unwrap()];
    let d = push(&s.repo, &src, &vol, &tags, &PushOptions::new(&Quiet))
        .unwrap()
        .digest;
    (d, config, big)
}

#[test]
fn a_file_is_sent_whole_or_by_one_range_with_the_ids_the_hubs_clients_check() {
    let s = common::server();
    let (d, config, big) = hf_volume(&s);
    let commit = ids::commit_id(&d);

    // A small file: its git blob id is its ETag (git's own: `git hash-object`).
    let (status, h, body) = ask(&s, "GET", "/hf/t/hf/resolve/prod/config.json", &[]);
    assert_eq!(status, 200);
    assert_eq!(body, config);
    assert_eq!(
        header(&h, "x-repo-commit").as_deref(),
        Some(commit.as_str())
    );
    assert_eq!(
        header(&h, "etag"),
        Some(format!("\"{}\"", ids::blob_id(&config)))
    );
    assert_eq!(header(&h, "x-linked-etag"), None);
    assert_eq!(header(&h, "accept-ranges").as_deref(), Some("bytes"));
    assert_eq!(header(&h, "cache-control").as_deref(), Some("no-cache"));

    // A large one: its SHA-256, as X-Linked-Etag too, by HEAD (no body) and by GET.
    let sha = sha256_hex(&big);
    for rev in ["prod", commit.as_str(), &d.hex(), &d.to_string(), "main"] {
        let path = format!("/hf/t/hf/resolve/{rev}/model.safetensors");
        let (status, h, body) = ask(&s, "HEAD", &path, &[]);
        assert_eq!(status, 200, "{path}");
        assert!(body.is_empty());
        assert_eq!(header(&h, "content-length"), Some(big.len().to_string()));
        assert_eq!(header(&h, "etag"), Some(format!("\"{sha}\"")));
        assert_eq!(header(&h, "x-linked-etag"), Some(format!("\"{sha}\"")));
        assert_eq!(header(&h, "x-linked-size"), Some(big.len().to_string()));
        assert_eq!(
            header(&h, "x-repo-commit").as_deref(),
            Some(commit.as_str())
        );
    }
    let path = format!("/hf/t/hf/resolve/{commit}/model.safetensors");
    let (status, h, body) = ask(&s, "GET", &path, &[]);
    assert_eq!((status, body.len()), (200, big.len()));
    assert!(body == big, "the bytes sent are the file's");
    assert_eq!(
        header(&h, "cache-control").as_deref(),
        Some("public, max-age=31536000, immutable")
    );

    // One range, as an interrupted download resumes; a suffix; an open end.
    let n = big.len() as u64;
    for (range, from, to) in [
        ("bytes=100-199", 100, 200),
        ("bytes=-10", n - 10, n),
        (
            &format!("bytes={}-", n - 5_000_000) as &str,
            n - 5_000_000,
            n,
        ),
        ("bytes=0-99999999999", 0, n),
    ] {
        let (status, h, body) = ask(&s, "GET", &path, &[("range", range)]);
        assert_eq!(status, 206, "{range}");
        assert!(body == big[from as usize..to as usize], "{range}");
        assert_eq!(
            header(&h, "content-range"),
            Some(format!("bytes {from}-{}/{n}", to - 1))
        );
    }
    // Past the end, or more than one range: 416 with the size; not a range: 400.
    for range in [&format!("bytes={n}-") as &str, "bytes=0-1,5-9", "bytes=-0"] {
        let (status, h, _) = ask(&s, "GET", &path, &[("range", range)]);
        assert_eq!(status, 416, "{range}");
        assert_eq!(header(&h, "content-range"), Some(format!("bytes */{n}")));
    }
    let (status, _, body) = ask(&s, "GET", &path, &[("range", "bytes=9-1")]);
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));

    // An empty file; a file two folders down.
    let (status, h, body) = ask(&s, "GET", "/hf/t/hf/resolve/prod/sub/empty.txt", &[]);
    assert_eq!((status, body.len()), (200, 0));
    assert_eq!(
        header(&h, "etag"),
        Some(format!("\"{}\"", ids::blob_id(b"")))
    );
    let (status, _, body) = ask(&s, "GET", "/hf/t/hf/resolve/prod/sub/deeper/a.txt", &[]);
    assert_eq!((status, body.as_slice()), (200, &b"hello\n"[..]));
    // A dataset's route reads the same volume.
    let (status, _, body) = ask(&s, "GET", "/hf/datasets/t/hf/resolve/prod/config.json", &[]);
    assert_eq!((status, body), (200, config));

    // The ids were computed once, and kept where no key of a namespace reads or
    // writes them (the admin's, which may purge the version, deletes them with it).
    // A listing has them all (computed now, or by the file requests' warming).
    let kept = format!("hub/t/hf/{}", d.hex());
    let (status, _, _) = ask(&s, "GET", "/hf/api/models/t/hf/tree/prod", &[]);
    assert_eq!(status, 200);
    assert!(s.repo.object_store().get(&kept).unwrap().is_some());
    let writer = sealvol_serve::keys::create(&s.place(), "w", false, vec!["t".into()]).unwrap();
    for method in ["GET", "PUT", "DELETE"] {
        let (status, _, _) = s.ask(
            &writer,
            method,
            &format!("/v1/objects/{kept}?mode=put"),
            b"{}".to_vec(),
        );
        assert_eq!(status, 403, "{method} {kept} with a writer of t");
    }
}

#[test]
fn a_file_that_is_not_there_or_a_path_that_climbs_is_answered_as_the_hub_answers() {
    let s = common::server();
    hf_volume(&s);
    let code = |path: &str| {
        let (status, h, body) = ask(&s, "GET", path, &[]);
        let text = String::from_utf8_lossy(&body).to_string();
        assert!(!text.contains('\n'), "{path}: one line: {text}");
        (status, header(&h, "x-error-code"))
    };
    let entry = (404, Some("EntryNotFound".to_string()));
    assert_eq!(code("/hf/t/hf/resolve/prod/nope.json"), entry);
    assert_eq!(code("/hf/t/hf/resolve/prod/sub"), entry, "a folder");
    assert_eq!(
        code("/hf/t/hf/resolve/prod/empty"),
        entry,
        "an empty folder"
    );
    // Sent as written (an HTTP client would take the dots out first).
    assert_eq!(
        raw_status(&s, "/hf/t/hf/resolve/prod/../../serve/resolve/main/w.bin"),
        400
    );
    assert_eq!(
        raw_status(&s, "/hf/t/hf/resolve/prod/sub/./deeper/a.txt"),
        400
    );
    for climbs in [
        "/hf/t/hf/resolve/prod/%2e%2e/%2e%2e/etc/passwd",
        "/hf/t/hf/resolve/prod/sub/%2E%2E%2Fconfig.json",
        "/hf/t/hf/resolve/prod/config.json%00",
        "/hf/t/hf/resolve/prod/sub//deeper/a.txt",
        "/hf/api/models/t/hf/tree/prod/..%2Fsub",
    ] {
        assert_eq!(raw_status(&s, climbs), 400, "{climbs}");
    }
    let revision = (404, Some("RevisionNotFound".to_string()));
    for rev in ["refs%2Fpr%2F1", "nope", &"0".repeat(40), "b3%3Azz", "%00"] {
        assert_eq!(
            code(&format!("/hf/t/hf/resolve/{rev}/config.json")),
            revision,
            "{rev}"
        );
    }
    // A revision that is a path's first part: the tag `refs` is not there.
    assert_eq!(code("/hf/t/hf/resolve/refs/pr/1/config.json"), revision);
    let repo = (404, Some("RepoNotFound".to_string()));
    assert_eq!(code("/hf/t/nope/resolve/main/config.json"), repo);
    assert_eq!(code("/hf/t/hf%2Fx/resolve/main/config.json"), repo);
    assert_eq!(code("/hf/api/models/t/nope/tree/main"), repo);
    assert_eq!(
        code("/hf/t/hf/blob/main/config.json"),
        (404, None),
        "not a route"
    );

    // A key of another namespace, or none: told nothing, read nothing.
    let other = sealvol_serve::keys::create(&s.place(), "b", false, vec!["b".into()]).unwrap();
    let auth = format!("Bearer {other}");
    let before = (
        s.metric("bytes_served_total"),
        s.metric("origin_fetches_total"),
    );
    for path in [
        "/hf/t/hf/resolve/prod/config.json",
        "/hf/api/models/t/hf/tree/prod",
        "/hf/api/models/t/hf/revision/prod",
    ] {
        let (status, h, _) = ask(&s, "GET", path, &[("authorization", &auth)]);
        assert_eq!((status, header(&h, "x-error-code")), repo, "{path}");
    }
    let (status, _, _) = ask(
        &s,
        "GET",
        "/hf/t/hf/resolve/prod/config.json",
        &[("authorization", "Bearer ")],
    );
    assert_eq!(status, 401);
    assert_eq!(
        (
            s.metric("bytes_served_total"),
            s.metric("origin_fetches_total")
        ),
        before
    );
}

#[test]
fn namespaces_called_api_or_datasets_are_reached_where_the_shapes_do_not_meet() {
    let s = common::server();
    let src = s.dir.path().join("ns-src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("f.txt"), b"reserved words\n").unwrap();
    for name in ["api/x", "datasets/x", "api/models"] {
        let vol = VolumeName::parse(name).unwrap();
        push(&s.repo, &src, &vol, &[], &PushOptions::new(&Quiet)).unwrap();
    }
    for path in [
        "/hf/api/x/resolve/main/f.txt",
        "/hf/datasets/x/resolve/main/f.txt",
        "/hf/datasets/api/x/resolve/main/f.txt",
    ] {
        let (status, _, body) = ask(&s, "GET", path, &[]);
        assert_eq!(
            (status, body.as_slice()),
            (200, &b"reserved words\n"[..]),
            "{path}"
        );
    }
    // `api/models` is the API's: its info is at the API's own route.
    let (status, _, body) = ask(&s, "GET", "/hf/api/models/api/models", &[]);
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["id"], "api/models");
}

#[test]
fn a_tree_lists_files_and_folders_with_their_git_ids_a_page_at_a_time() {
    let s = common::server();
    let (d, config, big) = hf_volume(&s);
    let list = |path: &str| -> (Vec<serde_json::Value>, Option<String>) {
        let (status, h, body) = ask(&s, "GET", path, &[]);
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        let link = header(&h, "link");
        (serde_json::from_slice(&body).unwrap(), link)
    };
    let (root, link) = list("/hf/api/models/t/hf/tree/prod");
    assert_eq!(link, None);
    let names: Vec<(&str, &str)> = root
        .iter()
        .map(|e| (e["path"].as_str().unwrap(), e["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("config.json", "file"),
            ("empty", "directory"),
            ("model.safetensors", "file"),
            ("sub", "directory")
        ]
    );
    assert_eq!(root[0]["oid"], ids::blob_id(&config));
    assert_eq!(root[0]["size"], config.len());
    assert!(root[0].get("lfs").is_none());
    let sha = sha256_hex(&big);
    assert_eq!(root[2]["lfs"]["oid"], sha);
    assert_eq!(root[2]["lfs"]["size"], big.len());
    let pointer = ids::lfs_pointer(&sha, big.len() as u64);
    assert_eq!(root[2]["oid"], ids::blob_id(pointer.as_bytes()));
    assert_eq!(root[2]["lfs"]["pointerSize"], pointer.len());
    // Folders by their git tree ids: `empty` holds nothing, `sub/deeper` one file.
    assert_eq!(root[1]["oid"], "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
    let (deeper, _) = list("/hf/api/models/t/hf/tree/prod/sub%2Fdeeper");
    assert_eq!(deeper.len(), 1);
    assert_eq!(deeper[0]["oid"], ids::blob_id(b"hello\n"));
    let (recursive, _) = list(&format!(
        "/hf/api/datasets/t/hf/tree/{}?recursive=true&expand=true",
        ids::commit_id(&d)
    ));
    let paths: Vec<&str> = recursive
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "config.json",
            "empty",
            "model.safetensors",
            "sub",
            "sub/deeper",
            "sub/deeper/a.txt",
            "sub/empty.txt"
        ]
    );
    assert_eq!(recursive[0]["lastCommit"]["id"], ids::commit_id(&d));
    let code = |path: &str| {
        let (status, h, _) = ask(&s, "GET", path, &[]);
        (status, header(&h, "x-error-code"))
    };
    assert_eq!(
        code("/hf/api/models/t/hf/tree/prod/nope"),
        (404, Some("EntryNotFound".into()))
    );
    assert_eq!(
        code("/hf/api/models/t/hf/tree/prod/config.json"),
        (404, Some("EntryNotFound".into()))
    );
    // A cursor is a path this server encoded: not base64url, or not UTF-8, is refused;
    // one past every path (`zzz`) is an empty page.
    assert_eq!(code("/hf/api/models/t/hf/tree/prod?cursor=x"), (400, None));
    assert_eq!(
        code("/hf/api/models/t/hf/tree/prod?cursor=99999999"),
        (400, None)
    );
    let (status, _, body) = ask(&s, "GET", "/hf/api/models/t/hf/tree/prod?cursor=enp6", &[]);
    assert_eq!((status, body.as_slice()), (200, &b"[]"[..]));

    // paths-info: the entries of the paths asked for that exist, in order.
    let (status, _, body) = s.ask(
        &s.key,
        "POST",
        "/hf/api/models/t/hf/paths-info/prod",
        b"paths=sub%2Fdeeper%2Fa.txt&paths=nope&paths=sub&expand=False".to_vec(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let got: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["path"], "sub/deeper/a.txt");
    assert_eq!(got[1]["type"], "directory");
}

#[test]
fn a_tree_of_many_files_is_paged_by_link_and_each_entry_listed_once() {
    let s = common::server();
    let src = s.dir.path().join("many");
    let n = 100_000;
    for i in 0..n {
        let dir = src.join(format!("d{}", i % 7));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i:05}")), i.to_string()).unwrap();
    }
    let vol = VolumeName::parse("t/many").unwrap();
    push(&s.repo, &src, &vol, &[], &PushOptions::new(&Quiet)).unwrap();
    let mut next = Some(format!(
        "{}/hf/api/models/t/many/tree/main?recursive=true",
        s.url
    ));
    let mut seen = std::collections::BTreeSet::new();
    let mut pages = 0;
    while let Some(url) = next.take() {
        let path = url.strip_prefix(&s.url).unwrap().to_string();
        let (status, h, body) = ask(&s, "GET", &path, &[]);
        assert_eq!(status, 200);
        let page: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
        assert!(page.len() <= 1000);
        for e in page {
            assert!(seen.insert(e["path"].as_str().unwrap().to_string()), "{e}");
        }
        pages += 1;
        // `<URL>; rel="next"`: absolute, as the Hub's clients follow it.
        next = header(&h, "link").map(|l| {
            let url = l
                .strip_prefix('<')
                .unwrap()
                .split_once(">; rel=\"next\"")
                .unwrap()
                .0;
            assert!(url.starts_with("http://127.0.0.1:"), "{url}");
            url.to_string()
        });
    }
    assert_eq!(seen.len(), n + 7, "every file and folder once");
    assert_eq!(pages, (n + 7).div_ceil(1000));
}

#[test]
fn kept_ids_that_do_not_fit_their_version_are_computed_again_never_used() {
    let s = common::server();
    let (d, config, _) = hf_volume(&s);
    let key = format!("hub/t/hf/{}", d.hex());
    let store = s.repo.object_store();
    // Before any server computed them: junk, then a record of another shape (a file
    // missing), each crafted in the bucket.
    for crafted in [
        b"not json".to_vec(),
        serde_json::json!({"format": 1, "digest": d.to_string(), "files": {
            "config.json": {"size": config.len(), "blob": "0".repeat(40)}
        }})
        .to_string()
        .into_bytes(),
    ] {
        store.delete(&key).unwrap();
        assert!(store.put_if_absent(&key, &crafted).unwrap());
        let service = std::sync::Arc::new(sealvol_serve::ChunkService::new(
            std::sync::Arc::clone(&s.repo),
            None,
        ));
        let hub = sealvol_serve::hub::Hub::new(service, false, None);
        let m = s
            .repo
            .manifest(&VolumeName::parse("t/hf").unwrap(), &d)
            .unwrap();
        let vol = VolumeName::parse("t/hf").unwrap();
        let ids = hub.kept.of(&hub.chunks, &vol, &d, &m).unwrap();
        assert_eq!(ids.files["config.json"].blob, ids::blob_id(&config));
        assert_eq!(ids.files.len(), 4);
        // And written again in its place, for the next server.
        let kept: serde_json::Value =
            serde_json::from_slice(&store.get(&key).unwrap().unwrap()).unwrap();
        assert_eq!(kept["files"]["config.json"]["blob"], ids::blob_id(&config));
    }
}
