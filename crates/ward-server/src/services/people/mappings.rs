//! External group mappings: a group at an identity provider holds a role at
//! the organization, for the sessions of its members only (never stored as
//! bindings). Immutable; deleting is a hard delete.

use ward_core::listing::FilterValue;
use ward_core::names::check_text;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::{
    BatchDeleteExternalGroupRoleMappingsRequest, BatchDeleteExternalGroupRoleMappingsResponse,
    CreateExternalGroupRoleMappingRequest, DeleteExternalGroupRoleMappingRequest, ExternalGroupRoleMapping,
    GetExternalGroupRoleMappingRequest, ListExternalGroupRoleMappingsRequest, ListExternalGroupRoleMappingsResponse,
};
use ward_store::people::{GROUP_MAPPING_TYPE, GroupMappingRecord};

use super::violation;
use crate::authz::Caller;
use crate::services::events;
use crate::services::list::ListParams;
use crate::ward::Ward;

const COLLECTION: &str = "external_group_role_mappings";
/// Longest external group id.
pub const MAX_GROUP_ID_LEN: usize = 256;
/// Most mappings one batch delete names.
pub const MAX_BATCH: usize = 100;

fn to_proto(r: GroupMappingRecord) -> ExternalGroupRoleMapping {
    ExternalGroupRoleMapping {
        uid: r.uid,
        identity_provider_uid: r.parent_uid,
        external_group_id: r.name,
        role_uid: r.role_uid,
        scope: r.scope,
        create_time: Some(Timestamp::from_millis(r.create_time)),
    }
}

impl Ward {
    async fn visible_mapping(&self, caller: &Caller, uid: &Uidp) -> Result<GroupMappingRecord> {
        match self.store.get_group_mapping(uid).await? {
            Some(r) if self.caps_at(caller, uid).contains(rpc::GET_GROUP_MAPPING.capability) => Ok(r),
            _ => Err(Error::not_found(GROUP_MAPPING_TYPE, uid.as_str())),
        }
    }

    pub async fn create_external_group_role_mapping(
        &self,
        caller: &Caller,
        req: CreateExternalGroupRoleMappingRequest,
    ) -> Result<ExternalGroupRoleMapping> {
        let m = req.external_group_role_mapping.unwrap_or_default();
        let mut bad = Vec::new();
        let parent = crate::services::parse_uidp("parent", &req.parent, &mut bad);
        if m.external_group_id.is_empty() {
            bad.push(violation("external_group_id", "external_group_id is required"));
        } else {
            check_text("external_group_id", &m.external_group_id, MAX_GROUP_ID_LEN, &mut bad);
        }
        let (Some(idp), true) = (parent, bad.is_empty()) else {
            return Err(Error::InvalidArgument(bad));
        };
        // Visible and authorized at the identity provider; its organization is
        // where the role applies.
        self.get_identity_provider(
            caller,
            ward_proto::iam::v2::GetIdentityProviderRequest {
                uid: idp.as_str().into(),
            },
        )
        .await?;
        self.authorize(caller, &rpc::CREATE_GROUP_MAPPING, &idp)?;
        let org = Uidp::parse("parent", idp.root())?;
        if !m.scope.is_empty() && m.scope != org.as_str() {
            return Err(Error::invalid(
                "scope",
                "scope must be the identity provider's organization (or empty)",
            ));
        }
        self.authorize(caller, &rpc::CREATE_ROLE_BINDING, &org)?;
        let (role, caps) = self.grantable_role(caller, "role_uid", &m.role_uid, &org).await?;
        self.check_no_escalation(caller, &org, caps)?;
        let now = self.clock.now_millis();
        let record = GroupMappingRecord {
            uid: idp.new_child().into(),
            parent_uid: idp.into(),
            name: m.external_group_id,
            role_uid: role.into(),
            scope: org.into(),
            create_time: now,
            update_time: now,
        };
        let reply = to_proto(record.clone());
        // A mapping's group is its identity provider's.
        let emit = self.created(
            caller,
            events::types::GROUP_MAPPING_CREATED,
            &record.uid,
            &record.scope,
            &reply,
        );
        self.store.create_group_mapping(&record, emit).await?;
        Ok(reply)
    }

