//! Demo view-models shared by the snapshot tests and the screenshot generator, so the
//! pictures in the README are exactly what the tests check.

use sealvol_themes::Role;

use crate::chrome::{Overlay, Status, StatusKind};
use crate::deployments::{
    CellState, DeployCell, DeployRow, DeploymentsView, RollbackRow, RollbackView,
};
use crate::jobs::{FileLine, JobDetail, JobRow, JobsView};
use crate::mounts::{MountRow, MountsView, RingRow};
use crate::tags::{MoveRow, TagRow, TagsFocus, TagsView};
use crate::trash::{TrashRow, TrashView};
use crate::versions::{Signed, VersionRow, VersionsView};
use crate::volumes::{VolumeRow, VolumesView};
use crate::watch::{Now, PushLine, WatchDetail, WatchRow, WatchesView};
use crate::{Body, FrameView};

fn digest(seed: u8) -> String {
    let hex: String = (0u8..32)
        .map(|i| {
            format!(
                "{:02x}",
                seed.wrapping_mul(37).wrapping_add(i.wrapping_mul(11))
            )
        })
        .collect();
    format!("b3:{hex}")
}

fn status(text: &str) -> Status {
    Status {
        kind: StatusKind::Info,
        text: text.into(),
        hints: vec![
            ("enter".into(), "open".into()),
            ("/".into(), "filter".into()),
            ("?".into(), "help".into()),
        ],
    }
}

