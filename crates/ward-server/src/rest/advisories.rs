//! Advisories over REST: reads at `/vulnerabilities/{v2beta1,v2}/advisories`,
//! writes at `/vulnerabilities/v1/…` (v1 shapes), OSV documents at `/osv/…`
//! and the public feed at `/advisory/v2/…`.

use std::sync::Arc;

use super::Json;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use ward_core::{Error, Result};
use ward_proto::advisory::v2 as feed;
use ward_proto::vulnerabilities::v1;
use ward_proto::vulnerabilities::v2::{
    Advisory, EventTypeFilter, GetAdvisoryRequest, ListAdvisoriesRequest, ListAdvisoriesResponse, ReviewState,
};

use super::table::{Endpoint, Raw, Routes};
use super::{Auth, JsonBody, Params, Reply, raw, rpc, versioned};
use crate::authz::Caller;
use crate::services::advisories::v1 as tr;
use crate::status::ApiError;
use crate::ward::Ward;

/// Largest import request body.
pub const MAX_IMPORT_BYTES: usize = 16 * 1024 * 1024;
/// Imports one server works on at once (each holds its parsed body).
pub const IMPORTS_AT_ONCE: usize = 2;

pub fn routes() -> Routes {
    let mut r = Routes::new();
    for v in ["v2beta1", "v2"] {
        r = r
            .route(&format!("/vulnerabilities/{v}/advisories"), get(list_advisories))
            .route(&format!("/vulnerabilities/{v}/advisories/{{*uid}}"), get(get_advisory));
    }
    r.route(
        "/vulnerabilities/v1/advisories",
        post(create_advisory).get(list_advisories_v1),
    )
    .route("/vulnerabilities/v1/advisories:import", post(import))
    .route("/vulnerabilities/v1/osv:import", post(import_osv))
    .route(
        "/vulnerabilities/v1/advisories/{*path}",
        put(update_advisory)
            .delete(delete_advisory)
            .post(create_event)
            .get(events_or_flags),
    )
    .route("/vulnerabilities/v1/advisory_events/{*uid}", put(update_event))
    .route("/osv/{file}", get(osv))
    .route("/advisory/v2/documents", get(documents))
    .route("/advisory/v2/metadata", get(metadata))
    .route("/advisory/v2beta1/documents", get(documents))
    .route("/advisory/v2beta1/metadata", get(metadata))
}

pub fn endpoints() -> Vec<Endpoint> {
    use http::Method;
    macro_rules! v1 {
        ($method:ident, $path:literal, $body:literal, $rpc:literal) => {
            rpc(
                Method::$method,
                concat!("/vulnerabilities/v1", $path),
                $body,
                concat!("chainguard.platform.vulnerabilities.v1.Advisories.", $rpc),
                true,
            )
        };
    }
    // The public feed: no token needed.
    macro_rules! feed {
        ($v:literal, $path:literal, $rpc:literal) => {
            rpc(
                Method::GET,
                concat!("/advisory/", $v, "/", $path),
                "",
                concat!(
                    "chainguard.platform.advisory.",
                    $v,
                    ".SecurityAdvisoryService.",
                    $rpc
                ),
                false,
            )
        };
    }
    let mut e = versioned! {"vulnerabilities", "AdvisoriesService", [
        (GET, "/advisories", "", "ListAdvisories"),
        (GET, "/advisories/{uid=**}", "", "GetAdvisory"),
    ]};
    e.extend([
        v1!(POST, "/advisories", "*", "Create"),
        v1!(GET, "/advisories", "", "List"),
        v1!(POST, "/advisories:import", "*", "Import"),
        v1!(PUT, "/advisories/{id=**}", "*", "Update"),
        v1!(DELETE, "/advisories/{id=**}", "", "Delete"),
        v1!(POST, "/advisories/{parent_id=**}/events", "*", "CreateAdvisoryEvent"),
        v1!(GET, "/advisories/{parent_id=**}/events", "", "ListAdvisoryEvents"),
        v1!(GET, "/advisories/{id=**}/flags", "", "GetAdvisoryFlags"),
        v1!(POST, "/osv:import", "*", "ImportOsv"),
        v1!(PUT, "/advisory_events/{id=**}", "*", "UpdateAdvisoryEvent"),
        feed!("v2beta1", "documents", "ListDocuments"),
        feed!("v2beta1", "metadata", "ListVulnerabilityMetadata"),
        feed!("v2", "documents", "ListDocuments"),
        feed!("v2", "metadata", "ListVulnerabilityMetadata"),
        Endpoint::Raw(Raw {
            errors: &[400, 401, 404, 500],
            ..raw(
                Method::GET,
                "/osv/{file}".into(),
                "An OSV document: `{file}` is `<id>.json` (one advisory by CGA id, or an imported feed \
                 record by its OSV id, as imported), `all.json` (a JSON array of every advisory's document) \
                 or `all.zip` (`application/zip`, one `<id>.json` per document). No token needed: \
                 anonymous callers get the public advisories; a token adds those it may list.",
            )
        }),
    ]);
    e
}

