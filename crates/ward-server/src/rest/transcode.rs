//! grpc-gateway style transcoding for RPCs declared as a table of HTTP
//! bindings: the path template's variables, the query string and the body
//! (`*`, one field, or none) are assembled into the request message by its
//! proto descriptor, the RPC's function runs, and its reply is encoded as
//! proto3 JSON. The same table is what the OpenAPI document describes, so a
//! route cannot be served without being documented.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use ward_core::Result;

use crate::authz::Caller;
use crate::ward::Ward;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A type-erased RPC: request JSON in, the reply's encoded JSON out.
pub type Handler =
    Arc<dyn Fn(Arc<Ward>, Option<Caller>, serde_json::Value) -> BoxFuture<Result<Encoded>> + Send + Sync>;

/// A reply's JSON, and a gzip'ed copy when the service keeps one (a large
/// reply built once and served many times), sent to clients that accept it.
#[derive(Clone, Debug)]
pub struct Encoded {
    pub json: bytes::Bytes,
    pub gzip: Option<bytes::Bytes>,
}

impl Encoded {
    /// `json` and, when it is large enough to be worth it, its gzip: at
    /// the default level (about a fifth smaller than the fastest on report
    /// JSON), since it is made once and sent many times.
    pub fn compressed(json: bytes::Bytes) -> Encoded {
        use std::io::Write as _;
        let gzip = (json.len() >= 1024)
            .then(|| {
                let mut z =
                    flate2::write::GzEncoder::new(Vec::with_capacity(json.len() / 4), flate2::Compression::default());
                z.write_all(&json).ok()?;
                z.finish().ok()
            })
            .flatten()
            .map(bytes::Bytes::from);
        Encoded { json, gzip }
    }

    /// Bytes a cache holds.
    pub fn weight(&self) -> usize {
        self.json.len() + self.gzip.as_ref().map_or(0, bytes::Bytes::len)
    }
}

/// Whether an `Accept-Encoding` value takes gzip (RFC 9110: `gzip`,
/// `x-gzip` or `*` with a non-zero weight).
fn accepts_gzip(header: &str) -> bool {
    // (coding, weight > 0) of each listed coding.
    let items = header.split(',').map(|item| {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("").to_ascii_lowercase();
        let zero = parts.any(|p| {
            p.strip_prefix("q=")
                .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        (coding, !zero)
    });
    let (mut named, mut any) = (None, None);
    for (coding, ok) in items {
        // `x-gzip` is the same coding (RFC 9110 §8.4.1.3); a coding named
        // outright outweighs `*`.
        match coding.as_str() {
            "gzip" | "x-gzip" => named = Some(named.unwrap_or(false) || ok),
            "*" => any = Some(ok),
            _ => {}
        }
    }
    named.or(any).unwrap_or(false)
}

/// One HTTP binding of one RPC, as grpc-gateway's `google.api.http` would
/// state it. The OpenAPI document is generated from these and the proto
/// descriptors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The HTTP method.
    pub method: http::Method,
    /// The path template in grpc-gateway syntax: literals, `{field}` (one
    /// segment), `{field=*}`, `{field=**}` (the rest of the path, slashes
    /// included), an optional trailing `:verb`.
    pub path: &'static str,
    /// `"*"` (the body is the request), a top-level field name (the body is
    /// that field), or `""` (no body; every other field is a query parameter).
    pub body: &'static str,
    /// The RPC's full proto name, `package.Service.Method`; the descriptor
    /// gives the request and reply messages.
    pub name: &'static str,
    /// Whether a token is required (false only for public RPCs).
    pub authenticated: bool,
}

/// A binding with the function that serves it.
#[derive(Clone)]
pub struct Rpc {
    pub binding: Binding,
    pub handler: Handler,
}

/// A reply the transport writes: a message it encodes, or JSON a service
/// encoded once and keeps (a large report served many times).
pub enum Reply<T> {
    Message(T),
    Encoded(Encoded),
}

impl<T: Serialize> Reply<T> {
    fn encode(self) -> Result<Encoded> {
        match self {
            Reply::Encoded(b) => Ok(b),
            Reply::Message(m) => {
                let v = serde_json::to_vec(&m)
                    .map_err(|e| ward_core::Error::Internal(format!("encoding the reply: {e}")))?;
                // google.protobuf.Empty (`()` in Rust) is `{}` in proto3 JSON.
                let json = if v == b"null" {
                    bytes::Bytes::from_static(b"{}")
                } else {
                    v.into()
                };
                Ok(Encoded { json, gzip: None })
            }
        }
    }
}

/// The request message from its JSON (body and query parameters merged):
/// a value of the wrong type is a field violation naming that field (its
/// JSON path, e.g. `since` or `filter.since`), not the body as a whole.
fn decode<Req: DeserializeOwned>(json: serde_json::Value) -> Result<Req> {
    serde_path_to_error::deserialize(json).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            ward_core::Error::invalid("body", format!("the request does not match the message: {inner}"))
        } else {
            ward_core::Error::invalid(&path, format!("not a valid value for this field ({inner})"))
        }
    })
}

