//! `sealvol serve` as an operator runs it: the real binary on loopback, asked over HTTP.

mod common;

use common::mounts::{mount, read_mapped, wait_stats, write_safetensors};
use common::servers::{Served, get_as, key, serve, serve_as_started, serve_named};
use common::{Env, fuse_available, noise, write};

/// One HTTP/1.1 GET with the server's admin key: status and body.
fn get(served: &Served, path: &str) -> (u16, Vec<u8>) {
    get_as(&served.addr, Some(&served.key), path)
}

#[test]
fn serve_answers_on_loopback_with_health_and_metrics() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(1 << 20, 3));
    env.push(&src, "t/served", &[]);
    let metrics_port = common::servers::free_port();
    let s = serve(
        &env,
        &[
            "--cache-size",
            "64M",
            "--metrics-listen",
            &metrics_port.to_string(),
        ],
    );
    // The probes answer without a key (a load balancer or a kubelet holds none); the
    // rest, /metrics included, need one (the route walk is engine/serve/tests/auth.rs).
    assert_eq!(get_as(&s.addr, None, "/healthz"), (200, b"ok\n".to_vec()));
    assert_eq!(get_as(&s.addr, None, "/readyz"), (200, b"ready\n".to_vec()));
    assert_eq!(get_as(&s.addr, None, "/metrics").0, 401);
    // ... unless asked for on an address of its own: a port alone is loopback.
    let (status, body) = get_as(&format!("127.0.0.1:{metrics_port}"), None, "/metrics");
    assert_eq!(status, 200);
    assert!(
        String::from_utf8_lossy(&body).contains("sealvol_serve_origin_fetches_total 0"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let mode = std::fs::metadata(env.state.join("serve/admin.key"))
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
        .unwrap();
    assert_eq!(mode, 0o600);
    let (status, body) = get(&s, "/metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains("sealvol_serve_origin_fetches_total 0")
            && text.contains(&format!("sealvol_serve_cache_max_bytes {}", 64 << 20)),
        "{text}"
    );
    // A chunk is served only as some file's, and the server holds no such file.
    let (status, body) = get(
        &s,
        &format!("/v1/chunks/{}?file={}", "ab".repeat(32), "cd".repeat(32)),
    );
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("no chunk list"));
}

#[test]
fn over_a_local_repository_serve_keeps_no_second_copy_unless_asked() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(1 << 20, 3));
    env.push(&src, "t/served", &[]);
    let caches = || -> Vec<String> {
        std::fs::read_dir(env.path("cache"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into())
                    .collect()
            })
            .unwrap_or_default()
    };
    let s = serve_as_started(&env, &[]);
    let text = String::from_utf8(get(&s, "/metrics").1).unwrap();
    assert!(text.contains("sealvol_serve_cache_max_bytes 0"), "{text}");
    assert!(
        !caches().iter().any(|n| n.ends_with("-serve")),
        "{:?}",
        caches()
    );
    drop(s);
    // Asked for (a bound given), it is kept in the default folder.
    let s = serve_as_started(&env, &["--cache-size", "8M"]);
    let text = String::from_utf8(get(&s, "/metrics").1).unwrap();
    assert!(
        text.contains(&format!("sealvol_serve_cache_max_bytes {}", 8 << 20)),
        "{text}"
    );
    assert!(
        caches().iter().any(|n| n.ends_with("-serve")),
        "{:?}",
        caches()
    );
}

/// The README's order: keys first, then the server. The first `key create` makes the
/// list and its admin key as the server would; the server then takes both.
#[test]
fn a_key_made_before_the_first_serve_is_taken_by_it() {
    let env = Env::new();
    env.ok(&["init"]);
    let out = env.run(&["key", "create", "ci", "--namespace", "t"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("made the key list") && said.contains("admin"),
        "{said}"
    );
    let ci = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let admin = std::fs::read_to_string(env.state.join("serve/admin.key")).unwrap();
    let served = serve(&env, &[]);
    assert_eq!(get_as(&served.addr, Some(&ci), "/v1/key").0, 200);
    assert_eq!(get_as(&served.addr, Some(admin.trim()), "/v1/key").0, 200);
    // A second key made later goes to the same list, with no second admin key.
    let again = env.run(&["key", "create", "ops"]);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("made the key list"));
}

