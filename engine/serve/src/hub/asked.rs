//! What a request under `/hf/` asks, read from its path as sent (each segment
//! percent-decoded on its own, so `refs%2Fpr%2F1` is one revision and a tree path sent
//! as `a%2Fb` is the path `a/b`). The Hub reserves its first segments, and so does this:
//! `api/models/…` and `api/datasets/…` are its API, `datasets/NS/VOL/resolve/…` a
//! dataset's file, and `NS/VOL/resolve/…` a model's file, tried in that order (so a
//! model repo `api/models` or `datasets/X` is reached by its API routes, and by
//! `resolve` where the shapes do not meet: docs/SEMANTICS.md).

use super::missing::Missing;

/// A repo at a revision, as a request names it (`NS/VOL`, `REV`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct At {
    pub ns: String,
    pub vol: String,
    pub rev: String,
    /// Asked as a dataset (`api/datasets/…`, `datasets/…/resolve/…`).
    pub datasets: bool,
    /// Set by the pull-through mirror: this names the version it sealed of an
    /// upstream repo (`mirror.rs`), which is told as that repo at that commit.
    pub mirrored: Option<Mirrored>,
}

/// An upstream Hub repo at a commit, as a client asked for it, sealed by the mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirrored {
    /// The repo id as asked (`Qwen/Qwen3-8B`).
    pub repo: String,
    /// The upstream's commit id, which clients are told (their caches line up).
    pub commit: String,
    /// Asked by commit id, not by a branch or tag that may move.
    pub pinned: bool,
}

impl Asked {
    /// The repo and revision asked for.
    pub fn at(&self) -> &At {
        match self {
            Asked::Info(at) | Asked::Tree(at, _) | Asked::PathsInfo(at) | Asked::File(at, _) => at,
        }
    }

