//! What the names in a watched folder mean: which are temporary (left alone until
//! they are renamed), which folders are checkpoints and at what step, and how a tag
//! template such as `step-{step}` becomes a tag.

use sealvol_core::error::{Error, Result};
use sealvol_core::refs::Name;

/// A name a writer uses while it is still writing: `*.tmp`, or starting with `.` or
/// `tmp`. Such a file is never part of a version; such a folder is not a checkpoint
/// until it is renamed.
pub fn is_temporary(name: &str) -> bool {
    name.starts_with('.') || name.starts_with("tmp") || name.ends_with(".tmp")
}

/// True if any component of a relative path is temporary.
pub fn has_temporary(rel: &str) -> bool {
    rel.split('/').any(is_temporary)
}

/// The step a checkpoint folder's name carries: the number after `step` when there is
/// one (`global_step1500`, `epoch2-step3000`), else the last number in the name
/// (`checkpoint-500`, `ckpt_42`). `None` for a name with no number or a temporary one.
pub fn step_of(name: &str) -> Option<u64> {
    if is_temporary(name) {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    if let Some(at) = lower.rfind("step") {
        let digits: String = lower[at + 4..]
            .trim_start_matches(['_', '-'])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(n) = digits.parse() {
            return Some(n);
        }
    }
    let bytes = name.as_bytes();
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    name[start..end].parse().ok()
}

const STEP: &str = "{step}";

/// A `--tag` as given: a plain tag, or a template with `{step}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagTemplate(String);

impl TagTemplate {
    /// Checks a template: `{step}` is the one placeholder, and what it expands to must
    /// be a valid tag.
    pub fn parse(s: &str) -> Result<TagTemplate> {
        let rest = s.replace(STEP, "");
        if rest.contains('{') || rest.contains('}') {
            return Err(Error::invalid(format!(
                "tag {s:?} has a placeholder other than {STEP}"
            ))
            .hint("the one placeholder is {step}, the number in a checkpoint folder's name: --tag step-{step}"));
        }
        Name::parse("tag", &s.replace(STEP, "0"))?;
        Ok(TagTemplate(s.to_string()))
    }

    /// True if the tag names one step (`step-{step}`); false for a tag that moves to
    /// each new checkpoint (`latest`).
    pub fn per_step(&self) -> bool {
        self.0.contains(STEP)
    }

    pub fn expand(&self, step: Option<u64>) -> Result<Name> {
        let s = match step {
            Some(n) => self.0.replace(STEP, &n.to_string()),
            None => self.0.clone(),
        };
        Name::parse("tag", &s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_come_from_the_names_trainers_use() {
        assert_eq!(step_of("checkpoint-500"), Some(500));
        assert_eq!(step_of("step_1000"), Some(1000));
        assert_eq!(step_of("global_step1500"), Some(1500));
        assert_eq!(step_of("epoch2-step3000"), Some(3000));
        assert_eq!(step_of("ckpt_42"), Some(42));
        assert_eq!(step_of("run7-ckpt-0009"), Some(9));
        assert_eq!(step_of("logs"), None);
        assert_eq!(step_of("tmp-checkpoint-500"), None);
        assert_eq!(step_of(".checkpoint-500"), None);
        assert_eq!(step_of("checkpoint-500.tmp"), None);
    }

    #[test]
    fn temporary_names_are_what_writers_use_before_a_rename() {
        for t in [".lock", "tmp123", "model.safetensors.tmp", "tmp"] {
            assert!(is_temporary(t), "{t}");
        }
        for t in ["model.safetensors", "config.json", "optimizer.pt", "a.tmpl"] {
            assert!(!is_temporary(t), "{t}");
        }
        assert!(has_temporary("sub/.partial/x"));
        assert!(!has_temporary("sub/x.bin"));
    }

    #[test]
    fn tag_templates_expand_per_step_or_stay_as_they_are() {
        let t = TagTemplate::parse("step-{step}").unwrap();
        assert!(t.per_step());
        assert_eq!(t.expand(Some(1500)).unwrap().to_string(), "step-1500");
        let latest = TagTemplate::parse("latest").unwrap();
        assert!(!latest.per_step());
        assert_eq!(latest.expand(Some(9)).unwrap().to_string(), "latest");
        assert!(TagTemplate::parse("step-{epoch}").is_err());
        assert!(TagTemplate::parse("bad tag {step}").is_err());
    }
}
