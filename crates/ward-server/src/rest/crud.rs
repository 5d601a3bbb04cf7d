//! The shape every IAM resource shares over REST: create under a parent, get,
//! update (PATCH with AIP-134 masks) and delete by uid. Each resource names its
//! service calls once in a [`Resource`] impl; the handlers here are generic.

use std::future::Future;
use std::sync::Arc;

use super::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use serde::Serialize;
use serde::de::DeserializeOwned;
use ward_core::{Error, Result};

use super::table::Routes;
use super::{Auth, JsonBody, Params, Reply};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::status::ApiError;
use crate::ward::Ward;

pub trait Resource: Send + Sync + 'static {
    type Msg: Serialize + DeserializeOwned + Send + 'static;
    /// False for immutable resources: no PATCH route (405).
    const UPDATABLE: bool = true;

    fn create(w: &Ward, c: &Caller, parent: String, msg: Self::Msg) -> impl Future<Output = Result<Self::Msg>> + Send;
    fn get(w: &Ward, c: &Caller, uid: String) -> impl Future<Output = Result<Self::Msg>> + Send;
    /// `msg` carries the uid from the path.
    fn update(w: &Ward, c: &Caller, msg: Self::Msg, mask: UpdateMask)
    -> impl Future<Output = Result<Self::Msg>> + Send;
    fn delete(w: &Ward, c: &Caller, uid: String) -> impl Future<Output = Result<()>> + Send;
    fn set_uid(msg: &mut Self::Msg, uid: String);
    /// A custom method on a resource (`POST …/{uid}:verb`): `None` when the
    /// resource has no such verb.
    fn verb(
        _w: &Ward,
        _c: &Caller,
        _uid: String,
        _verb: &str,
        _body: JsonBody,
    ) -> impl Future<Output = Option<Result<serde_json::Value>>> + Send {
        async { None }
    }
}

async fn create<R: Resource>(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(parent): Path<String>,
    q: Params,
    body: JsonBody,
) -> Result<Response, ApiError> {
    q.finish()?;
    if let Some((uid, verb)) = parent.rsplit_once(':') {
        return match R::verb(&w, &c, uid.to_owned(), verb, body).await {
            Some(reply) => Ok(Json(reply?).into_response()),
            None => Err(Error::not_found("endpoint", format!(":{verb}")).into()),
        };
    }
    Ok(Json(R::create(&w, &c, parent, body.message()?).await?).into_response())
}

async fn get<R: Resource>(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
) -> Reply<R::Msg> {
    q.finish()?;
    Ok(Json(R::get(&w, &c, uid).await?))
}

async fn update<R: Resource>(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    mut q: Params,
    body: JsonBody,
) -> Reply<R::Msg> {
    let mask = super::update_mask(&mut q, &body);
    q.finish()?;
    let mut msg: R::Msg = body.message()?;
    R::set_uid(&mut msg, uid);
    Ok(Json(R::update(&w, &c, msg, mask).await?))
}

async fn delete<R: Resource>(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
) -> Reply<serde_json::Value> {
    q.finish()?;
    R::delete(&w, &c, uid).await?;
    Ok(Json(serde_json::json!({})))
}

/// The `/{collection}/{*uid}` routes of `R`: POST creates under the path's
/// parent; GET, PATCH and DELETE act on the path's uid.
pub fn item_routes<R: Resource>() -> MethodRouter<Arc<Ward>> {
    let r = axum::routing::post(create::<R>).get(get::<R>).delete(delete::<R>);
    if R::UPDATABLE { r.patch(update::<R>) } else { r }
}

/// Registers `collection` (list + item routes) under every IAM version.
/// `root` serves `…/{collection}/`, the create template with an empty
/// parent (grpc-gateway's `{parent=**}` matches no segment), for resources
/// that can be created without one; otherwise that path is no route (a
/// list there would answer a get with an empty uid).
pub fn routes<R: Resource>(
    collection: &str,
    list: MethodRouter<Arc<Ward>>,
    root: Option<MethodRouter<Arc<Ward>>>,
) -> Routes {
    let mut r = Routes::new();
    for v in ["v2beta1", "v2"] {
        r = r
            .route(&format!("/iam/{v}/{collection}"), list.clone())
            .route(&format!("/iam/{v}/{collection}/{{*uid}}"), item_routes::<R>());
        if let Some(root) = &root {
            r = r.route(&format!("/iam/{v}/{collection}/"), root.clone());
        }
    }
    r
}

/// The endpoints of [`routes`] for resource `$r` of IAM service `$service`:
/// List (`GET /collection`), Create (`POST
/// …/{parent=**}`, the body is the resource field), Get, Delete, and Update
/// (`PATCH …/{field.uid=**}`) when `$r` is updatable. Custom verbs and extra
/// collection methods are the resource module's to add.
macro_rules! endpoints {
    ($r:ty, $service:literal, $collection:literal, $field:literal, $kind:literal, $plural:literal) => {{
        let mut e = $crate::rest::versioned! {"iam", $service, [
            (GET, concat!("/", $collection), "", concat!("List", $plural)),
            (POST, concat!("/", $collection, "/{parent=**}"), $field, concat!("Create", $kind)),
            (GET, concat!("/", $collection, "/{uid=**}"), "", concat!("Get", $kind)),
            (DELETE, concat!("/", $collection, "/{uid=**}"), "", concat!("Delete", $kind)),
        ]};
        if <$r as $crate::rest::crud::Resource>::UPDATABLE {
            e.extend($crate::rest::versioned! {"iam", $service, [
                (PATCH, concat!("/", $collection, "/{", $field, ".uid=**}"), $field, concat!("Update", $kind)),
            ]});
        }
        e
    }};
}
pub(crate) use endpoints;
