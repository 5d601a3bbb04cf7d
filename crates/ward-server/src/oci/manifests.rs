//! `/v2/<name>/manifests/<reference>`: GET, HEAD, PUT, DELETE.

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};

use super::{header_value, target};
use crate::authz::Caller;
use crate::services::events::registry::Client;
use crate::services::registry::oci::{Action, MAX_MANIFEST_BYTES, MAX_TAG_PARAMS, OciError, OciResult};
use crate::ward::Ward;

/// Whether the client accepts `media_type`: no `Accept`, a wildcard, JSON,
/// or the type itself among the (possibly several) `Accept` headers.
fn acceptable(headers: &http::HeaderMap, media_type: &str) -> bool {
    let mut listed = false;
    for v in headers.get_all(header::ACCEPT) {
        for item in v.to_str().unwrap_or("*/*").split(',') {
            let t = item.split(';').next().unwrap_or("").trim();
            if t.is_empty() {
                continue;
            }
            listed = true;
            if t == media_type || t == "*/*" || t == "application/*" || t == "application/json" {
                return true;
            }
        }
    }
    !listed
}

pub(crate) async fn handle(
    ward: &Ward,
    caller: &Caller,
    name: &str,
    reference: &str,
    req: Request,
) -> OciResult<Response> {
    let method = req.method().clone();
    let client = Client::of(&req);
    match method {
        Method::GET | Method::HEAD => {
            let t = target(ward, caller, name, Action::Pull).await?;
            let m = ward.oci_get_manifest(caller, &t, reference).await?;
            if !acceptable(req.headers(), &m.media_type) {
                return Err(OciError::manifest_unknown(&format!(
                    "{reference} is a {}, which the Accept header does not list",
                    m.media_type
                )));
            }
            ward.record_pull(caller, &t, name, reference, &m.digest, &client);
            let len = m.content.len();
            let mut r = Response::new(if method == Method::HEAD {
                Body::empty()
            } else {
                Body::from(m.content)
            });
            let h = r.headers_mut();
            h.insert(header::CONTENT_TYPE, header_value(&m.media_type));
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            h.insert("docker-content-digest", header_value(&m.digest));
            h.insert(header::ETAG, header_value(&format!("\"{}\"", m.digest)));
            Ok(r)
        }
        Method::PUT => {
            let mut t = target(ward, caller, name, Action::Push).await?;
            // Tags to set on a manifest pushed by digest (`?tag=a&tag=b`).
            let raw: Vec<String> = super::query(&req)
                .into_iter()
                .filter(|(k, _)| k == "tag")
                .map(|(_, v)| v)
                .collect();
            if raw.len() > MAX_TAG_PARAMS {
                return Err(OciError::new(
                    414,
                    "TAG_INVALID",
                    format!("at most {MAX_TAG_PARAMS} tag parameters"),
                ));
            }
            let mut tags: Vec<String> = Vec::with_capacity(raw.len());
            for v in raw {
                if !tags.contains(&v) {
                    tags.push(v);
                }
            }
            let content_type = super::header_str(req.headers(), header::CONTENT_TYPE).map(str::to_owned);
            let body = axum::body::to_bytes(req.into_body(), MAX_MANIFEST_BYTES)
                .await
                .map_err(|e| {
                    if crate::serve::is_body_timeout(e.into_inner().as_ref()) {
                        OciError::new(408, "SIZE_INVALID", "the manifest did not arrive in time")
                    } else {
                        OciError::new(
                            413,
                            "SIZE_INVALID",
                            format!("manifests are limited to {MAX_MANIFEST_BYTES} bytes"),
                        )
                    }
                })?;
            let pushed = ward
                .oci_put_manifest(
                    caller,
                    &mut t,
                    reference,
                    &tags,
                    content_type.as_deref(),
                    body,
                    name,
                    &client,
                )
                .await;
            let (digest, subject) = match pushed {
                Ok(p) => p,
                Err(e) => {
                    ward.record_refused_push(caller, &t, name, reference, &client, &e).await;
                    return Err(e);
                }
            };
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::CREATED;
            let h = r.headers_mut();
            h.insert(
                header::LOCATION,
                header_value(&format!("/v2/{name}/manifests/{digest}")),
            );
            h.insert("docker-content-digest", header_value(&digest));
            if !tags.is_empty() {
                h.insert("oci-tag", header_value(&tags.join(", ")));
            }
            if let Some(s) = subject {
                h.insert("oci-subject", header_value(&s));
            }
            Ok(r)
        }
        Method::DELETE => {
            let t = target(ward, caller, name, Action::Delete).await?;
            ward.oci_delete_manifest(caller, &t, reference).await?;
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::ACCEPTED;
            Ok(r)
        }
        _ => Err(OciError::new(405, "UNSUPPORTED", "the operation is unsupported")),
    }
}

#[cfg(test)]
mod tests {
    use super::acceptable;

    #[test]
    fn accept_lists() {
        let mut h = http::HeaderMap::new();
        assert!(acceptable(&h, "application/vnd.oci.image.index.v1+json"));
        h.append("accept", "application/vnd.oci.image.manifest.v1+json".parse().unwrap());
        h.append(
            "accept",
            "application/vnd.docker.distribution.manifest.v2+json; q=0.9, text/plain"
                .parse()
                .unwrap(),
        );
        assert!(acceptable(&h, "application/vnd.oci.image.manifest.v1+json"));
        assert!(acceptable(&h, "application/vnd.docker.distribution.manifest.v2+json"));
        assert!(!acceptable(&h, "application/vnd.oci.image.index.v1+json"));
        h.append("accept", "*/*".parse().unwrap());
        assert!(acceptable(&h, "application/vnd.oci.image.index.v1+json"));
    }
}
