//! sealvol's node: what one machine keeps and runs beside the repository.
//!
//! Its one job is this machine's state and the work it does for every `sealvol`
//! process on it: the state database (stat cache, what syncs stored, job and watch
//! records), sync jobs and watches and the agent that runs them (with its socket, live
//! progress and logs), the sync runner, the watch runner, and the `Api` the console
//! talks to. What a source is (address, endpoints, filters, listing, secrets) is
//! `sealvol-source`'s; the remote clients plug in through `sealvol_source::Connector`
//! (`sealvol-sources`), so nothing here links them; deployment files go through
//! `sealvol-deploy` and mount records through `sealvol-mount`.

pub mod agent;
pub mod api;
pub mod jobs;
pub mod log;
pub mod state;
pub mod sync;
pub mod watch;