/// The caller when a token is given; anonymous otherwise (public feeds).
pub struct MaybeAuth(pub Option<Caller>);

impl FromRequestParts<Arc<Ward>> for MaybeAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, ward: &Arc<Ward>) -> Result<Self, ApiError> {
        if parts.headers.contains_key(http::header::AUTHORIZATION) {
            Ok(MaybeAuth(Some(Auth::from_request_parts(parts, ward).await?.0)))
        } else {
            Ok(MaybeAuth(None))
        }
    }
}

/// A repeated enum query parameter, by value name or number (a number the
/// enum does not define is refused like an unknown name).
fn enum_list(q: &mut Params, key: &str, parse: impl Fn(&str) -> Option<i32>) -> Result<Vec<i32>> {
    q.list(key)?
        .iter()
        .map(|v| {
            parse(v)
                .ok_or_else(|| Error::invalid(key, format!("unknown {key} value \"{}\"", ward_core::names::echo(v))))
        })
        .collect()
}

/// An enum value by name, or by a number the enum defines.
fn enum_value<E: Into<i32> + TryFrom<i32>>(s: &str, by_name: fn(&str) -> Option<E>) -> Option<i32> {
    by_name(s)
        .map(Into::into)
        .or_else(|| s.parse::<i32>().ok().filter(|n| E::try_from(*n).is_ok()))
}

fn review_state(s: &str) -> Option<i32> {
    enum_value(s, ReviewState::from_str_name)
}

fn event_type(s: &str) -> Option<i32> {
    enum_value(s, EventTypeFilter::from_str_name)
}

async fn list_advisories(State(w): State<Arc<Ward>>, Auth(c): Auth, mut q: Params) -> Reply<ListAdvisoriesResponse> {
    let origin = q.string("origin");
    // Given, even empty, it must name an event type (as the schema says).
    let latest = q.optional("latest_event_type");
    let req = ListAdvisoriesRequest {
        uidp: q.uidp()?,
        advisory_ids: q.list("advisory_ids")?,
        legacy_advisory_ids: q.list("legacy_advisory_ids")?,
        artifact_names: q.list("artifact_names")?,
        artifact_types: q.list("artifact_types")?,
        artifact_architectures: q.list("artifact_architectures")?,
        component_names: q.list("component_names")?,
        component_types: q.list("component_types")?,
        component_locations: q.list("component_locations")?,
        aliases: q.list("aliases")?,
        origin: (!origin.is_empty()).then_some(origin),
        event_review_states: enum_list(&mut q, "event_review_states", review_state)?,
        event_authors: q.list("event_authors")?,
        exclude_event_authors: q.list("exclude_event_authors")?,
        event_reviewers: q.list("event_reviewers")?,
        event_types: enum_list(&mut q, "event_types", event_type)?,
        latest_event_type: match latest {
            None => None,
            Some(latest) => Some(event_type(&latest).ok_or_else(|| {
                Error::invalid(
                    "latest_event_type",
                    format!("unknown latest_event_type \"{}\"", ward_core::names::echo(&latest)),
                )
            })?),
        },
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        show_deleted: q.bool("show_deleted")?,
        skip: q.int("skip")?,
        query: q.string("query"),
    };
    q.finish()?;
    Ok(Json(w.list_advisories(&c, req).await?))
}

