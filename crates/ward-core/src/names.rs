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

/// Longest issuer URL, subject or audience an identity may store.
pub const MAX_CLAIM_VALUE_LEN: usize = 1024;
/// Longest claim name in `claims` / `claim_patterns`.
pub const MAX_CLAIM_NAME_LEN: usize = 128;

/// A user-supplied value as an error message may repeat it: at most 64
/// characters, with an ellipsis when cut.
pub fn echo(value: &str) -> String {
    match value.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &value[..i]),
        None => value.to_owned(),
    }
}

/// Characters no stored text may hold: control characters (C0, DEL, C1),
/// line and paragraph separators, bidirectional overrides and isolates, and
/// zero-width characters. They make one string display as another
/// ("Trojan Source") or break terminals and logs.
pub fn is_forbidden_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}' // soft hyphen
                | '\u{034F}' // combining grapheme joiner
                | '\u{061C}'
                | '\u{115F}'..='\u{1160}' // Hangul fillers
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}' // Mongolian selectors and vowel separator
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}' // Hangul filler
                | '\u{FE00}'..='\u{FE0F}' // variation selectors
                | '\u{FEFF}'
                | '\u{FFA0}' // halfwidth Hangul filler
                | '\u{FFF9}'..='\u{FFFB}' // interlinear annotation
                | '\u{E0000}'..='\u{E0FFF}' // tags and variation selectors supplement
        )
}

/// Checks free text other than names and descriptions (issuers, subjects,
/// audiences, claim names and values): at most `max` bytes, no forbidden
/// characters.
pub fn check_text(field: &str, value: &str, max: usize, out: &mut Vec<FieldViolation>) {
    let description = if value.len() > max {
        format!("{field} must be at most {max} bytes")
    } else if value.chars().any(is_forbidden_char) {
        format!("{field} must not contain control, bidirectional-override or zero-width characters")
    } else {
        return;
    };
    out.push(FieldViolation {
        field: field.into(),
        description,
    });
}

/// Checks a resource name, pushing a violation for `field` if it fails.
/// Beyond the pattern, a name needs a letter or digit and may not start or
/// end with a space: `" "`, `"."` and `".."` name nothing a person can find.
pub fn check_name(field: &str, name: &str, out: &mut Vec<FieldViolation>) {
    let description = if !NAME_RE.is_match(name) {
        format!("{field} must match \"{NAME_PATTERN}\"")
    } else if name.chars().count() > NAME_MAX_LEN {
        format!("{field} must be at most {NAME_MAX_LEN} characters")
    } else if !name.bytes().any(|b| b.is_ascii_alphanumeric()) {
        format!("{field} must contain a letter or a digit")
    } else if name.starts_with(' ') || name.ends_with(' ') {
        format!("{field} must not start or end with a space")
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
    if !DESCRIPTION_RE.is_match(description) || description.chars().any(is_forbidden_char) {
        out.push(FieldViolation {
            field: field.into(),
            description: format!(
                "{field} must match \"{DESCRIPTION_PATTERN}\" (at most 512 characters; no tabs, newlines, control, bidirectional-override or zero-width characters)"
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
        for useless in [" ", ".", "..", "-", " a", "a ", "_._"] {
            assert!(!name_ok(useless), "{useless:?}");
        }
        assert!(name_ok("my team") && name_ok(".hidden") && name_ok("v1.2"));
        assert!(!name_ok(&"a".repeat(64)));
    }

    #[test]
    fn texts() {
        let ok = |s: &str, max: usize| {
            let mut v = vec![];
            check_text("issuer", s, max, &mut v);
            v.is_empty()
        };
        assert!(ok("https://token.actions.githubusercontent.com", 1024));
        assert!(!ok(&"x".repeat(1025), 1024));
        assert!(!ok("a\u{202E}b", 1024));
        assert!(!ok("a\nb", 1024));
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
        for sneaky in [
            "a\u{202E}b",
            "zero\u{200B}width",
            "bom\u{FEFF}",
            "esc\u{1b}[31m",
            "c1\u{9b}",
            "del\u{7f}",
            "iso\u{2066}",
            "soft\u{AD}hyphen",
            "hangul\u{3164}filler",
            "tag\u{E0041}",
            "vs\u{FE0F}",
        ] {
            assert!(!ok(sneaky), "{sneaky:?}");
        }
        assert!(ok(&"x".repeat(512)));
        assert!(!ok(&"x".repeat(513)));
    }
}
