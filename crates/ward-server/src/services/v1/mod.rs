//! The v1 API as a translation at the edge: v1 request messages in, v2
//! service calls, v1 messages out. No rule lives here; every check is the
//! v2 service layer's. Each function is called by both transports (the REST
//! transcoder and the v1 gRPC services).

use std::future::Future;

use ward_core::{Error, Result};
use ward_proto::common::UidpFilter;
use ward_proto::iam::v2 as iam2;
use ward_proto::registry::v2 as registry2;

pub mod events;
pub mod feed;
pub mod iam;
pub mod people;
pub mod registry;

/// Most items one v1 List returns. v1 has no pagination, so a List gathers
/// every page of the v2 listing; past this many the request is refused
/// (FAILED_PRECONDITION) instead of truncated, pointing at the paginated v2
/// endpoint.
pub const MAX_V1_ITEMS: usize = 10_000;

/// Most bytes (protobuf-encoded) one v1 List gathers; past that it is
/// refused like a list of too many items. Each item is bounded, but 10,000
/// of the largest would be gigabytes.
pub const MAX_V1_BYTES: usize = 16 * 1024 * 1024;

/// The error for a v1 List over [`MAX_V1_ITEMS`] or [`MAX_V1_BYTES`].
pub fn too_large(v2_path: &str) -> Error {
    Error::precondition(
        "V1_LIST_TOO_LARGE",
        v2_path,
        format!(
            "more than {MAX_V1_ITEMS} items or {MAX_V1_BYTES} bytes match; narrow the filter or use the paginated {v2_path}"
        ),
    )
}

/// A v2 call's result with its field violations named as the v1 request
/// names them, so that a v1 client can match an error to what it sent:
/// each `(v2, v1)` pair renames a field path and what lies below it
/// (`parent` → `parent_id`, `uid` → `id`); a v2 name ending in `.` renames
/// a prefix (a v1 Update's request is the bare resource, so `group.name` is
/// `name`). The first pair that applies wins.
pub fn v1_named<T>(r: Result<T>, names: &[(&str, &str)]) -> Result<T> {
    r.map_err(|e| match e {
        Error::InvalidArgument(mut violations) => {
            for v in &mut violations {
                v.field = v1_field(&v.field, names);
            }
            Error::InvalidArgument(violations)
        }
        e => e,
    })
}

