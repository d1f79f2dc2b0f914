//! Where the tensors of a `.safetensors` file lie, from its header: the order in which
//! a mount reads the file ahead of a loader that maps it and touches tensor after
//! tensor (torch, transformers, vLLM and SGLang all do).
//!
//! The format: 8 bytes of little-endian header length N, then N bytes of JSON mapping
//! each tensor name to `{dtype, shape, data_offsets: [begin, end]}` (offsets relative to
//! the byte after the header), plus an optional `__metadata__` of strings.

use std::collections::BTreeMap;
use std::ops::Range;

/// The largest header the format allows (the reference implementation refuses more).
pub const MAX_HEADER: u64 = 100_000_000;

/// The header's length, from the file's first 8 bytes, if a file of `file_size` bytes
/// can hold it.
pub fn header_len(first: &[u8], file_size: u64) -> Option<u64> {
    let n = u64::from_le_bytes(first.get(..8)?.try_into().ok()?);
    (n > 1 && n <= MAX_HEADER && 8 + n <= file_size).then_some(n)
}

/// The tensors the header names, with their byte ranges in the file, ordered by
/// offset (empty ones left out). `None` when the header is not one: the caller then
/// reads the file ahead as it would any other.
pub fn tensors(header: &[u8], file_size: u64) -> Option<Vec<(String, Range<u64>)>> {
    let map: BTreeMap<String, serde_json::Value> = serde_json::from_slice(header).ok()?;
    let base = 8 + header.len() as u64;
    let mut out = Vec::with_capacity(map.len());
    for (name, v) in map {
        if name == "__metadata__" {
            continue;
        }
        let offsets = v.get("data_offsets")?.as_array()?;
        let [b, e] = offsets.as_slice() else {
            return None;
        };
        let (b, e) = (b.as_u64()?, e.as_u64()?);
        if b > e || base.checked_add(e)? > file_size {
            return None;
        }
        if e > b {
            out.push((name, base + b..base + e));
        }
    }
    out.sort_by_key(|(_, r)| r.start);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_come_in_offset_order_with_their_names() {
        let h = br#"{"__metadata__":{"format":"pt"},
            "b":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},
            "a":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},
            "c":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},
            "empty":{"dtype":"F16","shape":[0],"data_offsets":[20,20]}}"#;
        let base = 8 + h.len() as u64;
        let got = tensors(h, base + 20).unwrap();
        assert_eq!(
            got,
            vec![
                ("b".to_string(), base..base + 4),
                ("a".to_string(), base + 4..base + 8),
                ("c".to_string(), base + 16..base + 20)
            ]
        );
    }

    #[test]
    fn a_header_that_is_not_one_gives_no_plan() {
        assert_eq!(header_len(&[0; 4], 100), None, "too short");
        assert_eq!(header_len(&200u64.to_le_bytes(), 100), None, "past the end");
        assert_eq!(
            header_len(&u64::MAX.to_le_bytes(), u64::MAX),
            None,
            "too large"
        );
        assert_eq!(header_len(&10u64.to_le_bytes(), 100), Some(10));
        for bad in [
            &b"not json"[..],
            br#"{"a":{"data_offsets":[8,4]}}"#,
            br#"{"a":{"data_offsets":[0,1000]}}"#,
            br#"{"a":{"data_offsets":[0]}}"#,
            br#"{"a":{"dtype":"F16"}}"#,
            br#"[1,2]"#,
        ] {
            assert_eq!(tensors(bad, 200), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
