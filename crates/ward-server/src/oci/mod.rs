//! The OCI distribution API at `/v2/`, and the Docker token endpoint at
//! `<issuer>/token`: request parsing, credentials, the `WWW-Authenticate`
//! challenge and the registry's error format. Operations are in
//! `services::registry::oci`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};

use crate::authz::Caller;
use crate::rest::raw;
use crate::rest::table::{Endpoint, Raw, Routes};
use crate::services::registry::oci::{Action, OciError, OciResult, Target};
use crate::ward::Ward;

mod auth;
mod blobs;
mod discovery;
mod manifests;

pub use auth::{token_endpoints, token_routes};

/// The `/v2/` routes.
pub fn routes() -> Routes {
    Routes::new()
        .route("/v2", axum::routing::any(dispatch))
        .route("/v2/", axum::routing::any(dispatch))
        .route("/v2/{*path}", axum::routing::any(dispatch))
}

/// What [`dispatch`] serves, per [`route`] and the handlers. Every request
/// needs registry credentials (a 401 carries the `WWW-Authenticate`
/// challenge); errors are `{"errors": [{code, message, detail}]}`; `name` is
/// a repository path and may contain slashes. Other methods answer 405.
pub fn endpoints() -> Vec<Endpoint> {
    const PAGE: &[(&str, &str, bool)] = &[
        (
            "n",
            "Page size; at most (and by default) the registry's maximum.",
            false,
        ),
        (
            "last",
            "The last entry of the previous page (as in the `Link` header).",
            false,
        ),
    ];
    const OCTETS: Option<&str> = Some("application/octet-stream");
    const ERR: &[u16] = &[400, 401, 403, 404, 429, 500, 503];
    const UPLOAD_ERR: &[u16] = &[400, 401, 403, 404, 408, 413, 416, 429, 500, 503];
    let op = |method: Method, path: &str, success: (u16, &'static str), summary: &'static str| Raw {
        authenticated: true,
        success,
        errors: ERR,
        ..raw(method, path.into(), summary)
    };
    let json = (200, "application/json");
    let none = |status: u16| (status, "");
    let manifest = "/v2/{name}/manifests/{reference}";
    let blob = "/v2/{name}/blobs/{digest}";
    let upload = "/v2/{name}/blobs/uploads/{uuid}";
    let mut out = Vec::new();
    for path in ["/v2", "/v2/"] {
        for method in [Method::GET, Method::HEAD] {
            out.push(op(method, path, json, "API version check: `{}` for valid credentials."));
        }
    }
    out.extend([
        Raw {
            query: PAGE,
            ..op(
                Method::GET,
                "/v2/_catalog",
                json,
                "The repositories the caller may list, `{repositories}`, paginated by `Link`; a \
                 repository-scoped token is refused (403).",
            )
        },
        Raw {
            query: PAGE,
            ..op(
                Method::GET,
                "/v2/{name}/tags/list",
                json,
                "A repository's tags, `{name, tags}`, paginated by `Link`.",
            )
        },
        op(
            Method::GET,
            manifest,
            (200, "application/vnd.oci.image.manifest.v1+json"),
            "A manifest by tag or digest, in its own media type (an OCI or Docker manifest or index, which \
             the Accept header must allow), with `Docker-Content-Digest`.",
        ),
        op(
            Method::HEAD,
            manifest,
            none(200),
            "A manifest's headers (media type, length, `Docker-Content-Digest`) without its body.",
        ),
        Raw {
            request: Some("application/vnd.oci.image.manifest.v1+json"),
            query: &[(
                "tag",
                "A tag to set on a manifest pushed by digest (repeatable, at most 32; the reply's `OCI-Tag` \
                 lists them).",
                false,
            )],
            errors: &[400, 401, 403, 404, 408, 413, 414, 429, 500, 503],
            ..op(
                Method::PUT,
                manifest,
                none(201),
                "Pushes a manifest (OCI or Docker manifest or index, by its Content-Type) under a tag or its \
                 digest: `Location`, `Docker-Content-Digest`, and `OCI-Subject` for one with a subject.",
            )
        },
        op(
            Method::DELETE,
            manifest,
            none(202),
            "Deletes a manifest (by digest) or a tag.",
        ),
        Raw {
            errors: &[400, 401, 403, 404, 416, 429, 500, 503],
            ..op(
                Method::GET,
                blob,
                (200, "application/octet-stream"),
                "A blob's content; a `Range: bytes=` request gets 206 with `Content-Range`.",
            )
        },
        op(
            Method::HEAD,
            blob,
            none(200),
            "A blob's headers (length, `Docker-Content-Digest`) without its body.",
        ),
        op(Method::DELETE, blob, none(202), "Deletes a blob from the repository."),
    ]);
    for path in ["/v2/{name}/blobs/uploads/", "/v2/{name}/blobs/uploads"] {
        out.push(Raw {
            query: &[
                ("mount", "Digest of a blob to mount from another repository.", false),
                ("from", "The repository to mount from.", false),
                (
                    "digest",
                    "Digest of the whole blob sent as the body (a monolithic upload).",
                    false,
                ),
            ],
            request: OCTETS,
            errors: UPLOAD_ERR,
            ..op(
                Method::POST,
                path,
                none(202),
                "Starts an upload: 202 with the session's `Location` and `Range`, or 201 with the blob's \
                 `Location` for a mount or a monolithic upload.",
            )
        });
    }
    out.extend([
        op(
            Method::GET,
            upload,
            none(204),
            "An upload session's progress (`Range`, `Location`).",
        ),
        Raw {
            request: OCTETS,
            errors: UPLOAD_ERR,
            ..op(
                Method::PATCH,
                upload,
                none(202),
                "Appends a chunk (at `Content-Range` when given); 202 with the new `Range`.",
            )
        },
        Raw {
            query: &[("digest", "The digest of the whole blob.", true)],
            request: OCTETS,
            errors: UPLOAD_ERR,
            ..op(
                Method::PUT,
                upload,
                none(201),
                "Completes an upload, with an optional last chunk; 201 with the blob's `Location`.",
            )
        },
        op(Method::DELETE, upload, none(204), "Cancels an upload session."),
        Raw {
            query: &[(
                "artifactType",
                "Only referrers of this artifact type (the reply then has `OCI-Filters-Applied`).",
                false,
            )],
            ..op(
                Method::GET,
                "/v2/{name}/referrers/{digest}",
                (200, "application/vnd.oci.image.index.v1+json"),
                "The manifests whose subject is this digest, as an OCI image index.",
            )
        },
    ]);
    out.into_iter().map(Endpoint::Raw).collect()
}

const API_VERSION: HeaderValue = HeaderValue::from_static("registry/2.0");

/// An OCI error response (no body for HEAD).
pub(crate) struct OciFailure {
    pub error: OciError,
    pub head: bool,
    pub challenge: Option<String>,
}

impl IntoResponse for OciFailure {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = if self.head {
            Body::empty()
        } else {
            Body::from(
                serde_json::json!({"errors": [{
                    "code": self.error.code,
                    "message": self.error.message,
                    "detail": null,
                }]})
                .to_string(),
            )
        };
        let mut resp = Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .unwrap_or_default();
        if let Some(c) = self.challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, c);
        }
        resp
    }
}

