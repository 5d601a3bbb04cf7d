//! `/iam/{v2beta1,v2}/roles` over REST.

use std::sync::Arc;

use super::Json;
use axum::extract::State;
use axum::routing::get;
use ward_core::Result;
use ward_proto::iam::v2::{
    CreateRoleRequest, DeleteRoleRequest, GetRoleRequest, ListRolesRequest, ListRolesResponse, Role,
};

use super::crud::{self, Resource};
use super::table::{Endpoint, Routes};
use super::{Auth, Params, Reply};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

struct Roles;

impl Resource for Roles {
    type Msg = Role;

    async fn create(w: &Ward, c: &Caller, parent: String, msg: Role) -> Result<Role> {
        w.create_role(
            c,
            CreateRoleRequest {
                parent,
                role: Some(msg),
            },
        )
        .await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<Role> {
        w.get_role(c, GetRoleRequest { uid }).await
    }
    async fn update(w: &Ward, c: &Caller, msg: Role, mask: UpdateMask) -> Result<Role> {
        w.update_role(c, msg, mask).await
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_role(c, DeleteRoleRequest { uid }).await
    }
    fn set_uid(msg: &mut Role, uid: String) {
        msg.uid = uid;
    }
}

pub fn routes() -> Routes {
    crud::routes::<Roles>("roles", get(list_roles), None)
}

pub fn endpoints() -> Vec<Endpoint> {
    crud::endpoints! {Roles, "RolesService", "roles", "role", "Role", "Roles"}
}

async fn list_roles(State(w): State<Arc<Ward>>, Auth(c): Auth, mut q: Params) -> Reply<ListRolesResponse> {
    let req = ListRolesRequest {
        uidp: q.uidp()?,
        name: q.string("name"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_roles(&c, req).await?))
}
