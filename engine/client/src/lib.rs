//! Client: the clients of a `sealvol serve`, speaking only the protocol
//! (`sealvol_wire`), never the server's code.
//!
//! - `peer`: a node's read path asking a server (or a ring of them) for runs of chunks
//!   (`read::Peer`); its key sent only to a server that proved it is one of the ring;
//! - `remote`: the remote engine a CLI or console elsewhere uses: the repository's
//!   objects as an `ObjectStore`, its operations, and the server's jobs;
//! - `address`: a server's address checked before any request, a failure told by cause;
//! - `protocol`: the protocol's version said on every request, a server too old refused;
//! - `tls`: the clients' TLS (the system's roots and `SEALVOL_CA_CERT`).

pub mod address;
pub mod peer;
pub mod protocol;
pub mod remote;
pub mod tls;
