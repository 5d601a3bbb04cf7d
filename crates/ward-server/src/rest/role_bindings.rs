//! `/iam/{v2beta1,v2}/roleBindings` over REST.

use std::sync::Arc;

use super::Json;
use axum::extract::State;
use axum::routing::get;
use ward_core::Result;
use ward_proto::iam::v2::{
    CreateRoleBindingRequest, DeleteRoleBindingRequest, GetRoleBindingRequest, ListRoleBindingsRequest,
    ListRoleBindingsResponse, RoleBinding,
};

use super::crud::{self, Resource};
use super::table::{Endpoint, Routes};
use super::{Auth, JsonBody, Params, Reply, versioned};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

struct RoleBindings;

impl Resource for RoleBindings {
    type Msg = RoleBinding;

    async fn create(w: &Ward, c: &Caller, parent: String, msg: RoleBinding) -> Result<RoleBinding> {
        w.create_role_binding(
            c,
            CreateRoleBindingRequest {
                parent,
                role_binding: Some(msg),
            },
        )
        .await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<RoleBinding> {
        w.get_role_binding(c, GetRoleBindingRequest { uid }).await
    }
    async fn update(w: &Ward, c: &Caller, msg: RoleBinding, mask: UpdateMask) -> Result<RoleBinding> {
        w.update_role_binding(c, msg, mask).await
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_role_binding(c, DeleteRoleBindingRequest { uid }).await
    }
    fn set_uid(msg: &mut RoleBinding, uid: String) {
        msg.uid = uid;
    }
}

pub fn routes() -> Routes {
    let mut r = crud::routes::<RoleBindings>("roleBindings", get(list_role_bindings), None);
    for v in ["v2beta1", "v2"] {
        r = r.route(
            &format!("/iam/{v}/roleBindings:batchCreate"),
            axum::routing::post(batch_create),
        );
    }
    r
}

pub fn endpoints() -> Vec<Endpoint> {
    let mut e = crud::endpoints! {
        RoleBindings,
        "RoleBindingsService",
        "roleBindings",
        "role_binding",
        "RoleBinding",
        "RoleBindings"
    };
    e.extend(versioned! {"iam", "RoleBindingsService", [
        (POST, "/roleBindings:batchCreate", "*", "BatchCreateRoleBindings"),
    ]});
    e
}

/// The body is the whole request (`body: "*"`): `parent`, `requests`, `roleUid`.
async fn batch_create(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    q: Params,
    body: JsonBody,
) -> Reply<ward_proto::iam::v2::BatchCreateRoleBindingsResponse> {
    q.finish()?;
    Ok(Json(w.batch_create_role_bindings(&c, body.message()?).await?))
}

async fn list_role_bindings(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ListRoleBindingsResponse> {
    let req = ListRoleBindingsRequest {
        uidp: q.uidp()?,
        identity: q.string("identity"),
        group: q.string("group"),
        role: q.string("role"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_role_bindings(&c, req).await?))
}
