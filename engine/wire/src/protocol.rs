//! The protocol's version, said on every request and every answer, so that a server
//! and a client of different releases meet with a line that says which to upgrade,
//! never with a body one of them misreads.
//!
//! - A client says its version in `HEADER` on every request; one that says none
//!   speaks `UNSAID` (the protocol before versions were said; also every client
//!   nobody here wrote: `huggingface_hub`, skopeo, Prometheus).
//! - A server answers every client from `OLDEST_CLIENT` up (one version older than
//!   its own, so that servers can be upgraded before their nodes), and says its own
//!   version in `HEADER` on every answer. An older client is answered `426` with an
//!   error body that says to upgrade the client.
//! - A client refuses a server older than `OLDEST_SERVER` (one that says no version
//!   speaks `UNSAID`), saying to upgrade the server.
//!
//! A change to a route's bodies that a client one version older could misread raises
//! `PROTOCOL`; the server then keeps answering the version before as it did.

/// This build's version of the protocol.
pub const PROTOCOL: u32 = 2;
/// The oldest client a server of this build answers.
pub const OLDEST_CLIENT: u32 = PROTOCOL - 1;
/// The oldest server a client of this build talks to.
pub const OLDEST_SERVER: u32 = PROTOCOL;
/// The version of a request or answer that says none.
pub const UNSAID: u32 = 1;
/// The header both sides say their version in.
pub const HEADER: &str = "x-sealvol-protocol";

/// The version a header says (`None`: no header), or why it is no version.
pub fn said(value: Option<&[u8]>) -> Result<u32, String> {
    let Some(v) = value else {
        return Ok(UNSAID);
    };
    std::str::from_utf8(v)
        .ok()
        .filter(|s| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            format!(
                "{HEADER} must be a protocol version (a number), not {:.40?}",
                String::from_utf8_lossy(v)
            )
        })
}

/// Why a server of this build does not answer a client of version `client`, if it
/// does not.
pub fn client_refused(client: u32) -> Option<String> {
    (client < OLDEST_CLIENT).then(|| {
        format!(
            "this client speaks sealvol protocol {client}; this server answers {OLDEST_CLIENT} \
             and newer: upgrade sealvol where the request came from"
        )
    })
}

/// Why a client of this build does not talk to the server at `url` of version
/// `server`, if it does not.
pub fn server_refused(url: &str, server: u32) -> Option<String> {
    (server < OLDEST_SERVER).then(|| {
        format!(
            "the server at {url} speaks sealvol protocol {server}, older than this client \
             needs ({OLDEST_SERVER}): upgrade `sealvol serve` there, or use a sealvol as \
             old as it"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_a_short_number_and_none_is_the_first() {
        assert_eq!(said(None), Ok(UNSAID));
        assert_eq!(said(Some(b"2")), Ok(2));
        for bad in [
            &b""[..],
            b"-1",
            b"1.0",
            b"two",
            b"99999999999",
            b" 2",
            b"\xff",
        ] {
            assert!(said(Some(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_server_answers_one_version_older_and_a_client_needs_its_own() {
        assert!(client_refused(PROTOCOL).is_none());
        assert!(client_refused(PROTOCOL + 1).is_none());
        assert!(client_refused(PROTOCOL - 1).is_none());
        let old = client_refused(PROTOCOL - 2).unwrap();
        assert!(
            old.contains("upgrade sealvol where the request came from"),
            "{old}"
        );
        assert!(server_refused("http://s", PROTOCOL).is_none());
        assert!(server_refused("http://s", PROTOCOL + 1).is_none());
        let old = server_refused("http://s", UNSAID).unwrap();
        assert!(old.contains("upgrade `sealvol serve` there"), "{old}");
    }
}