pub fn volumes() -> FrameView {
    let row = |ns: &str, name: &str, versions, tags: &[&str], bytes, updated: &str| VolumeRow {
        namespace: ns.into(),
        name: name.into(),
        versions,
        tags: tags.iter().map(|t| t.to_string()).collect(),
        latest_bytes: bytes,
        updated: updated.into(),
        damaged: 0,
        mounted: if name == "qwen3-8b" {
            vec![digest(2)]
        } else {
            vec![]
        },
    };
    FrameView {
        crumbs: vec!["volumes".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Volumes(VolumesView {
            empty: String::new(),
            rows: vec![
                row(
                    "adapters",
                    "support-lora",
                    2,
                    &["prod"],
                    1 << 20,
                    "2026-11-29T21:04:00.000Z",
                ),
                row(
                    "tokenizers",
                    "bpe-32k",
                    1,
                    &["prod"],
                    521_830,
                    "2026-11-20T09:12:00.000Z",
                ),
                row(
                    "weights",
                    "qwen3-8b",
                    14,
                    &["canary", "prod"],
                    16_384 << 20,
                    "2026-11-29T23:46:00.000Z",
                ),
                row(
                    "weights",
                    "tiny-llama",
                    3,
                    &["canary", "prod"],
                    6 << 20,
                    "2026-11-28T10:30:00.000Z",
                ),
            ],
            selected: 2,
            quotas: Vec::new(),
        }),
        status: status("4 volumes in 3 namespaces"),
        overlay: None,
    }
}

pub fn version_rows() -> Vec<VersionRow> {
    vec![
        VersionRow {
            digest: digest(3),
            created: "2026-11-29T23:46:00.000Z".into(),
            bytes: 16_384 << 20,
            files: 9,
            new_bytes: 131_072 + 700_000,
            source: "hf://Qwen/Qwen3-8B@a1b2c3d".into(),
            tags: vec!["canary".into()],
            labels: String::new(),
            mounts: 0,
            signed: Signed::Refused,
            damaged: None,
        },
        VersionRow {
            digest: digest(2),
            created: "2026-11-28T18:02:00.000Z".into(),
            bytes: 16_384 << 20,
            files: 9,
            new_bytes: 1_712 << 20,
            source: "file:///data/ckpt/step-2000".into(),
            tags: vec!["prod".into()],
            labels: "git=4f1c2ab, step=2000".into(),
            mounts: 2,
            signed: Signed::Trusted("release.pub".into()),
            damaged: None,
        },
        VersionRow {
            digest: digest(1),
            created: "2026-11-27T08:15:00.000Z".into(),
            bytes: 16_384 << 20,
            files: 9,
            new_bytes: 16_384 << 20,
            source: "file:///data/ckpt/step-1000".into(),
            tags: vec![],
            labels: "git=91be07d, step=1000".into(),
            mounts: 0,
            signed: Signed::Trusted("release.pub".into()),
            damaged: None,
        },
    ]
}

pub fn versions() -> FrameView {
    FrameView {
        crumbs: vec![
            "volumes".into(),
            "weights/qwen3-8b".into(),
            "versions".into(),
        ],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Versions(VersionsView {
            volume: "weights/qwen3-8b".into(),
            rows: version_rows(),
            selected: 0,
            marked: Some(1),
        }),
        status: status("marked b3:4a4f5a6570 — mark another version to diff"),
        overlay: None,
    }
}

pub fn tags_view() -> TagsView {
    TagsView {
        volume: "weights/qwen3-8b".into(),
        tags: vec![
            TagRow {
                expires_in: Some("6d 23h".into()),
                tag: "canary".into(),
                digest: digest(3),
                damaged: None,
                history: vec![MoveRow {
                    from: None,
                    to: digest(3),
                    at: "2026-11-29T23:47:00.000Z".into(),
                    by: "ana@node7".into(),
                }],
            },
            TagRow {
                expires_in: None,
                tag: "prod".into(),
                digest: digest(2),
                damaged: None,
                history: vec![
                    MoveRow {
                        from: None,
                        to: digest(1),
                        at: "2026-11-27T08:20:00.000Z".into(),
                        by: "ana@node7".into(),
                    },
                    MoveRow {
                        from: Some(digest(1)),
                        to: digest(2),
                        at: "2026-11-28T18:10:00.000Z".into(),
                        by: "bo@ci-runner".into(),
                    },
                ],
            },
        ],
        selected: 1,
        focus: TagsFocus::History,
        selected_move: 0,
    }
}

pub fn tags() -> FrameView {
    FrameView {
        crumbs: vec!["volumes".into(), "weights/qwen3-8b".into(), "tags".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Tags(tags_view()),
        status: status("u: point prod back to where this move came from"),
        overlay: None,
    }
}

pub fn confirm() -> FrameView {
    let mut f = tags();
    f.overlay = Some(Overlay::Confirm {
        title: "move tag prod".into(),
        lines: vec![
            ("weights/qwen3-8b:prod".into(), Role::Tag),
            (format!("from {}", &digest(2)[..19]), Role::Removed),
            (format!("to   {}", &digest(1)[..19]), Role::Added),
            (
                "every replica that resolves :prod gets the new bytes".into(),
                Role::Dim,
            ),
        ],
        yes: "move prod".into(),
        full: false,
    });
    f
}

pub fn help() -> FrameView {
    let mut f = volumes();
    f.overlay = Some(Overlay::Help {
        offset: 0,
        bindings: vec![
            ("".into(), "on this screen".into()),
            ("enter".into(), "open".into()),
            ("t".into(), "tags of this volume".into()),
            ("".into(), "everywhere".into()),
            ("j/↓ k/↑".into(), "move".into()),
            ("enter".into(), "open".into()),
            ("esc".into(), "back".into()),
            ("/".into(), "filter".into()),
            (":".into(), "command".into()),
            ("c".into(), "copy pinned ref".into()),
            ("q".into(), "quit".into()),
        ],
    });
    f
}

/// `L`: the status line's messages in full, an error cut on the line read whole.
pub fn messages() -> FrameView {
    let mut f = volumes();
    f.overlay = Some(Overlay::Messages {
        offset: 0,
        messages: vec![
            (
                "s3://ckpts/run-7/step-1/: no AWS credentials found (give credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_WEB_IDENTITY_TOKEN_FILE), or store KEY_ID:SECRET with `sealvol secret set NAME` and pass --secret NAME)".into(),
                true,
            ),
            ("job 12: syncing s3://ckpts/run-7/step-1/".into(), false),
            ("3 volume(s) in 3 namespace(s)".into(), false),
        ],
    });
    f
}

pub fn diff() -> FrameView {
    use crate::diff::{Change, DiffFile, DiffTensor, DiffView};
    let size: u64 = 536_870_912;
    // A fine-tune of the last layers: new chunks at the end of the shard.
    let chunk = 131_072u64;
    let spans: Vec<(u64, u32, bool)> = (0..size / chunk)
        .map(|i| {
            (
                i * chunk,
                chunk as u32,
                i * chunk >= size * 9 / 10 || i == 0,
            )
        })
        .collect();
    let tensor = |name: &str, change| DiffTensor {
        name: name.into(),
        change,
        kind: "BF16 [1024, 1024]".into(),
        bytes: 2 << 20,
        changed_bytes: if change == Change::Modified {
            1 << 20
        } else {
            0
        },
    };
    FrameView {
        crumbs: vec!["volumes".into(), "weights/qwen3-8b".into(), "diff".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Diff(DiffView {
            from: "vol:weights/qwen3-8b@b3:4a55606b7681".into(),
            to: "vol:weights/qwen3-8b@b3:6f7a85909ba6".into(),
            summary: "1 added · 1 removed · 2 modified · 3 unchanged · 52.1 MiB in 418 chunks new"
                .into(),
            files: vec![
                DiffFile {
                    path: "config.json".into(),
                    change: Change::Modified,
                    size: 688,
                    changed_bytes: 688,
                    chunks: 1,
                    changed_chunks: 1,
                    spans: vec![(0, 688, true)],
                },
                DiffFile {
                    path: "model-00004-of-00004.safetensors".into(),
                    change: Change::Modified,
                    size,
                    changed_bytes: size / 10,
                    chunks: size / chunk,
                    changed_chunks: 410,
                    spans,
                },
                DiffFile {
                    path: "model-00001-of-00004.safetensors".into(),
                    change: Change::Unchanged,
                    size,
                    changed_bytes: 0,
                    chunks: 4096,
                    changed_chunks: 0,
                    spans: vec![],
                },
                DiffFile {
                    path: "notes.md".into(),
                    change: Change::Added,
                    size: 1200,
                    changed_bytes: 1200,
                    chunks: 1,
                    changed_chunks: 1,
                    spans: vec![],
                },
                DiffFile {
                    path: "tokenizer_config.json".into(),
                    change: Change::Removed,
                    size: 4100,
                    changed_bytes: 0,
                    chunks: 0,
                    changed_chunks: 0,
                    spans: vec![],
                },
            ],
            selected: 1,
            tensors: vec![
                tensor("model.layers.229.self_attn.q_proj.weight", Change::Modified),
                tensor("model.layers.229.self_attn.k_proj.weight", Change::Modified),
                tensor("model.lora_extra.weight", Change::Added),
                tensor("model.layers.230.old_adapter.weight", Change::Removed),
                tensor("model.layers.228.mlp.down_proj.weight", Change::Unchanged),
            ],
            tensor_summary: "1 added · 1 removed · 2 modified · 1 unchanged".into(),
            note: None,
            focus: Default::default(),
            tensor_selected: 0,
        }),
        status: status("j/k: file · esc: back"),
        overlay: None,
    }
}

/// The diff with the keys in the tensors pane, the second changed tensor selected.
pub fn diff_tensors() -> FrameView {
    let mut f = diff();
    if let Body::Diff(vm) = &mut f.body {
        vm.focus = crate::diff::DiffFocus::Tensors;
        vm.tensor_selected = 1;
    }
    f.status = status("2 of 5 tensors changed");
    f
}

pub fn files() -> FrameView {
    use crate::files::{Entry, FilesView, Kind, tree};
    let shard: u64 = 536_870_912;
    let f = |path: &str, size: u64, chunks: u64, shared: u64| Entry {
        path: path.into(),
        kind: Kind::File { exec: false },
        size,
        chunks,
        shared_bytes: shared,
        target: None,
    };
    let mut entries = vec![
        f("config.json", 688, 1, 0),
        f("generation_config.json", 180, 1, 180),
        f("model-00001-of-00004.safetensors", shard, 4096, shard),
        f("model-00002-of-00004.safetensors", shard, 4096, shard),
        f("model-00003-of-00004.safetensors", shard, 4096, shard),
        f(
            "model-00004-of-00004.safetensors",
            shard,
            4096,
            shard - shard / 10,
        ),
        f("tokenizer/tokenizer.json", 7_031_673, 54, 7_031_673),
        f("tokenizer/vocab.txt", 231_508, 2, 231_508),
    ];
    entries.push(Entry {
        path: "latest".into(),
        kind: Kind::Symlink,
        size: 0,
        chunks: 0,
        shared_bytes: 0,
        target: Some("model-00004-of-00004.safetensors".into()),
    });
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    FrameView {
        crumbs: vec![
            "volumes".into(),
            "weights/qwen3-8b".into(),
            "b3:6f7a85909ba6".into(),
        ],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Files(FilesView {
            version: "vol:weights/qwen3-8b@b3:6f7a85909ba6".into(),
            previous: Some("b3:4a55606b7681".into()),
            rows: tree(&entries),
            selected: 5,
        }),
        status: status("9 entries · compared with b3:4a55606b7681"),
        overlay: None,
    }
}

/// The page behind the console in screenshots: dark themes on near-black, light on white.
pub fn page_background(theme: &str) -> (u8, u8, u8) {
    match theme {
        "light" => (255, 255, 255),
        "high-contrast" => (0, 0, 0),
        _ => (22, 25, 31),
    }
}

pub fn mounts() -> FrameView {
    let row =
        |dir: &str, n: u8, requested: &str, served: u64, hits: (u64, u64, u64, u64)| MountRow {
            dir: dir.into(),
            volume: "weights/qwen3-8b".into(),
            digest: digest(n),
            requested: requested.into(),
            pid: 4100 + n as u32,
            started: "2026-11-29T22:10:00.000Z".into(),
            bytes_served: served,
            memory_hits: hits.0,
            cache_hits: hits.1,
            peer_chunks: hits.2,
            peer_faults: 0,
            peer_refused: 0,
            peers: usize::from(hits.2 > 0),
            origin_chunks: hits.3,
            memory_peak: 410 << 20,
            memory_bound: 512 << 20,
            process_peak: 470 << 20,
            prefetched_bytes: served,
            prefetch_wasted_bytes: served / 50,
            errors: 0,
            ring: Vec::new(),
        };
    let server = |n: u8, up: bool, requests: u64, bytes: u64, errors: u64| RingRow {
        url: format!("http://sealvol-cache-{n}.sealvol-cache:7420"),
        up,
        share_ppm: 333_333,
        requests,
        bytes,
        errors,
    };
    let mut ringed = row(
        "/models/qwen-b",
        2,
        "weights/qwen3-8b@b3:0202",
        9_100 << 20,
        (50_000, 2_700, 20_000, 0),
    );
    ringed.peers = 3;
    ringed.ring = vec![
        server(0, true, 812, 3_100 << 20, 0),
        server(1, true, 790, 3_020 << 20, 0),
        server(2, false, 301, 1_160 << 20, 2),
    ];
    FrameView {
        crumbs: vec!["volumes".into(), "mounts".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Mounts(MountsView {
            empty: String::new(),
            rows: vec![
                row(
                    "/models/qwen",
                    2,
                    "weights/qwen3-8b:prod",
                    16_384 << 20,
                    (101_000, 24_000, 0, 6_000),
                ),
                ringed,
            ],
            selected: 1,
        }),
        status: status("2 mounts on this node"),
        overlay: None,
    }
}

fn job_rows() -> Vec<JobRow> {
    let row = |id: u64, state: &str, source: &str, volume: &str, done: u64, total: u64| JobRow {
        id,
        state: state.into(),
        source: source.into(),
        volume: volume.into(),
        bytes_done: done,
        bytes_total: total,
        updated: "2026-11-30T09:14:00.000Z".into(),
    };
    vec![
        row(
            4,
            "RUNNING",
            "s3://ckpts/run-7/step-4000/",
            "weights/run-7",
            9_800 << 20,
            16_384 << 20,
        ),
        row(
            3,
            "QUEUED",
            "hf://Qwen/Qwen3-8B@main",
            "weights/qwen3-8b",
            0,
            0,
        ),
        row(2, "FAILED", "r2://0a1b2c/lora/v3/", "adapters/lora", 0, 0),
        row(
            1,
            "READY",
            "s3://ckpts/run-7/step-3000/",
            "weights/run-7",
            16_384 << 20,
            16_384 << 20,
        ),
    ]
}

pub fn jobs() -> FrameView {
    let file = |path: &str, state: &str| FileLine {
        path: path.into(),
        size: 4_096 << 20,
        state: state.into(),
    };
    FrameView {
        crumbs: vec!["volumes".into(), "jobs".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Jobs(JobsView {
            empty: String::new(),
            rows: job_rows(),
            selected: 0,
            detail: Some(JobDetail {
                id: 4,
                state: "RUNNING".into(),
                source: "s3://ckpts/run-7/step-4000/".into(),
                volume: "weights/run-7".into(),
                tags: vec!["latest".into()],
                attempts: 2,
                bytes_done: 9_800 << 20,
                bytes_total: 16_384 << 20,
                files_done: 2,
                files_total: 4,
                chunks_new: 1_210,
                chunks_reused: 9_930,
                rate: 412 << 20,
                eta_secs: Some(16),
                rate_history: vec![
                    120, 260, 380, 410, 402, 395, 420, 415, 408, 390, 412, 430, 425, 410, 405, 412,
                ],
                files: vec![
                    file("model-00001-of-00004.safetensors", "kept"),
                    file("model-00002-of-00004.safetensors", "done"),
                    file("model-00003-of-00004.safetensors", "reading"),
                    file("model-00004-of-00004.safetensors", "waiting"),
                ],
                queued_ahead: 0,
                sealed: None,
                reason: None,
            }),
        }),
        status: status("4 job(s): 1 running, 1 queued"),
        overlay: None,
    }
}

pub fn job_failed() -> FrameView {
    FrameView {
        crumbs: vec!["volumes".into(), "jobs".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Jobs(JobsView {
            empty: String::new(),
            rows: job_rows(),
            selected: 2,
            detail: Some(JobDetail {
                id: 2,
                state: "FAILED".into(),
                source: "r2://0a1b2c/lora/v3/".into(),
                volume: "adapters/lora".into(),
                attempts: 1,
                reason: Some(
                    "r2://0a1b2c/lora/v3/: access denied (AccessDenied, HTTP 403) (give credentials in the agent's environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_WEB_IDENTITY_TOKEN_FILE), or store KEY_ID:SECRET with `sealvol secret set NAME` and pass --secret NAME)".into(),
                ),
                ..JobDetail::default()
            }),
        }),
        status: status("4 job(s): 1 running, 1 queued"),
        overlay: None,
    }
}

/// Every screen with its name, for tests and screenshots.
pub fn all() -> Vec<(&'static str, FrameView)> {
    vec![
        ("volumes", volumes()),
        ("versions", versions()),
        ("files", files()),
        ("mounts", mounts()),
        ("jobs", jobs()),
        ("job-failed", job_failed()),
        ("tags", tags()),
        ("confirm", confirm()),
        ("diff", diff()),
        ("diff-tensors", diff_tensors()),
        ("help", help()),
        ("messages", messages()),
        ("mounts-empty", mounts_empty()),
        ("jobs-empty", jobs_empty()),
        ("versions-damaged", versions_damaged()),
        ("volumes-damaged", volumes_damaged()),
        ("volumes-quotas", volumes_quotas()),
        ("trash", trash()),
        ("trash-empty", trash_empty()),
        ("confirm-delete", confirm_delete()),
        ("watch", watch()),
        ("watch-failed", watch_failed()),
        ("watch-empty", watch_empty()),
        ("deployments", deployments()),
        ("deployments-empty", deployments_empty()),
        ("rollback", rollback()),
        ("confirm-rollback", confirm_rollback()),
    ]
}

fn watch_rows() -> Vec<WatchRow> {
    let row =
        |id, state: &str, dir: &str, volume: &str, phase: &str, sealed, last: Option<&str>| {
            WatchRow {
                id,
                state: state.into(),
                dir: dir.into(),
                volume: volume.into(),
                phase: phase.into(),
                sealed,
                last: last.map(Into::into),
            }
        };
    vec![
        row(
            1,
            "ACTIVE",
            "/data/runs/run-7",
            "weights/run-7",
            "settling",
            6,
            Some("b3:3e4cd1d9b432efea"),
        ),
        row(
            2,
            "ACTIVE",
            "/data/adapters/support",
            "adapters/support",
            "failed",
            2,
            Some("b3:09a561d82a46f094"),
        ),
        row(
            3,
            "ACTIVE",
            "/data/runs/run-8",
            "weights/run-8",
            "waiting",
            0,
            None,
        ),
        row(
            4,
            "STOPPED",
            "/data/runs/run-6",
            "weights/run-6",
            "stopped",
            31,
            Some("b3:a0520204564fc82f"),
        ),
    ]
}

fn watch_pushes() -> Vec<PushLine> {
    let p = |at: &str,
             name: &str,
             outcome: &str,
             digest: Option<&str>,
             new: u64,
             latency: Option<f64>,
             note: Option<&str>| {
        PushLine {
            at: at.into(),
            name: name.into(),
            outcome: outcome.into(),
            digest: digest.map(Into::into),
            bytes_new: new,
            bytes_total: if digest.is_some() { 15_960 << 20 } else { 0 },
            latency_secs: latency,
            note: note.map(Into::into),
        }
    };
    vec![
        p(
            "2026-12-01T14:55:12.000Z",
            "checkpoint-3000",
            "sealed",
            Some("b3:3e4cd1d9b432efea"),
            1_638 << 20,
            Some(2.7),
            Some("1 to the trash"),
        ),
        p(
            "2026-12-01T14:31:40.000Z",
            "checkpoint-2500",
            "sealed",
            Some("b3:376e927109e4d408"),
            1_641 << 20,
            Some(2.9),
            Some("1 to the trash"),
        ),
        p(
            "2026-12-01T14:31:21.000Z",
            "checkpoint-2500",
            "abandoned",
            None,
            0,
            None,
            Some("changed while it was pushed"),
        ),
        p(
            "2026-12-01T14:08:02.000Z",
            "checkpoint-2000",
            "sealed",
            Some("b3:09a561d82a46f094"),
            1_640 << 20,
            Some(2.6),
            None,
        ),
        p(
            "2026-12-01T13:44:37.000Z",
            "checkpoint-1500",
            "sealed",
            Some("b3:a0520204564fc82f"),
            1_639 << 20,
            Some(3.1),
            None,
        ),
    ]
}

/// The Watch screen: a run's checkpoint settling, the last one sealed, the history.
pub fn watch() -> FrameView {
    let pushes = watch_pushes();
    FrameView {
        crumbs: vec!["volumes".into(), "watch".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Watch(WatchesView {
            empty: String::new(),
            rows: watch_rows(),
            selected: 0,
            detail: Some(Box::new(WatchDetail {
                id: 1,
                state: "ACTIVE".into(),
                dir: "/data/runs/run-7".into(),
                volume: "weights/run-7".into(),
                layout: "steps".into(),
                settle_secs: 10.0,
                tags: vec!["step-{step}".into(), "latest".into()],
                retention: Some("the last 3 · every step that is a multiple of 1000".into()),
                runs: "in the agent".into(),
                now: Now {
                    phase: "settling".into(),
                    name: Some("checkpoint-3500".into()),
                    why: Some("a file changed 3.6s ago".into()),
                    left_secs: 6.4,
                    ..Now::default()
                },
                notifier: Some("inotify".into()),
                pending: vec!["checkpoint-3500".into()],
                last: pushes.first().cloned(),
                pushes,
                reason: None,
            })),
        }),
        status: status("4 watch(es): 3 active, 1 stopped"),
        overlay: None,
    }
}

/// A watch whose last push failed: the reason in full, and when it tries again.
pub fn watch_failed() -> FrameView {
    let mut f = watch();
    if let Body::Watch(v) = &mut f.body {
        v.selected = 1;
        v.detail = Some(Box::new(WatchDetail {
            id: 2,
            state: "ACTIVE".into(),
            dir: "/data/adapters/support".into(),
            volume: "adapters/support".into(),
            layout: "flat".into(),
            settle_secs: 30.0,
            tags: vec!["latest".into()],
            runs: "for pid 4242 (foreground)".into(),
            now: Now {
                phase: "failed".into(),
                why: Some("cannot write /data/repo/packs/3e/3e4c….pack: No space left on device (os error 28) (free space in the repository, then it is tried again)".into()),
                retry_secs: 40.0,
                ..Now::default()
            },
            notifier: Some("polling every 5s (/data/adapters/support is on NFS, whose other clients' writes raise no events here)".into()),
            ..WatchDetail::default()
        }));
    }
    f
}

/// The Watch screen before any watch: headers, and how to start one.
pub fn watch_empty() -> FrameView {
    let mut f = watch();
    f.body = Body::Watch(WatchesView {
        rows: Vec::new(),
        selected: 0,
        detail: None,
        empty: "no watches: `sealvol volume watch DIR NS/NAME --detach` starts one".into(),
    });
    f.status = status("");
    f
}

/// The trash: versions deleted from two volumes, one past its window.
pub fn trash() -> FrameView {
    let row =
        |vol: &str, n: u8, at: &str, left: &str, gone: bool, bytes: u64, tags: &[&str]| TrashRow {
            volume: vol.into(),
            digest: digest(n),
            deleted_at: at.into(),
            deleted_by: "ana@node7".into(),
            left: left.into(),
            gone,
            bytes,
            tags: tags.iter().map(|t| t.to_string()).collect(),
        };
    FrameView {
        crumbs: vec!["volumes".into(), "trash".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Trash(TrashView {
            volume: None,
            rows: vec![
                row(
                    "weights/qwen3-8b",
                    5,
                    "2026-11-30T23:12:00.000Z",
                    "6d 22h",
                    false,
                    16_384 << 20,
                    &["canary"],
                ),
                row(
                    "adapters/support-lora",
                    6,
                    "2026-11-28T08:40:00.000Z",
                    "4d 8h",
                    false,
                    160 << 20,
                    &[],
                ),
                row(
                    "weights/qwen3-8b",
                    7,
                    "2026-11-22T10:02:00.000Z",
                    "expired",
                    true,
                    16_380 << 20,
                    &["prod"],
                ),
            ],
            selected: 0,
            empty: String::new(),
        }),
        status: status("3 version(s) in the trash · U restores the selected one"),
        overlay: None,
    }
}

/// The trash with nothing in it.
pub fn trash_empty() -> FrameView {
    let mut f = trash();
    f.body = Body::Trash(TrashView {
        volume: Some("weights/qwen3-8b".into()),
        rows: Vec::new(),
        selected: 0,
        empty: "the trash of weights/qwen3-8b is empty: d on the versions screen deletes a version"
            .into(),
    });
    f.crumbs = vec!["volumes".into(), "weights/qwen3-8b".into(), "trash".into()];
    f.status = status("nothing in the trash");
    f
}

/// Deleting a tagged version from the versions screen: the confirmation names the
/// digest and the tag it removes.
pub fn confirm_delete() -> FrameView {
    let mut f = versions();
    f.overlay = Some(Overlay::Confirm {
        title: "delete a version".into(),
        lines: vec![
            (
                format!("weights/qwen3-8b@{}", &digest(2)[..19]),
                Role::Pinned,
            ),
            (
                "goes to the trash: restorable until its window ends (7 days by default)".into(),
                Role::Text,
            ),
            (
                "removes tag prod, which points at it (its history keeps the move)".into(),
                Role::Danger,
            ),
        ],
        yes: "delete".into(),
        full: false,
    });
    f
}

/// The volumes screen when one volume has a damaged manifest and a damaged tag.
pub fn volumes_damaged() -> FrameView {
    let mut f = volumes();
    if let Body::Volumes(v) = &mut f.body {
        v.rows[3].damaged = 2;
    }
    f.status = status("2 damaged objects in weights/tiny-llama: `sealvol volume verify`");
    f
}

/// Namespaces with quotas: the fullest first on the bottom line, one nearly full.
pub fn volumes_quotas() -> FrameView {
    let mut f = volumes();
    if let Body::Volumes(v) = &mut f.body {
        let line = |ns: &str, used: u64, quota: u64| crate::volumes::QuotaLine {
            namespace: ns.into(),
            used,
            quota,
        };
        v.quotas = vec![
            line("adapters", 3 << 20, 1 << 30),
            line("weights", 475 << 30, 500 << 30),
        ];
    }
    f
}

/// A volume with a damaged manifest: the version is listed, marked, and says why.
pub fn versions_damaged() -> FrameView {
    let mut f = versions();
    let mut rows = version_rows();
    rows.push(VersionRow {
        digest: digest(4),
        tags: vec!["old".into()],
        damaged: Some(
            "manifest is damaged: EOF while parsing an object at line 1 column 412".into(),
        ),
        ..VersionRow::default()
    });
    f.body = Body::Versions(VersionsView {
        volume: "weights/qwen3-8b".into(),
        rows,
        selected: 3,
        marked: None,
    });
    f.status = status("1 damaged version: `sealvol volume verify` says what is wrong");
    f
}

/// The Mounts screen with nothing mounted: headers, and how to mount.
pub fn mounts_empty() -> FrameView {
    let mut f = mounts();
    f.body = Body::Mounts(MountsView {
        rows: Vec::new(),
        selected: 0,
        empty: "no mounts on this node: `sealvol volume mount REF DIR` makes one".into(),
    });
    f
}

/// The Jobs screen before any sync: headers, and how to start one.
pub fn jobs_empty() -> FrameView {
    let mut f = jobs();
    f.body = Body::Jobs(JobsView {
        rows: Vec::new(),
        selected: 0,
        detail: None,
        empty: "no sync jobs: `sealvol volume sync SOURCE NS/NAME --detach` queues one".into(),
    });
    f
}

fn deploy_cell(seed: u8, state: CellState) -> DeployCell {
    DeployCell {
        text: match state {
            CellState::Missing => "-".into(),
            CellState::Error => "error".into(),
            _ => digest(seed)[3..15].to_string(),
        },
        state,
    }
}

pub fn deployments() -> FrameView {
    use CellState::*;
    let row = |volume: &str, agree, cells: Vec<DeployCell>| DeployRow {
        volume: volume.into(),
        agree,
        cells,
    };
    FrameView {
        crumbs: vec!["volumes".into(), "deployments".into()],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Deployments(DeploymentsView {
            names: vec![
                "staging/config.yaml".into(),
                "prod/config.yaml".into(),
                "canary/config.yaml".into(),
            ],
            rows: vec![
                row(
                    "adapters/support-lora",
                    true,
                    vec![
                        deploy_cell(4, Unpinned),
                        deploy_cell(4, Pinned),
                        deploy_cell(4, Pinned),
                    ],
                ),
                row(
                    "evals/mmlu-pro",
                    true,
                    vec![
                        deploy_cell(5, Pinned),
                        deploy_cell(0, Missing),
                        deploy_cell(0, Missing),
                    ],
                ),
                row(
                    "tokenizers/qwen3",
                    false,
                    vec![
                        deploy_cell(6, Pinned),
                        deploy_cell(6, Pinned),
                        deploy_cell(0, Error),
                    ],
                ),
                row(
                    "weights/qwen3-8b",
                    false,
                    vec![
                        deploy_cell(1, Unpinned),
                        deploy_cell(2, Pinned),
                        deploy_cell(1, Pinned),
                    ],
                ),
            ],
            selected: 3,
            column: 1,
            detail: vec![
                "prod/config.yaml:5  /app/weights  ref: vol:weights/qwen3-8b@b3:4a55606b7681…"
                    .into(),
                format!("pinned: {}", digest(2)),
            ],
            failed: Vec::new(),
            empty: String::new(),
        }),
        status: Status {
            kind: StatusKind::Info,
            text: "4 volume(s) × 3 deployment(s): 2 disagree, 2 unpinned (*)".into(),
            hints: vec![
                ("tab".into(), "next deployment".into()),
                ("b".into(), "roll back".into()),
                ("?".into(), "help".into()),
            ],
        },
        overlay: None,
    }
}

pub fn deployments_empty() -> FrameView {
    FrameView {
        body: Body::Deployments(DeploymentsView {
            empty: "no deployment files: `sealvol --deploy FILE` or deploy_dirs in config.toml"
                .into(),
            ..DeploymentsView::default()
        }),
        status: status("no deployment files"),
        ..deployments()
    }
}

pub fn rollback() -> FrameView {
    let row = |seed, created: &str, bytes, tags: &[&str], serving| RollbackRow {
        digest: digest(seed),
        created: created.into(),
        bytes,
        tags: tags.iter().map(|t| t.to_string()).collect(),
        serving,
    };
    FrameView {
        crumbs: vec![
            "volumes".into(),
            "deployments".into(),
            "prod/config.yaml".into(),
            "roll back".into(),
        ],
        context: "~/.local/share/sealvol/repo".into(),
        body: Body::Rollback(RollbackView {
            title: "prod/config.yaml · weights/qwen3-8b at /app/weights · serving b3:4a55606b7681".into(),
            rows: vec![
                row(2, "2026-11-30T14:02:11Z", 16_384_000_000, &["prod"], true),
                row(1, "2026-11-28T09:13:40Z", 16_384_000_000, &["canary"], false),
                row(3, "2026-11-21T17:45:02Z", 16_380_000_000, &[], false),
            ],
            selected: 1,
            history: vec![
                format!("prod     {} → {}  2026-11-30 14:05  alice", &digest(1)[3..11], &digest(2)[3..11]),
                format!("canary   (new) → {}  2026-11-28 09:20  ci", &digest(1)[3..11]),
                format!("prod     {} → {}  2026-11-22 10:00  bob", &digest(3)[3..11], &digest(1)[3..11]),
            ],
        }),
        status: Status {
            kind: StatusKind::Info,
            text: "3 version(s) of weights/qwen3-8b · enter: roll prod/config.yaml back to the selected one".into(),
            hints: vec![
                ("enter".into(), "roll back to this".into()),
                ("esc".into(), "back".into()),
                ("?".into(), "help".into()),
            ],
        },
        overlay: None,
    }
}

pub fn confirm_rollback() -> FrameView {
    let mut f = rollback();
    f.overlay = Some(Overlay::Confirm {
        title: "roll back weights/qwen3-8b".into(),
        lines: vec![
            ("deploy/prod/config.yaml".into(), Role::Text),
            ("weights/qwen3-8b at /app/weights".into(), Role::Text),
            (format!("from {}", &digest(2)[..19]), Role::Removed),
            (format!("to   {}", &digest(1)[..19]), Role::Added),
            (
                format!("-   5: - ref: vol:weights/qwen3-8b@{}…", &digest(2)[..19]),
                Role::Removed,
            ),
            (
                format!("+   5: - ref: vol:weights/qwen3-8b@{}…", &digest(1)[..19]),
                Role::Added,
            ),
            (
                "only this ref changes; refused if the file changed since this diff".into(),
                Role::Dim,
            ),
        ],
        yes: "write deploy/prod/config.yaml".into(),
        full: false,
    });
    f
}