async fn get_advisory(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
) -> Reply<Advisory> {
    q.finish()?;
    Ok(Json(w.get_advisory(&c, GetAdvisoryRequest { uid }).await?))
}

async fn create_advisory(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params, body: JsonBody) -> Reply<v1::Advisory> {
    q.finish()?;
    let req: v1::CreateAdvisoryRequest = body.message()?;
    let a = tr::advisory_in(req.advisory.unwrap_or_default())?;
    Ok(Json(tr::advisory_out(w.create_advisory(&c, &req.parent_id, a).await?)))
}

async fn list_advisories_v1(State(w): State<Arc<Ward>>, Auth(c): Auth, mut q: Params) -> Reply<v1::AdvisoriesList> {
    let id = q.string("id");
    let page_size = q.int("page_size")?;
    let f = v1::AdvisoryFilter {
        id,
        uidp: q.uidp()?,
        advisory_ids: q.list("advisory_ids")?,
        legacy_advisory_ids: q.list("legacy_advisory_ids")?,
        artifact_type: q.list("artifact_type")?,
        artifact_name: q.list("artifact_name")?,
        component_name: q.list("component_name")?,
        component_type: q.list("component_type")?,
        component_location: q.list("component_location")?,
        aliases: q.list("aliases")?,
        artifact_architecture: q.list("artifact_architecture")?,
        page_token: q.string("page_token"),
        page_size: i64::from(page_size),
        event_statuses: enum_list(&mut q, "event_statuses", |s| {
            enum_value(s, v1::advisory_event::ReviewStatus::from_str_name)
        })?,
        event_author: q.list("event_author")?,
        event_reviewer: q.list("event_reviewer")?,
        event_types: enum_list(&mut q, "event_types", |s| {
            enum_value(s, v1::advisory_filter::EventTypeFilter::from_str_name)
        })?,
        order_by: enum_list(&mut q, "order_by", |s| {
            enum_value(s, v1::advisory_filter::OrderBy::from_str_name)
        })?
        .pop()
        .unwrap_or_default(),
        exclude_event_author: q.list("exclude_event_author")?,
        latest_event_type: enum_list(&mut q, "latest_event_type", |s| {
            enum_value(s, v1::advisory_filter::EventTypeFilter::from_str_name)
        })?
        .pop(),
        origin: Some(q.string("origin")).filter(|s| !s.is_empty()),
    };
    q.finish()?;
    let parent = f.id.clone();
    let resp = w.list_advisories(&c, tr::filter_in(f)?).await?;
    Ok(Json(v1::AdvisoriesList {
        id: parent,
        items: resp.advisories.into_iter().map(tr::advisory_out).collect(),
        next_page_token: resp.next_page_token,
        total_count: resp.total_count,
    }))
}

async fn update_advisory(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(id): Path<String>,
    q: Params,
    body: JsonBody,
) -> Reply<v1::Advisory> {
    q.finish()?;
    let mut a: v1::Advisory = body.message()?;
    a.id = id;
    a.events.clear();
    let a = tr::advisory_in(a)?;
    Ok(Json(tr::advisory_out(w.update_advisory(&c, a).await?)))
}

async fn delete_advisory(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(id): Path<String>,
    q: Params,
) -> std::result::Result<Response, ApiError> {
    q.finish()?;
    w.delete_advisory(&c, &id).await?;
    Ok(Json(serde_json::json!({})).into_response())
}

/// `POST …/advisories/{uid}/events`.
async fn create_event(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(path): Path<String>,
    q: Params,
    body: JsonBody,
) -> Reply<v1::AdvisoryEvent> {
    q.finish()?;
    let parent = path
        .strip_suffix("/events")
        .ok_or_else(|| Error::not_found("endpoint", format!("POST /vulnerabilities/v1/advisories/{path}")))?;
    let req: v1::CreateAdvisoryEventRequest = body.message()?;
    let e = tr::event_in(req.advisory_event.unwrap_or_default())?;
    Ok(Json(tr::event_out(w.create_advisory_event(&c, parent, e).await?)))
}