/// What a `/v2/` path names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    Ping,
    Catalog,
    Tags(&'a str),
    Manifest(&'a str, &'a str),
    Blob(&'a str, &'a str),
    StartUpload(&'a str),
    Upload(&'a str, &'a str),
    Referrers(&'a str, &'a str),
}

pub(crate) fn route(path: &str) -> Option<Route<'_>> {
    let rest = path.strip_prefix("/v2").unwrap_or(path);
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Some(Route::Ping);
    }
    if rest == "_catalog" {
        return Some(Route::Catalog);
    }
    if let Some(name) = rest.strip_suffix("/tags/list") {
        return Some(Route::Tags(name));
    }
    if let Some(name) = rest
        .strip_suffix("/blobs/uploads/")
        .or_else(|| rest.strip_suffix("/blobs/uploads"))
    {
        return Some(Route::StartUpload(name));
    }
    if let Some((name, id)) = rest.rsplit_once("/blobs/uploads/") {
        return Some(Route::Upload(name, id));
    }
    if let Some((name, reference)) = rest.rsplit_once("/manifests/") {
        return Some(Route::Manifest(name, reference));
    }
    if let Some((name, digest)) = rest.rsplit_once("/referrers/") {
        return Some(Route::Referrers(name, digest));
    }
    if let Some((name, digest)) = rest.rsplit_once("/blobs/") {
        return Some(Route::Blob(name, digest));
    }
    None
}

