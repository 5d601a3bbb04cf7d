//! Tags: a name in a repo pointing at one manifest the repo holds.

use ward_core::error::FieldViolation;
use ward_core::listing::FilterValue;
use ward_core::registry::{Digest, is_tag};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::registry::v2::{
    CreateTagRequest, DeleteTagRequest, GetTagRequest, ListTagsRequest, ListTagsResponse, Tag,
};
use ward_store::registry::{MANIFEST_TYPE, REPO_TYPE, TAG_TYPE, TagRecord};

use crate::authz::Caller;
use crate::services::list::ListParams;
use crate::ward::Ward;

const COLLECTION: &str = "tags";

pub(crate) fn to_proto(t: TagRecord) -> Tag {
    Tag {
        uid: t.uid,
        name: t.name,
        digest: t.digest,
        update_time: Some(Timestamp::from_millis(t.update_time)),
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

impl Ward {
    pub async fn create_tag(&self, caller: &Caller, req: CreateTagRequest) -> Result<Tag> {
        let repo = Uidp::parse("parent", &req.parent)?;
        self.authorize(caller, &rpc::CREATE_TAG, &repo)?;
        let tag = req.tag.unwrap_or_default();
        let mut bad = Vec::new();
        check_tag("name", &tag.name, &mut bad);
        let digest = Digest::parse(&tag.digest);
        if digest.is_none() {
            bad.push(FieldViolation {
                field: "digest".into(),
                description: "digest must be sha256:<64 hex> or sha512:<128 hex>".into(),
            });
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        if self.store.get_repo(&repo).await?.is_none() {
            return Err(Error::not_found(REPO_TYPE, repo.as_str()));
        }
        // Re-pointing an existing tag is an update.
        if self.store.find_tag(repo.as_str(), &tag.name).await?.is_some()
            && !self
                .caps_at(caller, &repo)
                .contains(ward_core::capability::Capability::TagUpdate)
        {
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
        };
        match self.store.put_tag(&record).await {
            Ok(t) => Ok(to_proto(t)),
            Err(Error::NotFound { resource_type, .. }) if resource_type == MANIFEST_TYPE => Err(Error::invalid(
                "digest",
                "the repo holds no manifest with this digest; push the manifest first",
            )),
            Err(e) => Err(e),
        }
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
        if !self.store.delete_tag(&uid).await? {
            return Err(Error::not_found(TAG_TYPE, uid.as_str()));
        }
        Ok(())
    }
}
