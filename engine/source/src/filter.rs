//! `--include` and `--exclude`: which of a source's keys a sync takes. Patterns work as
//! in .gitignore: one without a `/` matches a file name in any folder (`*.bin`), one with
//! a `/` matches the whole path (`onnx/*`, `**/optimizer.pt`); `*` stays within a folder,
//! `**` crosses folders. With includes, a key must match one; an exclude always wins.

use globset::{Glob, GlobBuilder, GlobMatcher};

use sealvol_core::error::{Error, Result};

struct Pattern {
    text: String,
    name_only: bool,
    glob: GlobMatcher,
}

impl Pattern {
    fn new(text: &str) -> Result<Pattern> {
        let glob: Glob = GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                Error::invalid(format!("bad pattern {text:?}: {}", e.kind()))
                    .hint("patterns use * ? [abc] {a,b} and **, e.g. --exclude '*.pt'")
            })?;
        Ok(Pattern {
            text: text.to_string(),
            name_only: !text.contains('/'),
            glob: glob.compile_matcher(),
        })
    }

    fn matches(&self, path: &str) -> bool {
        if self.name_only {
            let name = path.rsplit('/').next().unwrap_or(path);
            self.glob.is_match(name)
        } else {
            self.glob.is_match(path)
        }
    }
}

pub struct Filter {
    include: Vec<Pattern>,
    exclude: Vec<Pattern>,
}

impl Filter {
    pub fn new(include: &[String], exclude: &[String]) -> Result<Filter> {
        Ok(Filter {
            include: include
                .iter()
                .map(|p| Pattern::new(p))
                .collect::<Result<_>>()?,
            exclude: exclude
                .iter()
                .map(|p| Pattern::new(p))
                .collect::<Result<_>>()?,
        })
    }

    pub fn takes(&self, path: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| p.matches(path)))
            && !self.exclude.iter().any(|p| p.matches(path))
    }

    /// The patterns, for job records and provenance.
    pub fn describe(&self) -> Vec<String> {
        let inc = self.include.iter().map(|p| format!("+{}", p.text));
        let exc = self.exclude.iter().map(|p| format!("-{}", p.text));
        inc.chain(exc).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(inc: &[&str], exc: &[&str]) -> Filter {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Filter::new(&v(inc), &v(exc)).unwrap()
    }

    #[test]
    fn gitignore_like_matching() {
        let all = f(&[], &[]);
        assert!(all.takes("a/b/c.bin"));
        let bins = f(&["*.safetensors", "*.json"], &[]);
        assert!(bins.takes("model.safetensors"));
        assert!(
            bins.takes("1_Pooling/config.json"),
            "a name pattern matches in folders"
        );
        assert!(!bins.takes("vocab.txt"));
        let onnx = f(&[], &["onnx/*", "**/optimizer.pt"]);
        assert!(!onnx.takes("onnx/model.onnx"));
        assert!(
            onnx.takes("onnx/deep/model.onnx"),
            "* stays within a folder"
        );
        assert!(!onnx.takes("ckpt/step-1/optimizer.pt"));
        assert!(onnx.takes("optimizer.pt.bak"));
        let both = f(&["*.bin"], &["rng_*.bin"]);
        assert!(both.takes("model.bin"));
        assert!(!both.takes("rng_state.bin"), "an exclude wins");
        assert_eq!(both.describe(), ["+*.bin", "-rng_*.bin"]);
    }

    #[test]
    fn a_bad_pattern_is_one_clear_error() {
        let e = Filter::new(&["[unclosed".into()], &[]).err().unwrap();
        assert!(e.to_string().contains("bad pattern \"[unclosed\""), "{e}");
        assert!(e.hint_text().unwrap().contains("--exclude"));
    }
}
