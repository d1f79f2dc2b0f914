//! The header of a `.safetensors` file: where its tensors lie. One parser for every
//! reader of headers (the tensor diff, a mount's read-ahead), since a header is
//! crafted input like any other file.
//!
//! The format: 8 bytes of little-endian header length N, then N bytes of JSON mapping
//! each tensor name to `{dtype, shape, data_offsets: [begin, end]}` (offsets relative to
//! the byte after the header), plus an optional `__metadata__` of strings.
//!
//! Bounds: the header is at most [`MAX_HEADER`] bytes, the caller says how many
//! tensors it will take (a 65 MB header can name a million one-byte tensors, and each
//! costs memory), the JSON is read once without building a document tree, and every
//! offset is checked against the file with arithmetic that cannot wrap.

use std::cell::Cell;
use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// The largest header the format allows (the reference implementation refuses more).
pub const MAX_HEADER: u64 = 100_000_000;

/// One tensor: its name, and where its bytes are in the file (absolute offsets).
/// `dtype` and `shape` are filled only when asked for (`Want::Details`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub range: Range<u64>,
}

/// What a caller keeps of each tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Name and range: a plan of reads.
    Ranges,
    /// Name, range, dtype and shape: a diff shown to a person.
    Details,
}

/// Why a header gives no tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Not a safetensors header, or a damaged one.
    Malformed(String),
    /// It names more tensors than the caller takes.
    TooMany { limit: usize },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Malformed(why) => write!(f, "not a safetensors header: {why}"),
            HeaderError::TooMany { limit } => {
                write!(f, "the header names more than {limit} tensors")
            }
        }
    }
}

/// The header's length, from the file's first 8 bytes, if a file of `file_size` bytes
/// can hold it.
pub fn header_len(first: &[u8], file_size: u64) -> Option<u64> {
    let n = u64::from_le_bytes(first.get(..8)?.try_into().ok()?);
    let fits = 8u64.checked_add(n).is_some_and(|end| end <= file_size);
    (n > 1 && n <= MAX_HEADER && fits).then_some(n)
}

/// The bytes of memory one tensor of `name_len` bytes costs a caller that keeps
/// `want` of it, counting the allocator's overhead: what a caller's `limit` is
/// computed from.
pub fn cost_per_tensor(want: Want) -> usize {
    let inline = std::mem::size_of::<Tensor>();
    // A name's heap block (glibc's smallest is 32 bytes), and for details the dtype's
    // and the shape's.
    match want {
        Want::Ranges => inline + 48,
        Want::Details => inline + 48 + 32 + 48,
    }
}

/// The tensors `header` names (empty ones included), in the order it names them, at
/// most `limit` of them, each checked to lie within a file of `file_size` bytes.
pub fn parse(
    header: &[u8],
    file_size: u64,
    want: Want,
    limit: usize,
) -> Result<Vec<Tensor>, HeaderError> {
    let base = 8 + header.len() as u64;
    let too_many = Cell::new(false);
    let seed = Tensors {
        base,
        file_size,
        want,
        limit,
        too_many: &too_many,
    };
    let mut de = serde_json::Deserializer::from_slice(header);
    let out = seed.deserialize(&mut de).and_then(|t| de.end().map(|()| t));
    match out {
        Ok(t) => Ok(t),
        Err(_) if too_many.get() => Err(HeaderError::TooMany { limit }),
        Err(e) => Err(HeaderError::Malformed(e.to_string())),
    }
}

struct Tensors<'a> {
    base: u64,
    file_size: u64,
    want: Want,
    limit: usize,
    too_many: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Tensors<'_> {
    type Value = Vec<Tensor>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Tensor>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Tensors<'_> {
    type Value = Vec<Tensor>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of tensor names to their dtype, shape and data_offsets")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Tensor>, A::Error> {
        use serde::de::Error;
        let mut out = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if name == "__metadata__" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if out.len() >= self.limit {
                self.too_many.set(true);
                return Err(A::Error::custom("too many tensors"));
            }
            let e = map.next_value_seed(Entry(self.want))?;
            let [begin, end] = e
                .offsets
                .ok_or_else(|| A::Error::missing_field("data_offsets"))?;
            let range = self
                .base
                .checked_add(begin)
                .zip(self.base.checked_add(end))
                .filter(|(b, e)| b <= e && *e <= self.file_size)
                .map(|(b, e)| b..e)
                .ok_or_else(|| {
                    A::Error::custom(format!(
                        "tensor {name:?}: data_offsets [{begin}, {end}] do not lie within the file"
                    ))
                })?;
            if self.want == Want::Details && (e.dtype.is_none() || e.shape.is_none()) {
                return Err(A::Error::custom(format!(
                    "tensor {name:?} has no dtype or no shape"
                )));
            }
            out.push(Tensor {
                name,
                dtype: e.dtype.unwrap_or_default(),
                shape: e.shape.unwrap_or_default(),
                range,
            });
        }
        Ok(out)
    }
}