#[test]
fn bad_serve_input_gets_one_clear_line() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), b"x");
    env.push(&src, "t/served", &[]);
    let e = env.fails(2, &["serve", "--listen", "0.0.0.0:0"]);
    assert!(
        e.contains("not a loopback address") && e.contains("--insecure-http"),
        "{e}"
    );
    let e = env.fails(2, &["serve", "--metrics-listen", "localhost:x"]);
    assert!(
        e.contains("--metrics-listen localhost:x is not an address or a port"),
        "{e}"
    );
    let e = env.fails(2, &["serve", "--listen", "localhost"]);
    assert!(e.contains("is not an address"), "{e}");
    let e = env.fails(1, &["serve", "--cache-size", "lots"]);
    assert!(e.contains("lots"), "{e}");
    for (bad, says) in [
        ("0s", "give 1s to 1h"),
        ("2h", "give 1s to 1h"),
        ("soon", "is not a duration"),
    ] {
        let e = env.fails(2, &["serve", "--header-timeout", bad]);
        assert!(e.contains(says), "{bad}: {e}");
    }
    let missing = Env::new();
    let out = missing.run(&["--repo", missing.path("nowhere").to_str().unwrap(), "serve"]);
    assert!(!out.status.success());
    assert!(!missing.path("nowhere").exists(), "no repository made");
}

