//! Content discovery: `tags/list`, `_catalog` and the referrers API.

use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use super::{header_value, json_response, page_size, param, target};
use crate::authz::Caller;
use crate::services::registry::oci::{Action, OCI_INDEX, OciResult};
use crate::ward::Ward;

/// A `Link` to the next page after `last`.
fn link(path: &str, n: u32, last: &str) -> HeaderValue {
    let last: String = form_urlencoded::byte_serialize(last.as_bytes()).collect();
    header_value(&format!("<{path}?n={n}&last={last}>; rel=\"next\""))
}

pub(crate) async fn tags(ward: &Ward, caller: &Caller, name: &str, q: Vec<(String, String)>) -> OciResult<Response> {
    let n = page_size(&q)?;
    let t = target(ward, caller, name, Action::Pull).await?;
    let mut tags = ward
        .oci_tags(caller, &t, n.saturating_add(1), param(&q, "last"))
        .await?;
    let more = tags.len() > n as usize;
    tags.truncate(n as usize);
    let body = serde_json::json!({"name": name, "tags": tags}).to_string();
    let mut r = json_response(StatusCode::OK, body, false);
    if more && let Some(last) = tags.last() {
        r.headers_mut()
            .insert(header::LINK, link(&format!("/v2/{name}/tags/list"), n, last));
    }
    Ok(r)
}

/// The repositories the caller may list (a registry token needs the
/// `registry:catalog:*` scope, checked before this as every request's is).
pub(crate) async fn catalog(ward: &Ward, caller: &Caller, q: Vec<(String, String)>) -> OciResult<Response> {
    let n = page_size(&q)?;
    let mut repos = ward.oci_catalog(caller, n.saturating_add(1), param(&q, "last")).await?;
    let more = repos.len() > n as usize;
    repos.truncate(n as usize);
    let body = serde_json::json!({ "repositories": repos }).to_string();
    let mut r = json_response(StatusCode::OK, body, false);
    if more && let Some(last) = repos.last() {
        r.headers_mut().insert(header::LINK, link("/v2/_catalog", n, last));
    }
    Ok(r)
}

pub(crate) async fn referrers(
    ward: &Ward,
    caller: &Caller,
    name: &str,
    digest: &str,
    q: Vec<(String, String)>,
) -> OciResult<Response> {
    let t = target(ward, caller, name, Action::Pull).await?;
    let filter = param(&q, "artifactType").filter(|a| !a.is_empty());
    let index = ward.oci_referrers(caller, &t, digest, filter).await?;
    let mut r = json_response(StatusCode::OK, index.to_string(), false);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(OCI_INDEX));
    if filter.is_some() {
        r.headers_mut()
            .insert("oci-filters-applied", HeaderValue::from_static("artifactType"));
    }
    Ok(r)
}