/// The host (and port) the registry is addressed by, for challenges.
/// Whether `path` is the registry's (`/v2` and below), whose errors take the
/// distribution spec's shape.
pub(crate) fn is_registry_path(path: &str) -> bool {
    path == "/v2" || path.starts_with("/v2/")
}

pub(crate) fn registry_host(ward: &Ward) -> String {
    let url = ward.tokens.registry_audience();
    let after = url.split_once("://").map_or(url, |(_, r)| r);
    after.split('/').next().unwrap_or(after).to_owned()
}

/// `Bearer realm=…,service=…[,scope=…]`.
pub(crate) fn challenge(ward: &Ward, scope: Option<&str>) -> String {
    let mut c = format!(
        "Bearer realm=\"{}/token\",service=\"{}\"",
        ward.tokens.issuer(),
        registry_host(ward)
    );
    // A scope names a repository from the request's path: only the
    // characters scopes are made of may reach the header, so no path can
    // close the quoted value and add parameters (a second `realm`).
    if let Some(s) = scope.filter(|s| is_scope_text(s)) {
        c.push_str(&format!(",scope=\"{s}\""));
    }
    c
}

/// The challenge for a valid registry token that lacks what the request
/// needs: 401 with `error="insufficient_scope"` and the scope it needs, as
/// distribution answers, so clients fetch a wider token and go on.
fn insufficient_scope(ward: &Ward, scope: &str, head: bool) -> Response {
    let mut c = challenge(ward, Some(scope));
    c.push_str(",error=\"insufficient_scope\"");
    OciFailure {
        error: OciError::new(
            401,
            "UNAUTHORIZED",
            format!(
                "authentication required: the registry token does not grant {}",
                ward_core::names::echo(scope)
            ),
        ),
        head,
        challenge: Some(c),
    }
    .into_response()
}

/// Whether `s` is one or more registry scopes (`type:name:actions`, one
/// space between two), made only of repository-name characters, `:`, `,`
/// and `*`.
fn is_scope_text(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 1024
        && s.split(' ').all(|one| {
            one.matches(':').count() >= 2
                && one
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-/:,*".contains(&b))
        })
}

/// What a request needs of a registry token, derived once from its route
/// and method: the challenge names it, the token endpoint grants by the same
/// action names, and [`dispatch`] checks a registry token against it, so the
/// three cannot disagree. Uploads need `pull,push` whatever the method
/// (their status, chunks and cancel are all part of a push); deletes of
/// manifests, tags and blobs need `delete`; other writes `pull,push`; reads
/// `pull`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Need<'a> {
    Nothing,
    Catalog,
    Repository(&'a str, &'static [Action]),
}

pub(crate) fn need<'a>(route: &Route<'a>, method: &Method) -> Need<'a> {
    const PULL: &[Action] = &[Action::Pull];
    const PUSH: &[Action] = &[Action::Pull, Action::Push];
    const DELETE: &[Action] = &[Action::Delete];
    let (name, actions) = match route {
        Route::Ping => return Need::Nothing,
        Route::Catalog => return Need::Catalog,
        Route::StartUpload(n) | Route::Upload(n, _) => (n, PUSH),
        Route::Tags(n) | Route::Manifest(n, _) | Route::Blob(n, _) | Route::Referrers(n, _) => (
            n,
            match *method {
                Method::GET | Method::HEAD => PULL,
                Method::DELETE => DELETE,
                _ => PUSH,
            },
        ),
    };
    Need::Repository(name, actions)
}

impl Need<'_> {
    /// The scope text, naming the repository as the client did.
    fn scope(&self) -> Option<String> {
        match self {
            Need::Nothing => None,
            Need::Catalog => Some("registry:catalog:*".into()),
            Need::Repository(name, actions) => {
                let actions: Vec<&str> = actions.iter().map(|a| a.name()).collect();
                Some(format!("repository:{name}:{}", actions.join(",")))
            }
        }
    }
}

/// Whether the caller's registry token (if it presents one) grants what the
/// request needs; a Ward API token (no `access`) is judged by its
/// capabilities alone. `Err` is the answer when the name does not resolve.
async fn token_allows(ward: &Ward, caller: &Caller, need: &Need<'_>) -> OciResult<bool> {
    let Some(access) = &caller.claims.access else {
        return Ok(true);
    };
    match need {
        Need::Nothing => Ok(true),
        Need::Catalog => Ok(access.iter().any(|a| a.kind == "registry" && a.name == "catalog")),
        Need::Repository(name, actions) => {
            let (full, _, _) = ward.oci_name(caller, name).await?;
            Ok(actions.iter().all(|act| {
                access.iter().any(|a| {
                    a.kind == "repository" && a.name == full && a.actions.iter().any(|x| x == act.name() || x == "*")
                })
            }))
        }
    }
}