/// `GET …/advisories/{uid}/events`.
/// `GET /vulnerabilities/v1/advisories/{id}/events` (ListAdvisoryEvents) and
/// `…/{id}/flags` (GetAdvisoryFlags).
async fn events_or_flags(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(path): Path<String>,
    q: Params,
) -> std::result::Result<Response, ApiError> {
    q.finish()?;
    if let Some(id) = path.strip_suffix("/flags") {
        let req = v1::GetAdvisoryFlagsRequest { id: id.into() };
        return Ok(Json(w.get_advisory_flags(&c, req).await?).into_response());
    }
    let parent = path
        .strip_suffix("/events")
        .ok_or_else(|| Error::not_found("endpoint", format!("GET /vulnerabilities/v1/advisories/{path}")))?;
    let items = w.list_advisory_events(&c, parent).await?;
    Ok(Json(v1::AdvisoryEventList {
        parent_id: parent.into(),
        items: items.into_iter().map(tr::event_out).collect(),
    })
    .into_response())
}

async fn update_event(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    Path(uid): Path<String>,
    q: Params,
    body: JsonBody,
) -> Reply<v1::AdvisoryEvent> {
    q.finish()?;
    let e: v1::AdvisoryEvent = body.message()?;
    Ok(Json(tr::event_out(
        w.update_advisory_event(&c, &uid, tr::event_change(e)?).await?,
    )))
}

/// Imports: bodies up to [`MAX_IMPORT_BYTES`], read only for a caller who
/// may create advisories somewhere, at most [`IMPORTS_AT_ONCE`] at a time per
/// server, and parsed off the async workers.
async fn import(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params, req: Request) -> Reply<v1::ImportResponse> {
    q.finish()?;
    let (body, _permit) = import_body::<v1::ImportRequest>(&w, &c, req, "ImportRequest").await?;
    Ok(Json(w.import_advisories(&c, body).await?))
}

async fn import_osv(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params, req: Request) -> Reply<v1::ImportResponse> {
    q.finish()?;
    let (body, _permit) = import_body::<v1::ImportOsvRequest>(&w, &c, req, "ImportOsvRequest").await?;
    Ok(Json(w.import_osv(&c, body).await?))
}

/// An import's body, read once the caller may import anywhere (so nobody
/// else makes the server read megabytes), within [`MAX_IMPORT_BYTES`],
/// parsed off the async workers, holding one of the [`IMPORTS_AT_ONCE`]
/// slots (kept until the import is done).
async fn import_body<'w, T: serde::de::DeserializeOwned + Send + 'static>(
    w: &'w Ward,
    c: &Caller,
    req: Request,
    name: &'static str,
) -> std::result::Result<(T, tokio::sync::SemaphorePermit<'w>), ApiError> {
    w.may_import(c)?;
    if let Some(ct) = req.headers().get(http::header::CONTENT_TYPE) {
        super::json_content_type(ct.to_str().unwrap_or(""))?;
    }
    let permit = w
        .import_permits
        .acquire()
        .await
        .map_err(|_| Error::Unavailable("the server is shutting down".into()))?;
    let bytes = axum::body::to_bytes(req.into_body(), MAX_IMPORT_BYTES)
        .await
        .map_err(|e| super::body_error_over(e, MAX_IMPORT_BYTES))?;
    let body: T = tokio::task::spawn_blocking(move || {
        let bad = |e: serde_json::Error| Error::invalid("body", format!("the request body does not match {name}: {e}"));
        // An empty body is `{}`, and `null` a field's default, as everywhere.
        let mut v: serde_json::Value = if bytes.iter().all(u8::is_ascii_whitespace) {
            serde_json::json!({})
        } else {
            serde_json::from_slice(&bytes).map_err(bad)?
        };
        super::strip_nulls(&mut v, 0);
        serde_json::from_value(v).map_err(bad)
    })
    .await
    .map_err(Error::internal)??;
    Ok((body, permit))
}

