//! The command line, as clap definitions. Every command has an example in its help.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::ArgValueCompleter;

use crate::complete;

const JSON_HELP: &str = "Print one JSON document on stdout instead of text (shapes: docs/JSON.md)";
const PEER_HELP: &str = "A cache server (`sealvol serve`) to read through before the origin, as http://HOST:PORT; repeat for a ring: each part of a pack is asked of the server that owns it, then the next [default: config.toml's peers]";
const PEERS_FILE_HELP: &str = "A file listing the cache servers, one http://HOST:PORT per line, looked at again each second while this runs (an operator or a Kubernetes headless service rewrites it) [default: config.toml's peers_file]";
const ORIGIN_HELP: &str = "Another repository holding the same versions (`sealvol volume mirror`), read when the repository fails: a directory or s3://BUCKET/PREFIX; repeat for more, asked in order [default: config.toml's mirrors]";
const REF_HELP: &str = "A ref: NS/NAME@b3:DIGEST (8+ hex digits will do), NS/NAME:TAG, or NS/NAME for the newest version";

#[derive(Parser, Debug)]
#[command(
    name = "sealvol",
    version,
    about = "Sealed, content-addressed volumes of model data: push once, get a digest, pull or mount it anywhere.",
    after_help = "Examples:\n  sealvol                      (in a terminal: the console)\n  sealvol --demo               (seed demo volumes if the repository is empty, then the console)\n  sealvol volume push ./ckpt weights/qwen3-8b --tag prod\n  sealvol volume versions weights/qwen3-8b\n  sealvol volume pull weights/qwen3-8b:prod ./out\n\nConfiguration: flags override SEALVOL_* variables, which override config.toml in the XDG config directory."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    /// Seed the repository with demo volumes if it is empty, then open the console.
    #[arg(long)]
    pub demo: bool,

    /// Console: disable every change (tag moves, undo, delete, restore).
    #[arg(long)]
    pub readonly: bool,

    /// Console: a deployment file, or a folder of them, for the Deployments screen (repeatable) [default: deploy_dirs in config.toml]
    #[arg(long = "deploy", value_name = "PATH")]
    pub deploy: Vec<PathBuf>,

    /// Console theme: dark, light, high-contrast, or a file in <config>/themes/ [default: from config.toml, else dark]
    #[arg(long, env = "SEALVOL_THEME", value_name = "NAME")]
    pub theme: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Args, Debug)]
pub struct Global {
    /// Repository: a directory, s3://BUCKET/PREFIX, r2://ACCOUNT/BUCKET/PREFIX or cw://BUCKET/PREFIX [default: $XDG_DATA_HOME/sealvol/repo]
    #[arg(long, env = "SEALVOL_REPO", global = true, value_name = "ADDRESS")]
    pub repo: Option<String>,

    /// A remote engine (`sealvol serve` elsewhere) to work on instead of a repository, as http://HOST:PORT; the API key comes from SEALVOL_API_KEY
    #[arg(long, env = "SEALVOL_REMOTE", global = true, value_name = "URL")]
    pub remote: Option<String>,

    /// Stored secret (`sealvol secret set NAME`) with KEY_ID:SECRET for the repository's bucket [default: the AWS credential chain]
    #[arg(long, env = "SEALVOL_REPO_SECRET", global = true, value_name = "NAME")]
    pub repo_secret: Option<String>,

    /// Local state directory: database, caches, socket [default: $XDG_STATE_HOME/sealvol]
    #[arg(long, env = "SEALVOL_STATE", global = true, value_name = "DIR")]
    pub state: Option<PathBuf>,

