//! sealvol's deployments: what a deployment's config file says it serves.
//!
//! Its one job is the `sealvol:` block of a deployment's YAML file: reading it with
//! every ref's place in the file (`file`, over the spanned tree of `yaml`), resolving
//! and checking its refs against a repository (`check`), comparing deployments
//! (`drift`), choosing a version to go back to (`history`), and rewriting refs so that
//! not one other byte of the file changes (`rewrite`, `rollback`). The startup cache's keys
//! (`startup`) live here too: a deployment's replicas are what restore it. Mounting and
//! terminals are the app's.

pub mod check;
pub mod drift;
pub mod file;
pub mod history;
pub mod rewrite;
pub mod rollback;
pub mod startup;
pub mod yaml;

pub use check::{Checked, Finding, Follows, Served, Severity, check};
pub use file::{DeployFile, MountEntry};
pub use rewrite::{Edit, LineChange};
