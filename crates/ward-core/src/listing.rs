//! AIP-158 list queries: filters, ordering, page size and skip, parsed once.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::uidp::Uidp;

pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 200;

/// Parses `page_size`: 0 means the default, above the maximum is coerced to it,
/// negative is an error.
pub fn page_size(raw: i32) -> Result<u32> {
    match raw {
        n if n < 0 => Err(Error::invalid("page_size", "page_size must not be negative")),
        0 => Ok(DEFAULT_PAGE_SIZE),
        n => Ok((n as u32).min(MAX_PAGE_SIZE)),
    }
}

/// Parses `skip` (≥ 0).
pub fn skip(raw: i32) -> Result<u32> {
    u32::try_from(raw).map_err(|_| Error::invalid("skip", "skip must not be negative"))
}

/// A field a listing can be ordered by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortField {
    Uid,
    Name,
    CreateTime,
    UpdateTime,
}

impl SortField {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "uid" => SortField::Uid,
            "name" => SortField::Name,
            "create_time" | "created_at" | "createTime" | "createdAt" => SortField::CreateTime,
            "update_time" | "updated_at" | "updateTime" | "updatedAt" => SortField::UpdateTime,
            _ => return None,
        })
    }

    /// Whether this field's cursor key is a string (else milliseconds).
    pub fn is_text(self) -> bool {
        matches!(self, SortField::Uid | SortField::Name)
    }
}

/// `order_by`: one field, ascending or descending; ties are broken by uid in the
/// same direction, so every order is total and keyset pagination is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderBy {
    pub field: SortField,
    pub desc: bool,
}

impl Default for OrderBy {
    fn default() -> Self {
        OrderBy {
            field: SortField::Uid,
            desc: false,
        }
    }
}

impl OrderBy {
    /// Parses `"field"`, `"field asc"` or `"field desc"`; empty means `uid asc`.
    pub fn parse(raw: &str) -> Result<Self> {
        let mut words = raw.split_whitespace();
        let Some(first) = words.next() else {
            return Ok(Self::default());
        };
        let bad = || {
            Error::invalid(
                "order_by",
                format!(
                    "order_by \"{raw}\" is not supported: use one of uid, name, create_time (created_at), \
                     update_time (updated_at), optionally followed by \" asc\" or \" desc\""
                ),
            )
        };
        let field = SortField::parse(first).ok_or_else(bad)?;
        let desc = match words.next().map(str::to_ascii_lowercase).as_deref() {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(_) => return Err(bad()),
        };
        if words.next().is_some() {
            return Err(bad());
        }
        Ok(OrderBy { field, desc })
    }
}

/// The hierarchy filter (`uidp.*`); all given members must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UidpFilter {
    /// Strict ancestors of this UIDP.
    pub ancestors_of: Option<Uidp>,
    /// This UIDP and everything below it.
    pub descendants_of: Option<Uidp>,
    /// Direct children of this UIDP.
    pub children_of: Option<Uidp>,
    pub in_root: bool,
    /// Exactly these UIDPs (empty: no restriction).
    pub ids: Vec<Uidp>,
}

/// The value of the sort field at a cursor position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CursorKey {
    Text(String),
    Millis(i64),
}

/// Keyset position: the last item returned, as (sort key, uid).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub key: CursorKey,
    pub uid: String,
}

/// A value for an exact-match column filter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum FilterValue {
    Text(String),
    Int(i64),
    /// The column is at least this number (e.g. `updated_since`).
    AtLeast(i64),
    /// The column ends with this text. Only for service-built values without
    /// `%` or `_` (e.g. `/` + a 16-hex uid segment).
    EndsWith(String),
    /// The column equals one of these (a repeated filter; never empty).
    AnyOf(Vec<String>),
    /// The column is none of these.
    NoneOf(Vec<String>),
    /// The integer column equals one of these.
    AnyOfInt(Vec<i64>),
    /// The column holds this text anywhere, matched literally (a substring
    /// search, no wildcards). `index` covers (uid, the column): SQLite is
    /// told to scan it, so each row is read only when it matches.
    Search {
        index: &'static str,
        text: String,
    },
    /// The column is NULL (`true`) or not (`false`).
    IsNull(bool),
    /// `uid` is among the `key`s of the rows of `table` matching every filter
    /// (e.g. advisories with an event in some review state).
    In(SubQuery),
}

/// Rows of another table that select records by a key column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubQuery {
    pub table: &'static str,
    pub key: &'static str,
    pub filters: Vec<(&'static str, FilterValue)>,
}