/// A counter from a server's `/metrics`.
fn metric(s: &Served, name: &str) -> u64 {
    let text = String::from_utf8(get(s, "/metrics").1).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("sealvol_serve_{name} ")))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn mounts_and_pulls_read_through_a_ring_of_two_servers_and_the_origin_once() {
    if !fuse_available() {
        return;
    }
    let mut env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(48 << 20, 1));
    write(&src.join("sub/b.bin"), &noise(16 << 20, 2));
    let pinned = env.push(&src, "t/peered", &[]);
    // 16 segments of 4 MiB: the chance that one server owns none is 2^-15.
    let data = 64u64 << 20;
    let a = serve_named(&env, "cache-a", &[]);
    // One agent per state folder: the second cache server runs no jobs.
    let b = serve_named(&env, "cache-b", &["--no-jobs"]);
    // Both servers share the state, so one key list: nodes ask with its admin key.
    assert_eq!(a.key, b.key);
    env.vars.push(("SEALVOL_API_KEY".into(), a.key.clone()));
    let url = |s: &Served| format!("http://{}", s.addr);
    let (ua, ub) = (url(&a), url(&b));

    // Three nodes (each its own node cache) list both servers, in either order: each
    // part of a pack is asked of the one that owns it, whatever the order.
    let nodes: [[&str; 4]; 3] = [
        ["--peer", &ua, "--peer", &ub],
        ["--peer", &ub, "--peer", &ua],
        ["--peer", &ua, "--peer", &ub],
    ];
    // Runs a node asked again of the other server because the owner was late (a busy
    // machine): each may cost one more origin read of up to a segment, and more bytes
    // served, by design (hedging); on an idle machine there are none.
    let mut hedged = 0u64;
    for (i, peers) in nodes.iter().enumerate() {
        let mnt = env.path(&format!("mnt{i}"));
        let cache = env.path(&format!("node-cache{i}"));
        let mut args = vec!["--cache", cache.to_str().unwrap()];
        args.extend_from_slice(peers);
        let _m = mount(&env, &pinned, &mnt, &args);
        assert!(std::fs::read(mnt.join("a.bin")).unwrap() == noise(48 << 20, 1));
        assert!(std::fs::read(mnt.join("sub/b.bin")).unwrap() == noise(16 << 20, 2));
        let m = wait_stats(&env, &mnt, |s| s["peer_bytes"].as_u64() >= Some(data));
        let st = &m["stats"];
        assert_eq!(
            (&st["origin_chunks"], &st["origin_bytes"]),
            (&0.into(), &0.into()),
            "node {i} never read the origin, proof edges included: {m}"
        );
        assert_eq!(st["peer_errors"], 0, "{m}");
        hedged += st["peer_late"].as_u64().unwrap();
        // Both servers served this node, each its share.
        let ring = m["ring"].as_array().unwrap();
        assert_eq!(ring.len(), 2, "{m}");
        for r in ring {
            assert!(r["bytes"].as_u64() > Some(0), "{m}");
            assert_eq!(r["share_ppm"], 500_000, "{m}");
        }
        let listed = env.ok(&["volume", "mounts"]);
        assert!(listed.lines().next().unwrap().contains("PEERS"), "{listed}");
    }
    // The ring read the origin once for everyone: each server its own part.
    let (oa, ob) = (
        metric(&a, "origin_bytes_total"),
        metric(&b, "origin_bytes_total"),
    );
    // Each part once, and beyond it only the few KiB of proof blocks that a server
    // reads to prove a run (a block that reaches into the next server's part).
    // A run is one segment's chunks, the last of which may reach past its end.
    let hedges =
        hedged * (sealvol_core::read::ring::SEGMENT + sealvol_core::chunk::BLOCK as u64 / 2);
    let most = data + data / 20 + hedges;
    assert!(
        (data..=most).contains(&(oa + ob)),
        "A {oa} + B {ob} for {data}, {hedged} run(s) hedged"
    );
    let served = metric(&a, "bytes_served_total") + metric(&b, "bytes_served_total");
    assert!(
        (3 * data..=3 * data + hedges).contains(&served),
        "served {served} for 3 × {data}, {hedged} run(s) hedged"
    );
    assert!(oa > 0 && ob > 0, "A {oa}, B {ob}");
    assert!(metric(&a, "cache_hits_total") > 0);

    // B dies: a node that lists it reads B's part through A, and nothing else anew.
    drop(b);
    let mnt = env.path("mnt3");
    let cache = env.path("node-cache3");
    let _m = mount(
        &env,
        &pinned,
        &mnt,
        &[
            "--cache",
            cache.to_str().unwrap(),
            "--peer",
            &ub,
            "--peer",
            &ua,
        ],
    );
    assert!(std::fs::read(mnt.join("a.bin")).unwrap() == noise(48 << 20, 1));
    assert!(std::fs::read(mnt.join("sub/b.bin")).unwrap() == noise(16 << 20, 2));
    let m = wait_stats(&env, &mnt, |s| s["peer_bytes"].as_u64() >= Some(data));
    assert_eq!(m["stats"]["origin_chunks"], 0, "{m}");
    assert!(
        m["stats"]["peer_errors"].as_u64() >= Some(1),
        "B was tried: {m}"
    );
    let oa = metric(&a, "origin_bytes_total");
    assert!((data..=most).contains(&oa), "A took on B's part: {oa}");

    // A pull through A: its report says where the chunks came from.
    let out = env.path("pulled");
    let cache = env.path("node-cache4");
    let mut cmd = env.cmd();
    cmd.env("SEALVOL_CACHE", &cache);
    let pulled = cmd
        .args([
            "volume",
            "pull",
            &pinned,
            out.to_str().unwrap(),
            "--peer",
            &ua,
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        pulled.status.success(),
        "{}",
        String::from_utf8_lossy(&pulled.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&pulled.stdout).unwrap();
    assert_eq!(v["tiers"]["origin_chunks"], 0, "{v}");
    assert_eq!(v["tiers"]["peer_bytes"], data, "{v}");
    common::assert_same_tree(&src, &out);
    assert_eq!(metric(&a, "origin_bytes_total"), oa, "all from A's cache");
}

/// Servers that know their ring (`serve --peers-file`) ask the owner of a run before
/// the origin: nodes that list one server each, not the ring, still cost the origin the
/// version once.
#[test]
fn servers_of_a_ring_ask_each_other_before_the_origin() {
    if !fuse_available() {
        return;
    }
    let mut env = Env::new();
    let src = env.path("src");
    // 16 segments of 4 MiB: the chance that one server owns none is 2^-15.
    write(&src.join("w.bin"), &noise(64 << 20, 9));
    let pinned = env.push(&src, "t/fellows", &[]);
    let data = 64u64 << 20;
    let ring = env.path("ring");
    std::fs::write(&ring, "").unwrap();
    let ring_arg = ["--peers-file", ring.to_str().unwrap()];
    let a = serve_named(&env, "cache-a", &ring_arg);
    let b = serve_named(&env, "cache-b", &[&["--no-jobs"][..], &ring_arg].concat());
    env.vars.push(("SEALVOL_API_KEY".into(), a.key.clone()));
    let (ua, ub) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    std::fs::write(&ring, format!("{ua}\n{ub}\n")).unwrap();
    // The servers look at their file again once a second (asking /metrics makes them
    // look): until both have taken it, a run would go to the origin.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while metric(&a, "ring_servers") != 2 || metric(&b, "ring_servers") != 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the servers never took the ring"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    for (i, only) in [&ua, &ub].into_iter().enumerate() {
        let mnt = env.path(&format!("mnt{i}"));
        let cache = env.path(&format!("node-cache{i}"));
        let _m = mount(
            &env,
            &pinned,
            &mnt,
            &["--cache", cache.to_str().unwrap(), "--peer", only],
        );
        assert!(std::fs::read(mnt.join("w.bin")).unwrap() == noise(64 << 20, 9));
        let m = wait_stats(&env, &mnt, |s| s["peer_bytes"].as_u64() >= Some(data));
        assert_eq!(m["stats"]["origin_bytes"], 0, "{m}");
    }
    let (oa, ob) = (
        metric(&a, "origin_bytes_total"),
        metric(&b, "origin_bytes_total"),
    );
    // Both nodes read all of it, each through one server; the ring read it once.
    let most = data + data / 20;
    assert!(
        (data..=most).contains(&(oa + ob)),
        "A {oa} + B {ob} for {data}"
    );
    assert!(oa > 0 && ob > 0, "each read its own part: A {oa}, B {ob}");
    for (s, other) in [(&a, &b), (&b, &a)] {
        assert!(metric(s, "fellow_bytes_total") > 0, "asked its fellow");
        assert!(metric(other, "fellow_forwarded_in_total") > 0);
        assert_eq!(metric(s, "fellow_errors_total"), 0);
        assert_eq!(metric(s, "ring_servers"), 2);
    }

    // `sealvol peers` asks each server of the list: two up, one gone.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let v: serde_json::Value = serde_json::from_str(&env.ok(&[
        "peers", "--peer", &ua, "--peer", &ub, "--peer", &gone, "--json",
    ]))
    .unwrap();
    let rows = v["peers"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    for (row, origin) in rows.iter().zip([oa, ob]) {
        assert_eq!(row["up"], true, "{v}");
        assert_eq!(row["ring"], 2, "{v}");
        assert_eq!(row["origin_bytes"], origin, "{v}");
        assert!(row["bytes_served"].as_u64() >= Some(data / 4), "{v}");
        assert!(row["hit_ratio"].as_f64() > Some(0.0), "{v}");
    }
    assert_eq!(rows[2]["up"], false, "{v}");
    assert!(
        rows[2]["error"].as_str().unwrap().contains("cannot reach"),
        "{v}"
    );
    assert!((rows[0]["share"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    let text = env.ok(&["peers", "--peer", &ua, "--peer", &gone]);
    assert!(text.lines().next().unwrap().contains("HITS"), "{text}");
    assert!(text.contains("DOWN"), "{text}");
    // A key the servers do not know: said per server, not a failure of the command.
    let mut stranger = env.cmd();
    stranger.env("SEALVOL_API_KEY", "sv1:nobody:00");
    let out = stranger
        .args(["peers", "--peer", &ua, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["peers"][0]["error"].as_str().unwrap().contains("key"),
        "{v}"
    );
}

/// A node that follows a peers file takes a server added to it while it runs, and a
/// file that breaks leaves the servers it listed before.
#[test]
fn a_mount_follows_its_peers_file_as_it_changes() {
    if !fuse_available() {
        return;
    }
    let mut env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(8 << 20, 6));
    // 16 segments of 4 MiB: the chance that B owns none of them is 2^-16.
    write(&src.join("b.bin"), &noise(64 << 20, 7));
    let pinned = env.push(&src, "t/filed", &[]);
    let a = serve_named(&env, "cache-a", &[]);
    let b = serve_named(&env, "cache-b", &["--no-jobs"]);
    env.vars.push(("SEALVOL_API_KEY".into(), a.key.clone()));
    let (ua, ub) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let list = env.path("peers");
    std::fs::write(&list, format!("# the ring\n{ua}\n")).unwrap();

    // A file that is missing, or holds a line that is not a server: refused at once.
    let mnt = env.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let e = env.fails(
        1,
        &[
            "volume",
            "mount",
            &pinned,
            mnt.to_str().unwrap(),
            "--peers-file",
            env.path("nope").to_str().unwrap(),
        ],
    );
    assert!(e.contains("cannot read peers file"), "{e}");
    let bad = env.path("bad-peers");
    std::fs::write(&bad, format!("{ua}\ncache-b:7420\n")).unwrap();
    let e = env.fails(
        1,
        &[
            "volume",
            "mount",
            &pinned,
            mnt.to_str().unwrap(),
            "--peers-file",
            bad.to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("line 2") && e.contains("http://HOST:PORT"),
        "{e}"
    );
    let e = env.fails(
        2,
        &[
            "volume",
            "mount",
            &pinned,
            mnt.to_str().unwrap(),
            "--peers-file",
            bad.to_str().unwrap(),
            "--peer",
            &ua,
        ],
    );
    assert!(e.contains("cannot be used with"), "{e}");

    let cache = env.path("node-cache");
    let _m = mount(
        &env,
        &pinned,
        &mnt,
        &[
            "--cache",
            cache.to_str().unwrap(),
            "--peers-file",
            list.to_str().unwrap(),
        ],
    );
    assert!(std::fs::read(mnt.join("a.bin")).unwrap() == noise(8 << 20, 6));
    let m = wait_stats(&env, &mnt, |s| s["peer_bytes"].as_u64() >= Some(8 << 20));
    assert_eq!(m["peers"], serde_json::json!([ua.clone()]), "{m}");

    // B joins: written beside and renamed over, as kubelet and editors do.
    let next = env.path("peers.new");
    std::fs::write(&next, format!("{ua}\n{ub}\n")).unwrap();
    std::fs::rename(&next, &list).unwrap();
    let m = common::mounts::wait_record(&env, &mnt, |r| {
        r["ring"].as_array().map(Vec::len) == Some(2)
    });
    assert_eq!(
        m["peers"],
        serde_json::json!([ua.clone(), ub.clone()]),
        "{m}"
    );
    assert!(std::fs::read(mnt.join("b.bin")).unwrap() == noise(64 << 20, 7));
    assert!(
        metric(&b, "bytes_served_total") > 0,
        "B served its part of b.bin"
    );

    // A broken edit: the ring stays as it was.
    std::fs::write(&list, "not a server\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let recs = common::mounts::mounts_json(&env);
    assert_eq!(recs[0]["peers"], serde_json::json!([ua, ub]), "{recs:?}");
}

#[test]
fn a_peer_that_is_not_an_http_address_is_refused_before_anything_starts() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), b"x");
    let pinned = env.push(&src, "t/peered", &[]);
    let mnt = env.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    for bad in [
        "localhost:7420",
        "s3://bucket/cache",
        "http://",
        "/var/cache",
    ] {
        let e = env.fails(
            1,
            &[
                "volume",
                "mount",
                &pinned,
                mnt.to_str().unwrap(),
                "--peer",
                bad,
            ],
        );
        assert!(
            e.contains("--peer") && e.contains("http://HOST:PORT"),
            "{bad}: {e}"
        );
        assert_eq!(e.trim_end().lines().count(), 2, "message and hint: {e}");
        let out = env.path("pulled");
        let e = env.fails(
            1,
            &[
                "volume",
                "pull",
                &pinned,
                out.to_str().unwrap(),
                "--peer",
                bad,
            ],
        );
        assert!(e.contains("--peer"), "{bad}: {e}");
        assert!(!out.exists(), "nothing pulled");
    }
    let v: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "mounts", "--json"])).unwrap();
    assert_eq!(v["mounts"], serde_json::json!([]), "nothing mounted");
}