fn erase<Req, Resp, F, Fut>(f: F) -> Handler
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(Arc<Ward>, Option<Caller>, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp>> + Send + 'static,
{
    let f = Arc::new(f);
    erase_reply(move |w, c, req| {
        let f = f.clone();
        async move { f(w, c, req).await.map(Reply::Message) }
    })
}

fn erase_reply<Req, Resp, F, Fut>(f: F) -> Handler
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(Arc<Ward>, Option<Caller>, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Reply<Resp>>> + Send + 'static,
{
    let f = Arc::new(f);
    Arc::new(move |w, c, json| {
        let f = f.clone();
        Box::pin(async move {
            let req: Req = decode(json)?;
            f(w, c, req).await?.encode()
        })
    })
}

/// An authenticated RPC binding whose function may answer JSON it encoded
/// itself ([`Reply::Encoded`]).
pub fn rpc_reply<Req, Resp, F, Fut>(
    method: http::Method,
    path: &'static str,
    body: &'static str,
    name: &'static str,
    f: F,
) -> Rpc
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(Arc<Ward>, Caller, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Reply<Resp>>> + Send + 'static,
{
    let f = Arc::new(f);
    let handler = erase_reply(move |w, c: Option<Caller>, req: Req| {
        let f = f.clone();
        async move {
            let c = c.ok_or_else(|| ward_core::Error::Unauthenticated("a bearer token is required".into()))?;
            f(w, c, req).await
        }
    });
    Rpc {
        binding: Binding {
            method,
            path,
            body,
            name,
            authenticated: true,
        },
        handler,
    }
}

/// An authenticated RPC binding.
pub fn rpc<Req, Resp, F, Fut>(
    method: http::Method,
    path: &'static str,
    body: &'static str,
    name: &'static str,
    f: F,
) -> Rpc
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(Arc<Ward>, Caller, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp>> + Send + 'static,
{
    let f = Arc::new(f);
    rpc_reply(method, path, body, name, move |w, c, req: Req| {
        let f = f.clone();
        async move { f(w, c, req).await.map(Reply::Message) }
    })
}

/// A binding that needs no token (the caller is passed when one was given).
pub fn public_rpc<Req, Resp, F, Fut>(
    method: http::Method,
    path: &'static str,
    body: &'static str,
    name: &'static str,
    f: F,
) -> Rpc
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(Arc<Ward>, Option<Caller>, Req) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Resp>> + Send + 'static,
{
    Rpc {
        binding: Binding {
            method,
            path,
            body,
            name,
            authenticated: false,
        },
        handler: erase(f),
    }
}

/// One segment of a path template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// A variable bound to a (possibly dotted) request field; `rest` for `**`.
    Var {
        field: String,
        rest: bool,
    },
}

/// A parsed grpc-gateway path template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Segment>,
    verb: Option<String>,
}

impl Template {
    /// Parses a template such as `/iam/v1/groups/{group_id=**}:requestGroupAccess`.
    pub fn parse(template: &str) -> Template {
        let body = template.strip_prefix('/').unwrap_or(template);
        let last_slash = body.rfind('/').map_or(0, |i| i + 1);
        let last_brace = body.rfind('}').map_or(0, |i| i + 1);
        let (body, verb) = match body[last_slash.max(last_brace)..].find(':') {
            Some(i) => {
                let at = last_slash.max(last_brace) + i;
                (&body[..at], Some(body[at + 1..].to_owned()))
            }
            None => (body, None),
        };
        let segments = body
            .split('/')
            .map(|s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(var) => {
                    let (field, pattern) = var.split_once('=').unwrap_or((var, "*"));
                    Segment::Var {
                        field: field.to_owned(),
                        rest: pattern == "**",
                    }
                }
                None => Segment::Literal(s.to_owned()),
            })
            .collect();
        Template { segments, verb }
    }

    /// How specific the template is: literal segments and a verb outrank
    /// variables, so `/rolebindings/batch/{parent=**}` beats `/rolebindings/{parent=**}`.
    pub fn weight(&self) -> usize {
        let literals = self
            .segments
            .iter()
            .filter(|s| matches!(s, Segment::Literal(_)))
            .count();
        literals * 2 + usize::from(self.verb.is_some())
    }

    /// The first two literal segments (`/iam/v1`), under which the template is routed.
    pub fn root(&self) -> String {
        self.segments
            .iter()
            .take(2)
            .map(|s| match s {
                Segment::Literal(l) => format!("/{l}"),
                Segment::Var { .. } => String::new(),
            })
            .collect()
    }

    /// The OpenAPI form of the path and its variables' fields, in order:
    /// `{field=**}` becomes `{field}`.
    pub fn openapi(&self) -> (String, Vec<String>) {
        let mut path = String::new();
        let mut vars = Vec::new();
        for s in &self.segments {
            path.push('/');
            match s {
                Segment::Literal(l) => path.push_str(l),
                Segment::Var { field, .. } => {
                    path.push_str(&format!("{{{field}}}"));
                    vars.push(field.clone());
                }
            }
        }
        if let Some(v) = &self.verb {
            path.push(':');
            path.push_str(v);
        }
        (path, vars)
    }

    /// Matches a raw (percent-encoded) request path; the bound variables are
    /// decoded. `**` takes one or more segments (an empty last segment, as in
    /// `/groups/`, binds ""); linear in the path's length.
    pub fn matches(&self, raw_path: &str) -> Option<Vec<(String, String)>> {
        let mut path = raw_path.strip_prefix('/')?;
        if let Some(verb) = &self.verb {
            path = path.strip_suffix(verb.as_str())?.strip_suffix(':')?;
        }
        let parts: Vec<&str> = path.split('/').collect();
        let rest_at = self
            .segments
            .iter()
            .position(|s| matches!(s, Segment::Var { rest: true, .. }));
        let n = self.segments.len();
        let spans: Vec<(usize, usize)> = match rest_at {
            None if parts.len() != n => return None,
            None => (0..n).map(|i| (i, i + 1)).collect(),
            Some(k) => {
                if parts.len() < n {
                    return None;
                }
                let extra = parts.len() - n;
                (0..n)
                    .map(|i| match i.cmp(&k) {
                        std::cmp::Ordering::Less => (i, i + 1),
                        std::cmp::Ordering::Equal => (i, i + 1 + extra),
                        std::cmp::Ordering::Greater => (i + extra, i + extra + 1),
                    })
                    .collect()
            }
        };
        let mut vars = Vec::new();
        for (seg, (from, to)) in self.segments.iter().zip(spans) {
            match seg {
                Segment::Literal(l) => {
                    if parts[from] != l {
                        return None;
                    }
                }
                Segment::Var { field, .. } => {
                    let raw = parts[from..to].join("/");
                    let value = percent_encoding::percent_decode_str(&raw).decode_utf8().ok()?;
                    vars.push((field.clone(), value.into_owned()));
                }
            }
        }
        Some(vars)
    }

    /// Whether `parts` (a path split at `/` after its leading slash, a verb
    /// still on the last part) is an instance of the template: what
    /// [`Template::matches`] decides, without allocating, for the per-request
    /// method check. `utf8[i]` says whether `parts[i]` percent-decodes to
    /// UTF-8 (computed once per path: a verb is ASCII after a `:`, so it never
    /// changes that).
    pub fn fits(&self, parts: &[&str], utf8: &[bool]) -> bool {
        let Some((&last, init)) = parts.split_last() else {
            return false;
        };
        let last = match &self.verb {
            Some(verb) => match last.strip_suffix(verb.as_str()).and_then(|l| l.strip_suffix(':')) {
                Some(l) => l,
                None => return false,
            },
            None => last,
        };
        let part = |i: usize| if i == init.len() { last } else { init[i] };
        let n = self.segments.len();
        let rest_at = self
            .segments
            .iter()
            .position(|s| matches!(s, Segment::Var { rest: true, .. }));
        let extra = match rest_at {
            None if parts.len() != n => return false,
            None => 0,
            Some(_) if parts.len() < n => return false,
            Some(_) => parts.len() - n,
        };
        let mut i = 0;
        for (k, seg) in self.segments.iter().enumerate() {
            let width = if Some(k) == rest_at { 1 + extra } else { 1 };
            let ok = match seg {
                Segment::Literal(l) => part(i) == l,
                Segment::Var { .. } => utf8.get(i..i + width).is_some_and(|v| v.iter().all(|&u| u)),
            };
            if !ok {
                return false;
            }
            i += width;
        }
        true
    }

    /// For [`Template::fits`]: whether each part percent-decodes to UTF-8.
    pub fn utf8_parts(parts: &[&str]) -> Vec<bool> {
        parts
            .iter()
            .map(|p| !p.contains('%') || percent_encoding::percent_decode_str(p).decode_utf8().is_ok())
            .collect()
    }
}

/// Sets `value` at a dotted field path (proto names), creating objects on
/// the way. A body may name the same field by its JSON name: the path's
/// value wins over it at the leaf (as grpc-gateway's does), and objects on
/// the way are the body's under either name.
fn set_path(obj: &mut serde_json::Map<String, serde_json::Value>, path: &str, value: serde_json::Value) -> Result<()> {
    let mut parts = path.split('.').peekable();
    let mut cur = obj;
    while let Some(p) = parts.next() {
        let alias = ward_core::fieldmask::camel(p);
        if alias != p
            && let Some(v) = cur.remove(&alias)
            && parts.peek().is_some()
            && !cur.contains_key(p)
        {
            cur.insert(p.to_owned(), v);
        }
        if parts.peek().is_none() {
            cur.insert(p.to_owned(), value);
            return Ok(());
        }
        let next = cur
            .entry(p.to_owned())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        cur = next
            .as_object_mut()
            .ok_or_else(|| ward_core::Error::invalid(path, format!("{path} conflicts with another field")))?;
    }
    Ok(())
}

/// Well-known types whose proto3 JSON form is a string.
const STRING_WKTS: &[&str] = &[
    "google.protobuf.Timestamp",
    "google.protobuf.Duration",
    "google.protobuf.FieldMask",
    "google.protobuf.StringValue",
];

/// Converts a query-string value to the JSON a field of `kind` takes.
fn query_value(key: &str, kind: &ward_proto::descriptors::Kind, v: &str) -> Result<serde_json::Value> {
    use ward_proto::descriptors::Kind;
    let bad = |what: &str| {
        ward_core::Error::invalid(
            key,
            format!("{key} must be {what}, got \"{}\"", ward_core::names::echo(v)),
        )
    };
    Ok(match kind {
        Kind::Bool => match v {
            "true" | "1" => true.into(),
            "false" | "0" => false.into(),
            _ => return Err(bad("true or false")),
        },
        Kind::Int32 => v.parse::<i32>().map_err(|_| bad("a 32-bit integer"))?.into(),
        // proto3 JSON writes 64-bit integers as strings.
        Kind::Int64 => v.parse::<i64>().map_err(|_| bad("an integer"))?.to_string().into(),
        Kind::Float | Kind::Double => {
            let f = v
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .ok_or_else(|| bad("a number"))?;
            serde_json::Number::from_f64(f)
                .map(serde_json::Value::Number)
                .ok_or_else(|| bad("a number"))?
        }
        Kind::Enum(_) => match v.parse::<i32>() {
            Ok(n) => n.into(),
            Err(_) => v.into(),
        },
        Kind::String | Kind::Bytes => v.into(),
        Kind::Message(m) if STRING_WKTS.contains(&m.as_str()) => v.into(),
        Kind::Message(_) => {
            return Err(ward_core::Error::invalid(
                key,
                format!("{key} is not a query parameter"),
            ));
        }
    })
}

/// Most query parameters one request may carry.
const MAX_QUERY_PARAMS: usize = 4096;

/// Assembles the request message's JSON from the path's variables, the query
/// string and the body, by the request message's descriptor.
fn request_json(
    binding: &Binding,
    vars: Vec<(String, String)>,
    query: &str,
    body: Option<serde_json::Value>,
) -> Result<serde_json::Value> {
    use ward_proto::descriptors::pool;
    let pool = pool();
    let input = pool
        .methods
        .get(binding.name)
        .and_then(|m| pool.message(&m.input))
        .ok_or_else(|| ward_core::Error::Internal(format!("no descriptor for {}", binding.name)))?;
    let mut obj = serde_json::Map::new();
    match (binding.body, body) {
        ("*", Some(serde_json::Value::Object(m))) => obj = m,
        ("*", Some(_)) => {
            return Err(ward_core::Error::invalid(
                "body",
                "the request body must be a JSON object",
            ));
        }
        ("", _) | (_, None) => {}
        (field, Some(v)) => {
            obj.insert(field.to_owned(), v);
        }
    }
    let mut from_path = Vec::new();
    for (field, value) in vars {
        set_path(&mut obj, &field, value.into())?;
        from_path.push(field);
    }
    let mut repeated: std::collections::BTreeMap<String, Vec<serde_json::Value>> = Default::default();
    for (i, (k, v)) in form_urlencoded::parse(query.as_bytes()).enumerate() {
        if i >= MAX_QUERY_PARAMS {
            return Err(ward_core::Error::invalid(
                "query",
                format!("more than {MAX_QUERY_PARAMS} query parameters"),
            ));
        }
        let key = ward_core::fieldmask::snake(&k);
        let unknown = || {
            ward_core::Error::invalid(
                key.clone(),
                format!("unknown query parameter \"{}\"", ward_core::names::echo(&k)),
            )
        };
        let first = key.split('.').next().unwrap_or("");
        if binding.body == "*" || first == binding.body || from_path.contains(&key) {
            return Err(unknown());
        }
        let mut msg = input;
        let mut parts = key.split('.').peekable();
        while let Some(part) = parts.next() {
            let field = msg
                .field(part)
                .filter(|f| pool.map_entry(f).is_none())
                .ok_or_else(unknown)?;
            match (&field.kind, parts.peek()) {
                (ward_proto::descriptors::Kind::Message(m), Some(_)) if !field.repeated => {
                    msg = pool.message(m).ok_or_else(unknown)?;
                }
                (_, Some(_)) => return Err(unknown()),
                (ward_proto::descriptors::Kind::Message(_), None) if field.repeated => {
                    // A repeated message in a query (grpc-gateway has no
                    // form for it): each value is one element as a JSON
                    // object, e.g. `imageRefs={"repo":"…","tags":["v1"]}`.
                    let item: serde_json::Value = serde_json::from_str(&v)
                        .ok()
                        .filter(serde_json::Value::is_object)
                        .ok_or_else(|| {
                            ward_core::Error::invalid(key.clone(), format!("each {key} value is one JSON object"))
                        })?;
                    repeated.entry(key.clone()).or_default().push(item);
                }
                (kind, None) => {
                    if field.repeated {
                        let values = repeated.entry(key.clone()).or_default();
                        for item in v.split(',').map(str::trim) {
                            // An empty value (`ids=`) would silently widen the filter.
                            if item.is_empty() {
                                return Err(ward_core::Error::invalid(
                                    key.clone(),
                                    format!("{key} was given an empty value"),
                                ));
                            }
                            values.push(query_value(&key, kind, item)?);
                        }
                    } else {
                        set_path(&mut obj, &key, query_value(&key, kind, &v)?)?;
                    }
                }
            }
        }
    }
    for (key, values) in repeated {
        set_path(&mut obj, &key, serde_json::Value::Array(values))?;
    }
    Ok(serde_json::Value::Object(obj))
}

/// A path's variables: (request field, decoded value).
type Bound = Vec<(String, String)>;

/// The compiled table one catch-all route dispatches over.
struct Table(Vec<(Template, Rpc)>);

/// Routes every binding: one catch-all per root (`/iam/v1/{*rest}`) whose
/// handler picks the most specific template matching the path and method.
pub fn routes(rpcs: Vec<Rpc>) -> super::table::Routes {
    use std::collections::BTreeMap;
    let mut roots: BTreeMap<String, Vec<(Template, Rpc)>> = BTreeMap::new();
    for rpc in rpcs {
        let t = Template::parse(rpc.binding.path);
        roots.entry(t.root()).or_default().push((t, rpc));
    }
    let mut routes = super::table::Routes::new();
    for (root, entries) in roots {
        let table = Arc::new(Table(entries));
        routes = routes.route(
            &format!("{root}/{{*rest}}"),
            axum::routing::any(
                move |axum::extract::State(w): axum::extract::State<Arc<Ward>>, req: axum::extract::Request| {
                    let table = table.clone();
                    async move { dispatch(&table, w, req).await }
                },
            ),
        );
    }
    routes
}

async fn dispatch(table: &Table, w: Arc<Ward>, req: axum::extract::Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = req.uri().path().to_owned();
    let mut best: Option<(&Template, &Rpc, Bound)> = None;
    let mut allowed: Vec<&str> = Vec::new();
    for (t, rpc) in &table.0 {
        let Some(vars) = t.matches(&path) else { continue };
        // HEAD is GET without the body (hyper drops it), as on every route.
        let head_of_get = req.method() == http::Method::HEAD && rpc.binding.method == http::Method::GET;
        if rpc.binding.method != req.method() && !head_of_get {
            allowed.push(rpc.binding.method.as_str());
            if rpc.binding.method == http::Method::GET {
                allowed.push("HEAD");
            }
            continue;
        }
        if best.as_ref().is_none_or(|(b, _, _)| t.weight() > b.weight()) {
            best = Some((t, rpc, vars));
        }
    }
    let Some((_, rpc, vars)) = best else {
        if allowed.is_empty() {
            let e = ward_core::Error::not_found(
                "endpoint",
                format!("{} {}", req.method(), ward_core::names::echo(&path)),
            );
            return crate::status::ApiError::from(e).into_response();
        }
        allowed.sort_unstable();
        allowed.dedup();
        let mut resp = super::unimplemented(
            http::StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed on this path".into(),
        );
        if let Ok(v) = http::HeaderValue::from_str(&allowed.join(", ")) {
            resp.headers_mut().insert(http::header::ALLOW, v);
        }
        return resp;
    };
    let gzip = req
        .headers()
        .get(http::header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(accepts_gzip);
    match serve(rpc, w, vars, req).await {
        Ok(Encoded { json, gzip: None }) => ([(http::header::CONTENT_TYPE, "application/json")], json).into_response(),
        Ok(Encoded { json, gzip: Some(z) }) => {
            let vary = (http::header::VARY, "accept-encoding");
            let json_type = (http::header::CONTENT_TYPE, "application/json");
            if gzip {
                ([json_type, vary, (http::header::CONTENT_ENCODING, "gzip")], z).into_response()
            } else {
                ([json_type, vary], json).into_response()
            }
        }
        Err(e) => e.into_response(),
    }
}

async fn serve(
    rpc: &Rpc,
    w: Arc<Ward>,
    vars: Vec<(String, String)>,
    req: axum::extract::Request,
) -> Result<Encoded, crate::status::ApiError> {
    let (parts, body) = req.into_parts();
    let header = match parts.headers.get(http::header::AUTHORIZATION) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ward_core::Error::Unauthenticated("the Authorization header is not text".into()))?,
        ),
    };
    let caller = if header.is_some() || rpc.binding.authenticated {
        Some(w.authenticate(header).await?)
    } else {
        None
    };
    let body =
        if rpc.binding.body.is_empty() {
            None
        } else {
            let bytes = axum::body::to_bytes(body, super::MAX_BODY_BYTES)
                .await
                .map_err(super::body_error)?;
            if bytes.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                if let Some(ct) = parts.headers.get(http::header::CONTENT_TYPE) {
                    super::json_content_type(ct.to_str().unwrap_or(""))?;
                }
                Some(serde_json::from_slice(&bytes).map_err(|e| {
                    ward_core::Error::invalid("body", format!("the request body is not valid JSON: {e}"))
                })?)
            }
        };
    let body = body.map(|mut b: serde_json::Value| {
        super::strip_nulls(&mut b, 0);
        b
    });
    let json = request_json(&rpc.binding, vars, parts.uri.query().unwrap_or(""), body)?;
    Ok((rpc.handler)(w, caller, json).await?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn accept_encoding_is_read_as_rfc_9110_says() {
        for yes in [
            "gzip",
            "GZIP",
            "deflate, gzip",
            "gzip;q=0.5",
            "*",
            "br, *;q=0.1",
            " gzip ; q=1",
            "x-gzip",
        ] {
            assert!(accepts_gzip(yes), "{yes}");
        }
        for no in [
            "",
            "identity",
            "br, deflate",
            "gzip;q=0",
            "gzip; q=0.0",
            "*;q=0",
            "gzipped",
        ] {
            assert!(!accepts_gzip(no), "{no}");
        }
    }

    fn vars(t: &str, p: &str) -> Option<Vec<(String, String)>> {
        Template::parse(t).matches(p)
    }

    /// Every documented template (raw variables may hold slashes).
    pub(crate) fn documented_templates() -> Vec<String> {
        crate::rest::endpoints("")
            .iter()
            .map(|e| match e {
                crate::rest::table::Endpoint::Rpc(b) => b.path.to_owned(),
                crate::rest::table::Endpoint::Raw(r) => r.path.replace('}', "=**}"),
            })
            .collect()
    }

    /// Paths built from `templates`: each variable filled with odd values
    /// (empty, slashes, bad percent-encoding), plus a segment more, one
    /// fewer, and a verb.
    pub(crate) fn sample_paths(templates: &[String]) -> Vec<String> {
        let fillers = ["x", "a/b", "%2F", "%FF", "", "caf%C3%A9", "a:b"];
        let mut paths = vec!["/".to_owned(), "//".to_owned(), "/iam".to_owned(), "".to_owned()];
        for t in templates {
            for f in fillers {
                let mut p = String::new();
                let mut in_var = false;
                for c in t.chars() {
                    match c {
                        '{' => in_var = true,
                        '}' => {
                            in_var = false;
                            p.push_str(f);
                        }
                        _ if in_var => {}
                        c => p.push(c),
                    }
                }
                paths.push(format!("{p}/extra"));
                paths.push(p.trim_end_matches(|c: char| c != '/').to_owned());
                paths.push(format!("{p}:verb"));
                paths.push(p);
            }
        }
        paths
    }

    /// `fits` (the allocation-free check) decides exactly what `matches` does,
    /// for every documented template against paths built from all of them.
    #[test]
    fn fits_agrees_with_matches() {
        let templates = documented_templates();
        let paths = sample_paths(&templates);
        let mut checked = 0;
        for t in &templates {
            let parsed = Template::parse(t);
            for p in &paths {
                let parts: Vec<&str> = match p.strip_prefix('/') {
                    Some(rest) => rest.split('/').collect(),
                    None => continue,
                };
                let utf8 = Template::utf8_parts(&parts);
                assert_eq!(
                    parsed.fits(&parts, &utf8),
                    parsed.matches(p).is_some(),
                    "template {t}, path {p}"
                );
                checked += 1;
            }
        }
        assert!(checked > 100_000, "{checked} pairs");
    }

    #[test]
    fn path_values_win_over_the_bodys_json_names() {
        let mut body = serde_json::json!({"groupId": "from-body", "roleBinding": {"roleUid": "r"}});
        let obj = body.as_object_mut().unwrap();
        set_path(obj, "group_id", "from-path".into()).unwrap();
        set_path(obj, "role_binding.uid", "u".into()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"group_id": "from-path", "role_binding": {"roleUid": "r", "uid": "u"}})
        );
    }

    #[test]
    fn templates_match_like_grpc_gateway() {
        let v = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(vars("/iam/v1/groups", "/iam/v1/groups"), v(&[]));
        assert_eq!(
            vars("/iam/v1/groups/{id=**}", "/iam/v1/groups/a/b"),
            v(&[("id", "a/b")])
        );
        assert_eq!(
            vars("/iam/v1/groups/{id=**}", "/iam/v1/groups/a%2Fb"),
            v(&[("id", "a/b")])
        );
        assert_eq!(
            vars("/iam/v1/groups/{parent=**}", "/iam/v1/groups/"),
            v(&[("parent", "")])
        );
        assert_eq!(vars("/iam/v1/groups/{id=**}", "/iam/v1/groups"), None);
        assert_eq!(
            vars(
                "/iam/v1/groups/{group_id=**}:requestGroupAccess",
                "/iam/v1/groups/a/b:requestGroupAccess"
            ),
            v(&[("group_id", "a/b")])
        );
        assert_eq!(vars("/iam/v1/groups:lookupGroup", "/iam/v1/groups:lookupGroup"), v(&[]));
        assert_eq!(vars("/iam/v1/groups:lookupGroup", "/iam/v1/groups"), None);
        assert_eq!(
            vars(
                "/registry/v1/tags/{parent_id=**}/history",
                "/registry/v1/tags/a/b/c/history"
            ),
            v(&[("parent_id", "a/b/c")])
        );
        assert_eq!(
            vars(
                "/registry/v1/repos/{repo_id=**}/digests/{digest=*}/size",
                "/registry/v1/repos/a/b/digests/sha256:00/size"
            ),
            v(&[("repo_id", "a/b"), ("digest", "sha256:00")])
        );
        assert_eq!(
            vars(
                "/registry/v1/repos/{repo_id=**}/digests/{digest=*}/size",
                "/registry/v1/repos/a/size"
            ),
            None
        );
        assert_eq!(vars("/ping/v1/ping", "/ping/v1/ping/x"), None);
    }

    #[test]
    fn literals_outrank_variables() {
        let batch = Template::parse("/iam/v1/rolebindings/batch/{parent=**}");
        let one = Template::parse("/iam/v1/rolebindings/{parent=**}");
        assert!(batch.weight() > one.weight());
        assert!(one.matches("/iam/v1/rolebindings/batch/x").is_some());
        let verb = Template::parse("/iam/v1/groups/{group_id=**}:requestGroupAccess");
        let create = Template::parse("/iam/v1/groups/{parent=**}");
        assert!(verb.weight() > create.weight());
        assert_eq!(Template::parse("/iam/v1/groups:lookupGroup").root(), "/iam/v1");
        assert_eq!(
            Template::parse("/iam/v1/groups/{group_id=**}:check").openapi(),
            (
                "/iam/v1/groups/{group_id}:check".to_owned(),
                vec!["group_id".to_owned()]
            )
        );
    }

    #[test]
    fn arbitrary_paths_never_panic() {
        let templates = [
            "/iam/v1/groups/{id=**}",
            "/registry/v1/repos/{repo_id=**}/digests/{digest=*}/size",
            "/iam/v1/groups/{g=**}:v",
            "/a/b",
        ];
        let paths = [
            "",
            "/",
            "//",
            "/iam/v1/groups/%ff",
            "/iam/v1/groups/:v",
            ":",
            "/a/b:",
            "/%",
            "/a/b/%zz",
        ];
        for t in templates {
            for p in paths {
                let _ = vars(t, p);
            }
        }
    }
}
