//! The protocol's version on a real server over loopback: every answer says it, a
//! client one version older (or one that says none, as every client nobody here wrote)
//! is answered, an older one is told to upgrade and a header that is no version is
//! refused, before the key check reads anything.

mod common;

use common::{Server, server};
use sealvol_wire::protocol::{HEADER, OLDEST_CLIENT, PROTOCOL};

/// `GET path` saying `version` (none: no header); the status, the version the answer
/// says, and its body.
fn get(s: &Server, path: &str, version: Option<&str>) -> (u16, Option<String>, String) {
    let url = format!("{}{path}", s.url);
    let (key, version) = (s.key.clone(), version.map(str::to_string));
    s.rt.block_on(async move {
        let mut req = reqwest::Client::new().get(url).bearer_auth(key);
        if let Some(v) = version {
            req = req.header(HEADER, v);
        }
        let r = req.send().await.unwrap();
        let said = r
            .headers()
            .get(HEADER)
            .map(|v| v.to_str().unwrap().to_string());
        (
            r.status().as_u16(),
            said,
            r.text().await.unwrap_or_default(),
        )
    })
}

#[test]
fn every_answer_says_the_version_and_a_client_one_older_or_silent_is_answered() {
    let s = server();
    let ours = PROTOCOL.to_string();
    let older = OLDEST_CLIENT.to_string();
    let newer = (PROTOCOL + 1).to_string();
    for version in [
        None,
        Some(ours.as_str()),
        Some(older.as_str()),
        Some(newer.as_str()),
    ] {
        for path in ["/healthz", "/v1/key"] {
            let (status, said, body) = get(&s, path, version);
            assert_eq!(status, 200, "{path} saying {version:?}: {body}");
            assert_eq!(
                said.as_deref(),
                Some(ours.as_str()),
                "{path} saying {version:?}"
            );
        }
    }
    // Refusals say it too: a client reads the version before the refusal's body.
    let (status, said, _) = get(&s, "/v1/nothing-here", None);
    assert_eq!((status, said.as_deref()), (404, Some(ours.as_str())));
}

#[test]
fn an_older_client_is_told_to_upgrade_and_a_header_that_is_no_version_is_refused() {
    let s = server();
    let too_old = (OLDEST_CLIENT - 1).to_string();
    let (status, said, body) = get(&s, "/v1/key", Some(&too_old));
    assert_eq!(status, 426, "{body}");
    assert_eq!(said, Some(PROTOCOL.to_string()));
    let e: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(e["kind"], "Format", "{body}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("upgrade sealvol where the request came from"),
        "{body}"
    );
    for bad in ["two", "", "1.5", "-2", "123456789012"] {
        let (status, _, body) = get(&s, "/v1/key", Some(bad));
        assert_eq!(status, 400, "{bad:?}: {body}");
        assert!(body.contains(HEADER), "{bad:?}: {body}");
    }
    // Before the key check: without a key, the answer is still about the version.
    let url = format!("{}/v1/key", s.url);
    let status = s.rt.block_on(async move {
        let r = reqwest::Client::new()
            .get(url)
            .header(HEADER, too_old)
            .send()
            .await
            .unwrap();
        r.status().as_u16()
    });
    assert_eq!(status, 426);
}

#[test]
fn this_build_s_clients_talk_to_this_build_s_server() {
    let s = server();
    let me = sealvol_client::remote::whoami(&s.url, Some(&s.key)).unwrap();
    assert!(!me.name.is_empty());
    let peer = sealvol_client::peer::HttpPeer::new(&s.url, Some(&s.key)).unwrap();
    peer.check().unwrap();
}
