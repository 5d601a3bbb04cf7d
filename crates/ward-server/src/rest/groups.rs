//! `/iam/{v2beta1,v2}/groups` over REST.

use std::sync::Arc;

use super::Json;
use axum::extract::{Path, State};
use axum::routing::get;
use ward_core::Result;
use ward_proto::iam::v2::{
    AcceptTermsRequest, AcceptTermsResponse, CheckEligibilityRequest, CheckEligibilityResponse, CreateGroupRequest,
    DeleteGroupRequest, GetGroupRequest, Group, ListGroupAccessRequestsRequest, ListGroupAccessRequestsResponse,
    ListGroupsRequest, ListGroupsResponse, ListTermsAcceptancesRequest, ListTermsAcceptancesResponse,
    LookupGroupRequest, LookupGroupResponse, RequestGroupAccessRequest,
};

use super::crud::{self, Resource};
use super::table::{Endpoint, Routes};
use super::{Auth, JsonBody, Params, Reply, versioned};
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
    async fn verb(w: &Ward, c: &Caller, uid: String, verb: &str, body: JsonBody) -> Option<Result<serde_json::Value>> {
        match verb {
            // The body is the whole request (`body: "*"`); the path's group
            // wins over a `groupUid` in it, as in grpc-gateway.
            "requestGroupAccess" => Some(
                async {
                    let _: RequestGroupAccessRequest = body.message()?;
                    w.request_group_access(c, RequestGroupAccessRequest { group_uid: uid })
                        .await
                        .and_then(to_json)
                }
                .await,
            ),
            _ => None,
        }
    }
}

fn to_json<T: serde::Serialize>(v: T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| ward_core::Error::internal(format_args!("encode: {e}")))
}

/// Groups also accept POST on the collection itself: a new organization.
pub fn routes() -> Routes {
    let mut r = crud::routes::<Groups>(
        "groups",
        get(list_groups).post(create_organization),
        Some(axum::routing::post(create_organization)),
    );
    for v in ["v2beta1", "v2"] {
        r = r
            .route(&format!("/iam/{v}/groups:lookupGroup"), get(lookup_group))
            .route(&format!("/iam/{v}/groups:checkEligibility"), get(check_eligibility))
            .route(&format!("/iam/{v}/groups:accessRequests"), get(access_requests))
            .route(
                &format!("/iam/{v}/terms/{{*group}}"),
                get(list_terms).post(accept_terms),
            );
    }
    r
}

pub fn endpoints() -> Vec<Endpoint> {
    let mut e = crud::endpoints! {Groups, "GroupsService", "groups", "group", "Group", "Groups"};
    e.extend(versioned! {"iam", "GroupsService", [
        // A new organization: grpc-gateway's `{parent=**}` matching no segment.
        (POST, "/groups", "group", "CreateGroup"),
        (POST, "/groups/", "group", "CreateGroup"),
        // The body is the request; the path's group wins over its groupUid.
        (POST, "/groups/{group_uid=**}:requestGroupAccess", "*", "RequestGroupAccess"),
        (GET, "/groups:lookupGroup", "", "LookupGroup"),
        (GET, "/groups:checkEligibility", "", "CheckEligibility"),
        (GET, "/groups:accessRequests", "", "ListGroupAccessRequests"),
    ]});
    e.extend(versioned! {"iam", "TermsService", [
        (POST, "/terms/{group=**}", "*", "AcceptTerms"),
        (GET, "/terms/{group=**}", "", "ListTermsAcceptances"),
    ]});
    e
}

async fn lookup_group(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params) -> Reply<LookupGroupResponse> {
    q.finish()?;
    Ok(Json(w.lookup_group(&c, LookupGroupRequest {}).await?))
}

async fn check_eligibility(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params) -> Reply<CheckEligibilityResponse> {
    q.finish()?;
    Ok(Json(w.check_eligibility(&c, CheckEligibilityRequest {}).await?))
}

async fn access_requests(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ListGroupAccessRequestsResponse> {
    let req = ListGroupAccessRequestsRequest {
        group_uid: q.string("group_uid"),
    };
    q.finish()?;
    Ok(Json(w.list_group_access_requests(&c, req).await?))
}

async fn accept_terms(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(group): Path<String>,
    q: Params,
    body: JsonBody,
) -> Reply<AcceptTermsResponse> {
    q.finish()?;
    let mut req: AcceptTermsRequest = body.message()?;
    req.group = group;
    Ok(Json(w.accept_terms(&c, req).await?))
}

async fn list_terms(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(group): Path<String>,
    mut q: Params,
) -> Reply<ListTermsAcceptancesResponse> {
    let req = ListTermsAcceptancesRequest {
        group,
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_terms_acceptances(&c, req).await?))
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
