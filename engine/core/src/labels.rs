//! Labels on a version (`push --label step=4000 --label git=abc123`): what a person or a
//! training run says about it, kept in the manifest's provenance and its summary, and
//! never part of the digest. A version is sealed once, so its labels are those of the
//! push that sealed it; the same files pushed again with other labels are the same
//! version, labels and all.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::refs::Name;

pub type Labels = BTreeMap<String, String>;

/// The most labels one version carries.
pub const MAX_LABELS: usize = 64;
/// The longest value, in bytes.
pub const MAX_VALUE: usize = 256;

/// `KEY=VALUE` arguments as labels; a key given twice, or an argument without `=`, is
/// an error that names it.
pub fn parse(args: &[String]) -> Result<Labels> {
    let mut out = Labels::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(Error::invalid(format!("--label {a:?} has no `=`"))
                .hint("write --label KEY=VALUE, e.g. --label step=4000"));
        };
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(
                Error::invalid(format!("--label {k} is given twice")).hint("give each key once")
            );
        }
    }
    check(&out)?;
    Ok(out)
}

/// What every sealed version's labels must be (a server checks what a key sends):
/// at most `MAX_LABELS`, keys that are names (`a-z 0-9 . _ -`), values of printable
/// characters, at most `MAX_VALUE` bytes.
pub fn check(labels: &Labels) -> Result<()> {
    if labels.len() > MAX_LABELS {
        return Err(Error::invalid(format!(
            "{} labels: a version carries at most {MAX_LABELS}",
            labels.len()
        )));
    }
    for (k, v) in labels {
        Name::parse("label key", k)?;
        if v.len() > MAX_VALUE {
            return Err(Error::invalid(format!(
                "label {k}: the value is {} bytes; at most {MAX_VALUE}",
                v.len()
            )));
        }
        if v.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "label {k}: the value holds control characters"
            )));
        }
    }
    Ok(())
}

/// `k=v, k=v` as listings show them.
pub fn shown(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn labels_are_key_value_pairs_each_key_once() {
        let l = parse(&args(&["step=4000", "git=abc123", "note=a=b"])).unwrap();
        assert_eq!(shown(&l), "git=abc123, note=a=b, step=4000");
        for (bad, why) in [
            (vec!["step"], "has no `=`"),
            (vec!["step=1", "step=2"], "given twice"),
            (vec!["Step=1"], "invalid label key"),
            (vec!["=1"], "invalid label key"),
            (vec!["k=a\nb"], "control characters"),
        ] {
            let e = parse(&args(&bad)).unwrap_err();
            assert!(e.to_string().contains(why), "{bad:?}: {e}");
        }
        let long = format!("k={}", "x".repeat(MAX_VALUE + 1));
        assert!(parse(&[long]).is_err());
        let many: Vec<String> = (0..=MAX_LABELS).map(|i| format!("k{i}=v")).collect();
        assert!(parse(&many).is_err());
    }
}
