//! Syncs run by an agent started in the test with these sources, against real servers
//! on loopback (`sealvol-testkit`): one test binary, a module per kind of source, and
//! `cancel` for cancels and local folders. What only processes show is tested on the
//! binary (`tests/sync/`).

mod cancel;
mod cloud;
mod common;
mod hub;
mod s3;
