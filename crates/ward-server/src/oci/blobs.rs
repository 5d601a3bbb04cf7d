//! Blobs (`/v2/<name>/blobs/<digest>`: GET with ranges, HEAD, DELETE) and
//! uploads (`…/blobs/uploads/`: POST, then PATCH chunks, PUT to finish, GET
//! status, DELETE to cancel; or one POST/PUT with `?digest=`; or a mount).
//! Bodies are streamed to the blob store, never buffered whole.

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use futures_util::StreamExt as _;
use http::{HeaderValue, Method, StatusCode, header};
use ward_blob::ByteStream;

use super::{header_str, header_value, param, query, target, upload_location, upload_range};
use crate::authz::Caller;
use crate::services::registry::oci::{Action, OciError, OciResult, parse_digest};
use crate::ward::Ward;

/// The request body as a byte stream; a stalled body ends in `TimedOut`, a
/// broken one in `InvalidData` (the client's fault, not the server's).
fn body_stream(req: Request) -> ByteStream {
    Box::pin(req.into_body().into_data_stream().map(|r| {
        r.map_err(|e| {
            let inner = e.into_inner();
            if crate::serve::is_body_timeout(inner.as_ref()) {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "the request body stalled")
            } else {
                std::io::Error::new(std::io::ErrorKind::InvalidData, inner.to_string())
            }
        })
    }))
}

/// `bytes=a-b`, `bytes=a-`, `bytes=-n`; anything else (several ranges,
/// garbage) is ignored, as HTTP allows.
fn parse_range(raw: Option<&str>) -> Option<(Option<u64>, Option<u64>)> {
    let spec = raw?.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let a = if a.is_empty() {
        None
    } else {
        Some(a.trim().parse().ok()?)
    };
    let b = if b.is_empty() {
        None
    } else {
        Some(b.trim().parse().ok()?)
    };
    if a.is_none() && b.is_none() {
        return None;
    }
    Some((a, b))
}

/// `Content-Range` of a chunk: `a-b` (optionally `bytes a-b/total`): its
/// first and last byte.
fn chunk_range(raw: Option<&str>) -> OciResult<Option<(u64, u64)>> {
    let Some(raw) = raw else { return Ok(None) };
    let spec = raw.trim();
    let spec = spec
        .strip_prefix("bytes=")
        .or_else(|| spec.strip_prefix("bytes "))
        .unwrap_or(spec);
    let spec = spec.split('/').next().unwrap_or(spec);
    let (a, b) = spec
        .split_once('-')
        .ok_or_else(|| OciError::new(416, "BLOB_UPLOAD_INVALID", "Content-Range must be <start>-<end>"))?;
    let (a, b): (u64, u64) = match (a.trim().parse(), b.trim().parse()) {
        (Ok(a), Ok(b)) if b >= a => (a, b),
        _ => {
            return Err(OciError::new(
                416,
                "BLOB_UPLOAD_INVALID",
                "Content-Range must be <start>-<end>",
            ));
        }
    };
    Ok(Some((a, b)))
}

fn empty(status: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    r
}

/// 201 for a finished blob.
fn created(name: &str, digest: &str) -> Response {
    let mut r = empty(StatusCode::CREATED);
    let h = r.headers_mut();
    h.insert(header::LOCATION, header_value(&format!("/v2/{name}/blobs/{digest}")));
    h.insert("docker-content-digest", header_value(digest));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
    r
}

/// 202 / 204 for an upload in progress.
fn in_progress(status: StatusCode, name: &str, uuid: &str, size: i64) -> Response {
    let mut r = empty(status);
    let h = r.headers_mut();
    h.insert(header::LOCATION, header_value(&upload_location(name, uuid)));
    h.insert(header::RANGE, header_value(&upload_range(size)));
    h.insert("docker-upload-uuid", header_value(uuid));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
    r
}

pub(crate) async fn handle_blob(
    ward: &Ward,
    caller: &Caller,
    name: &str,
    digest: &str,
    req: Request,
) -> OciResult<Response> {
    let method = req.method().clone();
    match method {
        Method::GET | Method::HEAD => {
            let t = target(ward, caller, name, Action::Pull).await?;
            let range = parse_range(header_str(req.headers(), header::RANGE));
            let head = method == Method::HEAD;
            let read = ward.oci_get_blob(caller, &t, digest, range, !head).await?;
            let body = match read.body {
                Some(s) => Body::from_stream(s),
                None => Body::empty(),
            };
            let mut r = Response::new(body);
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(read.end - read.start));
            h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            h.insert("docker-content-digest", header_value(digest));
            h.insert(header::ETAG, header_value(&format!("\"{digest}\"")));
            if range.is_some() {
                h.insert(
                    header::CONTENT_RANGE,
                    header_value(&format!("bytes {}-{}/{}", read.start, read.end - 1, read.size)),
                );
                *r.status_mut() = StatusCode::PARTIAL_CONTENT;
            }
            Ok(r)
        }
        Method::DELETE => {
            let t = target(ward, caller, name, Action::Delete).await?;
            ward.oci_delete_blob(caller, &t, digest).await?;
            Ok(empty(StatusCode::ACCEPTED))
        }
        _ => Err(OciError::new(405, "UNSUPPORTED", "the operation is unsupported")),
    }
}