/// A private CA and a server certificate for 127.0.0.1 it signed, made by openssl:
/// (CA certificate, server certificate, server key), PEM.
fn certificates(env: &Env) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = env.path("tls");
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let steps: [Vec<String>; 3] = [
        [
            &["req", "-x509"][..],
            &ec,
            &["-days", "2", "-subj", "/CN=sealvol-test-ca"],
        ]
        .concat()
        .iter()
        .map(|s| s.to_string())
        .chain(["-keyout".into(), p("ca.key"), "-out".into(), p("ca.pem")])
        .collect(),
        [&["req"][..], &ec, &["-subj", "/CN=127.0.0.1"]]
            .concat()
            .iter()
            .map(|s| s.to_string())
            .chain(["-keyout".into(), p("key.pem"), "-out".into(), p("leaf.csr")])
            .collect(),
        ["x509", "-req", "-days", "2", "-CAcreateserial"]
            .iter()
            .map(|s| s.to_string())
            .chain([
                "-in".into(),
                p("leaf.csr"),
                "-CA".into(),
                p("ca.pem"),
                "-CAkey".into(),
                p("ca.key"),
                "-extfile".into(),
                p("ext"),
                "-out".into(),
                p("cert.pem"),
            ])
            .collect(),
    ];
    for args in steps {
        let ok = std::process::Command::new("openssl")
            .args(&args)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl (scripts/test.sh installs it)");
        assert!(ok.success(), "openssl {args:?}");
    }
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

