//! sealvol's node: what one machine keeps and runs beside the repository.
//!
//! Its one job is this machine's state and the work it does for every `sealvol`
//! process on it: the state database (stat cache, what syncs stored, job and watch
//! records), sync jobs and watches and the agent that runs them (with its socket, live
//! progress and logs), the sync runner, the watch runner and what it knows of a source (address, endpoint, filters,
//! listing), secrets for sources, the records of running mounts, and the `Api` the
//! console talks to (deployment files go through `sealvol-deploy`). The remote source clients plug in through `source::Connector`
//! (`sealvol-sources`), so nothing here links them.

pub mod agent;
pub mod api;
pub mod jobs;
pub mod log;
pub mod mounts;
pub mod private;
pub mod secrets;
pub mod source;
pub mod state;
pub mod sync;
pub mod watch;