    /// How long a backend (bucket, source, remote engine) may leave a request unanswered, retries included, before the command fails [default: 2m, or `timeout` in config.toml]
    #[arg(long, env = "SEALVOL_TIMEOUT", global = true, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<std::time::Duration>,

    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Only errors on stderr; no progress, no summaries.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the digest DIR would seal as, without a repository.
    #[command(after_help = "Example:\n  sealvol digest ./ckpt\n  b3:9f3c…")]
    Digest {
        /// The directory to hash.
        dir: PathBuf,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Create a repository: in a directory, or in a bucket prefix (the only way one is made there).
    #[command(
        after_help = "Examples:\n  sealvol init --repo s3://models/sealvol\n  AWS_ENDPOINT_URL=http://minio:9000 sealvol init --repo s3://models/team-a\n  sealvol init --repo r2://ACCOUNT/models/sealvol --repo-secret r2-keys\n  sealvol init --repo /srv/sealvol\n\nA bucket must exist already, and honour conditional writes (If-None-Match, If-Match):\nthey are all that keeps many writers safe, and init proves them before it writes."
    )]
    Init {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Push, list, tag, pull and verify volumes.
    #[command(subcommand)]
    Volume(VolumeCommand),

    /// Store, list and remove secrets for sync sources (values are never printed).
    #[command(subcommand)]
    Secret(SecretCommand),

    /// API keys of this node's `sealvol serve`: create (printed once), list, revoke.
    #[command(subcommand)]
    Key(KeyCommand),

    /// List sync jobs, show one, cancel or retry it.
    #[command(subcommand)]
    Jobs(JobsCommand),

    /// List watches (`volume watch`), show one with its pushes, stop one.
    #[command(subcommand)]
    Watch(WatchCommand),

    /// Deployments: check, pin, compare, roll back and mount the volumes their config files name.
    #[command(subcommand)]
    Deploy(DeployCommand),

    /// The startup cache: a folder of compiled kernels saved under a key, restored by later replicas.
    #[command(subcommand)]
    Cache(CacheCommand),

    /// Serve this repository: the in-cluster cache tier for nodes, and the remote engine for API-key holders.
    #[command(
        after_help = "Examples:\n  sealvol serve --cache /var/cache/sealvol-serve --cache-size 200G\n  sealvol serve --listen 10.0.0.5:7420 --tls-cert cert.pem --tls-key key.pem\n  sealvol serve --listen 10.0.0.5:7420 --insecure-http\n\nThe first start makes an admin API key in <state>/serve/admin.key (0600); `sealvol key create` makes scoped ones.\nEvery route needs a key (Authorization: Bearer KEY): GET /v1/chunks/<hash>, POST /v1/runs, the remote engine's\n/v1/objects/…, /v1/list, /metrics; but not the probes /healthz (the process is up) and /readyz (the repository answers).\n--metrics-listen serves /metrics without a key on an address of its own. Off loopback it needs TLS or --insecure-http."
    )]
    Serve(Box<ServeArgs>),

    /// Run the agent headless: it runs sync jobs and answers other sealvol processes.
    #[command(
        after_help = "Examples:\n  sealvol agent\n  sealvol agent --idle-exit 10m\n\nOne process per state directory is the agent: this command, a console, or a foreground sync."
    )]
    Agent {
        /// Stop after this long with nothing to do (e.g. 60s, 10m).
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        idle_exit: Option<std::time::Duration>,
    },

    /// Fix what `volume verify` finds: rebuild indexes, relink chunks to healthy copies, restore tags.
    #[command(
        after_help = "Examples:\n  sealvol repair --dry-run\n  sealvol repair\n  sealvol repair --from ./ckpt\n\nNothing is deleted: damaged objects move to quarantine/ in the repository.\nVersions still missing data are listed; --from DIR heals them from a folder holding their files."
    )]
    Repair {
        /// Show what would be done; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Read every pack first, to find damage no read has recorded yet.
        #[arg(long)]
        read_data: bool,
        /// A folder holding the files of damaged versions (their source), to heal them from.
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Show or change the repository's settings: the trash's retention, gc's grace period, and namespaces' quotas.
    #[command(
        after_help = "Examples:\n  sealvol settings\n  sealvol settings --retention 14d\n  sealvol settings --gc-grace 30m\n  sealvol settings --quota team-a=500G --quota team-b=none\n\nA quota counts the stored bytes of the distinct chunks a namespace's versions reference, live and in the trash (a chunk two namespaces hold counts for both), and their signatures; a push, sync or signature past it is refused. Deleting frees quota once gc has purged the versions from the trash.\n\nThe grace period must be longer than any push takes between its last check and its\nmanifest (milliseconds); longer also spares long pushes from rewriting their data."
    )]
    Settings {
        /// How long a deleted version stays restorable, e.g. 7d, 36h.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        retention: Option<std::time::Duration>,
        /// Garbage collection's grace period, e.g. 15m (at least 1s).
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        gc_grace: Option<std::time::Duration>,
        /// A namespace's quota, NS=SIZE (500G, 2T), or NS=none to remove it (repeatable).
        #[arg(long = "quota", value_name = "NS=SIZE", value_parser = quota_arg)]
        quotas: Vec<(String, Option<u64>)>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// The cache servers mounts and pulls read through, each asked how it is doing.
    #[command(
        after_help = "Per server: whether it answers, its share of the key space (1/N of the ring), bytes served, cache hit ratio, bytes read from the origin, bytes its fellows gave it, and the servers in its own ring (serve --peer). The servers are those a mount would use: --peer, --peers-file, config.toml, else the remote engine.\n\nExamples:\n  sealvol peers\n  sealvol peers --peers-file /etc/sealvol/peers --json"
    )]
    Peers {
        #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
        peers: Vec<String>,
        #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
        peers_file: Option<PathBuf>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Serve the Kubernetes CSI node plugin: pods mount sealed versions read-only by ref.
    #[command(
        after_help = "kubelet calls it over gRPC on a unix socket (CSI spec 1.12: Identity and Node).\nEach publish is a `volume mount` in a process of its own that outlives the plugin,\nwith this node's cache and the repository, key and cache servers given here (never\na pod's). A restarted plugin adopts the mounts it made. deploy/kubernetes/ runs it\nas a DaemonSet.\n\nExamples:\n  sealvol --remote http://sealvol:7420 csi --node-id \"$NODE_NAME\"\n  sealvol csi --node-id node-a --peers-file /etc/sealvol/peers"
    )]
    Csi {
        /// The socket to serve on: unix:///PATH or an absolute path.
        #[arg(
            long,
            value_name = "ENDPOINT",
            env = "CSI_ENDPOINT",
            default_value = "unix:///csi/csi.sock"
        )]
        endpoint: String,
        /// This node's name as kubelet knows it (the DaemonSet passes spec.nodeName).
        #[arg(long, value_name = "NAME", env = "NODE_NAME")]
        node_id: String,
        #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
        peers: Vec<String>,
        #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
        peers_file: Option<PathBuf>,
    },

    /// Show the settings in effect and where they come from.
    #[command(after_help = "Example:\n  sealvol info --json")]
    Info {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  echo 'source <(sealvol completions bash)' >> ~/.bashrc\n  sealvol completions fish > ~/.config/fish/completions/sealvol.fish\n  sealvol completions nushell | save -f ~/.config/nushell/sealvol.nu\n\nVolume, tag and digest names complete from the repository in effect (not in nushell)."
    )]
    Completions {
        /// bash, zsh, fish, elvish, powershell or nushell.
        #[arg(value_enum)]
        shell: crate::complete::Shell,
    },
}

