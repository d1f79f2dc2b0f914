//! The startup cache: compiled kernels and captured graphs kept as a version of a
//! volume, one tag per key the caller derives (GPU model, framework version, …). Keys
//! are free text; tags are names, so a key becomes a tag that is readable, safe, and
//! different for every key: a slug of it and 16 hex digits of its hash.

use sealvol_core::{Error, Name, Result};

/// The longest key taken.
pub const MAX_KEY: usize = 512;

/// The tag that holds the cache for `key`.
pub fn tag_for_key(key: &str) -> Result<Name> {
    if key.trim().is_empty() {
        return Err(Error::invalid("the cache key is empty")
            .hint("derive one from what the cache depends on, e.g. --key \"$(nvidia-smi --query-gpu=name --format=csv,noheader)-torch-2.5.1\""));
    }
    if key.len() > MAX_KEY {
        return Err(Error::invalid(format!(
            "the cache key is {} bytes long; at most {MAX_KEY} are taken",
            key.len()
        )));
    }
    if let Some(c) = key.chars().find(|c| c.is_control()) {
        return Err(
            Error::invalid(format!("the cache key holds the control character {c:?}"))
                .hint("a key is one line of text"),
        );
    }
    let mut slug = String::new();
    for c in key.chars().flat_map(char::to_lowercase) {
        let keep = c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_';
        match keep {
            true => slug.push(c),
            false if !slug.ends_with('-') => slug.push('-'),
            false => {}
        }
        if slug.len() >= 36 {
            break;
        }
    }
    let slug = slug
        .trim_matches(|c| c == '-' || c == '.')
        .replace("..", ".");
    let hash = blake3::hash(key.as_bytes()).to_hex();
    let tag = match slug.is_empty() {
        true => format!("cache-{}", &hash[..16]),
        false => format!("cache-{slug}-{}", &hash[..16]),
    };
    Name::parse("tag", &tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_distinct_safe_tags() {
        let a = tag_for_key("NVIDIA H100 80GB HBM3/torch-2.5.1+cu124").unwrap();
        assert!(
            a.as_str()
                .starts_with("cache-nvidia-h100-80gb-hbm3-torch-2."),
            "{a}"
        );
        assert!(a.as_str().len() <= 63);
        // Keys that slug alike still get tags of their own.
        let b = tag_for_key("nvidia h100 80gb hbm3 torch 2.5.1 cu124").unwrap();
        assert_ne!(a, b);
        assert_eq!(
            a,
            tag_for_key("NVIDIA H100 80GB HBM3/torch-2.5.1+cu124").unwrap()
        );
        assert!(tag_for_key("日本").unwrap().as_str().starts_with("cache-"));
        assert!(tag_for_key(&"x".repeat(500)).unwrap().as_str().len() <= 63);
        for bad in ["", "  ", "a\nb", &"x".repeat(600)] {
            assert!(tag_for_key(bad).is_err(), "{bad:?}");
        }
    }
}