/// One tensor's entry; what is not wanted is skipped without being kept.
struct Entry(Want);

struct Fields {
    offsets: Option<[u64; 2]>,
    dtype: Option<String>,
    shape: Option<Vec<u64>>,
}

impl<'de> DeserializeSeed<'de> for Entry {
    type Value = Fields;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Fields, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Entry {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tensor's {dtype, shape, data_offsets}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut f = Fields {
            offsets: None,
            dtype: None,
            shape: None,
        };
        let details = self.0 == Want::Details;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "data_offsets" => f.offsets = Some(map.next_value()?),
                "dtype" if details => f.dtype = Some(map.next_value()?),
                "shape" if details => f.shape = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(h: &[u8], size: u64) -> Result<Vec<(String, Range<u64>)>, HeaderError> {
        Ok(parse(h, size, Want::Ranges, 1000)?
            .into_iter()
            .map(|t| (t.name, t.range))
            .collect())
    }

    #[test]
    fn tensors_come_with_their_names_ranges_and_details() {
        let h = br#"{"__metadata__":{"format":"pt"},
            "b":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},
            "a":{"shape":[2],"dtype":"BF16","data_offsets":[4,8],"extra":{"x":[1]}},
            "empty":{"dtype":"F16","shape":[0],"data_offsets":[20,20]}}"#;
        let base = 8 + h.len() as u64;
        assert_eq!(
            ranges(h, base + 20).unwrap(),
            vec![
                ("b".to_string(), base..base + 4),
                ("a".to_string(), base + 4..base + 8),
                ("empty".to_string(), base + 20..base + 20)
            ]
        );
        let d = parse(h, base + 20, Want::Details, 10).unwrap();
        assert_eq!(
            (d[1].dtype.as_str(), d[1].shape.as_slice()),
            ("BF16", &[2][..])
        );
        let r = parse(h, base + 20, Want::Ranges, 10).unwrap();
        assert!(r[1].dtype.is_empty() && r[1].shape.is_empty(), "not kept");
    }

    #[test]
    fn a_header_that_is_not_one_is_refused() {
        assert_eq!(header_len(&[0; 4], 100), None, "too short");
        assert_eq!(header_len(&200u64.to_le_bytes(), 100), None, "past the end");
        for n in [u64::MAX, 1 << 63, u64::MAX - 7] {
            assert_eq!(header_len(&n.to_le_bytes(), u64::MAX), None, "{n}");
        }
        assert_eq!(header_len(&10u64.to_le_bytes(), 100), Some(10));
        for bad in [
            &b"not json"[..],
            br#"{"a":{"data_offsets":[8,4]}}"#,
            br#"{"a":{"data_offsets":[0,1000]}}"#,
            br#"{"a":{"data_offsets":[0]}}"#,
            br#"{"a":{"data_offsets":[0,1,2]}}"#,
            br#"{"a":{"data_offsets":[-1,2]}}"#,
            br#"{"a":{"dtype":"F16"}}"#,
            br#"{"a":{"data_offsets":[0,1]}} trailing"#,
            br#"[1,2]"#,
        ] {
            let got = ranges(bad, 200);
            assert!(
                matches!(got, Err(HeaderError::Malformed(_))),
                "{}: {got:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // Details need the dtype and the shape.
        let h = br#"{"a":{"data_offsets":[0,1]}}"#;
        assert!(parse(h, 200, Want::Details, 10).is_err());
    }

    #[test]
    fn offsets_that_would_wrap_are_refused() {
        let max = u64::MAX;
        for (b, e) in [(0, max - 7), (max - 100, max - 7), (max, max), (0, max)] {
            let h = format!(r#"{{"t":{{"dtype":"U8","shape":[1],"data_offsets":[{b},{e}]}}}}"#);
            for want in [Want::Ranges, Want::Details] {
                let got = parse(h.as_bytes(), 1 << 20, want, 10);
                assert!(
                    matches!(got, Err(HeaderError::Malformed(_))),
                    "[{b}, {e}]: {got:?}"
                );
            }
        }
    }

    #[test]
    fn a_header_past_the_limit_stops_at_it() {
        let mut h = String::from("{");
        for i in 0..1000 {
            h.push_str(&format!(r#""t{i}":{{"data_offsets":[{i},{}]}},"#, i + 1));
        }
        h.pop();
        h.push('}');
        let size = 8 + h.len() as u64 + 1000;
        assert_eq!(
            parse(h.as_bytes(), size, Want::Ranges, 1000).unwrap().len(),
            1000
        );
        assert_eq!(
            parse(h.as_bytes(), size, Want::Ranges, 999),
            Err(HeaderError::TooMany { limit: 999 })
        );
    }
}