#[derive(Subcommand, Debug)]
pub enum VolumeCommand {
    /// Seal a directory as a new version; prints its pinned ref last on stdout.
    #[command(
        after_help = "Example:\n  sealvol volume push ./ckpt weights/qwen3-8b --tag prod\n  vol:weights/qwen3-8b@b3:9f3c…"
    )]
    Push {
        /// The directory to seal.
        dir: PathBuf,
        /// Volume: NAMESPACE/NAME.
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        /// Point these tags at the new version (repeatable).
        #[arg(long = "tag", short = 't', value_name = "TAG")]
        tags: Vec<String>,
        /// Seal a folder that holds no file (refused otherwise: it is most often a wrong path).
        #[arg(long)]
        allow_empty: bool,
        /// Say something about the version (repeatable): KEY=VALUE, e.g. step=4000. Shown by `volume versions`, not part of the digest.
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Seal a remote source as a new version: objects stream into the repository, no local copy.
    #[command(
        after_help = "Examples:\n  sealvol volume sync s3://ckpts/run-7/step-4000 weights/run-7 --tag latest\n  sealvol volume sync r2://ACCOUNT/models/qwen weights/qwen --secret r2-key\n  sealvol volume sync s3://ckpts/run-7 weights/run-7 --exclude 'optimizer*' --include '*.safetensors'\n\nSources: s3://BUCKET/PREFIX, r2://ACCOUNT/BUCKET/PREFIX, cw://BUCKET/PREFIX, or a local path.\nEndpoints: AWS_ENDPOINT_URL(_S3), SEALVOL_R2_ENDPOINT, SEALVOL_CW_ENDPOINT, or [endpoints] in config.toml.\nA custom S3 endpoint uses path-style addressing unless SEALVOL_S3_PATH_STYLE=0."
    )]
    Sync {
        /// Where the bytes are.
        source: String,
        /// Volume: NAMESPACE/NAME.
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        /// Point these tags at the new version (repeatable).
        #[arg(long = "tag", short = 't', value_name = "TAG")]
        tags: Vec<String>,
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
    },

    /// Seal each checkpoint a trainer writes into DIR as soon as it is complete.
    #[command(
        after_help = "Examples:\n  sealvol volume watch ./out weights/run-7 --tag step-{step} --tag latest\n  sealvol volume watch ./out weights/run-7 --keep-last 3 --keep-every 1000 --detach\n  sealvol volume watch ./adapter adapters/support --layout flat --settle 30s\n\nA checkpoint is pushed once it has settled: no change for --settle, and no file of it\nopen for writing by any process this user may inspect (/proc/*/fd). Temporary names\n(*.tmp, .*, tmp*) are left out until they are renamed. Only new chunks are written.\nWithout --detach it runs until ctrl-c; with it, the agent runs it until `sealvol watch stop`."
    )]
    Watch(WatchArgs),

    /// List namespaces and volumes.
    #[command(after_help = "Example:\n  sealvol volume ls weights")]
    Ls {
        /// Only this namespace (an error if it holds no volume).
        namespace: Option<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// List the versions of a volume, newest first.
    #[command(after_help = "Example:\n  sealvol volume versions weights/qwen3-8b --json")]
    Versions {
        /// Volume: NAMESPACE/NAME.
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// List the files of a version.
    #[command(after_help = "Example:\n  sealvol volume files weights/qwen3-8b:prod")]
    Files {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Point TAG at the version REF names (REF may itself be a tag).
    #[command(
        after_help = "Examples:\n  sealvol volume tag weights/qwen3-8b@b3:9f3c1a2b prod\n  sealvol volume tag weights/qwen3-8b:canary prod"
    )]
    Tag {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// The tag to point (created if new): 1-63 characters of a-z 0-9 . _ -
        tag: String,
        /// The tag stops resolving after this long (30d, 12h) or at this time (RFC 3339); it stays in the history. A move without it makes the tag permanent.
        #[arg(long, value_name = "WHEN")]
        expires: Option<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Set or remove labels of a sealed version (outside its digest); with neither, print them and every change.
    #[command(
        after_help = "Examples:\n  sealvol volume label weights/run-7@b3:9f3c1a2b eval=passed step=4000\n  sealvol volume label weights/run-7:prod --remove eval\n  sealvol volume label weights/run-7:prod\n\nA version's labels are those of the push that sealed it until they are changed here;\nevery change is kept (who, when, what), and a deleted version's labels go with it."
    )]
    Label {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// Labels to set: KEY=VALUE (a key it has gets the new value).
        #[arg(value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// A label to remove (repeatable).
        #[arg(long = "remove", value_name = "KEY")]
        remove: Vec<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Everything known about one version: size, what it added, source, labels, tags (and when they expire), mounts here.
    #[command(after_help = "Example:\n  sealvol volume describe weights/qwen3-8b:prod --json")]
    Describe {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Print the pinned ref (NS/NAME@b3:DIGEST) a ref resolves to now, for scripts.
    #[command(
        after_help = "Example:\n  sealvol volume resolve weights/qwen3-8b:prod\n  vol:weights/qwen3-8b@b3:9f3c…"
    )]
    Resolve {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// List the tags of a volume, optionally with every move.
    #[command(after_help = "Example:\n  sealvol volume tags weights/qwen3-8b --history")]
    Tags {
        /// Volume: NAMESPACE/NAME.
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        /// Show each tag's move history.
        #[arg(long)]
        history: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// What changed between two versions: files, chunks, and safetensors tensors.
    #[command(
        after_help = "Examples:\n  sealvol volume diff weights/qwen3-8b:prod weights/qwen3-8b:canary\n  sealvol volume diff weights/qwen3-8b@9f3c1a2b weights/qwen3-8b@77ab01cd --json"
    )]
    Diff {
        /// The older version (a ref).
        #[arg(value_name = "FROM", add = ArgValueCompleter::new(complete::refs))]
        from: String,
        /// The newer version: a ref, or TAG or @DIGEST relative to FROM's volume.
        #[arg(value_name = "TO", add = ArgValueCompleter::new(complete::refs))]
        to: String,
        /// Exit 1 when the versions differ, 0 when they are the same (as `git diff --exit-code`).
        #[arg(long)]
        exit_code: bool,
        /// Also list unchanged files and tensors.
        #[arg(long)]
        all: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Write a version's files into a directory, verifying every chunk.
    #[command(after_help = "Example:\n  sealvol volume pull weights/qwen3-8b:prod ./model")]
    Pull {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// The directory to write: new, empty, or (with --force) made exactly the version.
        dir: PathBuf,
        /// Pull into a non-empty directory: replace the version's files there and remove
        /// (and list) everything the version does not hold.
        #[arg(long)]
        force: bool,
        /// Only the paths matching this glob (repeatable; .gitignore-like: `*.safetensors`, `onnx/*`); each file verified as ever.
        #[arg(long, value_name = "GLOB")]
        include: Vec<String>,
        /// Leave out the paths matching this glob (repeatable; wins over --include).
        #[arg(long, value_name = "GLOB")]
        exclude: Vec<String>,
        #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
        peers: Vec<String>,
        #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
        peers_file: Option<PathBuf>,
        #[arg(long = "origin", value_name = "REPO", help = ORIGIN_HELP)]
        origins: Vec<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Export a version as a CNCF ModelPack artifact (OCI): one raw layer per file, the same manifest digest every time.
    #[command(
        after_help = "DEST is oci:DIR[:NAME], an OCI image layout (skopeo's spelling; NAME defaults to REF's tag), or docker://HOST/REPO[:TAG], a registry (TAG defaults to REF's tag; blobs it has are not sent again).

Each file is read from the repository, every byte proven, and written once: a blob already in the layout is kept if its bytes hash to its name. Links to files are exported as their files; links to folders are refused.

Examples:
  sealvol volume export weights/qwen3-8b:prod oci:./qwen3-8b
  sealvol volume export weights/qwen3-8b@9f3c1a2b oci:/srv/layouts/qwen:v1"
    )]
    Export {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// Where: oci:DIR[:NAME], or docker://HOST/REPO[:TAG].
        #[arg(value_name = "DEST")]
        dest: String,
        /// A registry's credentials in a stored secret (`sealvol secret set NAME`), USER:PASSWORD; else the registry's entry in $REGISTRY_AUTH_FILE or ~/.docker/config.json (what `docker login` and `skopeo login` write).
        #[arg(long, value_name = "NAME")]
        registry_secret: Option<String>,
        /// false: speak plain HTTP to the registry (a registry on loopback), as skopeo spells it.
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
        tls_verify: bool,
        /// A blob larger than this goes to the registry in pieces of this size, each resumable: a failed piece is sent again from where the registry stands, and an export run again resumes an unfinished upload. Smaller pieces cost time (64M: 1.2x the whole export to a distribution registry; 256M: as fast as whole blobs); a proxy that limits request bodies needs them below its limit.
        #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = piece_size)]
        piece_size: u64,
        /// A repository of the same registry to mount blobs from rather than send them (repeatable); the repositories this machine pushed to lately are tried too.
        #[arg(long, value_name = "REPO", value_parser = registry_repo)]
        mount_from: Vec<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Import a CNCF ModelPack artifact (OCI) as a new version: each raw layer a file at its path.
    #[command(
        after_help = "SOURCE is oci:DIR[:NAME], an OCI image layout (skopeo's spelling; NAME may be left out when the layout holds one image), or docker://HOST/REPO[:TAG|@sha256:DIGEST], a registry.

The manifest is read once and pinned by its digest, so a tag that moves during the import changes nothing. Each layer is a file at its org.cncf.model.filepath, checked against its SHA-256 as it streams; only chunks the repository lacks are stored. Refused by name: manifest lists, tar layers (KitOps ModelKits, container images), layers without a path or whose path climbs out or repeats.
It runs as a sync job (`sealvol volume sync oci:DIR` and `oci://HOST/REPO:TAG` are the same), on this machine: a server never reads a registry a key names, nor its own files.

Examples:
  sealvol volume import oci:./qwen3-8b:prod weights/qwen3-8b --tag prod
  sealvol volume import docker://registry.internal/models/qwen3-8b:v1 weights/qwen3-8b
  sealvol volume import docker://127.0.0.1:5000/qwen:v1 weights/qwen --tls-verify=false"
    )]
    Import {
        /// Where: oci:DIR[:NAME], or docker://HOST/REPO[:TAG|@sha256:DIGEST].
        source: String,
        /// Volume: NAMESPACE/NAME.
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        /// Point these tags at the new version (repeatable).
        #[arg(long = "tag", short = 't', value_name = "TAG")]
        tags: Vec<String>,
        /// A registry's credentials in a stored secret (`sealvol secret set NAME`), USER:PASSWORD; else the registry's entry in $REGISTRY_AUTH_FILE or ~/.docker/config.json.
        #[arg(long, value_name = "NAME")]
        registry_secret: Option<String>,
        /// false: speak plain HTTP to the registry (a registry on loopback), as skopeo spells it.
        #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
        tls_verify: bool,
        /// Hand the job to the agent, print its id, return.
        #[arg(long)]
        detach: bool,
        /// Print the finished job as one JSON document.
        #[arg(long)]
        json: bool,
    },

    /// Copy a version into another repository (only the chunks it lacks), under the same digest.
    #[command(
        after_help = "The version keeps its digest there, so either repository can serve it (`--origin`).\nA tag in REF moves there too. A folder that does not exist becomes a repository; a bucket must be `sealvol init`ed.\n\nExamples:\n  sealvol volume mirror weights/qwen3-8b:prod --to s3://models-eu/sealvol\n  sealvol --repo s3://models-eu/sealvol volume mirror weights/qwen3-8b@9f3c1a2b --to /srv/sealvol"
    )]
    Mirror {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// The repository to copy into: a directory or s3://BUCKET/PREFIX (r2://, cw://). With --remote, the name of one of the server's destinations (`serve --mirror-to NAME=REPO`): the server copies it as a job.
        #[arg(long, value_name = "REPO")]
        to: String,
        /// With --remote: hand the job to the server, print its id, return.
        #[arg(long)]
        detach: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Mount a version read-only at DIR; bytes stream lazily through the node cache.
    #[command(
        after_help = "A tag resolves once, at mount time: the mount keeps serving that digest when the tag moves.\n\nExamples:\n  sealvol volume mount weights/qwen3-8b:prod /models/qwen\n  sealvol volume mount weights/qwen3-8b@9f3c1a2b /models/qwen --cache /nvme/sealvol --cache-size 200G --foreground"
    )]
    Mount {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// An existing, empty directory.
        dir: PathBuf,
        /// Node-disk cache directory, shared by every mount and pull [default: from config]
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        /// Bound of the node-disk cache, e.g. 500M, 20G [default: from config, else 20G]
        #[arg(long, value_name = "BYTES")]
        cache_size: Option<String>,
        /// Memory for read-ahead and recent chunks, e.g. 256M [default: from config, else 1/32 of RAM, 64M to 512M]
        #[arg(long, value_name = "BYTES")]
        prefetch_memory: Option<String>,
        /// How long a read waits for its bytes, retrying a failing origin, before it fails with EIO (1s to 1h)
        #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
        read_timeout: std::time::Duration,
        #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
        peers: Vec<String>,
        #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
        peers_file: Option<PathBuf>,
        #[arg(long = "origin", value_name = "REPO", help = ORIGIN_HELP)]
        origins: Vec<String>,
        /// Serve Prometheus metrics at http://ADDR/metrics: bytes, chunks and requests per tier, hit ratios, latency histograms, errors (e.g. 127.0.0.1:9464)
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// Stay attached; Ctrl-C or SIGTERM unmounts. Otherwise the mount runs in the background.
        #[arg(long)]
        foreground: bool,
        /// The ref as the user gave it, passed to a background mount (internal).
        #[arg(long, hide = true)]
        requested: Option<String>,
    },

    /// Unmount a mount made by `volume mount`, and stop the process serving it.
    #[command(after_help = "Example:\n  sealvol volume unmount /models/qwen")]
    Unmount {
        /// The mount point.
        dir: PathBuf,
        /// Detach now even if files are open under it; it goes when they close.
        #[arg(long)]
        lazy: bool,
    },

    /// List active mounts: what digest each serves, bytes served, hits per tier.
    #[command(after_help = "Example:\n  sealvol volume mounts --json")]
    Mounts {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Read profiles: the order a model's start-up reads a version in, replayed by later mounts.
    #[command(subcommand)]
    Profile(ProfileCommand),

    /// Sign a version in the OpenSSF model-signing format, stored beside it (several signers may sign one version).
    #[command(
        after_help = "Examples:\n  sealvol volume sign weights/qwen3-8b:prod --key release.key.pem\n  sealvol volume sign weights/qwen3-8b:prod --key release.key.pem --sha256\n  sealvol volume sign weights/qwen3-8b@b3:9f3c… --import model.sig\n\nThe key is an EC P-256 private key in PEM (openssl ecparam -name prime256v1 -genkey -noout -out key.pem).\nBLAKE3 (the default) reads no file bytes: the manifest holds each file's hash; model-signing's Python\nAPI verifies it. --sha256 reads every file once (kept beside the version), as `model_signing verify key`\nre-hashes with SHA-256. --import stores a signature model-signing made over the pushed folder, once its\nfile list is exactly this version's."
    )]
    Sign {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// The signer's EC P-256 private key (PEM: SEC1 or PKCS#8).
        #[arg(long, value_name = "KEY.pem", conflicts_with = "import")]
        key: Option<PathBuf>,
        /// Digest every file with SHA-256 (one read of the bytes) instead of BLAKE3.
        #[arg(long, requires = "key")]
        sha256: bool,
        /// Attach a signature made elsewhere (model_signing sign key … over the folder).
        #[arg(long, value_name = "FILE")]
        import: Option<PathBuf>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Check a version's signatures against public keys: exit 0 when one of them signed every file.
    #[command(
        name = "verify-signature",
        after_help = "Example:\n  sealvol volume verify-signature weights/qwen3-8b:prod --public-key release.pub.pem"
    )]
    VerifySignature {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// A trusted EC P-256 public key (PEM); repeat for several.
        #[arg(long = "public-key", value_name = "PUB.pem", required = true)]
        public_keys: Vec<PathBuf>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// List a version's signatures; with --out, write each as a file model-signing reads.
    #[command(
        after_help = "Example:\n  sealvol volume signatures weights/qwen3-8b:prod --out sigs/\n  model_signing verify key --public_key release.pub.pem --signature sigs/<NAME>.sig ./pulled"
    )]
    Signatures {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// Write each signature into DIR as <name>.sig.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Move a version to the trash; it stays restorable for the retention window (7 days).
    #[command(
        after_help = "Examples:\n  sealvol volume delete weights/qwen3-8b@b3:9f3c1a2b\n  sealvol volume delete weights/qwen3-8b@9f3c1a2b --untag --yes\n\nA version a tag points at is refused: move the tag first, or pass --untag.\nA mount already serving the version keeps serving it until gc purges it."
    )]
    Delete {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        /// Remove the tags that point at it (each removal is kept in the tag's history).
        #[arg(long)]
        untag: bool,
        /// Do not ask (needed when standard input is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Remove a tag; the removal is a move to nothing in its history, undone by tagging again.
    #[command(
        after_help = "Examples:\n  sealvol volume untag weights/qwen3-8b:canary\n  sealvol volume tag weights/qwen3-8b@b3:9f3c1a2b canary   (undoes it)"
    )]
    Untag {
        /// NS/NAME:TAG
        #[arg(value_name = "NS/NAME:TAG", add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// List deleted versions: who deleted them, when, time left, size, the tags they had.
    #[command(
        after_help = "Examples:\n  sealvol volume trash\n  sealvol volume trash weights/qwen3-8b --json"
    )]
    Trash {
        /// Only this volume (an error if there is no such volume).
        #[arg(value_name = "NS/NAME", add = ArgValueCompleter::new(complete::volumes))]
        volume: Option<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Bring a deleted version back from the trash, exactly as it was sealed.
    #[command(after_help = "Example:\n  sealvol volume restore weights/qwen3-8b@b3:9f3c1a2b")]
    Restore {
        /// NS/NAME@DIGEST of a version in the trash (8+ hex digits will do).
        #[arg(value_name = "REF")]
        reference: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Purge expired versions from the trash and reclaim what no version references.
    #[command(
        after_help = "Examples:\n  sealvol volume gc --dry-run\n  sealvol volume gc\n  sealvol volume gc --no-wait     (condemn now; the next gc sweeps)\n\nSafe while other processes and machines push: what is unreferenced is condemned first,\nand deleted only after the grace period (`sealvol settings`) if it is still unreferenced.\nPacks that are mostly dead are rewritten. Only one gc runs at a time."
    )]
    Gc {
        /// Say what would be purged, condemned, rewritten and freed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not wait out the grace period: condemn now and leave the sweep to the next gc.
        #[arg(long)]
        no_wait: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Check the repository (or one version): name each damaged object, what it breaks, and the fix.
    #[command(
        after_help = "Examples:\n  sealvol volume verify\n  sealvol volume verify --read-data\n  sealvol volume verify --read-data-subset 1/10\n  sealvol volume verify weights/qwen3-8b:prod\n\nWithout --read-data, every object's structure is checked and a random sample of packs is read\n(at least 1/16 of the chunk data, and at least 256 MiB: a small repository is read whole).\nA version (REF) is always read whole. Damaged copies found are recorded, so no push reuses them."
    )]
    Verify {
        /// Only this version (a ref: NS/NAME@b3:DIGEST, NS/NAME:TAG or NS/NAME) [default: the whole repository]
        #[arg(value_name = "REF", add = ArgValueCompleter::new(complete::refs))]
        reference: Option<String>,
        /// Read every pack and check every chunk's hash.
        #[arg(long)]
        read_data: bool,
        /// Read some packs: N/T (run 1/T … T/T to cover everything) or P% (a random share).
        #[arg(long, value_name = "N/T|P%")]
        read_data_subset: Option<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ProfileCommand {
    /// Store the read order this node's latest mount of REF recorded, beside the version.
    #[command(
        after_help = "Example:\n  sealvol volume mount weights/qwen3-8b:prod /models/qwen\n  (start the model server once, so it loads the weights)\n  sealvol volume profile save weights/qwen3-8b:prod\n\nEvery later mount of that version, on any node, reads ahead in that order first.\nThe version stays sealed: a profile is advisory and never changes its digest."
    )]
    Save {
        #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
        reference: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum SecretCommand {
    /// Store a secret; the value is read from stdin, never from the command line.
    #[command(
        after_help = "Examples:\n  printf %s \"$HF_TOKEN\" | sealvol secret set hf-token\n  sealvol secret set aws-key < key.txt\n  sealvol secret set hf-token            (in a terminal: asks, without echo)"
    )]
    Set {
        /// 1-63 characters of a-z 0-9 . _ -
        name: String,
        /// With --remote: the namespace whose jobs use it (default: the key's one namespace).
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// Caught only to refuse it without printing it back.
        #[arg(hide = true)]
        value_on_command_line: Option<String>,
    },

    /// List secret names, sizes and when they were set (never values).
    #[command(after_help = "Example:\n  sealvol secret ls --json")]
    Ls {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Remove a secret.
    #[command(after_help = "Example:\n  sealvol secret rm hf-token")]
    Rm {
        /// The secret's name, from `sealvol secret ls`.
        name: String,
        /// With --remote: the namespace it is stored in (default: the key's one namespace).
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The server's own chunk cache (default: the node cache's directory + `-serve`). A
    /// repository in a bucket always has one; a local one only when --cache or
    /// --cache-size is given (its packs are already on this machine's disks).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Bound on the cache (e.g. 200G); default: the node cache's size.
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<String>,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7420")]
    pub listen: String,
    /// The server's certificate chain, PEM: serve HTTPS (rustls). With --tls-key.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Allow a non-loopback address without TLS (a network you trust).
    #[arg(long)]
    pub insecure_http: bool,
    /// Also serve /metrics without a key, on this address, for a Prometheus that holds none (a port alone: 127.0.0.1:PORT)
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Run no sync jobs for the holders of keys (a cache tier only).
    #[arg(long)]
    pub no_jobs: bool,
    /// Connections open at once, idle ones included; when all are open, the oldest idle one is closed to make room [default: 4096, within the open-files limit].
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    /// Requests one key may have under way at once; past it, 429 [default: 256].
    #[arg(long, value_name = "N")]
    pub requests_per_key: Option<usize>,
    /// Set a namespace's quota in the repository's settings as the server starts, NS=SIZE or NS=none (repeatable; the same as `sealvol settings --quota`, kept for every server and writer of the repository).
    #[arg(long = "quota", value_name = "NS=SIZE", value_parser = quota_arg)]
    pub quotas: Vec<(String, Option<u64>)>,
    /// Sync jobs running at once, every namespace together [default: 4; config.toml [jobs] running]. Namespaces take turns for them.
    #[arg(long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Jobs of one namespace running at once [default: 2; [jobs] per_namespace].
    #[arg(long, value_name = "N")]
    pub jobs_per_namespace: Option<usize>,
    /// Jobs one key's holder started running at once [default: 2; [jobs] per_key].
    #[arg(long, value_name = "N")]
    pub jobs_per_key: Option<usize>,
    /// Jobs one namespace may have queued; past it a submission gets 429 [default: 64; [jobs] queue_per_namespace].
    #[arg(long, value_name = "N")]
    pub queue_per_namespace: Option<usize>,
    /// Jobs one key may have queued [default: 32; [jobs] queue_per_key].
    #[arg(long, value_name = "N")]
    pub queue_per_key: Option<usize>,
    /// A registry (HOST[:PORT]) the keys' jobs may read oci:// images from (repeatable); none by default, since a key could otherwise aim the server at any host. Plain HTTP only where [endpoints] oci_plain_http says.
    #[arg(long = "jobs-oci-registry", value_name = "HOST[:PORT]", value_parser = registry_host)]
    pub jobs_oci_registries: Vec<String>,
    /// Let jobs that name no secret use the server's own credentials (its environment, profile, web identity). Off: such jobs reach public sources only, so no key reads what the server's identity can.
    #[arg(long)]
    pub jobs_use_server_credentials: bool,
    /// Run a garbage collection this often (e.g. 6h), the first one that long after the start: logged, and in /metrics as sealvol_serve_gc_*. Off by default.
    #[arg(long, value_name = "DURATION", value_parser = gc_interval)]
    pub gc_every: Option<std::time::Duration>,
    /// A repository the keys' mirror jobs may copy versions to, by name (repeatable): NAME=REPO, a folder or s3://BUCKET/PREFIX. A job names it (`--remote URL volume mirror REF --to NAME`), never an address.
    #[arg(long = "mirror-to", value_name = "NAME=REPO")]
    pub mirror_to: Vec<String>,
    /// A server of this one's ring, as http://HOST:PORT (repeatable; list every server, this one too, as the nodes do): a run another server owns is asked of it before the origin, so a cold chunk costs one origin read across the ring.
    #[arg(long = "peer", value_name = "URL")]
    pub peers: Vec<String>,
    /// The ring's servers in a file, one http://HOST:PORT per line, looked at again each second (the nodes' peers file will do).
    #[arg(long, value_name = "FILE", conflicts_with = "peers")]
    pub peers_file: Option<std::path::PathBuf>,
    /// A namespace never told that a chunk it pushes is held outside it (repeatable): its pushes upload every such chunk, and the server still keeps one copy. Other namespaces learn that some namespace holds a chunk with exactly those bytes, and prove they hold them.
    #[arg(long = "private-dedup", value_name = "NS", value_parser = namespace_name)]
    pub private_dedup: Vec<String>,
    /// Be a pull-through mirror of this Hugging Face Hub (e.g. https://huggingface.co): a request under /hf/ for a repo the server does not hold starts a job of the server's own that seals that revision, and is answered while it runs; later ones from the sealed version. Off by default.
    #[arg(long, value_name = "URL")]
    pub hf_upstream: Option<String>,
    /// The namespace mirrored repos are sealed in, as NS/org--name tagged hf-COMMIT [default: hf]. Keys that see it may read (and so start) mirrored repos.
    #[arg(long, value_name = "NS", value_parser = namespace_name, requires = "hf_upstream")]
    pub hf_namespace: Option<String>,
    /// How long the commit a branch or tag named upstream is believed before it is asked again [default: 10m].
    #[arg(long, value_name = "DURATION", value_parser = refresh_interval, requires = "hf_upstream")]
    pub hf_refresh: Option<std::time::Duration>,
    /// The stored secret (of the mirror's namespace: `sealvol secret set NAME --namespace NS`) holding the token the mirror reads the upstream with.
    #[arg(long, value_name = "NAME", requires = "hf_upstream")]
    pub hf_secret: Option<String>,
}

