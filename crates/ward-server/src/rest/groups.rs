//! `/iam/{v2beta1,v2}/groups` over REST.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::get;
use ward_proto::iam::v2::{
    CreateGroupRequest, DeleteGroupRequest, GetGroupRequest, Group, ListGroupsRequest,
    ListGroupsResponse,
};

use super::{Auth, JsonBody, Params, Reply};
use crate::services::UpdateMask;
use crate::ward::Ward;

pub fn routes() -> axum::Router<Arc<Ward>> {
    let mut r = axum::Router::new();
    for v in ["v2beta1", "v2"] {
        r = r
            .route(
                &format!("/iam/{v}/groups"),
                get(list_groups).post(create_root_group),
            )
            .route(
                &format!("/iam/{v}/groups/{{*uid}}"),
                get(get_group)
                    .post(create_group)
                    .patch(update_group)
                    .delete(delete_group),
            );
    }
    r
}

async fn list_groups(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ListGroupsResponse> {
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

async fn create_root_group(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    q: Params,
    body: JsonBody,
) -> Reply<Group> {
    q.finish()?;
    let req = CreateGroupRequest {
        parent: String::new(),
        group: Some(body.message()?),
    };
    Ok(Json(w.create_group(&c, req).await?))
}

async fn create_group(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(parent): Path<String>,
    q: Params,
    body: JsonBody,
) -> Reply<Group> {
    q.finish()?;
    let req = CreateGroupRequest {
        parent,
        group: Some(body.message()?),
    };
    Ok(Json(w.create_group(&c, req).await?))
}

async fn get_group(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
) -> Reply<Group> {
    q.finish()?;
    Ok(Json(w.get_group(&c, GetGroupRequest { uid }).await?))
}

async fn update_group(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    mut q: Params,
    body: JsonBody,
) -> Reply<Group> {
    let paths = q.list("update_mask");
    q.finish()?;
    let mask = if paths.is_empty() {
        UpdateMask::BodyKeys(body.keys())
    } else {
        UpdateMask::Paths(paths)
    };
    let mut group: Group = body.message()?;
    group.uid = uid;
    Ok(Json(w.update_group(&c, group, mask).await?))
}

async fn delete_group(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
) -> Reply<serde_json::Value> {
    q.finish()?;
    w.delete_group(&c, DeleteGroupRequest { uid }).await?;
    Ok(Json(serde_json::json!({})))
}
