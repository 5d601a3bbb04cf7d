//! JSON helpers shared by the SBOM and npm parsers.
//!
//! serde's derived deserializers recurse once per nesting level. serde_json
//! stops at 128 levels on its own, but the bound we promise is
//! [`crate::Limits::max_depth`], and a byte scan is the cheapest way to keep
//! it before any recursion starts.

use serde::de::DeserializeOwned;

use crate::Error;

/// Fails if `bytes` nest arrays/objects deeper than `limit`. Brackets inside
/// strings do not count; the scan is linear and allocation-free. It does not
/// validate the JSON: serde does that afterwards.
pub(crate) fn check_depth(bytes: &[u8], limit: usize) -> Result<(), Error> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(Error::TooDeep { what: "JSON", limit });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Drops a leading UTF-8 byte-order mark, which some Windows tools write and
/// serde_json refuses.
pub(crate) fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// Depth-checks then deserializes `bytes`. Syntax errors become
/// [`Error::Json`]; a well-formed document of the wrong shape becomes
/// [`Error::NotSbom`], since that is what it means to the caller.
pub(crate) fn from_slice<T: DeserializeOwned>(bytes: &[u8], what: &'static str, limit: usize) -> Result<T, Error> {
    check_depth(bytes, limit)?;
    serde_json::from_slice(bytes).map_err(|e| classify(e, what))
}

/// Deserializes an already parsed (and so already depth-checked) value.
pub(crate) fn from_value<T: DeserializeOwned>(value: serde_json::Value, what: &'static str) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|e| classify(e, what))
}

fn classify(e: serde_json::Error, what: &'static str) -> Error {
    match e.classify() {
        serde_json::error::Category::Data => Error::NotSbom {
            reason: format!("{what}: {e}"),
        },
        _ => Error::Json { what, source: e },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_only_structure() {
        assert!(check_depth(br#"{"a":[[1]]}"#, 3).is_ok());
        assert!(check_depth(br#"{"a":[[[1]]]}"#, 3).is_err());
        assert!(check_depth(br#"{"a":"[[[[[[\"[[[["}"#, 1).is_ok());
        assert!(check_depth(&[b'['; 10_000], 64).is_err());
    }
}
