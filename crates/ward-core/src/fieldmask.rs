//! AIP-134 update masks.
//!
//! A PATCH changes exactly the fields in its mask. The mask comes from
//! `updateMask` (comma-separated paths, snake_case or camelCase) or, when that is
//! absent, from the keys present in the JSON body. Output-only fields in either
//! are ignored; unknown paths in an explicit mask are INVALID_ARGUMENT.

use crate::error::{Error, Result};

/// The fields of one resource type, as an update sees them.
pub struct Updatable {
    /// Fields an update may change (snake_case proto names).
    pub mutable: &'static [&'static str],
    /// Fields that exist but are output-only: ignored in masks and bodies.
    pub output_only: &'static [&'static str],
    /// Fields set at creation that no update can change: an explicit mask
    /// naming one is INVALID_ARGUMENT (a body that merely carries one, as a
    /// fetched-and-modified resource does, is not).
    pub immutable: &'static [&'static str],
}

/// `create_time` → `createTime`; `uidp.descendants_of` →
/// `uidp.descendantsOf`: proto names to proto3 JSON names, segment by segment.
pub fn camel(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut upper = false;
    for c in path.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A validated mask: a subset of the resource's mutable fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldMask(Vec<&'static str>);

/// `createTime` → `create_time`; `uidp.descendantsOf` → `uidp.descendants_of`.
/// Request field names arrive in either form (proto or JSON names).
pub fn snake(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 4);
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl FieldMask {
    /// From an explicit `updateMask`. `*` means every mutable field.
    pub fn parse(raw: &str, fields: &Updatable) -> Result<Self> {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        for path in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if path == "*" {
                return Ok(Self(fields.mutable.to_vec()));
            }
            let p = snake(path);
            if fields.immutable.contains(&p.as_str()) {
                return Err(Error::invalid(
                    "update_mask",
                    format!("{p} cannot be changed after creation; create a new resource instead"),
                ));
            }
            if let Some(f) = fields.mutable.iter().find(|f| **f == p) {
                if !out.contains(f) {
                    out.push(*f);
                }
            } else if !fields.output_only.contains(&p.as_str()) {
                bad.push(path.to_owned());
            }
        }
        if !bad.is_empty() {
            return Err(Error::invalid(
                "update_mask",
                format!(
                    "update_mask has unknown field path(s) {}; updatable fields are {}",
                    bad.join(", "),
                    fields.mutable.join(", ")
                ),
            ));
        }
        Ok(Self(out))
    }

    /// From the keys present in a JSON body (unknown keys are ignored, as unknown
    /// request fields are).
    pub fn from_body_keys<'a>(keys: impl IntoIterator<Item = &'a str>, fields: &Updatable) -> Self {
        let mut out = Vec::new();
        for k in keys {
            let p = snake(k);
            if let Some(f) = fields.mutable.iter().find(|f| **f == p)
                && !out.contains(f)
            {
                out.push(*f);
            }
        }
        Self(out)
    }

    /// Every mutable field that is set to a non-default value (gRPC without a mask).
    pub fn of(paths: Vec<&'static str>) -> Self {
        Self(paths)
    }

    pub fn contains(&self, field: &str) -> bool {
        self.0.contains(&field)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUP: Updatable = Updatable {
        mutable: &["name", "description"],
        output_only: &["uid", "create_time"],
        immutable: &["parent"],
    };

    #[test]
    fn masks() {
        let m = FieldMask::parse("description", &GROUP).unwrap();
        assert!(m.contains("description") && !m.contains("name"));
        let m = FieldMask::parse("name, description,createTime", &GROUP).unwrap();
        assert!(m.contains("name") && m.contains("description"));
        assert!(FieldMask::parse("*", &GROUP).unwrap().contains("name"));
        let e = FieldMask::parse("nmae", &GROUP).unwrap_err();
        assert!(e.message().contains("nmae"), "{}", e.message());
        let e = FieldMask::parse("name,parent", &GROUP).unwrap_err();
        assert!(e.message().contains("parent cannot be changed"), "{}", e.message());
        let m = FieldMask::from_body_keys(["description", "unknown", "uid", "parent"], &GROUP);
        assert_eq!(m, FieldMask(vec!["description"]));
    }

    proptest::proptest! {
        /// Arbitrary masks and body keys never panic; a mask that parses
        /// names only mutable fields; errors stay small.
        #[test]
        fn masks_never_panic(raw in ".{0,400}", keys in proptest::collection::vec(".{0,20}", 0..20)) {
            match FieldMask::parse(&raw, &GROUP) {
                Ok(m) => proptest::prop_assert!(m.0.iter().all(|f| GROUP.mutable.contains(f))),
                Err(e) => proptest::prop_assert!(e.bounded().message().len() < 4096),
            }
            let m = FieldMask::from_body_keys(keys.iter().map(String::as_str), &GROUP);
            proptest::prop_assert!(m.0.iter().all(|f| GROUP.mutable.contains(f)));
        }
    }
}
