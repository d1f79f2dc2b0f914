//! What a pod spec says to mount sealed versions through this driver: its `volumes:`
//! (inline CSI volumes, read-only, each with its pinned ref) and its containers'
//! `volumeMounts:`, rendered from a deployment's config file (`sealvol deploy k8s`) so
//! that the file stays the one source of truth.

use serde::Serialize;

/// One volume a deployment mounts, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct PodVolume {
    /// `NS/NAME`.
    pub volume: String,
    /// `vol:NS/NAME@b3:HEX`.
    pub pinned: String,
    /// Where the container sees it.
    pub path: String,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Rendered {
    pub volumes: Vec<Volume>,
    #[serde(rename = "volumeMounts")]
    pub volume_mounts: Vec<VolumeMount>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Volume {
    pub name: String,
    pub csi: Csi,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Csi {
    pub driver: &'static str,
    #[serde(rename = "readOnly")]
    pub read_only: bool,
    #[serde(rename = "volumeAttributes")]
    pub volume_attributes: Attributes,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Attributes {
    #[serde(rename = "ref")]
    pub reference: String,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct VolumeMount {
    pub name: String,
    #[serde(rename = "mountPath")]
    pub mount_path: String,
    #[serde(rename = "readOnly")]
    pub read_only: bool,
    /// `HostToContainer`: when a restarted node plugin mounts the version again at
    /// the same path, the running container sees the new mount.
    #[serde(rename = "mountPropagation")]
    pub mount_propagation: &'static str,
}

/// The propagation every volumeMount of a sealed version gets.
pub const PROPAGATION: &str = "HostToContainer";

pub fn render(mounts: &[PodVolume]) -> Rendered {
    let mut names: Vec<String> = Vec::new();
    let mut out = Rendered {
        volumes: Vec::new(),
        volume_mounts: Vec::new(),
    };
    for m in mounts {
        let name = unique(&mut names, &label(&m.volume));
        out.volumes.push(Volume {
            name: name.clone(),
            csi: Csi {
                driver: crate::mounter::DRIVER_NAME,
                read_only: true,
                volume_attributes: Attributes {
                    reference: m.pinned.clone(),
                },
            },
        });
        out.volume_mounts.push(VolumeMount {
            name,
            mount_path: m.path.clone(),
            read_only: true,
            mount_propagation: PROPAGATION,
        });
    }
    out
}

/// The two lists as YAML to paste: every string double-quoted, which YAML reads as
/// JSON reads it, whatever a path holds.
pub fn yaml(r: &Rendered, header: &[String]) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut out = String::new();
    for line in header {
        out.push_str(&format!("# {line}\n"));
    }
    out.push_str("volumes:\n");
    for v in &r.volumes {
        out.push_str(&format!("  - name: {}\n", q(&v.name)));
        out.push_str("    csi:\n");
        out.push_str(&format!("      driver: {}\n", q(v.csi.driver)));
        out.push_str("      readOnly: true\n");
        out.push_str("      volumeAttributes:\n");
        out.push_str(&format!(
            "        ref: {}\n",
            q(&v.csi.volume_attributes.reference)
        ));
    }
    out.push_str("volumeMounts:\n");
    for m in &r.volume_mounts {
        out.push_str(&format!("  - name: {}\n", q(&m.name)));
        out.push_str(&format!("    mountPath: {}\n", q(&m.mount_path)));
        out.push_str("    readOnly: true\n");
        out.push_str(&format!("    mountPropagation: {}\n", m.mount_propagation));
    }
    out
}

/// A volume's name as a pod volume's: a DNS-1123 label (lowercase letters, digits and
/// `-`, at most 63), `sealvol-` first so that it never clashes with the pod's own.
fn label(volume: &str) -> String {
    let mut s = String::from("sealvol-");
    for c in volume.chars() {
        let c = c.to_ascii_lowercase();
        match c {
            'a'..='z' | '0'..='9' => s.push(c),
            _ if !s.ends_with('-') => s.push('-'),
            _ => {}
        }
    }
    s.truncate(56); // room for a "-NN" suffix
    s.trim_end_matches('-').to_string()
}

fn unique(taken: &mut Vec<String>, base: &str) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.push(name.clone());
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_volume_is_a_read_only_inline_volume_with_a_valid_unique_name() {
        let r = render(&[
            PodVolume {
                volume: "weights/Qwen3_8B".into(),
                pinned: "vol:weights/Qwen3_8B@b3:00".into(),
                path: "/models/a \"b\": c".into(),
            },
            PodVolume {
                volume: "weights/Qwen3_8B".into(),
                pinned: "vol:weights/Qwen3_8B@b3:11".into(),
                path: "/models/old".into(),
            },
            PodVolume {
                volume: format!("ns/{}", "x".repeat(120)),
                pinned: "vol:ns/x@b3:22".into(),
                path: "/x".into(),
            },
        ]);
        let names: Vec<&str> = r.volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names[0], "sealvol-weights-qwen3-8b");
        assert_eq!(names[1], "sealvol-weights-qwen3-8b-2");
        assert!(names[2].len() <= 63 && !names[2].ends_with('-'));
        let y = yaml(&r, &["made by a test".into()]);
        assert!(y.contains(r#"mountPath: "/models/a \"b\": c""#), "{y}");
        assert!(y.starts_with("# made by a test\nvolumes:\n"), "{y}");
    }
}