/// `/osv/<CGA id>.json`, `/osv/all.json`, `/osv/all.zip`.
async fn osv(
    State(w): State<Arc<Ward>>,
    MaybeAuth(c): MaybeAuth,
    Path(file): Path<String>,
    q: Params,
) -> std::result::Result<Response, ApiError> {
    q.finish()?;
    match file.as_str() {
        "all.json" => {
            let export = w.osv_export(c.as_ref(), false).await?;
            let docs = &export.docs;
            let mut body = Vec::with_capacity(docs.iter().map(|(_, d)| d.len() + 1).sum::<usize>() + 2);
            body.push(b'[');
            for (i, (_, d)) in docs.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(d);
            }
            body.push(b']');
            Ok(export_response("application/json", None, body, export.permit))
        }
        "all.zip" => {
            let export = w.osv_export(c.as_ref(), true).await?;
            let (docs, permit) = (export.docs, export.permit);
            // Compressed on a blocking thread of its own: the export slot
            // already bounds how many run, and they never queue ahead of
            // the CPU work requests need to authenticate.
            let bytes = tokio::task::spawn_blocking(move || zip_documents(&docs))
                .await
                .map_err(Error::internal)??;
            Ok(export_response(
                "application/zip",
                Some("attachment; filename=\"all.zip\""),
                bytes,
                permit,
            ))
        }
        name => {
            let id = name.strip_suffix(".json").unwrap_or_default();
            if ward_core::advisory::is_cga(id) {
                return Ok(Json(w.osv_by_id(c.as_ref(), id).await?).into_response());
            }
            // A feed record, byte for byte as imported.
            let body = w.feed_record(c.as_ref(), id).await?;
            Ok(([(http::header::CONTENT_TYPE, "application/json")], body).into_response())
        }
    }
}

/// An export's response: its body is sent in pieces, and the export's slot
/// is held until the last piece has been handed to the connection, so the
/// exports at once bound the memory they hold, however slowly clients read.
fn export_response(
    content_type: &'static str,
    disposition: Option<&'static str>,
    body: Vec<u8>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    const PIECE: usize = 64 * 1024;
    let body = bytes::Bytes::from(body);
    let len = body.len();
    let pieces = futures_util::stream::unfold((body, Some(permit)), |(mut rest, permit)| async move {
        if rest.is_empty() {
            drop(permit);
            return None;
        }
        let piece = rest.split_to(rest.len().min(PIECE));
        Some((Ok::<_, std::convert::Infallible>(piece), (rest, permit)))
    });
    let mut resp = Response::new(axum::body::Body::from_stream(pieces));
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    h.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    if let Some(d) = disposition {
        h.insert(http::header::CONTENT_DISPOSITION, http::HeaderValue::from_static(d));
    }
    resp
}

/// A zip of `<id>.json` files.
fn zip_documents(docs: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    use std::io::Write;
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (id, text) in docs {
        out.start_file(format!("{id}.json"), options).map_err(Error::internal)?;
        out.write_all(text).map_err(Error::internal)?;
    }
    Ok(out.finish().map_err(Error::internal)?.into_inner())
}

async fn documents(
    State(w): State<Arc<Ward>>,
    MaybeAuth(c): MaybeAuth,
    mut q: Params,
) -> Reply<feed::ListDocumentsResponse> {
    let req = feed::ListDocumentsRequest {
        id: q.string("id"),
        cves: q.list("cves")?,
    };
    q.finish()?;
    Ok(Json(w.list_documents(c.as_ref(), req).await?))
}

async fn metadata(
    State(w): State<Arc<Ward>>,
    MaybeAuth(c): MaybeAuth,
    mut q: Params,
) -> Reply<feed::ListVulnerabilityMetadataResponse> {
    let req = feed::ListVulnerabilityMetadataRequest {
        id: q.string("id"),
        ids: q.list("ids")?,
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_vulnerability_metadata(c.as_ref(), req).await?))
}