/// A registry token names the repositories (and actions) it is good for;
/// anything else is refused with a challenge for the scope it needs, which
/// clients answer by fetching a wider token.
pub(crate) fn check_access(caller: &Caller, t: &Target, action: Action) -> OciResult<()> {
    let Some(access) = &caller.claims.access else {
        return Ok(());
    };
    let ok = access.iter().any(|a| {
        a.kind == "repository" && a.name == t.full && a.actions.iter().any(|x| x == action.name() || x == "*")
    });
    if ok {
        Ok(())
    } else {
        let mut e = OciError::denied(format!(
            "this registry token does not allow {} on {}",
            action.name(),
            t.full
        ));
        e.scope = Some(format!(
            "repository:{}:{}",
            t.full,
            match action {
                Action::Pull => "pull",
                Action::Push => "pull,push",
                Action::Delete => "delete",
            }
        ));
        Err(e)
    }
}

/// Every `/v2/` request: authenticate, route, answer.
async fn dispatch(State(ward): State<Arc<Ward>>, req: Request) -> Response {
    let method = req.method().clone();
    let head = method == Method::HEAD;
    let path = req.uri().path().to_owned();
    let Some(route) = route(&path) else {
        return with_version(
            OciFailure {
                error: OciError::new(404, "NAME_UNKNOWN", "no such registry endpoint"),
                head,
                challenge: None,
            }
            .into_response(),
        );
    };
    let need = need(&route, &method);
    let mut scope = need.scope();
    // A cross-repository mount reads `from`: its challenge asks for pull
    // there too (as distribution's does), so the token a client fetches can
    // mount.
    let q = query(&req);
    let mount_from = match (&route, param(&q, "mount"), param(&q, "from")) {
        (Route::StartUpload(_), Some(_), Some(from)) if !from.is_empty() && !from.contains(' ') => {
            Some(from.to_owned())
        }
        _ => None,
    };
    if let (Some(from), Some(s)) = (&mount_from, scope.as_mut()) {
        s.push_str(&format!(" repository:{from}:pull"));
    }
    let caller = match auth::caller(&ward, req.headers()).await {
        Ok(c) => c,
        Err(e) => {
            return with_version(
                OciFailure {
                    error: e,
                    head,
                    challenge: Some(challenge(&ward, scope.as_deref())),
                }
                .into_response(),
            );
        }
    };
    match token_allows(&ward, &caller, &need).await {
        Ok(true) => {}
        Ok(false) => return with_version(insufficient_scope(&ward, scope.as_deref().unwrap_or_default(), head)),
        Err(error) => {
            return with_version(
                OciFailure {
                    error,
                    head,
                    challenge: None,
                }
                .into_response(),
            );
        }
    }
    // A registry token without pull on a mount's source, from a caller who
    // may pull there: re-challenged, so the client fetches a token that
    // mounts. (One who may not pull there gets a plain upload session, 202,
    // as the spec allows.)
    if let Some(from) = mount_from.as_deref()
        && caller.claims.access.is_some()
        && !token_allows(&ward, &caller, &Need::Repository(from, &[Action::Pull]))
            .await
            .unwrap_or(true)
        && ward.oci_could_pull(&caller, from).await
    {
        return with_version(insufficient_scope(&ward, scope.as_deref().unwrap_or_default(), head));
    }
    let resp = handle(&ward, &caller, route, req).await;
    with_version(match resp {
        Ok(r) => r,
        Err(e) => {
            let challenge = e.scope.as_deref().map(|s| challenge(&ward, Some(s)));
            OciFailure {
                error: e,
                head,
                challenge,
            }
            .into_response()
        }
    })
}

fn with_version(mut r: Response) -> Response {
    r.headers_mut().insert("docker-distribution-api-version", API_VERSION);
    r
}

fn not_allowed() -> OciError {
    OciError::new(405, "UNSUPPORTED", "the operation is unsupported")
}

