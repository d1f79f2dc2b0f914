//! `volume sync SOURCE NS/VOL`: a remote source sealed as a new version, by a job
//! (`commands::jobs`), and what a sync and an import both seal into.

use clap::Args;
use clap_complete::ArgValueCompleter;

use sealvol_core::Result;

use crate::commands::jobs::{self, SyncRequest};
use crate::commands::{Ctx, Run};
use crate::complete;

/// The version a sync or an import seals: its volume and the tags that move to it.
#[derive(Args, Debug)]
pub struct Destination {
    /// Volume: NAMESPACE/NAME.
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    pub volume: String,
    /// Point these tags at the new version (repeatable).
    #[arg(long = "tag", short = 't', value_name = "TAG")]
    pub tags: Vec<String>,
}

/// Seal a remote source as a new version: objects stream into the repository, no local copy.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume sync s3://ckpts/run-7/step-4000 weights/run-7 --tag latest\n  sealvol volume sync r2://ACCOUNT/models/qwen weights/qwen --secret r2-key\n  sealvol volume sync s3://ckpts/run-7 weights/run-7 --exclude 'optimizer*' --include '*.safetensors'\n\nSources: s3://BUCKET/PREFIX, r2://ACCOUNT/BUCKET/PREFIX, cw://BUCKET/PREFIX, or a local path.\nEndpoints: AWS_ENDPOINT_URL(_S3), SEALVOL_R2_ENDPOINT, SEALVOL_CW_ENDPOINT, or [endpoints] in config.toml.\nA custom S3 endpoint uses path-style addressing unless SEALVOL_S3_PATH_STYLE=0."
)]
pub struct Sync {
    /// Where the bytes are.
    source: String,
    #[command(flatten)]
    into: Destination,
    /// A stored secret holding the credentials (see `sealvol secret`).
    #[arg(long, value_name = "NAME")]
    secret: Option<String>,
    /// Only keys matching this glob (repeatable; .gitignore-like).
    #[arg(long, value_name = "GLOB")]
    include: Vec<String>,
    /// Leave out keys matching this glob (repeatable; wins over --include).
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    /// Hand the job to the agent (started in the background if none runs; with --remote, the server's), print its id, return.
    #[arg(long, conflicts_with = "wait")]
    detach: bool,
    /// Follow the job to its end, with its progress on a terminal (the default): exit 0 sealed, 1 failed, 3 cancelled. Ctrl-c stops following, not the job.
    #[arg(long)]
    wait: bool,
    /// Print the finished job (or, with --detach, the queued one) as one JSON document.
    #[arg(long)]
    json: bool,
}

impl Run for Sync {
    fn run(self, ctx: &Ctx) -> Result<()> {
        jobs::sync(
            ctx,
            SyncRequest {
                source: self.source,
                volume: self.into.volume,
                tags: self.into.tags,
                secret: self.secret,
                include: self.include,
                exclude: self.exclude,
                detach: self.detach,
                json: self.json,
                endpoint: None,
            },
        )
    }
}
