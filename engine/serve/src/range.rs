//! A request's `Range` header, as the object routes (`objects/`) and the Hub's file
//! route (`hub/file.rs`) read it: one range, checked against the size of what is read.

use axum::http::StatusCode;

/// A request's `Range`, as (first byte, length) within an object of `size` bytes: one
/// range of `bytes=FIRST-LAST`, `bytes=FIRST-` or `bytes=-SUFFIX`, the end clamped to the
/// object. `Err` answers 416 (unsatisfiable) or 400 (not a range this server reads).
pub fn parse_range(value: &str, size: u64) -> Result<(u64, u64), StatusCode> {
    let spec = value
        .trim()
        .strip_prefix("bytes=")
        .ok_or(StatusCode::BAD_REQUEST)?;
    if spec.contains(',') {
        return Err(StatusCode::BAD_REQUEST);
    }
    let (a, b) = spec.split_once('-').ok_or(StatusCode::BAD_REQUEST)?;
    let num = |s: &str| s.trim().parse::<u64>().map_err(|_| StatusCode::BAD_REQUEST);
    let (first, last) = match (a.trim().is_empty(), b.trim().is_empty()) {
        (true, true) => return Err(StatusCode::BAD_REQUEST),
        (true, false) => {
            let n = num(b)?;
            if n == 0 || size == 0 {
                return Err(StatusCode::RANGE_NOT_SATISFIABLE);
            }
            (size - n.min(size), size - 1)
        }
        (false, true) => (num(a)?, size.saturating_sub(1)),
        (false, false) => (num(a)?, num(b)?),
    };
    if first >= size {
        return Err(StatusCode::RANGE_NOT_SATISFIABLE);
    }
    if last < first {
        return Err(StatusCode::BAD_REQUEST);
    }
    let last = last.min(size - 1);
    Ok((first, last - first + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_against_the_object() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok((0, 10)));
        assert_eq!(parse_range("bytes=90-", 100), Ok((90, 10)));
        assert_eq!(parse_range("bytes=-10", 100), Ok((90, 10)));
        assert_eq!(parse_range("bytes=0-99999999999", 100), Ok((0, 100)));
        assert_eq!(
            parse_range("bytes=0-18446744073709551615", 100),
            Ok((0, 100))
        );
        assert_eq!(
            parse_range("bytes=1-18446744073709551615", 100),
            Ok((1, 99))
        );
        assert_eq!(
            parse_range("bytes=100-", 100),
            Err(StatusCode::RANGE_NOT_SATISFIABLE)
        );
        assert_eq!(
            parse_range("bytes=18446744073709551615-", 100),
            Err(StatusCode::RANGE_NOT_SATISFIABLE)
        );
        for bad in [
            "bytes=9-1",
            "bytes=a-b",
            "bytes=-",
            "items=0-1",
            "bytes=0-1,4-5",
            "bytes=99999999999999999999-1",
        ] {
            assert_eq!(parse_range(bad, 100), Err(StatusCode::BAD_REQUEST), "{bad}");
        }
        assert_eq!(
            parse_range("bytes=-0", 100),
            Err(StatusCode::RANGE_NOT_SATISFIABLE)
        );
    }
}
