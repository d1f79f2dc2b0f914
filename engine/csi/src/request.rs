//! What a publish asks for, checked before anything on the node is touched: the
//! volume's ref (from the inline volume's `ref` attribute, or a PersistentVolume's
//! handle), its other attributes, the target path and the access. Every field is
//! bounded and every unknown attribute refused: the pod spec that wrote them may be
//! anyone's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sealvol_core::Ref;
use sealvol_core::refs::{DigestSpec, Target};
use tonic::Status;

use crate::proto::volume_capability::AccessType;
use crate::proto::volume_capability::access_mode::Mode;
use crate::proto::{NodePublishVolumeRequest, VolumeCapability};
use crate::status::invalid;

/// The attribute that names what an inline volume mounts.
pub const REF: &str = "ref";
/// Cache servers to read through, separated by commas or spaces; each must be one the
/// driver was configured with.
pub const PEERS: &str = "peers";
/// The mount's memory bound for read-ahead (e.g. `512M`).
pub const PREFETCH_MEMORY: &str = "prefetchMemory";
const KNOWN: [&str; 3] = [REF, PEERS, PREFETCH_MEMORY];

/// What kubelet adds to a volume's context of its own (pod name, namespace, whether
/// the volume is inline): read, never refused.
const KUBERNETES: &str = "csi.storage.k8s.io/";
const EPHEMERAL: &str = "csi.storage.k8s.io/ephemeral";
const POD_NAMESPACE: &str = "csi.storage.k8s.io/pod.namespace";
const POD_NAME: &str = "csi.storage.k8s.io/pod.name";

const MAX_ID: usize = 1024;
const MAX_PATH: usize = 4096;
const MAX_ATTRIBUTES: usize = 64;
const MAX_VALUE: usize = 4096;

/// A publish, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Publish {
    pub volume_id: String,
    pub target: PathBuf,
    /// The ref to resolve, as given.
    pub reference: String,
    /// An inline volume of one pod, rather than a PersistentVolume.
    pub ephemeral: bool,
    pub peers: Option<Vec<String>>,
    pub prefetch_memory: Option<String>,
    /// `namespace/name` of the pod, when kubelet says.
    pub pod: Option<String>,
}

pub fn publish(req: &NodePublishVolumeRequest) -> Result<Publish, Status> {
    volume_id(&req.volume_id)?;
    let target = target(&req.target_path)?;
    if !req.secrets.is_empty() {
        // Never read, never logged: only their presence is refused.
        return Err(invalid(
            "the volume carries secrets (nodePublishSecretRef)",
            "sealvol csi takes its credentials from its own config, never from a volume: remove nodePublishSecretRef",
        ));
    }
    access(req.volume_capability.as_ref(), req.readonly)?;
    let ctx = &req.volume_context;
    attributes(ctx)?;
    let ephemeral = ctx.get(EPHEMERAL).is_some_and(|v| v == "true");
    let reference = match (ephemeral, ctx.get(REF)) {
        (true, Some(r)) => r.clone(),
        (true, None) => {
            return Err(invalid(
                "the inline volume has no `ref` attribute",
                "give volumeAttributes: {ref: \"vol:NS/NAME@b3:…\"}",
            ));
        }
        (false, given) => {
            // A PersistentVolume outlives pods on many nodes: its handle is pinned, or
            // two pods of one claim could read different bytes.
            pinned_handle(&req.volume_id)?;
            if let Some(r) = given.filter(|r| *r != &req.volume_id) {
                return Err(invalid(
                    format!(
                        "the `ref` attribute {r:?} differs from the volumeHandle {:?}",
                        req.volume_id
                    ),
                    "a PersistentVolume mounts its volumeHandle: drop the `ref` attribute",
                ));
            }
            req.volume_id.clone()
        }
    };
    Ref::parse(&reference).map_err(|e| crate::status::of(&e))?;
    let peers = ctx.get(PEERS).map(|p| {
        p.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_end_matches('/').to_string())
            .collect::<Vec<_>>()
    });
    if peers.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid(
            "the `peers` attribute names no server",
            "list cache servers separated by commas, or drop the attribute to use the driver's",
        ));
    }
    let pod = match (ctx.get(POD_NAMESPACE), ctx.get(POD_NAME)) {
        (Some(ns), Some(name)) => Some(format!("{ns}/{name}")),
        _ => None,
    };
    Ok(Publish {
        volume_id: req.volume_id.clone(),
        target,
        reference,
        ephemeral,
        peers,
        prefetch_memory: ctx.get(PREFETCH_MEMORY).cloned(),
        pod,
    })
}

pub fn volume_id(id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(invalid(
            "no volume_id",
            "kubelet always sends one; is this a CSI client?",
        ));
    }
    if id.len() > MAX_ID || id.chars().any(char::is_control) {
        return Err(invalid(
            format!("volume_id is not a volume's name ({} bytes)", id.len()),
            "give a ref of at most 1 KiB without control characters",
        ));
    }
    Ok(())
}

