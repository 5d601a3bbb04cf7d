//! `/iam/{v2beta1,v2}/identities` over REST.

use std::sync::Arc;

use super::Json;
use axum::extract::State;
use axum::routing::get;
use ward_core::{Error, Result};
use ward_proto::iam::v2::{
    CreateIdentityRequest, DeleteIdentityRequest, GetIdentityRequest, Identity, ListIdentitiesRequest,
    ListIdentitiesResponse, RelationshipType,
};

use super::crud::{self, Resource};
use super::table::{Endpoint, Routes};
use super::{Auth, Params, Reply, versioned};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

struct Identities;

impl Resource for Identities {
    type Msg = Identity;

    async fn create(w: &Ward, c: &Caller, parent: String, msg: Identity) -> Result<Identity> {
        w.create_identity(
            c,
            CreateIdentityRequest {
                parent,
                identity: Some(msg),
            },
        )
        .await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<Identity> {
        w.get_identity(c, GetIdentityRequest { uid }).await
    }
    async fn update(w: &Ward, c: &Caller, msg: Identity, mask: UpdateMask) -> Result<Identity> {
        w.update_identity(c, msg, mask).await
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_identity(c, DeleteIdentityRequest { uid }).await
    }
    fn set_uid(msg: &mut Identity, uid: String) {
        msg.uid = uid;
    }
}

pub fn routes() -> Routes {
    let mut r = crud::routes::<Identities>("identities", get(list_identities), None);
    for v in ["v2beta1", "v2"] {
        r = r
            .route(&format!("/iam/{v}/identities:lookupIdentity"), get(lookup_identity))
            .route(
                &format!("/iam/{v}/identities:updateIdentityMetadata"),
                axum::routing::patch(update_metadata),
            );
    }
    r
}

pub fn endpoints() -> Vec<Endpoint> {
    let mut e = crud::endpoints! {Identities, "IdentitiesService", "identities", "identity", "Identity", "Identities"};
    e.extend(versioned! {"iam", "IdentitiesService", [
        (GET, "/identities:lookupIdentity", "", "LookupIdentity"),
        // The body is the whole request, `{"identityMetadata": …, "updateMask": …}`.
        (PATCH, "/identities:updateIdentityMetadata", "*", "UpdateIdentityMetadata"),
    ]});
    e
}

/// The body is the whole request (`body: "*"`), as SDK clients send it:
/// `{"identityMetadata": {…}, "updateMask": "company,jobTitle"}`; without a
/// mask (in the body or the query), the keys of `identityMetadata` are it.
/// A body that is the metadata itself (no `identityMetadata` key) is read
/// the same way, for clients written against Ward's earlier binding.
async fn update_metadata(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
    mut body: super::JsonBody,
) -> Reply<ward_proto::iam::v2::IdentityMetadata> {
    let inner = ["identityMetadata", "identity_metadata"]
        .into_iter()
        .find_map(|k| body.0.remove(k));
    let (metadata, body_mask) = match inner {
        None => (body, None),
        Some(serde_json::Value::Object(m)) => {
            let mask = ["updateMask", "update_mask"].into_iter().find_map(|k| body.0.remove(k));
            if let Some(extra) = body.0.keys().next() {
                return Err(Error::invalid(
                    extra.clone(),
                    "UpdateIdentityMetadataRequest has only identityMetadata and updateMask",
                )
                .into());
            }
            (super::JsonBody(m), mask)
        }
        Some(serde_json::Value::Null) => (super::JsonBody(Default::default()), None),
        Some(_) => return Err(Error::invalid("identity_metadata", "identityMetadata must be an object").into()),
    };
    let mut mask = super::update_mask(&mut q, &metadata);
    match body_mask {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::String(m)) if m.is_empty() => {}
        Some(serde_json::Value::String(m)) => {
            mask = UpdateMask::Paths(m.split(',').map(|p| p.trim().to_owned()).collect());
        }
        Some(_) => {
            return Err(Error::invalid("update_mask", "updateMask is a string of comma-separated field paths").into());
        }
    }
    q.finish()?;
    Ok(Json(w.update_own_metadata(&c, metadata.message()?, mask).await?))
}

async fn lookup_identity(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ward_proto::iam::v2::LookupIdentityResponse> {
    let req = ward_proto::iam::v2::LookupIdentityRequest {
        issuer: q.string("issuer"),
        subject: q.string("subject"),
    };
    q.finish()?;
    Ok(Json(w.lookup_identity(&c, req).await?))
}

/// `relationship_type` by enum name or number.
fn relationship_type(raw: &str) -> Result<i32> {
    if raw.is_empty() {
        return Ok(0);
    }
    raw.parse::<i32>()
        .ok()
        .filter(|n| RelationshipType::try_from(*n).is_ok())
        .or_else(|| RelationshipType::from_str_name(raw).map(|t| t as i32))
        .ok_or_else(|| {
            Error::invalid(
                "relationship_type",
                format!("relationship_type \"{raw}\" is not a RelationshipType"),
            )
        })
}

async fn list_identities(State(w): State<Arc<Ward>>, Auth(c): Auth, mut q: Params) -> Reply<ListIdentitiesResponse> {
    let req = ListIdentitiesRequest {
        uidp: q.uidp()?,
        name: q.string("name"),
        relationship_type: relationship_type(&q.string("relationship_type"))?,
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_identities(&c, req).await?))
}