#[test]
fn with_tls_serve_listens_beyond_loopback_and_a_remote_push_goes_over_https() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(3 << 20, 8));
    env.push(&src, "t/base", &[]);
    let (ca, cert, key) = certificates(&env);
    let s = serve(
        &env,
        &[
            "--listen",
            "0.0.0.0:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let port = s.addr.rsplit(':').next().unwrap();
    let url = format!("https://127.0.0.1:{port}");
    let mut client = Env::new();
    client.vars = vec![
        ("SEALVOL_REMOTE".into(), url.clone()),
        ("SEALVOL_API_KEY".into(), s.key.clone()),
    ];
    // Not trusted yet: a clear refusal, not a push.
    let e = client.fails(1, &["volume", "ls"]);
    assert!(
        e.contains("cannot reach the remote engine") && e.contains("UnknownIssuer"),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 2, "message and hint: {e}");
    client
        .vars
        .push(("SEALVOL_CA_CERT".into(), ca.to_str().unwrap().into()));
    let v2 = client.path("v2");
    write(&v2.join("w.bin"), &noise(3 << 20, 9));
    let pinned = client.push(&v2, "t/over-tls", &[]);
    assert_eq!(env.ok(&["volume", "resolve", "t/over-tls"]).trim(), pinned);
    // Plain HTTP to the TLS port gets nothing.
    let plain = Env::new();
    let mut plain = plain;
    plain.vars = vec![
        ("SEALVOL_REMOTE".into(), format!("http://127.0.0.1:{port}")),
        ("SEALVOL_API_KEY".into(), s.key.clone()),
    ];
    plain.fails(1, &["volume", "ls"]);
}

#[test]
fn bad_tls_input_is_refused_before_the_server_starts() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), b"x");
    env.push(&src, "t/base", &[]);
    let (_, cert, key) = certificates(&env);
    let e = env.fails(2, &["serve", "--tls-cert", cert.to_str().unwrap()]);
    assert!(e.contains("go together"), "{e}");
    let missing = env.path("nope.pem");
    let e = env.fails(
        1,
        &[
            "serve",
            "--tls-cert",
            missing.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(e.contains("cannot read the certificate"), "{e}");
    // The certificate given as its own key.
    let e = env.fails(
        1,
        &[
            "serve",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            cert.to_str().unwrap(),
        ],
    );
    assert!(e.contains("cannot read the key"), "{e}");
    let e = env.fails(1, &["--remote", "https://", "volume", "ls"]);
    assert!(e.contains("--remote"), "{e}");
}

/// One `/metrics` value: the first row of `name` whose labels hold `having`.
fn metric_row(text: &str, name: &str, having: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(having))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} with {having} in:\n{text}"))
}

