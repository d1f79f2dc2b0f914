//! Test support only: the servers tests talk to on loopback, started by the test that
//! needs them and killed when it ends, so that a crate's own tests can use the same
//! real S3 API server, relays and emulators as the binary's. Nothing here is linked
//! into sealvol.

pub mod servers;