/// An absolute path of plain components: the plugin creates and removes it.
pub fn target(path: &str) -> Result<PathBuf, Status> {
    let p = Path::new(path);
    // `Path::components` drops inner `.`: the text is checked.
    let plain = !path.split('/').any(|s| s == "." || s == "..");
    if path.is_empty() || path.len() > MAX_PATH || !p.is_absolute() || !plain || path.contains('\0')
    {
        return Err(invalid(
            format!("target path {:?} is not an absolute path", truncate(path)),
            "give an absolute path without `.` or `..` components (kubelet's pods directory)",
        ));
    }
    Ok(p.to_path_buf())
}

/// Mounts are read-only: a reader mode, or a writer mode that kubelet asks with
/// `readonly` set (it asks SINGLE_NODE_WRITER for every inline volume, `readOnly:
/// true` in the pod is what says read-only there).
fn access(cap: Option<&VolumeCapability>, readonly: bool) -> Result<(), Status> {
    let Some(cap) = cap else {
        return Err(invalid(
            "no volume_capability",
            "kubelet always sends one; is this a CSI client?",
        ));
    };
    match &cap.access_type {
        Some(AccessType::Mount(m)) => {
            if !m.mount_flags.is_empty() {
                return Err(invalid(
                    format!("mount flags {:?} are not supported", m.mount_flags),
                    "a sealed version mounts read-only with no flags: drop mountOptions; give options as volumeAttributes",
                ));
            }
            if !matches!(m.fs_type.as_str(), "" | "sealvol" | "fuse.sealvol") {
                return Err(invalid(
                    format!("fsType {:?} is not sealvol's", m.fs_type),
                    "drop fsType, or give fuse.sealvol",
                ));
            }
        }
        Some(AccessType::Block(_)) => {
            return Err(invalid(
                "a block volume was asked for",
                "sealvol publishes a directory: use volumeMode: Filesystem",
            ));
        }
        None => {
            return Err(invalid(
                "the volume_capability has no access type",
                "ask for a mount",
            ));
        }
    }
    let mode = cap
        .access_mode
        .as_ref()
        .and_then(|a| Mode::try_from(a.mode).ok())
        .unwrap_or(Mode::Unknown);
    match mode {
        Mode::SingleNodeReaderOnly | Mode::MultiNodeReaderOnly => Ok(()),
        Mode::SingleNodeWriter | Mode::SingleNodeSingleWriter if readonly => Ok(()),
        Mode::Unknown => Err(invalid("no access mode", "ask for ReadOnlyMany")),
        writable => Err(invalid(
            format!(
                "a writable publish was asked for ({}{})",
                writable.as_str_name(),
                if readonly { "" } else { ", readonly false" }
            ),
            "a sealed version is read-only: set readOnly: true on the volume, or accessModes: [ReadOnlyMany] on the PersistentVolume",
        )),
    }
}

fn attributes(ctx: &HashMap<String, String>) -> Result<(), Status> {
    if ctx.len() > MAX_ATTRIBUTES {
        return Err(invalid(
            format!("{} volume attributes", ctx.len()),
            "give at most 64; sealvol reads ref, peers and prefetchMemory",
        ));
    }
    for (k, v) in ctx {
        if k.starts_with(KUBERNETES) {
            continue;
        }
        if !KNOWN.contains(&k.as_str()) {
            return Err(invalid(
                format!("unknown volume attribute {:?}", truncate(k)),
                "sealvol reads ref, peers and prefetchMemory",
            ));
        }
        if v.len() > MAX_VALUE || v.chars().any(char::is_control) {
            return Err(invalid(
                format!("the {k} attribute is not a value sealvol takes"),
                "give at most 4 KiB without control characters",
            ));
        }
    }
    Ok(())
}