/// POST `/v2/<name>/blobs/uploads/`: a mount, a whole blob, or a session.
pub(crate) async fn start_upload(ward: &Ward, caller: &Caller, name: &str, req: Request) -> OciResult<Response> {
    let q = query(&req);
    let mut t = target(ward, caller, name, Action::Push).await?;
    let repo = ward.oci_push_repo(caller, &mut t).await?;
    if let Some(mount) = param(&q, "mount") {
        let digest = parse_digest(mount)?;
        if let Some(from) = param(&q, "from")
            && ward.oci_mount(caller, &repo, &digest, from).await?
        {
            return Ok(created(name, digest.as_str()));
        }
    } else if let Some(d) = param(&q, "digest") {
        let digest = parse_digest(d)?;
        ward.oci_put_blob(&repo, &digest, body_stream(req)).await?;
        return Ok(created(name, digest.as_str()));
    }
    let u = ward.oci_start_upload(caller, &repo).await?;
    Ok(in_progress(StatusCode::ACCEPTED, name, &u.uuid, u.size))
}

/// `/v2/<name>/blobs/uploads/<uuid>`.
pub(crate) async fn handle_upload(
    ward: &Ward,
    caller: &Caller,
    name: &str,
    uuid: &str,
    req: Request,
) -> OciResult<Response> {
    let method = req.method().clone();
    if ![Method::GET, Method::PATCH, Method::PUT, Method::DELETE].contains(&method) {
        return Err(OciError::new(405, "UNSUPPORTED", "the operation is unsupported"));
    }
    // Sessions exist only in repos a push already created.
    let t = target(ward, caller, name, Action::Push).await?;
    let repo = ward.oci_check(caller, &t, ward_core::capability::Capability::ManifestCreate)?;
    let upload = ward.oci_upload(&repo, uuid).await?;
    match method {
        Method::GET => Ok(in_progress(StatusCode::NO_CONTENT, name, &upload.uuid, upload.size)),
        Method::PATCH => {
            let range = chunk_range(header_str(req.headers(), header::CONTENT_RANGE))?;
            let end = ward.oci_append(&upload, range, body_stream(req)).await?;
            Ok(in_progress(StatusCode::ACCEPTED, name, &upload.uuid, end))
        }
        Method::PUT => {
            let q = query(&req);
            let digest = parse_digest(param(&q, "digest").unwrap_or(""))?;
            let range = chunk_range(header_str(req.headers(), header::CONTENT_RANGE))?;
            let has_body = header_str(req.headers(), header::CONTENT_LENGTH).is_none_or(|l| l != "0");
            let len = if has_body || range.is_some() {
                ward.oci_append(&upload, range, body_stream(req)).await?
            } else {
                upload.size
            };
            ward.oci_finish(&repo, &upload.uuid, len, &digest).await?;
            Ok(created(name, digest.as_str()))
        }
        Method::DELETE => {
            ward.oci_cancel_upload(&upload).await?;
            Ok(empty(StatusCode::NO_CONTENT))
        }
        _ => Err(OciError::new(405, "UNSUPPORTED", "the operation is unsupported")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range(Some("bytes=0-9")), Some((Some(0), Some(9))));
        assert_eq!(parse_range(Some("bytes=5-")), Some((Some(5), None)));
        assert_eq!(parse_range(Some("bytes=-5")), Some((None, Some(5))));
        assert_eq!(parse_range(Some("bytes=0-1,3-4")), None);
        assert_eq!(parse_range(Some("items=0-1")), None);
        assert_eq!(parse_range(Some("bytes=-")), None);
        assert_eq!(parse_range(Some("bytes=x-1")), None);
        assert_eq!(chunk_range(Some("0-99")).unwrap(), Some((0, 99)));
        assert_eq!(chunk_range(Some("bytes 100-199/*")).unwrap(), Some((100, 199)));
        assert!(chunk_range(Some("9-1")).is_err());
        assert!(chunk_range(Some("x")).is_err());
        assert_eq!(chunk_range(None).unwrap(), None);
    }
}
