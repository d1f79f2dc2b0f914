//! The protocol's version on the client's side, against a stand-in server on loopback
//! that answers as a server of another release would: this build's clients say their
//! version on every request, and refuse a server too old for them (one that says no
//! version, or an older one, or one that is none) with a line that says to upgrade it,
//! never by misreading its answer.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;

use sealvol_core::error::ErrorKind;
use sealvol_wire::protocol::{HEADER, OLDEST_SERVER, PROTOCOL};

/// A server answering every request `200 {}` with `said` as its version (none: no
/// header); its URL, and the request heads it read.
fn stand_in(said: Option<String>) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (heads, seen) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut head = String::new();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let _ = heads.send(head);
            let version = said
                .as_ref()
                .map(|v| format!("{HEADER}: {v}\r\n"))
                .unwrap_or_default();
            let body =
                r#"{"name":"k","scope":"admin","admin":true,"read_only":false,"namespaces":[]}"#;
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\n{version}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen)
}

#[test]
fn a_server_that_says_this_version_is_talked_to_and_every_request_says_it() {
    let (url, heads) = stand_in(Some(PROTOCOL.to_string()));
    let me = sealvol_client::remote::whoami(&url, Some("sv1:k:secret")).unwrap();
    assert_eq!(me.name, "k");
    let head = heads.recv().unwrap().to_ascii_lowercase();
    assert!(
        head.contains(&format!("{HEADER}: {PROTOCOL}\r\n")),
        "{head}"
    );
    let peer = sealvol_client::peer::HttpPeer::new(&url, Some("sv1:k:secret")).unwrap();
    peer.check().unwrap();
    let head = heads.recv().unwrap().to_ascii_lowercase();
    assert!(
        head.contains(&format!("{HEADER}: {PROTOCOL}\r\n")),
        "{head}"
    );
}

#[test]
fn a_server_too_old_or_saying_no_version_is_refused_with_a_line_saying_to_upgrade_it() {
    let older = (OLDEST_SERVER - 1).to_string();
    for said in [None, Some(older), Some("two".to_string())] {
        let (url, _heads) = stand_in(said.clone());
        let e = sealvol_client::remote::whoami(&url, Some("sv1:k:secret")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format, "{said:?}: {e}");
        assert!(e.to_string().contains(&url), "{said:?}: {e}");
        if said.as_deref() != Some("two") {
            assert!(
                e.to_string().contains("upgrade `sealvol serve` there"),
                "{e}"
            );
        }
        let peer = sealvol_client::peer::HttpPeer::new(&url, Some("sv1:k:secret")).unwrap();
        let e = peer.check().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format, "{said:?}: {e}");
    }
}