fn pinned_handle(id: &str) -> Result<(), Status> {
    let r = Ref::parse(id).map_err(|e| crate::status::of(&e))?;
    match r.target {
        Target::Digest(DigestSpec::Full(_)) => Ok(()),
        _ => Err(invalid(
            format!("the volumeHandle {id:?} is not pinned"),
            "a PersistentVolume names one version: vol:NS/NAME@b3:<64 hex> (`sealvol volume resolve REF` prints it)",
        )),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::volume_capability::{AccessMode, BlockVolume, MountVolume};
    use tonic::Code;

    const PINNED: &str =
        "vol:weights/x@b3:9f3c1a2b9f3c1a2b9f3c1a2b9f3c1a2b9f3c1a2b9f3c1a2b9f3c1a2b9f3c1a2b";

    fn cap(mode: Mode) -> Option<VolumeCapability> {
        Some(VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode { mode: mode as i32 }),
        })
    }

    fn inline(attrs: &[(&str, &str)]) -> NodePublishVolumeRequest {
        let mut ctx: HashMap<String, String> = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ctx.insert(EPHEMERAL.into(), "true".into());
        NodePublishVolumeRequest {
            volume_id: "csi-0a1b".into(),
            target_path: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/w/mount".into(),
            volume_capability: cap(Mode::SingleNodeWriter),
            readonly: true,
            volume_context: ctx,
            ..Default::default()
        }
    }

    fn refused(req: &NodePublishVolumeRequest) -> String {
        let s = publish(req).unwrap_err();
        assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
        s.message().to_string()
    }

    #[test]
    fn an_inline_volume_mounts_its_ref_attribute_with_its_pod() {
        let mut req = inline(&[
            (REF, "vol:weights/x:prod"),
            (PEERS, "http://a:7420/, http://b:7420"),
        ]);
        req.volume_context
            .insert(POD_NAMESPACE.into(), "serving".into());
        req.volume_context.insert(POD_NAME.into(), "llm-0".into());
        let p = publish(&req).unwrap();
        assert_eq!(p.reference, "vol:weights/x:prod");
        assert!(p.ephemeral);
        assert_eq!(p.pod.as_deref(), Some("serving/llm-0"));
        assert_eq!(
            p.peers,
            Some(vec!["http://a:7420".into(), "http://b:7420".into()])
        );
    }

    #[test]
    fn a_persistent_volume_mounts_its_pinned_handle_and_nothing_else() {
        let pv = NodePublishVolumeRequest {
            volume_id: PINNED.into(),
            target_path: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv/mount".into(),
            volume_capability: cap(Mode::MultiNodeReaderOnly),
            ..Default::default()
        };
        assert_eq!(publish(&pv).unwrap().reference, PINNED);
        let tagged = NodePublishVolumeRequest {
            volume_id: "vol:weights/x:prod".into(),
            ..pv.clone()
        };
        assert!(refused(&tagged).contains("not pinned"));
        let mut other = pv.clone();
        other
            .volume_context
            .insert(REF.into(), "vol:weights/y:prod".into());
        assert!(refused(&other).contains("differs from the volumeHandle"));
    }

    #[test]
    fn writable_block_flagged_or_secret_publishes_are_refused_with_what_to_do() {
        let mut rw = inline(&[(REF, "vol:weights/x")]);
        rw.readonly = false;
        assert!(refused(&rw).contains("set readOnly: true"));
        let mut multi = inline(&[(REF, "vol:weights/x")]);
        multi.volume_capability = cap(Mode::MultiNodeMultiWriter);
        assert!(refused(&multi).contains("MULTI_NODE_MULTI_WRITER"));
        let mut block = inline(&[(REF, "vol:weights/x")]);
        block.volume_capability = Some(VolumeCapability {
            access_type: Some(AccessType::Block(BlockVolume {})),
            access_mode: Some(AccessMode {
                mode: Mode::MultiNodeReaderOnly as i32,
            }),
        });
        assert!(refused(&block).contains("volumeMode: Filesystem"));
        let mut flags = inline(&[(REF, "vol:weights/x")]);
        flags.volume_capability = Some(VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume {
                mount_flags: vec!["rw".into()],
                ..Default::default()
            })),
            access_mode: Some(AccessMode {
                mode: Mode::MultiNodeReaderOnly as i32,
            }),
        });
        assert!(refused(&flags).contains("mountOptions"));
        let mut secret = inline(&[(REF, "vol:weights/x")]);
        secret
            .secrets
            .insert("key".into(), "sv_live_hunter2".into());
        let msg = refused(&secret);
        assert!(
            msg.contains("nodePublishSecretRef") && !msg.contains("hunter2"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_attributes_bad_refs_and_crafted_paths_are_refused() {
        assert!(
            refused(&inline(&[(REF, "vol:weights/x"), ("cacheDir", "/etc")]))
                .contains("unknown volume attribute")
        );
        assert!(refused(&inline(&[])).contains("no `ref` attribute"));
        assert!(refused(&inline(&[(REF, "s3://bucket/x")])).contains("invalid"));
        assert!(
            refused(&inline(&[(REF, "vol:weights/x"), (PEERS, " , ")])).contains("names no server")
        );
        let many: Vec<(String, String)> = (0..70)
            .map(|i| (format!("{KUBERNETES}k{i}"), "v".into()))
            .collect();
        let mut req = inline(&[(REF, "vol:weights/x")]);
        req.volume_context.extend(many);
        assert!(refused(&req).contains("at most 64"));
        for bad in [
            "",
            "relative/mount",
            "/var/lib/kubelet/../../etc",
            "/a/./b",
            "/a\0b",
        ] {
            let mut req = inline(&[(REF, "vol:weights/x")]);
            req.target_path = bad.into();
            assert!(refused(&req).contains("absolute path"), "{bad:?}");
        }
        let mut req = inline(&[(REF, "vol:weights/x")]);
        req.volume_id = "x".repeat(2000);
        assert!(refused(&req).contains("1 KiB"));
    }
}