/// `--quota NS=SIZE`: a namespace and its quota in bytes, `None` for `NS=none`.
/// A registry's repository name (lowercase path components), never read otherwise.
pub fn registry_repo(s: &str) -> Result<String, String> {
    match sealvol_oci::destination::repository_name_ok(s) {
        true => Ok(s.to_string()),
        false => Err(format!(
            "{s:.100}: not a repository name: lowercase path components of a-z 0-9 . _ -"
        )),
    }
}

/// An upload piece's size: at least 1 MiB (registries refuse smaller pieces but the last).
pub fn piece_size(s: &str) -> Result<u64, String> {
    let bytes = sealvol_setup::settings::parse_size(s).map_err(|e| e.message().to_string())?;
    if bytes < 1 << 20 {
        return Err(format!("{s}: a piece is at least 1M"));
    }
    Ok(bytes)
}

pub fn quota_arg(s: &str) -> Result<(String, Option<u64>), String> {
    let (ns, size) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: write NS=SIZE, like team-a=500G, or NS=none"))?;
    let ns = namespace_name(ns)?;
    if size == "none" {
        return Ok((ns, None));
    }
    let bytes = sealvol_setup::settings::parse_size(size).map_err(|e| e.message().to_string())?;
    if bytes == 0 {
        return Err(format!(
            "{s}: a quota of 0 takes nothing; write {ns}=none to remove it"
        ));
    }
    Ok((ns, Some(bytes)))
}