fn v1_field(field: &str, names: &[(&str, &str)]) -> String {
    for (v2, v1) in names {
        if v2.ends_with('.') {
            if let Some(rest) = field.strip_prefix(v2) {
                return format!("{v1}{rest}");
            }
        } else if let Some(rest) = field.strip_prefix(v2)
            && (rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
        {
            return format!("{v1}{rest}");
        }
    }
    field.to_owned()
}

/// v2's `uid` of the resource a v1 request names by `id`.
pub const ID: &[(&str, &str)] = &[("uid", "id")];

/// Page size used while gathering a v1 List.
pub const V1_PAGE: i32 = 200;

/// `uidp` narrowed to the one resource the v1 `id` filter names (unchanged
/// when `id` is empty). The filter is checked first, as v2 would: a bad
/// UIDP anywhere is INVALID_ARGUMENT. `None` when the filter already names
/// other ids, so nothing can match and the v1 List is empty.
pub fn narrow_to_id(uidp: Option<UidpFilter>, id: &str) -> Result<Option<Option<UidpFilter>>> {
    let mut bad = Vec::new();
    if let Some(f) = &uidp {
        crate::services::list::parse_filter(f, &mut bad);
    }
    if !id.is_empty() {
        crate::services::parse_uidp("id", id, &mut bad);
    }
    if !bad.is_empty() {
        return Err(Error::InvalidArgument(bad));
    }
    if id.is_empty() {
        return Ok(Some(uidp));
    }
    let mut f = uidp.unwrap_or_default();
    if !f.ids.is_empty() && !f.ids.iter().any(|i| i == id) {
        return Ok(None);
    }
    f.ids = vec![id.to_owned()];
    Ok(Some(Some(f)))
}

/// A v2 List reply as one page of a listing: its items and the next page
/// token ("" at the end). Lets [`collect_all`] take the v2 call itself, so
/// each v1 List only says which v2 request it makes.
pub trait V2Page {
    type Item: prost::Message;
    fn into_page(self) -> (Vec<Self::Item>, String);
}

/// [`V2Page`] for v2 List replies, each by the field holding its items.
macro_rules! v2_pages {
    ($($reply:ty => $items:ident: $item:ty;)*) => {$(
        impl V2Page for $reply {
            type Item = $item;
            fn into_page(self) -> (Vec<$item>, String) {
                (self.$items, self.next_page_token)
            }
        }
    )*};
}

v2_pages! {
    iam2::ListGroupsResponse => groups: iam2::Group;
    iam2::ListIdentitiesResponse => identities: iam2::Identity;
    iam2::ListRolesResponse => roles: iam2::Role;
    iam2::ListRoleBindingsResponse => role_bindings: iam2::RoleBinding;
    iam2::ListTermsAcceptancesResponse => terms_acceptances: iam2::TermsAcceptance;
    iam2::ListIdentityProvidersResponse => identity_providers: iam2::IdentityProvider;
    iam2::ListAccountAssociationsResponse => account_associations: iam2::AccountAssociation;
    iam2::ListGroupInvitesResponse => group_invites: iam2::GroupInvite;
    iam2::ListExternalGroupRoleMappingsResponse => external_group_role_mappings: iam2::ExternalGroupRoleMapping;
    registry2::ListReposResponse => repos: registry2::Repo;
    registry2::ListTagsResponse => tags: registry2::Tag;
    ward_proto::events::v2::ListSubscriptionsResponse => subscriptions: ward_proto::events::v2::Subscription;
}

/// Gathers every page of a v2 listing. `page(token)` is the v2 List call
/// for one page.
pub async fn collect_all<R, F, Fut>(v2_path: &str, mut page: F) -> Result<Vec<R::Item>>
where
    R: V2Page,
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<R>>,
{
    let mut items = Vec::new();
    let mut bytes = 0usize;
    let mut token = String::new();
    loop {
        let (batch, next) = page(token).await?.into_page();
        bytes += batch.iter().map(prost::Message::encoded_len).sum::<usize>();
        items.extend(batch);
        if items.len() > MAX_V1_ITEMS || bytes > MAX_V1_BYTES {
            return Err(too_large(v2_path));
        }
        if next.is_empty() {
            return Ok(items);
        }
        token = next;
    }
}

#[cfg(test)]
mod v1_named_tests {
    use ward_core::error::FieldViolation;

    #[test]
    fn renames_exact_paths_what_lies_below_and_prefixes() {
        let names = &[("group.uid", "id"), ("parent", "parent_id"), ("group.", "")];
        let r: ward_core::Result<()> = Err(ward_core::Error::InvalidArgument(
            ["group.uid", "parent", "parent.x", "parents", "group.name", "other"]
                .iter()
                .map(|f| FieldViolation {
                    field: (*f).to_owned(),
                    description: String::new(),
                })
                .collect(),
        ));
        let Err(ward_core::Error::InvalidArgument(v)) = super::v1_named(r, names) else {
            panic!("still invalid")
        };
        let fields: Vec<&str> = v.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["id", "parent_id", "parent_id.x", "parents", "name", "other"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_filter_narrows_empties_or_refuses() {
        let a = format!("{:040x}", 1);
        let b = format!("{:040x}", 2);
        assert_eq!(narrow_to_id(None, "").unwrap(), Some(None));
        assert_eq!(narrow_to_id(None, &a).unwrap().flatten().unwrap().ids, vec![a.clone()]);
        let within = UidpFilter {
            ids: vec![a.clone(), b.clone()],
            ..Default::default()
        };
        assert_eq!(
            narrow_to_id(Some(within), &b).unwrap().flatten().unwrap().ids,
            vec![b.clone()]
        );
        let only_a = UidpFilter {
            ids: vec![a.clone()],
            ..Default::default()
        };
        assert_eq!(narrow_to_id(Some(only_a), &b).unwrap(), None);
        assert!(narrow_to_id(None, "not-a-uidp").is_err());
        // Nothing can match, but a bad filter is still refused, as v2 would.
        let bad = UidpFilter {
            ids: vec![a],
            children_of: "²".into(),
            ..Default::default()
        };
        assert!(narrow_to_id(Some(bad), &b).is_err());
    }
}
