//! Turning a proto list request's common parts into a [`ListQuery`], and a page
//! back into the response's cursor fields.

use ward_core::listing::{self, ListQuery, OrderBy, Page, UidpFilter};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::common::UidpFilter as ProtoFilter;

use crate::ward::Ward;

/// Most UIDPs one `uidp.ids` filter may name.
pub const MAX_IDS: usize = 1000;

/// The common AIP-158 parameters of every List request.
pub struct ListParams<'a> {
    pub uidp: Option<&'a ProtoFilter>,
    pub name: &'a str,
    pub page_size: i32,
    pub page_token: &'a str,
    pub order_by: &'a str,
    pub skip: i32,
    /// Resource-specific exact-match filters (column, value), already checked.
    pub filters: Vec<(&'static str, ward_core::listing::FilterValue)>,
}

fn opt_uidp(field: &str, raw: &str, bad: &mut Vec<ward_core::error::FieldViolation>) -> Option<Uidp> {
    if raw.is_empty() {
        None
    } else {
        super::parse_uidp(field, raw, bad)
    }
}

/// Parses a `uidp.*` filter, recording each bad field in `bad`.
pub(crate) fn parse_filter(f: &ProtoFilter, bad: &mut Vec<ward_core::error::FieldViolation>) -> UidpFilter {
    if f.ids.len() > MAX_IDS {
        bad.push(ward_core::error::FieldViolation {
            field: "uidp.ids".into(),
            description: format!("uidp.ids may name at most {MAX_IDS} UIDPs"),
        });
    }
    UidpFilter {
        ancestors_of: opt_uidp("uidp.ancestors_of", &f.ancestors_of, bad),
        descendants_of: opt_uidp("uidp.descendants_of", &f.descendants_of, bad),
        children_of: opt_uidp("uidp.children_of", &f.children_of, bad),
        in_root: f.in_root,
        ids: f.ids.iter().filter_map(|id| opt_uidp("uidp.ids", id, bad)).collect(),
    }
}

impl Ward {
    /// Parses and checks the parameters; `collection` binds page tokens to it.
    /// Also returns the response's `skipped`: this request's `skip` plus what
    /// the pages before it skipped (carried in the page token).
    pub(crate) fn list_query(
        &self,
        collection: &str,
        p: ListParams<'_>,
        visible: Option<Vec<Uidp>>,
    ) -> Result<(ListQuery, i32)> {
        let mut bad = Vec::new();
        let filter = p.uidp.map(|f| parse_filter(f, &mut bad)).unwrap_or_default();
        let mut collect = |r: Result<()>| {
            if let Err(Error::InvalidArgument(v)) = r {
                bad.extend(v);
            }
        };
        let mut page_size = 0;
        collect(listing::page_size(p.page_size).map(|n| page_size = n));
        let mut skip = 0;
        collect(listing::skip(p.skip).map(|n| skip = n));
        let mut order = OrderBy::default();
        collect(OrderBy::parse(p.order_by).map(|o| order = o));
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let mut q = ListQuery {
            uidp: filter,
            name: (!p.name.is_empty()).then(|| p.name.to_owned()),
            filters: p.filters,
            order,
            page_size,
            skip,
            after: None,
            visible,
        };
        let mut skipped = p.skip;
        if !p.page_token.is_empty()
            && let Some((cursor, before)) =
                self.page_tokens
                    .open(p.page_token, &q.fingerprint(collection), self.clock.now_millis())?
        {
            q.after = Some(cursor);
            skipped = skipped.saturating_add(before);
        }
        Ok((q, skipped))
    }

    /// The `next_page_token` for a page ("" on the last page).
    pub(crate) fn next_page_token<T>(&self, collection: &str, q: &ListQuery, skipped: i32, page: &Page<T>) -> String {
        match &page.next {
            Some(c) => self
                .page_tokens
                .issue(&q.fingerprint(collection), c, skipped, self.clock.now_millis()),
            None => String::new(),
        }
    }
}
