//! Tags: a name in a repo pointing at one manifest the repo holds.

use ward_core::capability::Capability;
use ward_core::error::FieldViolation;
use ward_core::listing::FilterValue;
use ward_core::registry::{Digest, is_tag};
use ward_core::rpc::{self, Kind, Rule, Scope};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::registry::v2::{
    CreateTagRequest, DeleteTagRequest, GetTagRequest, ListTagsRequest, ListTagsResponse, Tag,
};
use ward_store::registry::{MANIFEST_TYPE, MAX_TAG_HISTORY, REPO_TYPE, TAG_TYPE, TagHistoryRecord, TagRecord};

use crate::authz::Caller;
use crate::services::events;
use crate::services::list::ListParams;
use crate::ward::Ward;

const COLLECTION: &str = "tags";

/// Re-pointing a tag (v1 `Registry.UpdateTag`; v2 has no tag update):
/// `tag.update` on the tag itself. It lives here rather than in
/// `ward_core::rpc::REGISTRY_RULES`, which lists the v2 registry RPCs.
pub const UPDATE_TAG: Rule = Rule {
    rpc: "Registry.UpdateTag",
    kind: Kind::Tag,
    capability: Capability::TagUpdate,
    scope: Scope::Resource,
};

pub(crate) fn to_proto(t: TagRecord) -> Tag {
    Tag {
        uid: t.uid,
        name: t.name,
        digest: t.digest,
        update_time: Some(Timestamp::from_millis(t.update_time)),
        deprecated: t.deprecated,
        bundles: super::json_list(&t.bundles),
    }
}

pub(crate) fn check_tag(field: &str, name: &str, bad: &mut Vec<FieldViolation>) {
    if !is_tag(name) {
        bad.push(FieldViolation {
            field: field.into(),
            description: format!(
                "\"{}\" is not a tag: tags match [a-zA-Z0-9_][a-zA-Z0-9._-]{{0,127}}",
                ward_core::names::echo(name)
            ),
        });
    }
}

fn check_digest(digest: &str, bad: &mut Vec<FieldViolation>) {
    if Digest::parse(digest).is_none() {
        bad.push(FieldViolation {
            field: "digest".into(),
            description: "digest must be sha256:<64 hex> or sha512:<128 hex>".into(),
        });
    }
}

impl Ward {
    pub async fn create_tag(&self, caller: &Caller, req: CreateTagRequest) -> Result<Tag> {
        let repo = Uidp::parse("parent", &req.parent)?;
        self.authorize(caller, &rpc::CREATE_TAG, &repo)?;
        let tag = req.tag.unwrap_or_default();
        let mut bad = Vec::new();
        check_tag("name", &tag.name, &mut bad);
        // No digest: a tag made by name, pointed by a later push (or left
        // as it is when the tag exists).
        if !tag.digest.is_empty() {
            check_digest(&tag.digest, &mut bad);
        }
        ward_core::registry::check_bundles("bundles", &tag.bundles, &mut bad);
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        if self.store.get_repo(&repo).await?.is_none() {
            return Err(Error::not_found(REPO_TYPE, repo.as_str()));
        }
        // Re-pointing an existing tag is an update.
        let exists = self.store.find_tag(repo.as_str(), &tag.name).await?.is_some();
        if exists && !self.caps_at(caller, &repo).contains(Capability::TagUpdate) {
            return Err(Error::PermissionDenied(format!("tag.update is required on {repo}")));
        }
        let now = self.clock.now_millis();
        let record = TagRecord {
            uid: repo.new_child().into(),
            parent_uid: repo.as_str().into(),
            name: tag.name,
            digest: tag.digest,
            create_time: now,
            update_time: now,
            deprecated: tag.deprecated,
            bundles: super::to_json_list(&tag.bundles),
        };
        let kind = if exists {
            events::types::TAG_UPDATED
        } else {
            events::types::TAG_CREATED
        };
        self.put_tag(caller, &record, kind).await
    }

    /// Writes a tag through the store's one tag write (the one an OCI push
    /// uses), which also records a move in the tag's history, with its
    /// event (`kind`: created or updated).
    async fn put_tag(&self, caller: &Caller, record: &TagRecord, kind: &str) -> Result<Tag> {
        let emit = self.updated(
            caller,
            kind,
            &record.uid,
            &Ward::event_group(&record.parent_uid),
            to_proto,
        );
        match self.store.put_tag(record, emit).await {
            Ok(t) => {
                self.on_sboms_changed(&t.parent_uid, None, std::slice::from_ref(&t.name))
                    .await;
                Ok(to_proto(t))
            }
            Err(Error::NotFound { resource_type, .. }) if resource_type == MANIFEST_TYPE => Err(Error::invalid(
                "digest",
                "the repo holds no manifest with this digest; push the manifest first",
            )),
            Err(e) => Err(e),
        }
    }