    pub async fn get_external_group_role_mapping(
        &self,
        caller: &Caller,
        req: GetExternalGroupRoleMappingRequest,
    ) -> Result<ExternalGroupRoleMapping> {
        let uid = Uidp::parse("uid", &req.uid)?;
        Ok(to_proto(self.visible_mapping(caller, &uid).await?))
    }

    pub async fn list_external_group_role_mappings(
        &self,
        caller: &Caller,
        req: ListExternalGroupRoleMappingsRequest,
    ) -> Result<ListExternalGroupRoleMappingsResponse> {
        let mut filters = Vec::new();
        if !req.identity_provider_uid.is_empty() {
            let idp = Uidp::parse("identity_provider_uid", &req.identity_provider_uid)?;
            filters.push(("parent_uid", FilterValue::Text(idp.into())));
        }
        let visible = self.visible_scopes(caller, rpc::LIST_GROUP_MAPPINGS.capability);
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: "",
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters,
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_group_mappings(&q).await?;
        Ok(ListExternalGroupRoleMappingsResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            external_group_role_mappings: page.items.into_iter().map(to_proto).collect(),
        })
    }

    pub async fn delete_external_group_role_mapping(
        &self,
        caller: &Caller,
        req: DeleteExternalGroupRoleMappingRequest,
    ) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        let current = self.visible_mapping(caller, &uid).await?;
        self.authorize(caller, &rpc::DELETE_GROUP_MAPPING, &uid)?;
        let emit = self.rendered(
            caller,
            events::types::GROUP_MAPPING_DELETED,
            uid.as_str(),
            &current.scope,
            |_: &Vec<String>| serde_json::json!({}),
        );
        self.store.delete_group_mappings(&[uid.into()], emit).await?;
        Ok(())
    }

    /// Deletes mappings of one identity provider, all or none: each must be
    /// under `parent` and visible, else nothing is deleted.
    pub async fn batch_delete_external_group_role_mappings(
        &self,
        caller: &Caller,
        req: BatchDeleteExternalGroupRoleMappingsRequest,
    ) -> Result<BatchDeleteExternalGroupRoleMappingsResponse> {
        let idp = Uidp::parse("parent", &req.parent)?;
        if req.names.is_empty() || req.names.len() > MAX_BATCH {
            return Err(Error::invalid(
                "names",
                format!("names takes 1 to {MAX_BATCH} mapping uids"),
            ));
        }
        self.authorize(caller, &rpc::BATCH_DELETE_GROUP_MAPPINGS, &idp)?;
        let mut uids = Vec::with_capacity(req.names.len());
        let mut found = Vec::with_capacity(req.names.len());
        for name in &req.names {
            let uid = Uidp::parse("names", name)?;
            if uid.parent().as_ref() != Some(&idp) {
                return Err(Error::invalid("names", format!("{uid} is not a mapping of {idp}")));
            }
            found.push(self.visible_mapping(caller, &uid).await?);
            uids.push(uid.into());
        }
        let scope = found.first().map(|m| m.scope.clone()).unwrap_or_default();
        let shown = found.clone();
        let parent = idp.as_str().to_owned();
        let emit = self.rendered(
            caller,
            events::types::GROUP_MAPPINGS_DELETED,
            idp.as_str(),
            &scope,
            move |deleted: &Vec<String>| BatchDeleteExternalGroupRoleMappingsResponse {
                parent,
                external_group_role_mappings: shown
                    .into_iter()
                    .filter(|m| deleted.contains(&m.uid))
                    .map(to_proto)
                    .collect(),
            },
        );
        let deleted = self.store.delete_group_mappings(&uids, emit).await?;
        Ok(BatchDeleteExternalGroupRoleMappingsResponse {
            parent: idp.into(),
            external_group_role_mappings: found
                .into_iter()
                .filter(|m| deleted.contains(&m.uid))
                .map(to_proto)
                .collect(),
        })
    }

    /// The roles a login's groups map to at `provider`: (scope, role uid).
    pub(crate) async fn mapped_roles(&self, provider: &str, groups: &[String]) -> Result<Vec<(String, String)>> {
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let mut out: Vec<(String, String)> = self
            .store
            .group_mappings_of(provider)
            .await?
            .into_iter()
            .filter(|m| groups.contains(&m.name))
            .map(|m| (m.scope, m.role_uid))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }
}