#[test]
fn a_mount_serves_prometheus_metrics_per_tier_with_latency_histograms() {
    if !fuse_available() {
        return;
    }
    let mut env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(5 << 20, 6));
    let pinned = env.push(&src, "t/metered", &[]);
    let s = serve(&env, &[]);
    env.vars.push(("SEALVOL_API_KEY".into(), s.key.clone()));
    let mnt = env.path("mnt");
    let url = s.url();
    let _m = mount(
        &env,
        &pinned,
        &mnt,
        &["--peer", &url, "--metrics", "127.0.0.1:0"],
    );
    assert!(std::fs::read(mnt.join("a.bin")).unwrap() == noise(5 << 20, 6));
    let m = wait_stats(&env, &mnt, |st| st["peer_bytes"].as_u64() >= Some(5 << 20));
    let at = m["metrics"]
        .as_str()
        .expect("the record says where the metrics are");
    let addr = at
        .strip_prefix("http://")
        .and_then(|a| a.strip_suffix("/metrics"))
        .unwrap();
    let (status, body) = get_as(addr, None, "/metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    assert!(metric_row(&text, "sealvol_mount_bytes_total", "tier=\"peer\"") >= (5 << 20) as f64);
    assert_eq!(
        metric_row(&text, "sealvol_mount_chunks_total", "tier=\"origin\""),
        0.0
    );
    assert!(metric_row(&text, "sealvol_mount_hit_ratio", "tier=\"peer\"") > 0.0);
    assert!(metric_row(&text, "sealvol_mount_read_seconds_count", "t/metered") > 0.0);
    assert!(
        metric_row(
            &text,
            "sealvol_mount_peer_request_seconds_bucket",
            "le=\"+Inf\""
        ) > 0.0
    );
    assert!(metric_row(&text, "sealvol_mount_cache_max_bytes", "t/metered") > 0.0);
    // Nothing evicted from a cache far larger than the data.
    assert_eq!(
        metric_row(&text, "sealvol_mount_cache_evictions_total", "t/metered"),
        0.0
    );
    assert!(
        text.contains("# TYPE sealvol_mount_read_seconds histogram"),
        "{text}"
    );

    let bad = env.path("mnt-bad");
    std::fs::create_dir_all(&bad).unwrap();
    let e = env.fails(
        1,
        &[
            "volume",
            "mount",
            &pinned,
            bad.to_str().unwrap(),
            "--metrics",
            "nowhere",
        ],
    );
    assert!(e.contains("--metrics nowhere is not an address"), "{e}");
    assert!(!common::mounts::is_mounted(&bad));
}

#[test]
fn a_peer_that_refuses_the_key_is_said_at_once_and_sends_no_more_than_nodes_read() {
    let mut env = Env::new();
    let src = env.path("src");
    let file = noise(20 << 20, 9);
    write(&src.join("w.bin"), &file);
    let pinned = env.push(&src, "t/refused", &[]);
    let served = serve(&env, &[]);
    let url = format!("http://{}", served.addr);
    // No key, and a key the server does not know: refused before anything is read.
    for key in [None, Some(format!("sv1:nodes:{}", "0".repeat(64)))] {
        let mut cmd = env.cmd();
        cmd.env_remove("SEALVOL_API_KEY");
        if let Some(k) = &key {
            cmd.env("SEALVOL_API_KEY", k);
        }
        let out = cmd
            .args([
                "volume",
                "pull",
                &pinned,
                env.path("p").to_str().unwrap(),
                "--peer",
                &url,
            ])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{e}");
        assert!(
            e.contains("refused this node's API key") && e.contains("key create"),
            "{e}"
        );
        assert!(!env.path("p").join("w.bin").exists());
    }
    if !fuse_available() {
        return;
    }
    // With a key: two nodes read the file through the server, which sends what they
    // read (a whole file kept in a node's cache is built from the origin, not asked
    // for again).
    env.vars
        .push(("SEALVOL_API_KEY".into(), served.key.clone()));
    for i in 0..2 {
        let mnt = env.path(&format!("mnt{i}"));
        let cache = env.path(&format!("node-cache{i}"));
        let _m = mount(
            &env,
            &pinned,
            &mnt,
            &["--cache", cache.to_str().unwrap(), "--peer", &url],
        );
        assert!(std::fs::read(mnt.join("w.bin")).unwrap() == file);
        wait_stats(&env, &mnt, |s| s["files_cached"].as_u64() >= Some(1));
    }
    let sent = metric(&served, "bytes_served_total");
    let read = 2 * file.len() as u64;
    assert!(
        sent * 100 <= read * 105,
        "the server sent {sent} bytes for {read} the nodes read"
    );
}