async fn handle(ward: &Ward, caller: &Caller, route: Route<'_>, req: Request) -> OciResult<Response> {
    let method = req.method().clone();
    match route {
        Route::Ping => match method {
            Method::GET | Method::HEAD => Ok(json_response(StatusCode::OK, "{}".into(), method == Method::HEAD)),
            _ => Err(not_allowed()),
        },
        Route::Catalog => match method {
            Method::GET => discovery::catalog(ward, caller, query(&req)).await,
            _ => Err(not_allowed()),
        },
        Route::Tags(name) => match method {
            Method::GET => discovery::tags(ward, caller, name, query(&req)).await,
            _ => Err(not_allowed()),
        },
        Route::Referrers(name, digest) => match method {
            Method::GET => discovery::referrers(ward, caller, name, digest, query(&req)).await,
            _ => Err(not_allowed()),
        },
        Route::Manifest(name, reference) => manifests::handle(ward, caller, name, reference, req).await,
        Route::Blob(name, digest) => blobs::handle_blob(ward, caller, name, digest, req).await,
        Route::StartUpload(name) => match method {
            Method::POST => blobs::start_upload(ward, caller, name, req).await,
            _ => Err(not_allowed()),
        },
        Route::Upload(name, id) => blobs::handle_upload(ward, caller, name, id, req).await,
    }
}

pub(crate) fn json_response(status: StatusCode, body: String, head: bool) -> Response {
    let len = body.len();
    let mut r = Response::new(if head { Body::empty() } else { Body::from(body) });
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    r
}

/// Query parameters (decoded), first value of each.
pub(crate) fn query(req: &Request) -> Vec<(String, String)> {
    req.uri()
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

pub(crate) fn param<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// `n` of a paginated listing: absent is the maximum page.
pub(crate) fn page_size(q: &[(String, String)]) -> OciResult<u32> {
    match param(q, "n") {
        None | Some("") => Ok(crate::services::registry::oci::MAX_PAGE),
        Some(n) => n
            .parse::<u32>()
            .map(|n| n.min(crate::services::registry::oci::MAX_PAGE))
            .map_err(|_| OciError::new(400, "PAGINATION_NUMBER_INVALID", "n must be a non-negative number")),
    }
}

pub(crate) fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Resolves the request's repository and checks the token's access to it.
pub(crate) async fn target(ward: &Ward, caller: &Caller, name: &str, action: Action) -> OciResult<Target> {
    let t = ward.oci_target(caller, name).await?;
    check_access(caller, &t, action)?;
    Ok(t)
}

/// The `Location` path of an upload session.
pub(crate) fn upload_location(name: &str, uuid: &str) -> String {
    format!("/v2/{name}/blobs/uploads/{uuid}")
}

/// `Range: 0-<last byte>` of an upload of `size` bytes.
pub(crate) fn upload_range(size: i64) -> String {
    format!("0-{}", (size - 1).max(0))
}

pub(crate) fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::{Route, route};

    #[test]
    fn challenges_carry_only_scope_text() {
        assert!(super::is_scope_text("repository:0123/app:pull,push"));
        assert!(super::is_scope_text("registry:catalog:*"));
        assert!(super::is_scope_text("repository:o/b:pull,push repository:o/a:pull"));
        for bad in [
            "repository:a\",realm=\"http://evil/x:pull",
            "repository:a b:pull",
            "repository:a:pull  repository:b:pull",
            "repository:a:pull ",
            "repository:a\\:pull",
            "repository:a\r\nX: y:pull",
            "",
        ] {
            assert!(!super::is_scope_text(bad), "{bad:?}");
        }
    }

    #[test]
    fn routes() {
        assert_eq!(route("/v2/"), Some(Route::Ping));
        assert_eq!(route("/v2/_catalog"), Some(Route::Catalog));
        assert_eq!(route("/v2/o/a/b/tags/list"), Some(Route::Tags("o/a/b")));
        assert_eq!(
            route("/v2/o/a/manifests/latest"),
            Some(Route::Manifest("o/a", "latest"))
        );
        assert_eq!(route("/v2/o/a/blobs/sha256:x"), Some(Route::Blob("o/a", "sha256:x")));
        assert_eq!(route("/v2/o/a/blobs/uploads/"), Some(Route::StartUpload("o/a")));
        assert_eq!(route("/v2/o/a/blobs/uploads/abc"), Some(Route::Upload("o/a", "abc")));
        assert_eq!(
            route("/v2/o/a/referrers/sha256:x"),
            Some(Route::Referrers("o/a", "sha256:x"))
        );
        assert_eq!(route("/v2/o/a/other"), None);
    }
}
