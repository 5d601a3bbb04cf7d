//! Repos: created under a group, named by the OCI grammar, unique within
//! their organization.

use ward_core::error::FieldViolation;
use ward_core::fieldmask::Updatable;
use ward_core::names::check_description;
use ward_core::registry::{check_aliases, check_bundles, check_tags, is_repo_name};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::registry::v2::{
    CatalogTier, CreateRepoRequest, DeleteRepoRequest, GetRepoRequest, ListReposRequest, ListReposResponse, Repo,
};
use ward_store::registry::{RepoPatch, RepoRecord};

use super::{json_list, to_json_list};
use crate::authz::Caller;
use crate::services::list::ListParams;
use crate::services::{UpdateMask, events};
use crate::ward::Ward;

const COLLECTION: &str = "repos";

pub const REPO_FIELDS: Updatable = Updatable {
    mutable: &[
        "name",
        "description",
        "catalog_tier",
        "bundles",
        "aliases",
        "active_tags",
    ],
    output_only: &["uid", "create_time", "update_time"],
    immutable: &[],
};

pub(crate) fn to_proto(r: RepoRecord) -> Repo {
    Repo {
        uid: r.uid,
        name: r.name,
        description: r.description,
        catalog_tier: i32::try_from(r.catalog_tier).unwrap_or_default(),
        bundles: json_list(&r.bundles),
        aliases: json_list(&r.aliases),
        active_tags: json_list(&r.active_tags),
        create_time: Some(Timestamp::from_millis(r.create_time)),
        update_time: Some(Timestamp::from_millis(r.update_time)),
    }
}

/// Checks a repo name (the OCI grammar).
pub(crate) fn check_repo_name(field: &str, name: &str, bad: &mut Vec<FieldViolation>) {
    if !is_repo_name(name) {
        bad.push(FieldViolation {
            field: field.into(),
            description: format!(
                "\"{}\" is not a repository name: lowercase letters and digits, separated by '.', '_', '__' \
                 or dashes, in up to {} '/'-separated parts of at most {} characters in all",
                ward_core::names::echo(name),
                ward_core::registry::MAX_REPO_COMPONENTS,
                ward_core::registry::MAX_REPO_NAME
            ),
        });
    }
}

fn check_tier(tier: i32, bad: &mut Vec<FieldViolation>) {
    if CatalogTier::try_from(tier).is_err() {
        bad.push(FieldViolation {
            field: "catalog_tier".into(),
            description: format!("catalog_tier: {tier} is not a CatalogTier"),
        });
    }
}

impl Ward {
    pub async fn create_repo(&self, caller: &Caller, req: CreateRepoRequest) -> Result<Repo> {
        let parent = Uidp::parse("parent", &req.parent)?;
        self.authorize(caller, &rpc::CREATE_REPO, &parent)?;
        let repo = req.repo.unwrap_or_default();
        let mut bad = Vec::new();
        check_repo_name("name", &repo.name, &mut bad);
        check_description("description", &repo.description, &mut bad);
        check_tier(repo.catalog_tier, &mut bad);
        check_bundles("bundles", &repo.bundles, &mut bad);
        check_aliases("aliases", &repo.aliases, &mut bad);
        check_tags("active_tags", &repo.active_tags, &mut bad);
        if parent.depth() > crate::services::groups::MAX_GROUP_DEPTH {
            bad.push(FieldViolation {
                field: "parent".into(),
                description: "repos live in groups; this parent is too deep to be one".into(),
            });
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let now = self.clock.now_millis();
        let record = RepoRecord {
            uid: parent.new_child().into(),
            parent_uid: parent.as_str().into(),
            org_uid: parent.root().into(),
            name: repo.name,
            description: repo.description,
            catalog_tier: i64::from(repo.catalog_tier),
            bundles: to_json_list(&repo.bundles),
            aliases: to_json_list(&repo.aliases),
            active_tags: to_json_list(&repo.active_tags),
            create_time: now,
            update_time: now,
        };
        let emit = self.created(
            caller,
            events::types::REPO_CREATED,
            &record.uid,
            &record.parent_uid,
            &to_proto(record.clone()),
        );
        self.store.create_repo(&record, emit).await?;
        Ok(to_proto(record))
    }

    pub async fn get_repo(&self, caller: &Caller, req: GetRepoRequest) -> Result<Repo> {
        let uid = Uidp::parse("uid", &req.uid)?;
        Ok(to_proto(self.authorized_repo(caller, &rpc::GET_REPO, &uid).await?))
    }

    pub async fn list_repos(&self, caller: &Caller, req: ListReposRequest) -> Result<ListReposResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_REPOS.capability);
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: req.name.as_deref().unwrap_or(""),
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters: Vec::new(),
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_repos(&q).await?;
        Ok(ListReposResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            repos: page.items.into_iter().map(to_proto).collect(),
        })
    }

    pub async fn update_repo(&self, caller: &Caller, repo: Repo, mask: UpdateMask) -> Result<Repo> {
        let uid = Uidp::parse("repo.uid", &repo.uid)?;
        self.authorized_repo(caller, &rpc::UPDATE_REPO, &uid).await?;
        let mask = mask.resolve(
            &REPO_FIELDS,
            &[
                ("name", !repo.name.is_empty()),
                ("description", !repo.description.is_empty()),
                ("catalog_tier", repo.catalog_tier != 0),
                ("bundles", !repo.bundles.is_empty()),
                ("aliases", !repo.aliases.is_empty()),
                ("active_tags", !repo.active_tags.is_empty()),
            ],
        )?;
        let mut bad = Vec::new();
        let mut patch = RepoPatch::default();
        // A field outside the mask is not written, but a value that breaks
        // its schema is still refused (a strict client expects the 400).
        if mask.contains("name") || !repo.name.is_empty() {
            check_repo_name("name", &repo.name, &mut bad);
        }
        if mask.contains("name") {
            patch.name = Some(repo.name);
        }
        check_description("description", &repo.description, &mut bad);
        if mask.contains("description") {
            patch.description = Some(repo.description);
        }
        if mask.contains("catalog_tier") {
            check_tier(repo.catalog_tier, &mut bad);
            patch.catalog_tier = Some(i64::from(repo.catalog_tier));
        }
        if mask.contains("bundles") {
            check_bundles("bundles", &repo.bundles, &mut bad);
            patch.bundles = Some(to_json_list(&repo.bundles));
        }
        if mask.contains("aliases") {
            check_aliases("aliases", &repo.aliases, &mut bad);
            patch.aliases = Some(to_json_list(&repo.aliases));
        }
        if mask.contains("active_tags") {
            check_tags("active_tags", &repo.active_tags, &mut bad);
            patch.active_tags = Some(to_json_list(&repo.active_tags));
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let now = self.clock.now_millis();
        let emit = self.updated(
            caller,
            events::types::REPO_UPDATED,
            uid.as_str(),
            &Ward::event_group(uid.as_str()),
            to_proto,
        );
        Ok(to_proto(self.store.update_repo(&uid, &patch, now, emit).await?))
    }

    pub async fn delete_repo(&self, caller: &Caller, req: DeleteRepoRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorized_repo(caller, &rpc::DELETE_REPO, &uid).await?;
        let emit = self.deleted(
            caller,
            events::types::REPO_DELETED,
            uid.as_str(),
            &Ward::event_group(uid.as_str()),
        );
        self.store.delete_repo(&uid, emit).await
    }
}