    /// v1 `UpdateTag`: re-points a tag at another manifest of its repo,
    /// exactly as `docker push` to the same tag would (the move is recorded
    /// in the tag's history; an empty digest leaves it where it is), and
    /// replaces its labels (`deprecated`, `bundles`). Tags are not renamed
    /// (create the new name and delete the old): a name other than the tag's
    /// own is INVALID_ARGUMENT, an empty one means its own.
    /// Needs `tag.update` on the tag; NOT_FOUND when the caller cannot see it.
    pub async fn update_tag(&self, caller: &Caller, tag: Tag) -> Result<Tag> {
        let uid = Uidp::parse("tag.uid", &tag.uid)?;
        self.authorize(caller, &UPDATE_TAG, &uid)?;
        let current = self
            .store
            .get_tag(&uid)
            .await?
            .ok_or_else(|| Error::not_found(TAG_TYPE, uid.as_str()))?;
        let mut bad = Vec::new();
        if !tag.name.is_empty() && tag.name != current.name {
            bad.push(FieldViolation {
                field: "name".into(),
                description: format!(
                    "tags cannot be renamed (this one is \"{}\"); create the new tag and delete this one",
                    current.name
                ),
            });
        }
        // An empty digest leaves the tag where it points (what a client that
        // only changes labels sends).
        if !tag.digest.is_empty() {
            check_digest(&tag.digest, &mut bad);
        }
        ward_core::registry::check_bundles("bundles", &tag.bundles, &mut bad);
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let record = TagRecord {
            digest: tag.digest,
            update_time: self.clock.now_millis(),
            deprecated: tag.deprecated,
            bundles: super::to_json_list(&tag.bundles),
            ..current
        };
        self.put_tag(caller, &record, events::types::TAG_UPDATED).await
    }

    /// The digests a tag has pointed at, oldest first, at most
    /// [`MAX_TAG_HISTORY`]: the moves with `start <= time <= end` (an unset
    /// bound is open). Needs `tag.list` on the tag, as reading it does.
    pub async fn tag_history(
        &self,
        caller: &Caller,
        uid: &str,
        start: Option<Timestamp>,
        end: Option<Timestamp>,
    ) -> Result<Vec<TagHistoryRecord>> {
        let mut bad = Vec::new();
        for (field, t) in [("start", &start), ("end", &end)] {
            if t.as_ref().is_some_and(|t| !t.is_valid()) {
                bad.push(FieldViolation {
                    field: field.into(),
                    description: format!("{field} is not a valid timestamp"),
                });
            }
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let start = start.map_or(i64::MIN, |t| t.to_millis());
        let end = end.map_or(i64::MAX, |t| t.to_millis());
        if start > end {
            return Err(Error::invalid("start", "start is after end"));
        }
        let tag = self.get_tag(caller, GetTagRequest { uid: uid.to_owned() }).await?;
        let uid = Uidp::parse("uid", &tag.uid)?;
        self.store.tag_history(&uid, start, end, MAX_TAG_HISTORY).await
    }

    pub async fn get_tag(&self, caller: &Caller, req: GetTagRequest) -> Result<Tag> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::GET_TAG, &uid)?;
        let t = self
            .store
            .get_tag(&uid)
            .await?
            .ok_or_else(|| Error::not_found(TAG_TYPE, uid.as_str()))?;
        Ok(to_proto(t))
    }

    pub async fn list_tags(&self, caller: &Caller, req: ListTagsRequest) -> Result<ListTagsResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_TAGS.capability);
        let mut filters = Vec::new();
        if !req.digest.is_empty() {
            if Digest::parse(&req.digest).is_none() {
                return Err(Error::invalid(
                    "digest",
                    "digest must be sha256:<64 hex> or sha512:<128 hex>",
                ));
            }
            filters.push(("digest", FilterValue::Text(req.digest.clone())));
        }
        if let Some(t) = &req.updated_since {
            if !t.is_valid() {
                return Err(Error::invalid(
                    "updated_since",
                    "updated_since is not a valid timestamp",
                ));
            }
            filters.push(("update_time", FilterValue::AtLeast(t.to_millis())));
        }
        for (include, column) in [
            (req.include_referrers, "is_referrer"),
            (req.include_dates, "is_dated"),
            (req.include_epochs, "is_epoch"),
        ] {
            if !include {
                filters.push((column, FilterValue::Int(0)));
            }
        }
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: &req.name,
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters,
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_tags(&q).await?;
        Ok(ListTagsResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            tags: page.items.into_iter().map(to_proto).collect(),
        })
    }

    pub async fn delete_tag(&self, caller: &Caller, req: DeleteTagRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::DELETE_TAG, &uid)?;
        let tag = self.store.get_tag(&uid).await?;
        let group = Ward::event_group(&Ward::event_group(uid.as_str()));
        let emit = self.deleted(caller, events::types::TAG_DELETED, uid.as_str(), &group);
        if !self.store.delete_tag(&uid, emit).await? {
            return Err(Error::not_found(TAG_TYPE, uid.as_str()));
        }
        if let Some(t) = tag {
            self.on_sboms_changed(&t.parent_uid, None, &[t.name]).await;
        }
        Ok(())
    }
}