/// `--private-dedup`: a namespace's name.
/// `--jobs-oci-registry`: a registry's HOST[:PORT], as an `oci://` address names it.
fn registry_host(s: &str) -> Result<String, String> {
    match sealvol_source::SourceUrl::parse(&format!("oci://{s}/r:t")) {
        Ok(sealvol_source::SourceUrl::Oci { host, .. }) if host == s => Ok(host),
        _ => Err(format!("{s:.100} is not a registry's HOST[:PORT]")),
    }
}

fn namespace_name(s: &str) -> Result<String, String> {
    sealvol_core::refs::Name::parse("namespace", s)
        .map(|n| n.to_string())
        .map_err(|e| e.message().to_string())
}

/// `--gc-every`: a duration of at least a second.
/// `--hf-refresh`: any duration (0s asks upstream for each request's branch).
fn refresh_interval(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write 10m, 1h, 30s"))
}

fn gc_interval(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write 6h, 30m, 1d"))?;
    if d < std::time::Duration::from_secs(1) {
        return Err(format!(
            "{s}: at least 1s (a collection reads every index; 6h is usual)"
        ));
    }
    Ok(d)
}

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Make a key for callers of `sealvol serve`; it is printed once, on stdout, and only its hash is kept.
    #[command(
        after_help = "Examples:\n  sealvol key create training-ci --namespace weights\n  sealvol key create dashboards --read-only\n\nThe caller sets SEALVOL_API_KEY to it and runs `sealvol --remote http://HOST:7420 …`.\nRevocation takes effect at the server's next request, without a restart."
    )]
    Create {
        /// 1-63 characters of a-z 0-9 . _ -
        name: String,
        /// Reads only: no push, tag, delete or restore.
        #[arg(long)]
        read_only: bool,
        /// Only this namespace (repeatable) [default: every namespace]
        #[arg(long = "namespace", value_name = "NS")]
        namespaces: Vec<String>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// List keys: name, scope, created, revoked (never the keys).
    Ls {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Revoke a key: refused from the server's next request on (within 5 s on every server of a shared list).
    Revoke {
        /// The key's name, from `sealvol key ls`.
        name: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Move this server's key list into the repository, for every server of it.
    #[command(
        long_about = "Move this server's key list (<state>/serve/keys.json) into the repository (access/keys.json).\n\nFrom then on every `sealvol serve` of the repository accepts the same keys: each reads the list every 5 s, so a key made or revoked with `sealvol key` reaches all of them within 5 s (a server that cannot read the repository for 2 minutes refuses every key). The local list is renamed keys.json.shared and no longer read; the admin key stays valid. Refused when the repository already holds a list."
    )]
    Share {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Make a new ring key: the servers of the repository prove themselves with it from now on.
    #[command(
        name = "rotate-ring",
        long_about = "Make a new key of the ring (access/ring.json in the repository): every `sealvol serve` of the repository signs with it within 5 s, and the key before is kept so that what it signed still checks; older keys go. Nodes that read the repository find the new public key there; a node given ring_key in config.toml needs the new access/ring-public.json copied to it."
    )]
    RotateRing {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum WatchLayout {
    Steps,
    Flat,
}

#[derive(Subcommand, Debug)]
pub enum WatchCommand {
    /// List watches: their folder, volume, state and last sealed version.
    #[command(after_help = "Example:\n  sealvol watch ls --json")]
    Ls {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Show one watch: what it is doing, what it sealed, and its recent pushes.
    #[command(after_help = "Example:\n  sealvol watch show 3")]
    Show {
        /// The watch's number, from `sealvol watch ls`.
        id: u64,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Stop a watch; the versions it sealed stay.
    #[command(after_help = "Example:\n  sealvol watch stop 3")]
    Stop {
        /// The watch's number, from `sealvol watch ls`.
        id: u64,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Print a watch's log: each push, each abandoned one and why.
    #[command(after_help = "Example:\n  sealvol watch logs 3")]
    Logs {
        /// The watch's number, from `sealvol watch ls`.
        id: u64,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum JobsCommand {
    /// List sync jobs, newest first.
    #[command(after_help = "Example:\n  sealvol jobs ls --json")]
    Ls {
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Show one job: its source, state, progress and, if it failed, why.
    #[command(
        after_help = "Examples:\n  sealvol jobs show 7\n  sealvol --remote https://sealvol.internal:7420 jobs show 7 --follow"
    )]
    Show {
        /// The job's number, from `sealvol jobs ls`.
        id: u64,
        /// Follow it to its end, as `volume sync --wait` does (ctrl-c stops following, not the job).
        #[arg(long)]
        follow: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Cancel a queued or running job.
    #[command(after_help = "Example:\n  sealvol jobs cancel 7")]
    Cancel {
        /// The job's number, from `sealvol jobs ls`.
        id: u64,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Run a failed or cancelled job again; what it already stored is not fetched again.
    #[command(after_help = "Example:\n  sealvol jobs retry 7")]
    Retry {
        /// The job's number, from `sealvol jobs ls`.
        id: u64,
        /// Hand it to the agent and return at once.
        #[arg(long)]
        detach: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Print what happened to a job, line by line.
    #[command(after_help = "Example:\n  sealvol jobs logs 7")]
    Logs {
        /// The job's number, from `sealvol jobs ls`.
        id: u64,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum DeployCommand {
    /// Check every ref of deployment files against the repository (fit for CI).
    #[command(
        after_help = "Examples:\n  sealvol deploy check deploy/prod/config.yaml\n  sealvol deploy check deploy/ --strict --json\n\nErrors: a ref that does not resolve (unknown, in the trash, an ambiguous prefix), a\nmalformed file. Warnings: unpinned refs (a tag or a bare volume), abbreviated digests,\ntwo mounts on one path. Exits 1 on errors, and on warnings with --strict."
    )]
    Check {
        /// Deployment files (YAML with a `sealvol:` block), or folders of them.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Warnings fail the check too.
        #[arg(long)]
        strict: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Rewrite tag refs (and abbreviated digests) to the digests they resolve to now.
    #[command(
        after_help = "Examples:\n  sealvol deploy pin config.yaml --all\n  sealvol deploy pin config.yaml adapters/support-lora --dry-run\n\nOnly the refs change: comments, quoting, key order and line endings stay as they were."
    )]
    Pin {
        file: PathBuf,
        /// Pin only the refs of this volume (NS/NAME).
        #[arg(conflicts_with = "all")]
        volume: Option<String>,
        /// Pin every ref that is not pinned.
        #[arg(long)]
        all: bool,
        /// Show the change; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Show which version each deployment serves, volume by volume, marking disagreements.
    #[command(
        after_help = "Examples:\n  sealvol deploy drift deploy/staging.yaml deploy/prod.yaml\n  sealvol deploy drift deploy/ --exit-code\n\nTags are resolved as they are now; * marks a ref that is not pinned."
    )]
    Drift {
        /// Deployment files, or folders of them.
        #[arg(required = true, value_name = "FILE")]
        paths: Vec<PathBuf>,
        /// Exit 1 when deployments disagree.
        #[arg(long)]
        exit_code: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Point one volume's ref at another version, changing no other byte of the file.
    #[command(
        after_help = "Examples:\n  sealvol deploy rollback deploy/prod.yaml weights/qwen3-8b --previous\n  sealvol deploy rollback deploy/prod.yaml weights/qwen3-8b --to @1a2b3c4d --yes\n\nShows the line that changes and asks first. The file is replaced by a rename, and only\nif it still holds what the diff was made from."
    )]
    Rollback {
        file: PathBuf,
        /// The volume to roll back (NS/NAME).
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        /// The version to go to: a ref, or @DIGEST or TAG of this volume.
        #[arg(long, value_name = "REF", conflicts_with = "previous")]
        to: Option<String>,
        /// The version of the volume sealed just before the one the file serves now (by seal time, not the file's own history of pins: for that, --to with the digest from `git log -p FILE`).
        #[arg(long)]
        previous: bool,
        /// The mount, when the file mounts the volume more than once.
        #[arg(long, value_name = "PATH")]
        path: Option<String>,
        /// Write without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Mount every volume of a deployment file at its path (tags resolved once, and printed).
    #[command(
        after_help = "Examples:\n  sealvol deploy mount config.yaml\n  sealvol deploy mount config.yaml --root /tmp/sandbox\n\nAll or nothing: when one mount fails, the ones made before it are unmounted."
    )]
    Mount {
        file: PathBuf,
        /// Mount below this folder instead of at the absolute paths (path /app/w → ROOT/app/w).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Print the pod volumes and volumeMounts that mount a deployment's volumes in Kubernetes (CSI), pinned.
    #[command(
        after_help = "Examples:\n  sealvol deploy k8s config.yaml\n  sealvol deploy k8s config.yaml --json\n\nEach volume is an inline CSI volume of the driver csi.sealvol.dev (`sealvol csi`), read-only, with the ref\nthe file names resolved now: the config file stays the one source of truth, the pod gets fixed bytes.\nWhat `deploy check` reports as an error (or nested mounts) stops it, unless --no-check."
    )]
    K8s {
        file: PathBuf,
        /// Render even when `deploy check` finds a problem (a version the trust policy refuses, nested mounts); the output says so.
        #[arg(long)]
        no_check: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Unmount what `deploy mount` mounted for a deployment file.
    #[command(after_help = "Example:\n  sealvol deploy unmount config.yaml --root /tmp/sandbox")]
    Unmount {
        file: PathBuf,
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Detach now even if busy; unmount once the last file is closed.
        #[arg(long)]
        lazy: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// Publish a folder (compiled kernels, captured graphs) as the cache for a key.
    #[command(
        after_help = "Example:\n  sealvol cache save ~/.cache/torch/inductor caches/qwen3-8b --key \"H100-80GB/torch-2.5.1\"\n\nThe key becomes a tag (cache-<slug>-<hash>); saving unchanged contents writes nothing."
    )]
    Save {
        dir: PathBuf,
        /// Volume: NAMESPACE/NAME.
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        /// What the cache depends on, in any text (GPU model, framework version, …).
        #[arg(long)]
        key: String,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },

    /// Put the cache for a key into a folder (or mount it there); no cache yet is not an error.
    #[command(
        after_help = "Examples:\n  sealvol cache restore caches/qwen3-8b ~/.cache/torch/inductor --key \"H100-80GB/torch-2.5.1\"\n  sealvol cache restore caches/qwen3-8b /cache --key \"$KEY\" --mount\n\nWhen no cache was saved for the key, it says so in one line and exits 0: a first replica\nstill starts, and saves one."
    )]
    Restore {
        #[arg(add = ArgValueCompleter::new(complete::volumes))]
        volume: String,
        dir: PathBuf,
        #[arg(long)]
        key: String,
        /// Mount it read-only at DIR instead of copying it there.
        #[arg(long)]
        mount: bool,
        /// Make DIR exactly the cache: what it holds that the cache does not is removed.
        #[arg(long, conflicts_with = "mount")]
        force: bool,
        #[arg(long, help = JSON_HELP)]
        json: bool,
    },
}

/// `volume watch`: what to watch, how to tell it is complete, and what to keep.
#[derive(Args, Debug)]
pub struct WatchArgs {
    /// The folder the trainer writes into (it may not exist yet).
    pub dir: PathBuf,
    /// Volume: NAMESPACE/NAME.
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    pub volume: String,
    /// Point these tags at each new checkpoint: `latest` moves, `step-{step}` names one (repeatable).
    #[arg(long = "tag", short = 't', value_name = "TAG")]
    pub tags: Vec<String>,
    /// steps: each subfolder named by a step (checkpoint-500/) is one checkpoint.
    /// flat: DIR itself is the checkpoint, pushed whenever it settles after a change.
    #[arg(long, value_enum, default_value = "steps")]
    pub layout: WatchLayout,
    /// How long a checkpoint must stay unchanged before it is pushed (at least 500ms).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub settle: std::time::Duration,
    /// Keep the N newest checkpoints; move older ones no other tag holds to the trash.
    #[arg(long, value_name = "N")]
    pub keep_last: Option<u32>,
    /// Keep every checkpoint whose step is a multiple of K (with --layout steps).
    #[arg(long, value_name = "K")]
    pub keep_every: Option<u64>,
    /// Poll for changes instead of waiting for inotify events (automatic on network file systems).
    #[arg(long)]
    pub poll: bool,
    /// Hand the watch to the agent (started in the background if none runs), print its id, return.
    #[arg(long)]
    pub detach: bool,
    /// One JSON document per push (or, with --detach, the watch).
    #[arg(long)]
    pub json: bool,
}
