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
    /// Templates (with their weight) by their literal prefix: their first
    /// [`KEY_SEGMENTS`] segments, or fewer where a variable comes sooner.
    by_root: std::collections::HashMap<String, Vec<Keyed>>,
}

/// A documented template, its weight (specificity), its method and its
/// text (the metrics' route label).
type Keyed = (super::transcode::Template, usize, http::Method, Arc<str>);

/// How many leading literal segments key a template: three tell
/// `/iam/v2/groups/…` from the other collections under `/iam/v2`, so a
/// request is tried against a handful of templates, not every one.
const KEY_SEGMENTS: usize = 3;

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
            let (method, template, text) = match e {
                Endpoint::Rpc(b) => (b.method.clone(), b.path.to_owned(), b.path.to_owned()),
                // A raw variable may hold slashes (an OCI repository name).
                Endpoint::Raw(r) => (r.method.clone(), r.path.replace('}', "=**}"), r.path.clone()),
            };
            let literal = template
                .trim_start_matches('/')
                .split('/')
                .take(KEY_SEGMENTS)
                .take_while(|s| !s.contains('{'))
                .count();
            let key = first_segments(&template, literal.max(1)).to_owned();
            let parsed = super::transcode::Template::parse(&template);
            let weight = parsed.weight();
            by_root
                .entry(key)
                .or_default()
                .push((parsed, weight, method, text.into()));
        }
        Methods { by_root }
    }

    /// The methods allowed at `path` (HEAD wherever GET is), or `None` when
    /// no documented template matches it. Runs on every request: the path is
    /// split once, and nothing else allocates unless a template matches.
    pub fn allowed(&self, path: &str) -> Option<Vec<http::Method>> {
        decide(self.candidates(path), path, None).map(|(m, _)| m)
    }

    /// The templates that may match `path`: a template keyed by k segments
    /// can only match a path whose first k segments are its key.
    fn candidates<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a Keyed> + 'a {
        let mut keys: [&str; KEY_SEGMENTS] = [""; KEY_SEGMENTS];
        for (n, key) in keys.iter_mut().enumerate() {
            *key = first_segments(path, n + 1);
        }
        (0..KEY_SEGMENTS)
            .take_while(move |&n| n == 0 || keys[n] != keys[n - 1])
            .flat_map(move |n| self.by_root.get(keys[n]).into_iter().flatten())
    }

    /// [`Methods::allowed`], and the documented template `method` (HEAD as
    /// GET) is served by there, as the document writes it (what metrics and
    /// traces label a request with), in one pass.
    pub fn allowed_and_route(
        &self,
        method: &http::Method,
        path: &str,
    ) -> Option<(Vec<http::Method>, Option<Arc<str>>)> {
        decide(self.candidates(path), path, Some(method))
    }
}

/// The methods of the most specific of `candidates` that match `path` (HEAD
/// wherever GET is), or `None` when none does.
fn decide<'a>(
    candidates: impl Iterator<Item = &'a Keyed>,
    path: &str,
    method: Option<&http::Method>,
) -> Option<(Vec<http::Method>, Option<Arc<str>>)> {
    let method = method.map(|m| if m == http::Method::HEAD { &http::Method::GET } else { m });
    let parts: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let utf8 = super::transcode::Template::utf8_parts(&parts);
    let mut best = 0;
    let mut methods: Vec<http::Method> = Vec::new();
    let mut route = None;
    for (t, w, m, text) in candidates {
        if *w < best || !t.fits(&parts, &utf8) {
            continue;
        }
        if *w > best {
            best = *w;
            methods.clear();
            route = None;
        }
        if !methods.contains(m) {
            methods.push(m.clone());
        }
        if route.is_none() && method == Some(m) {
            route = Some(text.clone());
        }
    }
    if methods.is_empty() {
        return None;
    }
    if methods.contains(&http::Method::GET) && !methods.contains(&http::Method::HEAD) {
        methods.push(http::Method::HEAD);
    }
    Some((methods, route))
}

/// The documented route template a request was matched to (a request and
/// response extension, for metrics and traces).
#[derive(Clone, Debug)]
pub struct RouteLabel(pub Arc<str>);

/// Answers 405, with `Allow` naming the documented methods, for a method the
/// document does not list at a documented path.
pub async fn documented_methods(
    axum::extract::State(methods): axum::extract::State<Arc<Methods>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Some((allowed, route)) = methods.allowed_and_route(req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    if allowed.contains(req.method()) {
        // Labelled for the metrics (outside) and the traces (inside).
        let Some(route) = route.filter(|_| crate::telemetry::enabled() || crate::traces::exporting()) else {
            return next.run(req).await;
        };
        let mut req = req;
        req.extensions_mut().insert(RouteLabel(route.clone()));
        let mut resp = next.run(req).await;
        resp.extensions_mut().insert(RouteLabel(route));
        return resp;
    }
    let allow = allowed.iter().map(http::Method::as_str).collect::<Vec<_>>().join(", ");
    let mut resp = if crate::oci::is_registry_path(req.uri().path()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::transcode::tests::{documented_templates, sample_paths};

    /// What `allowed` answers without the index: every template tried.
    fn allowed_by_scan(methods: &Methods, path: &str) -> Option<Vec<http::Method>> {
        decide(methods.by_root.values().flatten(), path, None).map(|(m, _)| m)
    }

    /// The literal-prefix index never hides a template: for paths built
    /// from every documented template, `allowed` answers what trying every
    /// template answers.
    #[test]
    fn the_index_agrees_with_a_full_scan() {
        let methods = Methods::new(&crate::rest::endpoints(""));
        let sorted = |v: Option<Vec<http::Method>>| {
            v.map(|mut v| {
                v.sort_by(|a, b| a.as_str().cmp(b.as_str()));
                v
            })
        };
        let paths = sample_paths(&documented_templates());
        let mut matched = 0;
        for p in &paths {
            let indexed = sorted(methods.allowed(p));
            matched += usize::from(indexed.is_some());
            assert_eq!(indexed, sorted(allowed_by_scan(&methods, p)), "path {p}");
        }
        assert!(matched > paths.len() / 2, "{matched} of {} paths matched", paths.len());
    }
}
