//! Validation of names and descriptions (reference §8).

use std::sync::LazyLock;

use regex::Regex;

use crate::error::FieldViolation;

pub const NAME_PATTERN: &str = "^[a-z0-9 ._-]{1,}$";
/// The API comments say names are at most 63 characters.
pub const NAME_MAX_LEN: usize = 63;
pub const DESCRIPTION_PATTERN: &str = r"^[\S ]{0,512}$";

static NAME_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(NAME_PATTERN).expect("valid regex"));
static DESCRIPTION_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(DESCRIPTION_PATTERN).expect("valid regex"));

/// Checks a resource name, pushing a violation for `field` if it fails.
pub fn check_name(field: &str, name: &str, out: &mut Vec<FieldViolation>) {
    let description = if !NAME_RE.is_match(name) {
        format!("{field} must match \"{NAME_PATTERN}\"")
    } else if name.chars().count() > NAME_MAX_LEN {
        format!("{field} must be at most {NAME_MAX_LEN} characters")
    } else {
        return;
    };
    out.push(FieldViolation {
        field: field.into(),
        description,
    });
}

/// Checks a description: printable characters and spaces, at most 512.
pub fn check_description(field: &str, description: &str, out: &mut Vec<FieldViolation>) {
    if !DESCRIPTION_RE.is_match(description) {
        out.push(FieldViolation {
            field: field.into(),
            description: format!(
                "{field} must match \"{DESCRIPTION_PATTERN}\" (at most 512 characters, no tabs or newlines)"
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_ok(s: &str) -> bool {
        let mut v = vec![];
        check_name("name", s, &mut v);
        v.is_empty()
    }

    #[test]
    fn names() {
        assert!(name_ok("engineering"));
        assert!(name_ok("a.b_c-d 1"));
        assert!(!name_ok(""));
        assert!(!name_ok("Upper"));
        assert!(!name_ok("tab\t"));
        assert!(name_ok(&"a".repeat(63)));
        assert!(!name_ok(&"a".repeat(64)));
    }

    #[test]
    fn descriptions() {
        let ok = |s: &str| {
            let mut v = vec![];
            check_description("description", s, &mut v);
            v.is_empty()
        };
        assert!(ok(""));
        assert!(ok("Hello, World! ünïcode"));
        assert!(!ok("line\nbreak"));
        assert!(ok(&"x".repeat(512)));
        assert!(!ok(&"x".repeat(513)));
    }
}
