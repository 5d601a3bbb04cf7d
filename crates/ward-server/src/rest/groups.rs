//! `/iam/{v2beta1,v2}/groups` over REST.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::routing::get;
use ward_core::Result;
use ward_proto::iam::v2::{
    CreateGroupRequest, DeleteGroupRequest, GetGroupRequest, Group, ListGroupsRequest, ListGroupsResponse,
};

use super::crud::{self, Resource};
use super::{Auth, JsonBody, Params, Reply};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

struct Groups;

impl Resource for Groups {
    type Msg = Group;

    async fn create(w: &Ward, c: &Caller, parent: String, msg: Group) -> Result<Group> {
        w.create_group(
            c,
            CreateGroupRequest {
                parent,
                group: Some(msg),
            },
        )
        .await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<Group> {
        w.get_group(c, GetGroupRequest { uid }).await
    }
    async fn update(w: &Ward, c: &Caller, msg: Group, mask: UpdateMask) -> Result<Group> {
        w.update_group(c, msg, mask).await
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_group(c, DeleteGroupRequest { uid }).await
    }
    fn set_uid(msg: &mut Group, uid: String) {
        msg.uid = uid;
    }
}

/// Groups also accept POST on the collection itself: a new organization.
pub fn routes() -> axum::Router<Arc<Ward>> {
    crud::routes::<Groups>("groups", get(list_groups).post(create_organization))
}

async fn list_groups(State(w): State<Arc<Ward>>, Auth(c): Auth, mut q: Params) -> Reply<ListGroupsResponse> {
    let req = ListGroupsRequest {
        uidp: q.uidp()?,
        name: q.string("name"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_groups(&c, req).await?))
}

async fn create_organization(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params, body: JsonBody) -> Reply<Group> {
    q.finish()?;
    let req = CreateGroupRequest {
        parent: String::new(),
        group: Some(body.message()?),
    };
    Ok(Json(w.create_group(&c, req).await?))
}