/// A peers file that names a server of another repository, or something that is no
/// server at all: the pull stops at once, naming it, and this node's key never reaches
/// it; with the real server listed instead, it pulls.
#[test]
fn a_peer_that_does_not_prove_it_is_of_the_ring_is_said_at_once_and_sent_no_key() {
    let mut env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(1 << 20, 4));
    let pinned = env.push(&src, "t/ring", &[]);
    let served = serve(&env, &[]);
    env.vars
        .push(("SEALVOL_API_KEY".into(), served.key.clone()));
    // Another repository's server: a server, of another ring.
    let other = Env::new();
    other.ok(&["init"]);
    let elsewhere = serve(&other, &[]);
    // Something that answers anything with 200 and `{}` (saying this build's protocol
    // version, as a server would), keeping what it was sent.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let anything = format!("http://{}", listener.local_addr().unwrap());
    let heard = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = std::sync::Arc::clone(&heard);
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for c in listener.incoming() {
            let Ok(mut c) = c else { continue };
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap_or(0);
            kept.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\n{}: {}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
                sealvol_wire::protocol::HEADER,
                sealvol_wire::protocol::PROTOCOL
            );
        }
    });
    let peers = env.path("peers");
    for impostor in [format!("http://{}", elsewhere.addr), anything] {
        std::fs::write(&peers, format!("{impostor}\n")).unwrap();
        let out = env
            .cmd()
            .args(["volume", "pull", &pinned, env.path("p").to_str().unwrap()])
            .args(["--peers-file", peers.to_str().unwrap()])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{e}");
        assert!(
            e.contains("did not prove it is a server of this repository's ring"),
            "{e}"
        );
        assert!(e.contains(&impostor), "{e}");
        assert_eq!(
            e.trim().lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{e}"
        );
        assert!(!env.path("p").join("w.bin").exists());
    }
    let heard = heard.lock().unwrap();
    assert!(heard.contains("/v1/ring/id?challenge="), "{heard}");
    assert!(
        !heard.contains(&served.key) && !heard.to_lowercase().contains("authorization"),
        "{heard}"
    );
    std::fs::write(&peers, format!("http://{}\n", served.addr)).unwrap();
    env.ok(&[
        "volume",
        "pull",
        &pinned,
        env.path("p").to_str().unwrap(),
        "--peers-file",
        peers.to_str().unwrap(),
    ]);
    assert!(env.path("p").join("w.bin").exists());
}

