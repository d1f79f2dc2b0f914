//! What the arguments of several commands share: help text and value parsers. Each
//! command's own arguments sit beside it, in `commands/`.

pub const JSON_HELP: &str =
    "Print one JSON document on stdout instead of text (shapes: docs/JSON.md)";
pub const PEER_HELP: &str = "A cache server (`sealvol serve`) to read through before the origin, as http://HOST:PORT; repeat for a ring: each part of a pack is asked of the server that owns it, then the next [default: config.toml's peers]";
pub const PEERS_FILE_HELP: &str = "A file listing the cache servers, one http://HOST:PORT per line, looked at again each second while this runs (an operator or a Kubernetes headless service rewrites it) [default: config.toml's peers_file]";
pub const ORIGIN_HELP: &str = "Another repository holding the same versions (`sealvol volume mirror`), read when the repository fails: a directory or s3://BUCKET/PREFIX; repeat for more, asked in order [default: config.toml's mirrors]";
pub const REF_HELP: &str = "A ref: NS/NAME@b3:DIGEST (8+ hex digits will do), NS/NAME:TAG, or NS/NAME for the newest version";

/// `--quota NS=SIZE`: a namespace and its quota in bytes, `None` for `NS=none`.
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

/// A namespace's name (`--quota`, `--private-dedup`, `--hf-namespace`).
pub fn namespace_name(s: &str) -> Result<String, String> {
    sealvol_core::refs::Name::parse("namespace", s)
        .map(|n| n.to_string())
        .map_err(|e| e.message().to_string())
}