/// A fully parsed list request, as a store executes it.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    pub uidp: UidpFilter,
    /// Exact-match name filter.
    pub name: Option<String>,
    /// Further exact-match filters: (column, value). Columns come from the
    /// service layer, never from the client.
    pub filters: Vec<(&'static str, FilterValue)>,
    pub order: OrderBy,
    pub page_size: u32,
    pub skip: u32,
    /// Continue after this position (from a page token).
    pub after: Option<Cursor>,
    /// Authorization: only records at or below one of these scopes. `None` means
    /// unrestricted; an empty list means nothing is visible.
    pub visible: Option<Vec<Uidp>>,
}

impl ListQuery {
    /// What a page token is bound to: the collection, filters and order (not the
    /// page size or skip, which may change between pages).
    pub fn fingerprint(&self, collection: &str) -> String {
        let f = &self.uidp;
        // The same ids in another order are the same query.
        let mut ids: Vec<&str> = f.ids.iter().map(Uidp::as_str).collect();
        ids.sort_unstable();
        ids.dedup();
        serde_json::json!({
            "c": collection,
            "a": f.ancestors_of.as_ref().map(Uidp::as_str),
            "d": f.descendants_of.as_ref().map(Uidp::as_str),
            "ch": f.children_of.as_ref().map(Uidp::as_str),
            "r": f.in_root,
            "i": ids,
            "n": self.name,
            "f": self.filters,
            "o": self.order,
        })
        .to_string()
    }
}

/// One page of results.
#[derive(Clone, Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Position after the last item, when more items follow.
    pub next: Option<Cursor>,
    pub total_count: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_by_forms() {
        assert_eq!(OrderBy::parse("").unwrap(), OrderBy::default());
        assert_eq!(
            OrderBy::parse("name").unwrap(),
            OrderBy {
                field: SortField::Name,
                desc: false
            }
        );
        assert_eq!(
            OrderBy::parse("name desc").unwrap(),
            OrderBy {
                field: SortField::Name,
                desc: true
            }
        );
        assert_eq!(
            OrderBy::parse("created_at DESC").unwrap(),
            OrderBy {
                field: SortField::CreateTime,
                desc: true
            }
        );
        assert_eq!(
            OrderBy::parse("update_time asc").unwrap(),
            OrderBy {
                field: SortField::UpdateTime,
                desc: false
            }
        );
        for bad in ["description", "name sideways", "name desc extra", "name,uid"] {
            let e = OrderBy::parse(bad).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArgument(v) if v[0].field == "order_by"),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn page_sizes() {
        assert_eq!(page_size(0).unwrap(), 50);
        assert_eq!(page_size(7).unwrap(), 7);
        assert_eq!(page_size(201).unwrap(), 200);
        assert!(page_size(-1).is_err());
        assert!(skip(-1).is_err());
        assert_eq!(skip(3).unwrap(), 3);
    }

    proptest::proptest! {
        /// Arbitrary list parameters never panic; what parses is in range,
        /// and errors stay small however long the input.
        #[test]
        fn list_parameters_never_panic(order in ".{0,300}", size: i32, skipped: i32) {
            match OrderBy::parse(&order) {
                Ok(_) => {}
                Err(e) => proptest::prop_assert!(e.bounded().message().len() < 4096),
            }
            if let Ok(n) = page_size(size) {
                proptest::prop_assert!((1..=MAX_PAGE_SIZE).contains(&n));
            }
            proptest::prop_assert_eq!(skip(skipped).is_ok(), skipped >= 0);
        }

        /// Words from the grammar in any arrangement: accepted exactly when
        /// they form `field [asc|desc]`.
        #[test]
        fn order_by_grammar(words in proptest::collection::vec(
            proptest::sample::select(vec!["name", "uid", "create_time", "created_at", "asc", "DESC", "x", ""]), 0..4)
        ) {
            let raw = words.join(" ");
            let tokens: Vec<&str> = raw.split_whitespace().collect();
            let field_ok = |t: &str| ["name", "uid", "create_time", "created_at"].contains(&t);
            let dir_ok = |t: &str| ["asc", "desc"].contains(&t.to_ascii_lowercase().as_str());
            let want = match tokens.as_slice() {
                [] => true,
                [f] => field_ok(f),
                [f, d] => field_ok(f) && dir_ok(d),
                _ => false,
            };
            proptest::prop_assert_eq!(OrderBy::parse(&raw).is_ok(), want, "{:?}", raw);
        }
    }
}