    pub fn at_mut(&mut self) -> &mut At {
        match self {
            Asked::Info(at) | Asked::Tree(at, _) | Asked::PathsInfo(at) | Asked::File(at, _) => at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// `api/{models,datasets}/NS/VOL[/revision/REV]`.
    Info(At),
    /// `api/{models,datasets}/NS/VOL/tree/REV[/PATH]`: the folder's path.
    Tree(At, String),
    /// `POST api/{models,datasets}/NS/VOL/paths-info/REV`.
    PathsInfo(At),
    /// `[datasets/]NS/VOL/resolve/REV/PATH`: the file's path.
    File(At, String),
}

/// The longest path in a repo a request may name.
pub const MAX_PATH: usize = 4096;

/// Reads `path` (the request's path after `/hf/`, as sent).
pub fn parse(path: &str) -> Result<Asked, Missing> {
    let segs: Vec<String> = path.split('/').map(decode).collect::<Result<_, _>>()?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    // The API's routes say their kind second; a file's route, by its shape (below).
    let datasets = matches!(s.as_slice(), ["api", "datasets", ..]);
    let at = |ns: &str, vol: &str, rev: &str| At {
        ns: ns.to_string(),
        vol: vol.to_string(),
        rev: rev.to_string(),
        datasets,
        mirrored: None,
    };
    let rest = |from: &[&str]| from.join("/");
    let asked = match s.as_slice() {
        ["api", "models" | "datasets", ns, vol] => Asked::Info(at(ns, vol, "main")),
        ["api", "models" | "datasets", ns, vol, "revision", rev] => Asked::Info(at(ns, vol, rev)),
        [
            "api",
            "models" | "datasets",
            ns,
            vol,
            "tree",
            rev,
            tail @ ..,
        ] => Asked::Tree(at(ns, vol, rev), repo_path(&rest(tail), true)?),
        ["api", "models" | "datasets", ns, vol, "paths-info", rev] => {
            Asked::PathsInfo(at(ns, vol, rev))
        }
        ["datasets", ns, vol, "resolve", rev, tail @ ..] if !tail.is_empty() => {
            let mut at = at(ns, vol, rev);
            at.datasets = true;
            Asked::File(at, repo_path(&rest(tail), false)?)
        }
        [ns, vol, "resolve", rev, tail @ ..] if !tail.is_empty() => {
            Asked::File(at(ns, vol, rev), repo_path(&rest(tail), false)?)
        }
        _ => return Err(Missing::Route),
    };
    Ok(asked)
}

/// One segment as its text: `%XX` decoded, and text that is not UTF-8 once decoded
/// refused.
fn decode(seg: &str) -> Result<String, Missing> {
    percent_encoding::percent_decode_str(seg)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| Missing::Bad(format!("{seg:.100} is not UTF-8 once decoded")))
}

/// A path in a repo as a version holds it: relative, `/`-separated, no empty, `.` or
/// `..` part, no control character, at most `MAX_PATH` bytes. Nothing is resolved:
/// a path is looked up exactly as written, so one that climbs is refused, never
/// followed. `empty` allows the repo's root (a tree listing).
pub fn repo_path(p: &str, empty: bool) -> Result<String, Missing> {
    if p.is_empty() && empty {
        return Ok(String::new());
    }
    let clean = !p.is_empty()
        && p.len() <= MAX_PATH
        && !p.chars().any(char::is_control)
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
    match clean {
        true => Ok(p.to_string()),
        false => Err(Missing::Bad(format!(
            "{:?} is not a path in a repo: relative, no empty, . or .. parts, no control characters, at most {MAX_PATH} bytes",
            p.chars().take(100).collect::<String>()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(ns: &str, vol: &str, rev: &str, path: &str) -> Asked {
        let at = At {
            ns: ns.into(),
            vol: vol.into(),
            rev: rev.into(),
            ..Default::default()
        };
        Asked::File(at, path.into())
    }

    #[test]
    fn paths_name_what_the_hubs_clients_ask() {
        assert_eq!(
            parse("t/m/resolve/main/a/b.json").unwrap(),
            file("t", "m", "main", "a/b.json")
        );
        let mut dataset = file("t", "m", "v1", "x");
        dataset.at_mut().datasets = true;
        assert_eq!(parse("datasets/t/m/resolve/v1/x").unwrap(), dataset);
        assert!(parse("api/datasets/t/m").unwrap().at().datasets);
        assert!(!parse("api/models/t/m").unwrap().at().datasets);
        assert_eq!(
            parse("t/m/resolve/refs%2Fpr%2F1/x").unwrap(),
            file("t", "m", "refs/pr/1", "x")
        );
        let Asked::Tree(at, path) = parse("api/models/t/m/tree/main/a%2Fb").unwrap() else {
            panic!("a tree")
        };
        assert_eq!((at.rev.as_str(), path.as_str()), ("main", "a/b"));
        // A namespace that meets a reserved word: the API's shape wins where both fit.
        assert_eq!(
            parse("api/x/resolve/main/f").unwrap(),
            file("api", "x", "main", "f")
        );
        assert!(matches!(parse("api/models/t/m").unwrap(), Asked::Info(_)));
        assert_eq!(
            parse("datasets/x/resolve/main/f").unwrap(),
            file("datasets", "x", "main", "f")
        );
        assert!(!parse("datasets/x/resolve/main/f").unwrap().at().datasets);
    }

    #[test]
    fn paths_that_climb_or_hide_bytes_are_refused() {
        for bad in [
            "t/m/resolve/main/../x",
            "t/m/resolve/main/%2e%2e/x",
            "t/m/resolve/main/a/%2E%2E%2Fetc",
            "t/m/resolve/main/a%00b",
            "t/m/resolve/main/a//b",
            "t/m/resolve/main/./a",
            "t/m/resolve/main/%ff",
            "api/models/t/m/tree/main/..",
        ] {
            assert!(matches!(parse(bad), Err(Missing::Bad(_))), "{bad}");
        }
        for nothing in [
            "",
            "t/m",
            "t/m/resolve/main",
            "api/spaces/t/m",
            "t/m/blob/main/x",
        ] {
            assert!(matches!(parse(nothing), Err(Missing::Route)), "{nothing}");
        }
    }
}
