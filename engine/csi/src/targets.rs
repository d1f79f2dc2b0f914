//! The plugin's own record of what it published: one small JSON file per target path
//! in `<state>/csi/targets/`, written before the mount starts (as `mounting`: the
//! intent), rewritten as `ready` once the mount answers, and removed once it is gone. The mount processes outlive the plugin; these records are how a restarted
//! plugin tells its mounts (to adopt) from anyone else's (never to touch), and what
//! the pinned ref behind a tag was at publish.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use sealvol_core::error::{IoContext, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Published {
    pub volume_id: String,
    /// The target path, absolute.
    pub target: String,
    /// The ref as the pod or PersistentVolume gave it.
    pub requested: String,
    /// What it resolved to at publish, for the life of the mount.
    pub pinned: String,
    pub ephemeral: bool,
    /// `namespace/name`, when kubelet said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch_memory: Option<String>,
    pub published: String,
    /// How far the publish got: a record still `mounting` is a publish cut short
    /// (the plugin died before kubelet heard its answer). Records written before the
    /// intent was recorded first have no phase: they were written once ready.
    #[serde(default)]
    pub phase: Phase,
}

/// How far a publish got.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Recorded before the mount starts: the mount may not exist, may be starting or
    /// may serve.
    Mounting,
    /// The mount answered and kubelet was told so (unless the plugin died in between).
    #[default]
    Ready,
}

pub struct Targets {
    dir: PathBuf,
}

impl Targets {
    pub fn open(state: &Path) -> Result<Targets> {
        let dir = state.join("csi").join("targets");
        sealvol_core::private::dir(&dir)?;
        Ok(Targets { dir })
    }

    /// A target path as a file name: its hash, since paths are long and any bytes.
    fn path(&self, target: &Path) -> PathBuf {
        let h = blake3::hash(target.as_os_str().as_encoded_bytes());
        self.dir.join(format!("{}.json", &h.to_hex()[..32]))
    }

    pub fn get(&self, target: &Path) -> Option<Published> {
        let bytes = fs::read(self.path(target)).ok()?;
        serde_json::from_slice::<Published>(&bytes)
            .ok()
            .filter(|p| Path::new(&p.target) == target)
    }

    /// Written whole or not at all.
    pub fn put(&self, p: &Published) -> Result<()> {
        let path = self.path(Path::new(&p.target));
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        let json = serde_json::to_vec_pretty(p).unwrap_or_default();
        sealvol_core::private::create_new()
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &json))
            .ctx("cannot write", &tmp)?;
        fs::rename(&tmp, &path).ctx("cannot write", &path)
    }

    pub fn remove(&self, target: &Path) {
        let _ = fs::remove_file(self.path(target));
    }

    /// Every record, oldest publish first; unreadable ones are skipped.
    pub fn all(&self) -> Vec<Published> {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<Published> = rd
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        out.sort_by(|a, b| a.published.cmp(&b.published));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_found_by_its_target_and_survives_a_reopen() {
        let state = tempfile::tempdir().unwrap();
        let t = Targets::open(state.path()).unwrap();
        let p = Published {
            volume_id: "csi-1".into(),
            target: "/pods/a b/mount".into(),
            requested: "vol:w/x:prod".into(),
            pinned: "vol:w/x@b3:00".into(),
            ephemeral: true,
            pod: Some("ns/p".into()),
            peers: None,
            prefetch_memory: None,
            published: "2026-12-04T00:00:00Z".into(),
            phase: Phase::Mounting,
        };
        t.put(&p).unwrap();
        let again = Targets::open(state.path()).unwrap();
        assert_eq!(again.get(Path::new("/pods/a b/mount")), Some(p.clone()));
        assert_eq!(again.get(Path::new("/pods/other")), None);
        assert_eq!(again.all(), vec![p]);
        again.remove(Path::new("/pods/a b/mount"));
        assert!(again.all().is_empty());
    }

    #[test]
    fn a_record_written_before_phases_existed_reads_as_ready() {
        let old = r#"{"volume_id":"csi-1","target":"/t","requested":"vol:w/x:prod",
            "pinned":"vol:w/x@b3:00","ephemeral":true,"published":"2026-12-04T00:00:00Z"}"#;
        let p: Published = serde_json::from_str(old).unwrap();
        assert_eq!(p.phase, Phase::Ready);
        let json = serde_json::to_string(&Published {
            phase: Phase::Mounting,
            ..p
        })
        .unwrap();
        assert!(json.contains(r#""phase":"mounting""#), "{json}");
    }
}
