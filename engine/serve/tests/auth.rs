//! API keys on a real server over loopback: every route in the router's list (and a
//! path that is none) refuses a request without a key, with a wrong one and with a
//! revoked one, but for the two probes, which answer anyone; scoped and read-only keys are held to their scope object by object;
//! bad object requests get one line and store nothing.

mod common;

use common::{Server, server};
use sealvol_serve::router::{HUB_ROUTES, OPEN_ROUTES, ROUTES};

/// `route` with its parameters filled in.
fn concrete(route: &str) -> String {
    route
        .replace("{hash}", &"ab".repeat(32))
        .replace("{*key}", &format!("packs/ab/{}", "ab".repeat(32)))
        .replace("{file}", &"cd".repeat(32))
        .replace("{*rest}", "t/serve/resolve/main/w.bin")
}

fn ask(s: &Server, method: &str, path: &str, key: Option<&str>, body: Vec<u8>) -> (u16, String) {
    let url = format!("{}{path}", s.url);
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let key = key.map(str::to_string);
    s.rt.block_on(async move {
        let mut req = reqwest::Client::new().request(method, url).body(body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    })
}

#[test]
fn every_route_refuses_no_key_a_wrong_key_and_a_revoked_key() {
    let s = server();
    let revoked = sealvol_serve::keys::create(&s.place(), "old", false, vec![]).unwrap();
    sealvol_serve::keys::revoke(&s.place(), "old").unwrap();
    let wrong = format!("sv1:admin:{}", "0".repeat(64));
    let mut walked = 0;
    for (route, methods) in ROUTES
        .iter()
        .chain(HUB_ROUTES.iter())
        .chain([("/no/such/route", &["GET"][..])].iter())
    {
        let path = concrete(route);
        for method in *methods {
            for (key, why) in [
                (None, "no API key"),
                (Some(wrong.as_str()), "not known"),
                (Some(revoked.as_str()), "revoked"),
                (Some("Basic abc"), "malformed"),
            ] {
                let (status, body) = ask(&s, method, &path, key, Vec::new());
                assert_eq!(status, 401, "{method} {path} with {key:?}: {body}");
                if *method != "HEAD" {
                    assert!(body.contains(why), "{method} {path}: {body}");
                }
            }
            walked += 1;
        }
    }
    assert!(walked >= ROUTES.len());
    // The admin key is let in everywhere (what each route then says is its own).
    let (status, _) = ask(&s, "GET", "/v1/key", Some(&s.key), Vec::new());
    assert_eq!(status, 200);
    // The probes are for load balancers and kubelets, which hold no key: any caller is
    // answered, and told nothing but the verdict.
    for (route, _) in OPEN_ROUTES {
        for key in [
            None,
            Some(wrong.as_str()),
            Some(revoked.as_str()),
            Some("Basic abc"),
        ] {
            let (status, body) = ask(&s, "GET", route, key, Vec::new());
            assert_eq!(status, 200, "{route} with {key:?}: {body}");
            // The ring's id route says a random id made at start, and nothing else.
            let id = body.trim_end().len() == 32
                && body.trim_end().bytes().all(|b| b.is_ascii_hexdigit());
            assert!(
                body == "ok\n" || body == "ready\n" || id,
                "{route}: {body:?}"
            );
        }
        let (status, _) = ask(&s, "POST", route, None, Vec::new());
        assert_eq!(status, 405, "{route}: only GET");
    }
}

/// `/readyz` says whether the repository answers, without a key and without saying
/// more; `/healthz` only that the process is up.
#[test]
fn readyz_fails_while_the_repository_cannot_be_read() {
    let s = server();
    let config = s
        .dir
        .path()
        .join("repo")
        .join(sealvol_core::repo::CONFIG_KEY);
    let kept = std::fs::read(&config).unwrap();
    std::fs::remove_file(&config).unwrap();
    let (status, body) = ask(&s, "GET", "/readyz", None, Vec::new());
    assert_eq!(status, 503, "{body}");
    assert_eq!(body, "not ready: the repository does not answer\n");
    assert!(!body.contains(&s.dir.path().display().to_string()));
    assert_eq!(ask(&s, "GET", "/healthz", None, Vec::new()).0, 200);
    std::fs::write(&config, kept).unwrap();
}

#[test]
fn scoped_and_read_only_keys_are_held_to_their_scope() {
    let s = server();
    let dir = &s.place();
    let ci = sealvol_serve::keys::create(dir, "ci", false, vec!["t".into()]).unwrap();
    let other = sealvol_serve::keys::create(dir, "other", false, vec!["elsewhere".into()]).unwrap();
    let ro = sealvol_serve::keys::create(dir, "ro", true, vec![]).unwrap();
    // The pushed volume is t/serve: its manifests are under manifests/t/serve/.
    let (status, body) = ask(
        &s,
        "GET",
        "/v1/list?prefix=manifests/",
        Some(&ci),
        Vec::new(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("manifests/t/serve/"), "{body}");
    let (status, body) = ask(
        &s,
        "GET",
        "/v1/list?prefix=manifests/",
        Some(&other),
        Vec::new(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.contains("manifests/t/"),
        "another namespace is listed: {body}"
    );
    let (status, body) = ask(
        &s,
        "GET",
        "/v1/list?prefix=manifests/t/",
        Some(&other),
        Vec::new(),
    );
    assert_eq!(status, 403, "{body}");

    // Writes: a read-only key, a key of another namespace, and deletes of content.
    let tag = "/v1/objects/tags/t/serve/prod?mode=match";
    let (status, body) = ask(&s, "PUT", tag, Some(&ro), b"{}".to_vec());
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("read-only") && body.contains("may not write"),
        "{body}"
    );
    let (status, body) = ask(&s, "PUT", tag, Some(&other), b"{}".to_vec());
    assert_eq!(status, 403, "{body}");
    let id = "ab".repeat(32);
    let pack = format!("/v1/objects/packs/ab/{id}");
    let (status, body) = ask(&s, "DELETE", &pack, Some(&ci), Vec::new());
    assert_eq!(status, 403, "{body}");
    let (status, body) = ask(&s, "POST", "/v1/barrier", Some(&ro), Vec::new());
    assert_eq!(status, 403, "{body}");
    assert!(
        s.repo
            .tag(
                &sealvol_core::VolumeName::parse("t/serve").unwrap(),
                &sealvol_core::Name::parse("tag", "prod").unwrap()
            )
            .unwrap()
            .is_none()
    );
}

#[test]
fn bad_object_requests_get_one_line_and_store_nothing() {
    let s = server();
    let ci = sealvol_serve::keys::create(&s.place(), "ci", false, vec![]).unwrap();
    let id = "cd".repeat(32);
    let key = format!("packs/{}/{id}", &id[..2]);
    for (path, body, want) in [
        // Bytes that are no pack, and a pack whose name is not its hash.
        (
            format!("/v1/objects/{key}?mode=absent"),
            b"not a pack".to_vec(),
            422,
        ),
        // What the server derives, it writes itself: a key may not.
        (
            format!("/v1/objects/index/{id}?mode=absent"),
            vec![0; 100],
            403,
        ),
        (
            format!("/v1/objects/manifests/t/serve/{id}?mode=absent"),
            b"{\"not\": \"a manifest\"}".to_vec(),
            403,
        ),
        (
            format!("/v1/objects/files/{}/{id}?mode=put", &id[..2]),
            b"x".to_vec(),
            403,
        ),
        // Names that are no object of any kind: a folder's name, a stray.
        (
            "/v1/objects/packs/cd?mode=absent".to_string(),
            b"x".to_vec(),
            400,
        ),
        (
            "/v1/objects/files/cd?mode=absent".to_string(),
            b"x".to_vec(),
            400,
        ),
        (
            // A manifest's name ends in its digest's 64 hex digits.
            "/v1/objects/manifests/t/serve/abcd?mode=absent".to_string(),
            b"x".to_vec(),
            400,
        ),
        // (A `..` never reaches the server: URL parsers resolve it first.)
        (
            "/v1/objects/packs//x?mode=absent".to_string(),
            b"x".to_vec(),
            400,
        ),
        (
            "/v1/objects/packs/%20x?mode=absent".to_string(),
            b"x".to_vec(),
            400,
        ),
        (
            format!("/v1/objects/{key}?mode=sideways"),
            b"x".to_vec(),
            400,
        ),
        (format!("/v1/objects/{key}"), b"x".to_vec(), 400),
    ] {
        let (status, text) = ask(&s, "PUT", &path, Some(&ci), body);
        assert_eq!(status, want, "{path}: {text}");
        assert!(!text.trim().contains('\n'), "{path}: {text}");
    }
    // Over the largest object: refused on its announced length, before a byte is read.
    {
        use std::io::{Read, Write};
        let addr = s.url.trim_start_matches("http://").to_string();
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            c,
            "PUT /v1/objects/{key}?mode=absent HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ci}\r\nContent-Length: {}\r\n\r\n",
            sealvol_serve::objects::MAX_OBJECT + 1
        )
        .unwrap();
        let mut head = [0u8; 12];
        c.read_exact(&mut head).unwrap();
        assert_eq!(&head[9..12], b"413", "{}", String::from_utf8_lossy(&head));
    }
    assert!(s.repo.object_store().size(&key).unwrap().is_none());
    let staged: Vec<_> = std::fs::read_dir(s.dir.path().join("repo/tmp"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        staged
            .iter()
            .all(|n| !n.to_string_lossy().ends_with(".tmp")),
        "{staged:?}"
    );
    let (status, text) = ask(&s, "GET", "/v1/objects/packs/none", Some(&ci), Vec::new());
    assert_eq!(status, 400, "{text}");
    let (status, text) = ask(
        &s,
        "GET",
        &format!("/v1/objects/{key}"),
        Some(&ci),
        Vec::new(),
    );
    assert_eq!(status, 404, "{text}");
    let (status, text) = ask(&s, "GET", "/v1/list?prefix=packs", Some(&ci), Vec::new());
    assert_eq!(status, 400, "{text}");
}

#[test]
fn an_upload_cut_short_stores_nothing_and_leaves_no_staging_file() {
    use std::io::Write;
    let s = server();
    let ci = sealvol_serve::keys::create(&s.place(), "ci", false, vec![]).unwrap();
    let id = "ef".repeat(32);
    let key = format!("packs/{}/{id}", &id[..2]);
    let addr = s.url.trim_start_matches("http://").to_string();
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        c,
        "PUT /v1/objects/{key}?mode=absent HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ci}\r\nContent-Length: {}\r\n\r\n",
        4 << 20
    )
    .unwrap();
    c.write_all(&vec![7u8; 1 << 20]).unwrap();
    // The client dies a quarter of the way through.
    drop(c);
    let staged = || -> Vec<String> {
        std::fs::read_dir(s.dir.path().join("repo/tmp"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".tmp"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !staged().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(staged().is_empty(), "{:?}", staged());
    assert!(s.repo.object_store().size(&key).unwrap().is_none());
}

#[test]
fn the_shared_key_list_is_no_key_s_to_read_or_write_over_http() {
    let s = server();
    sealvol_serve::keys::share(&s.keys_dir, &s.repo).unwrap();
    s.keys.refresh();
    assert_eq!(s.metric("key_list_shared"), 1);
    // The admin key went along with the list and still works; it may touch anything
    // in the repository but the list itself.
    let path = "/v1/objects/access/keys.json";
    let before = s.repo.object_store().get("access/keys.json").unwrap();
    for (method, query) in [
        ("GET", ""),
        ("HEAD", ""),
        ("PUT", "?mode=put"),
        ("DELETE", ""),
    ] {
        let at = format!("{path}{query}");
        let (status, text) = ask(&s, method, &at, Some(&s.key), br#"{"keys": []}"#.to_vec());
        assert_eq!(status, 403, "{method}: {text}");
        if method != "HEAD" {
            assert!(text.contains("`sealvol key`"), "{method}: {text}");
        }
    }
    let (status, text) = ask(
        &s,
        "PUT",
        &format!("{path}?mode=absent"),
        Some(&s.key),
        Vec::new(),
    );
    assert_eq!(status, 403, "{text}");
    assert_eq!(
        s.repo.object_store().get("access/keys.json").unwrap(),
        before
    );
    // A listing does not show it either.
    let (status, text) = ask(
        &s,
        "GET",
        "/v1/list?prefix=access/",
        Some(&s.key),
        Vec::new(),
    );
    assert!(
        status == 200 && !text.contains("keys.json"),
        "{status} {text}"
    );
    // A key made in the shared list works at the server's next read of it.
    let ci = sealvol_serve::keys::create(&s.place(), "ci", true, vec![]).unwrap();
    s.keys.refresh();
    assert_eq!(ask(&s, "GET", "/v1/key", Some(&ci), Vec::new()).0, 200);
}