/// `--gc-every`: the server collects on its schedule (here a version whose time in the
/// trash is over, the server's clock eight days ahead), logs it and counts it.
#[test]
fn a_server_collects_garbage_on_its_schedule_and_counts_it() {
    let mut env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(1 << 20, 8));
    let pinned = env.push(&src, "t/old", &[]);
    env.ok(&["volume", "delete", &pinned, "--yes"]);
    env.vars.push(("SEALVOL_NOW".into(), common::days_ahead(8)));
    let s = serve(&env, &["--gc-every", "1s"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = String::from_utf8(get(&s, "/metrics").1).unwrap();
        if text.contains("sealvol_serve_gc_versions_purged_total 1") {
            assert!(text.contains("sealvol_serve_gc_failures_total 0"), "{text}");
            assert!(
                !text.contains("gc_last_run_end_timestamp_seconds 0\n"),
                "{text}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no scheduled gc:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let trash = env.ok(&["volume", "trash", "--json"]);
    assert!(!trash.contains("t/old"), "{trash}");

    let e = env.fails(2, &["serve", "--gc-every", "100ms"]);
    assert!(e.contains("at least 1s"), "{e}");
    let e = env.fails(2, &["serve", "--gc-every", "soon"]);
    assert!(e.contains("is not a duration"), "{e}");
}

/// Bytes from peers stay within 5% of the bytes a node reads (read-ahead included),
/// so two nodes cost the server twice the data, not more. Each mount's memory holds the
/// whole version: what is asserted is that nothing is fetched twice, which holds under
/// any interleaving; with a bound smaller than the data, a reader the machine starves
/// may find a chunk it read dropped before a later block's proof needs it again (a
/// re-fetch the bound allows, measured under load by bench/, not asserted here).
#[test]
fn two_mounts_reading_through_one_server_take_each_chunk_from_it_once() {
    if !fuse_available() {
        return;
    }
    let mut env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(12 << 20, 4));
    // 48 MiB of tensors read by page faults, read ahead by the tensors' plan.
    let st = write_safetensors(&src.join("m.safetensors"), 96, 5);
    let pinned = env.push(&src, "t/twice", &[]);
    let data = (12u64 << 20) + st.len() as u64;
    let s = serve(&env, &[]);
    env.vars.push(("SEALVOL_API_KEY".into(), s.key.clone()));
    let url = format!("http://{}", s.addr);
    let mut mounted = Vec::new();
    for i in 0..2 {
        let mnt = env.path(&format!("mnt{i}"));
        let cache = env.path(&format!("node-cache{i}"));
        let args = [
            "--cache",
            cache.to_str().unwrap(),
            "--peer",
            &url,
            "--prefetch-memory",
            "128M",
        ];
        mounted.push((mnt.clone(), mount(&env, &pinned, &mnt, &args)));
    }
    let most = data + data / 20;
    for (mnt, _) in &mounted {
        assert!(std::fs::read(mnt.join("a.bin")).unwrap() == noise(12 << 20, 4));
        assert!(read_mapped(&mnt.join("m.safetensors")) == st);
    }
    for (mnt, _) in &mounted {
        let m = wait_stats(&env, mnt, |s| s["bytes_served"].as_u64() >= Some(data));
        let peer = m["stats"]["peer_bytes"].as_u64().unwrap();
        assert!(
            (data..=most).contains(&peer),
            "{peer} bytes from the peer for {data} read: {m}"
        );
        assert_eq!(m["stats"]["origin_chunks"], 0, "{m}");
    }
    let served = metric(&s, "bytes_served_total");
    assert!(
        served <= 2 * most,
        "the server sent {served} for 2 x {data}"
    );
}

/// Until `deadline`, whether `addr` answers `key` with `status` on `GET /v1/key`.
fn answers_within(addr: &str, key: &str, status: u16) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if get_as(addr, Some(key), "/v1/key").0 == status {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn servers_of_one_bucket_share_its_keys_and_a_revocation_reaches_each() {
    let moto = common::servers::Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let mut one = Env::new();
    one.vars = moto.repo_vars("s3://models/team");
    one.ok(&["init"]);
    // Two servers of the bucket, each with a state (and a key list) of its own.
    let mut two = Env::new();
    two.vars = one.vars.clone();
    let a = serve_named(&one, "cache-a", &["--no-jobs"]);
    let b = serve_named(&two, "cache-b", &["--no-jobs"]);
    assert_eq!(get_as(&b.addr, Some(&a.key), "/v1/key").0, 401);

    let said = one.run(&["key", "share"]);
    let err = String::from_utf8_lossy(&said.stderr);
    assert!(
        said.status.success() && err.contains("1 key(s) now in repository s3://models/team"),
        "{err}"
    );
    // The second server moves to the bucket's list at its next read of it: the first's
    // admin key works there, its own admin key no longer does.
    assert!(
        answers_within(&b.addr, &a.key, 200),
        "b never took the shared list"
    );
    assert!(answers_within(&b.addr, &b.key, 401));
    assert!(two.state.join("serve/keys.json.shared").exists());
    let e = two.fails(1, &["key", "share"]);
    assert!(e.contains("already holds a key list"), "{e}");

    // A key made on either side is one key; so is a revocation.
    let ci = key(&two, &["ci", "--read-only"]);
    for s in [&a, &b] {
        assert!(
            answers_within(&s.addr, &ci, 200),
            "{} never took ci",
            s.addr
        );
    }
    let listed = one.ok(&["key", "ls", "--json"]);
    assert!(
        listed.contains("\"ci\"") && listed.contains("\"admin\""),
        "{listed}"
    );
    let said = one.run(&["key", "revoke", "ci"]);
    let err = String::from_utf8_lossy(&said.stderr);
    assert!(said.status.success() && err.contains("within 5 s"), "{err}");
    for s in [&a, &b] {
        assert!(
            answers_within(&s.addr, &ci, 401),
            "{} still takes ci",
            s.addr
        );
    }
    let (_, body) = get_as(&a.addr, Some(&ci), "/v1/key");
    assert!(String::from_utf8_lossy(&body).contains("revoked"));
    let (_, text) = get_as(&b.addr, Some(&a.key), "/metrics");
    assert!(String::from_utf8_lossy(&text).contains("sealvol_serve_key_list_shared 1"));

    // Keys are not made through a server, and a collection leaves the list alone.
    let e = a.client(&a.key).fails(2, &["key", "create", "x"]);
    assert!(
        e.contains("--remote") && e.contains("server's machine"),
        "{e}"
    );
    one.ok(&["volume", "gc"]);
    let ro = key(&one, &["after-gc", "--read-only"]);
    assert!(answers_within(&a.addr, &ro, 200));
}
