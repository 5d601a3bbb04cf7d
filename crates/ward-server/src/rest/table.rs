//! The router's own route table: every REST route is added through
//! [`Routes`], which remembers its path, and every route states what it
//! serves as [`Endpoint`]s, from which the OpenAPI document is generated. A
//! test walks both to prove the document covers every route.

use std::sync::Arc;

use axum::routing::MethodRouter;

use super::transcode::Binding;
use crate::ward::Ward;

/// An axum router that records the paths it was given.
pub struct Routes {
    pub router: axum::Router<Arc<Ward>>,
    /// Every path added, in axum syntax (`/iam/v2/groups/{*uid}`).
    pub paths: Vec<String>,
}

impl Default for Routes {
    fn default() -> Self {
        Self::new()
    }
}

impl Routes {
    pub fn new() -> Self {
        Routes {
            router: axum::Router::new(),
            paths: Vec::new(),
        }
    }

    pub fn route(mut self, path: &str, method_router: MethodRouter<Arc<Ward>>) -> Self {
        self.router = self.router.route(path, method_router);
        self.paths.push(path.to_owned());
        self
    }

    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.paths.extend(other.paths);
        self
    }
}

/// What one route serves, for the OpenAPI document.
#[derive(Clone, Debug)]
pub enum Endpoint {
    /// A proto RPC bound to HTTP (request and reply from its descriptor).
    Rpc(Binding),
    /// An endpoint that is not a proto RPC (health, OIDC discovery, token
    /// exchange, the OCI distribution API, browser login).
    Raw(Raw),
}

/// A non-RPC endpoint.
#[derive(Clone, Debug)]
pub struct Raw {
    pub method: http::Method,
    /// OpenAPI path template (`{name}` variables).
    pub path: String,
    pub summary: &'static str,
    pub authenticated: bool,
    /// Query parameters it reads: (name, description, required).
    pub query: &'static [(&'static str, &'static str, bool)],
    /// Request body media type, if it reads one.
    pub request: Option<&'static str>,
    /// Success status and its media type (`""` for no body).
    pub success: (u16, &'static str),
    /// Other statuses it answers with.
    pub errors: &'static [u16],
}

/// The methods each documented path allows, for answering 405 before a
/// request reaches a route: catch-all routes (`/groups/{*uid}`) would
/// otherwise take a method the document does not list at that path (a POST
/// to `…/digests/{digest}/size` read as a create under a strange parent).
/// The most specific templates matching the path decide, as in routing.
pub struct Methods {
    /// Templates (with their weight) by their first segment, and by their
    /// first two when both are literal.
    by_root: std::collections::HashMap<String, Vec<(super::transcode::Template, usize, http::Method)>>,
}

/// The first `n` segments of `path` (after its leading slashes), as a slice of it.
fn first_segments(path: &str, n: usize) -> &str {
    let path = path.trim_start_matches('/');
    let end = path.match_indices('/').nth(n - 1).map_or(path.len(), |(i, _)| i);
    &path[..end]
}

impl Methods {
    pub fn new(endpoints: &[Endpoint]) -> Self {
        let mut by_root: std::collections::HashMap<_, Vec<_>> = Default::default();
        for e in endpoints {
            let (method, template) = match e {
                Endpoint::Rpc(b) => (b.method.clone(), b.path.to_owned()),
                // A raw variable may hold slashes (an OCI repository name).
                Endpoint::Raw(r) => (r.method.clone(), r.path.replace('}', "=**}")),
            };
            let literal2 = {
                let two: Vec<&str> = template.trim_start_matches('/').splitn(3, '/').take(2).collect();
                two.len() == 2 && !two.iter().any(|s| s.contains('{'))
            };
            let key = first_segments(&template, if literal2 { 2 } else { 1 }).to_owned();
            let parsed = super::transcode::Template::parse(&template);
            let weight = parsed.weight();
            by_root.entry(key).or_default().push((parsed, weight, method));
        }
        Methods { by_root }
    }

    /// The methods allowed at `path` (HEAD wherever GET is), or `None` when
    /// no documented template matches it. Runs on every request: the path is
    /// split once, and nothing else allocates unless a template matches.
    pub fn allowed(&self, path: &str) -> Option<Vec<http::Method>> {
        let parts: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        let utf8 = super::transcode::Template::utf8_parts(&parts);
        let mut best = 0;
        let mut methods: Vec<http::Method> = Vec::new();
        let (two, one) = (first_segments(path, 2), first_segments(path, 1));
        let keys = if two == one { &[one][..] } else { &[two, one][..] };
        for key in keys {
            for (t, w, m) in self.by_root.get(*key).into_iter().flatten() {
                if *w < best || !t.fits(&parts, &utf8) {
                    continue;
                }
                if *w > best {
                    best = *w;
                    methods.clear();
                }
                if !methods.contains(m) {
                    methods.push(m.clone());
                }
            }
        }
        if methods.is_empty() {
            return None;
        }
        if methods.contains(&http::Method::GET) && !methods.contains(&http::Method::HEAD) {
            methods.push(http::Method::HEAD);
        }
        Some(methods)
    }
}

/// Answers 405, with `Allow` naming the documented methods, for a method the
/// document does not list at a documented path.
pub async fn documented_methods(
    axum::extract::State(methods): axum::extract::State<Arc<Methods>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Some(allowed) = methods.allowed(req.uri().path()) else {
        return next.run(req).await;
    };
    if allowed.contains(req.method()) {
        return next.run(req).await;
    }
    let allow = allowed.iter().map(http::Method::as_str).collect::<Vec<_>>().join(", ");
    let mut resp = if req.uri().path().starts_with("/v2/") || req.uri().path() == "/v2" {
        let body = serde_json::json!({"errors": [{"code": "UNSUPPORTED",
            "message": "the operation is unsupported", "detail": null}]});
        (http::StatusCode::METHOD_NOT_ALLOWED, axum::Json(body)).into_response()
    } else {
        super::unimplemented(
            http::StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this path".into(),
        )
    };
    if let Ok(v) = http::HeaderValue::from_str(&allow) {
        resp.headers_mut().insert(http::header::ALLOW, v);
    }
    resp
}
