//! Identity providers, their group mappings and group invites over REST,
//! and `/auth/v1/register` (accepting an invite).

use std::sync::Arc;

use super::Json;
use axum::extract::State;
use axum::routing::{get, post};
use ward_core::{Error, Result};
use ward_proto::auth::Session;
use ward_proto::iam::v2::{
    BatchDeleteExternalGroupRoleMappingsResponse, CreateExternalGroupRoleMappingRequest, CreateGroupInviteRequest,
    CreateIdentityProviderRequest, DeleteExternalGroupRoleMappingRequest, DeleteGroupInviteRequest,
    DeleteIdentityProviderRequest, ExternalGroupRoleMapping, GetExternalGroupRoleMappingRequest, GetGroupInviteRequest,
    GetIdentityProviderRequest, GroupInvite, IdentityProvider, ListExternalGroupRoleMappingsRequest,
    ListExternalGroupRoleMappingsResponse, ListGroupInvitesRequest, ListGroupInvitesResponse,
    ListIdentityProvidersRequest, ListIdentityProvidersResponse,
};

use super::crud::{self, Resource};
use super::table::{Endpoint, Routes};
use super::{Auth, JsonBody, Params, Reply, versioned};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

struct Providers;

impl Resource for Providers {
    type Msg = IdentityProvider;

    async fn create(w: &Ward, c: &Caller, parent: String, msg: IdentityProvider) -> Result<IdentityProvider> {
        let req = CreateIdentityProviderRequest {
            parent,
            identity_provider: Some(msg),
        };
        w.create_identity_provider(c, req).await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<IdentityProvider> {
        w.get_identity_provider(c, GetIdentityProviderRequest { uid }).await
    }
    async fn update(w: &Ward, c: &Caller, msg: IdentityProvider, mask: UpdateMask) -> Result<IdentityProvider> {
        w.update_identity_provider(c, msg, mask).await
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_identity_provider(c, DeleteIdentityProviderRequest { uid })
            .await
    }
    fn set_uid(msg: &mut IdentityProvider, uid: String) {
        msg.uid = uid;
    }
}

/// Immutable resources never reach `update` (no PATCH route).
fn immutable() -> Error {
    Error::internal("update of an immutable resource")
}

struct Mappings;

impl Resource for Mappings {
    type Msg = ExternalGroupRoleMapping;
    const UPDATABLE: bool = false;

    async fn create(
        w: &Ward,
        c: &Caller,
        parent: String,
        msg: ExternalGroupRoleMapping,
    ) -> Result<ExternalGroupRoleMapping> {
        let req = CreateExternalGroupRoleMappingRequest {
            parent,
            external_group_role_mapping: Some(msg),
        };
        w.create_external_group_role_mapping(c, req).await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<ExternalGroupRoleMapping> {
        w.get_external_group_role_mapping(c, GetExternalGroupRoleMappingRequest { uid })
            .await
    }
    async fn update(
        _: &Ward,
        _: &Caller,
        _: ExternalGroupRoleMapping,
        _: UpdateMask,
    ) -> Result<ExternalGroupRoleMapping> {
        Err(immutable())
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_external_group_role_mapping(c, DeleteExternalGroupRoleMappingRequest { uid })
            .await
    }
    fn set_uid(msg: &mut ExternalGroupRoleMapping, uid: String) {
        msg.uid = uid;
    }
}

struct Invites;

impl Resource for Invites {
    type Msg = GroupInvite;
    const UPDATABLE: bool = false;

    async fn create(w: &Ward, c: &Caller, parent: String, msg: GroupInvite) -> Result<GroupInvite> {
        let req = CreateGroupInviteRequest {
            parent,
            group_invite: Some(msg),
        };
        w.create_group_invite(c, req).await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<GroupInvite> {
        w.get_group_invite(c, GetGroupInviteRequest { uid }).await
    }
    async fn update(_: &Ward, _: &Caller, _: GroupInvite, _: UpdateMask) -> Result<GroupInvite> {
        Err(immutable())
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_group_invite(c, DeleteGroupInviteRequest { uid }).await
    }
    fn set_uid(msg: &mut GroupInvite, uid: String) {
        msg.uid = uid;
    }
}

pub fn routes() -> Routes {
    let mut r = crud::routes::<Providers>("identityProviders", get(list_providers), None)
        .merge(crud::routes::<Invites>("groupInvites", get(list_invites), None));
    // The batch verb is routed before the `{*uid}` item routes match it.
    for v in ["v2beta1", "v2"] {
        r = r.route(
            &format!("/iam/{v}/externalGroupRoleMappings:batchDelete"),
            post(batch_delete_mappings),
        );
    }
    r.merge(crud::routes::<Mappings>(
        "externalGroupRoleMappings",
        get(list_mappings),
        None,
    ))
    .route("/auth/v1/register", post(register))
}

pub fn endpoints() -> Vec<Endpoint> {
    let mut e = crud::endpoints! {
        Providers,
        "IdentityProvidersService",
        "identityProviders",
        "identity_provider",
        "IdentityProvider",
        "IdentityProviders"
    };
    e.extend(crud::endpoints! {
        Invites,
        "GroupInvitesService",
        "groupInvites",
        "group_invite",
        "GroupInvite",
        "GroupInvites"
    });
    e.extend(crud::endpoints! {
        Mappings,
        "ExternalGroupRoleMappingsService",
        "externalGroupRoleMappings",
        "external_group_role_mapping",
        "ExternalGroupRoleMapping",
        "ExternalGroupRoleMappings"
    });
    e.extend(versioned! {"iam", "ExternalGroupRoleMappingsService", [
        (POST, "/externalGroupRoleMappings:batchDelete", "*", "BatchDeleteExternalGroupRoleMappings"),
    ]});
    e.push(super::rpc(
        http::Method::POST,
        "/auth/v1/register",
        "*",
        "chainguard.platform.auth.Auth.Register",
        true,
    ));
    e
}

async fn list_providers(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ListIdentityProvidersResponse> {
    let req = ListIdentityProvidersRequest {
        uidp: q.uidp()?,
        name: q.string("name"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_identity_providers(&c, req).await?))
}

async fn list_mappings(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ListExternalGroupRoleMappingsResponse> {
    let req = ListExternalGroupRoleMappingsRequest {
        uidp: q.uidp()?,
        identity_provider_uid: q.string("identity_provider_uid"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_external_group_role_mappings(&c, req).await?))
}

async fn list_invites(State(w): State<Arc<Ward>>, Auth(c): Auth, mut q: Params) -> Reply<ListGroupInvitesResponse> {
    let req = ListGroupInvitesRequest {
        uidp: q.uidp()?,
        key_id: q.string("key_id"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_group_invites(&c, req).await?))
}

async fn batch_delete_mappings(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    q: Params,
    body: JsonBody,
) -> Reply<BatchDeleteExternalGroupRoleMappingsResponse> {
    q.finish()?;
    Ok(Json(
        w.batch_delete_external_group_role_mappings(&c, body.message()?).await?,
    ))
}

async fn register(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params, body: JsonBody) -> Reply<Session> {
    q.finish()?;
    Ok(Json(w.register(&c, body.message()?).await?))
}
