//! Test support only, shared by the tests of every crate and of the binary: the
//! servers tests talk to on loopback (`servers`), started by the test that needs them
//! and killed when it ends; HTTP spoken by hand as a hostile client speaks it (`http`);
//! the scripted trainer of `../shared/bench` (`trainer`); and walking a folder's files
//! (`files`). Nothing here is linked into sealvol.

pub mod files;
pub mod http;
pub mod servers;
pub mod trainer;
