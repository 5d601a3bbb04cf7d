//! The OpenAPI 3.1 document of every REST route, generated from the route
//! table ([`super::table::Endpoint`]) and the proto descriptors; nothing in
//! it is written by hand beside them. Schemas follow proto3 JSON as Ward
//! reads and writes it: lowerCamelCase names (snake_case is accepted too),
//! 64-bit integers as strings or numbers, enums by name or number, `null`
//! for a field's default.

use std::collections::{BTreeMap, BTreeSet};
use ward_core::fieldmask::camel;

use serde_json::{Value, json};
use ward_proto::descriptors::{Kind, MessageDesc, Pool, pool};

use super::table::{Endpoint, Raw};
use super::transcode::{Binding, Template};

/// Deepest nesting of message fields flattened into query parameters.
const MAX_QUERY_DEPTH: usize = 3;

/// Error statuses every RPC may answer with (AIP-193 body).
const RPC_ERRORS: &[u16] = &[400, 401, 403, 404, 405, 409, 413, 415, 429, 500, 501, 503];

/// What the HTTP layer answers before any route, with no body: a request
/// line or headers over hyper's limits.
const TRANSPORT_ERRORS: &[u16] = &[414, 431];

/// The document for `endpoints`.
pub fn document(endpoints: &[Endpoint]) -> Value {
    let pool = pool();
    // A field some binding of an RPC takes from its path is never a query
    // parameter of that RPC (`POST /iam/v2/groups`, an organization, has no parent).
    let mut path_fields: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in endpoints {
        if let Endpoint::Rpc(b) = e {
            path_fields
                .entry(b.name.to_owned())
                .or_default()
                .extend(Template::parse(b.path).openapi().1);
        }
    }
    let mut g = Generator {
        pool,
        path_fields,
        schemas: BTreeMap::new(),
        pending: Vec::new(),
        ops: Vec::new(),
        operation_ids: BTreeSet::new(),
    };
    for e in endpoints {
        match e {
            Endpoint::Rpc(b) => g.rpc(b),
            Endpoint::Raw(r) => g.raw(r),
        }
    }
    while let Some((name, mode)) = g.pending.pop() {
        let key = mode.component(&name);
        if g.schemas.contains_key(&key) {
            continue;
        }
        let schema = g.message_schema(&name, mode);
        g.schemas.insert(key, schema);
    }
    g.schemas.insert("google.rpc.Status".into(), status_schema());
    let paths = finish(std::mem::take(&mut g.ops));
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Ward platform API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "IAM, registry and advisories, wire-compatible with the Chainguard platform API \
                            (v1, v2beta1, v2). REST/JSON as grpc-gateway transcodes it; the same RPCs over gRPC \
                            on the same port.",
        },
        "paths": paths,
        "components": {
            "schemas": g.schemas,
            "responses": RPC_ERRORS.iter().map(|c| (format!("Error{c}"), json!({
                "description": reason(*c),
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/google.rpc.Status"}}},
            }))).collect::<serde_json::Map<_, _>>(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                           "description": "A Ward token (`ward auth token`, or `/sts/exchange`)."},
            },
        },
    })
}

/// The AIP-193 error body.
fn status_schema() -> Value {
    json!({
        "type": "object",
        "description": "An error (google.rpc.Status): code, message and typed details \
                        (ErrorInfo, BadRequest, ResourceInfo, PreconditionFailure).",
        "properties": {
            "code": {"type": "integer"},
            "message": {"type": "string"},
            "details": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["code", "message"],
    })
}

/// Which side of the wire a schema describes. Requests carry the fields'
/// constraints (required, patterns, bounds); replies only their types, since
/// a reply may leave a field empty that a request must fill (a lookup that
/// returns only an id). A PATCH body is a request whose fields are all
/// optional (the mask says what changes). A PUT body whose message has a
/// `kept_on_replace` field is an input where that field may be empty or
/// absent (it keeps its value).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Output,
    Input,
    Patch,
    Replace,
}

impl Mode {
    fn component(self, message: &str) -> String {
        match self {
            Mode::Output => message.to_owned(),
            Mode::Input => format!("{message}.Input"),
            Mode::Patch => format!("{message}.Patch"),
            Mode::Replace => format!("{message}.Replace"),
        }
    }

    /// Whether this side lets a field with `rule` be empty or absent (it
    /// keeps its value), whatever else `rule` says.
    fn keeps(self, rule: &ward_proto::descriptors::FieldSchema) -> bool {
        self == Mode::Replace && rule.kept_on_replace
    }

    /// Whether this side requires a field with `rule`.
    fn requires(self, rule: &ward_proto::descriptors::FieldSchema) -> bool {
        rule.required && matches!(self, Mode::Input | Mode::Replace) && !self.keeps(rule)
    }
}

struct Generator {
    pool: &'static Pool,
    path_fields: BTreeMap<String, Vec<String>>,
    schemas: BTreeMap<String, Value>,
    pending: Vec<(String, Mode)>,
    ops: Vec<Op>,
    operation_ids: BTreeSet<String>,
}

/// An operation before its path variables get their shared names.
struct Op {
    method: http::Method,
    /// OpenAPI path with this operation's own variable names.
    path: String,
    /// The request fields its path variables fill, in order.
    vars: Vec<String>,
    /// The reply message (RPCs only), for links.
    output: Option<String>,
    op: Value,
}

/// The variable name a path shape uses for all its operations: OpenAPI
/// forbids equivalent templated paths (`/groups/{parent}` beside
/// `/groups/{uid}`), so one name is chosen per position, preferring the
/// name that reads as the resource's own id.
fn finish(mut ops: Vec<Op>) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for op in &ops {
        let chosen = names.entry(skeleton(&op.path)).or_insert_with(|| op.vars.clone());
        for (c, v) in chosen.iter_mut().zip(&op.vars) {
            let rank = |n: &str| match n.rsplit('.').next().unwrap_or(n) {
                "uid" => 0,
                "id" => 1,
                _ => 2,
            };
            if rank(v) < rank(c) {
                *c = v.clone();
            }
        }
    }
    let param = |v: &str| v.replace('.', "_");
    // Links from a create to the operations on what it created (stateful testing).
    let mut links: Vec<(usize, String, String, String)> = Vec::new();
    for (i, create) in ops.iter().enumerate() {
        let (Some(out), true) = (&create.output, create.method == http::Method::POST) else {
            continue;
        };
        let id_field = match pool().message(out) {
            Some(m) if m.field("uid").is_some() => "uid",
            Some(m) if m.field("id").is_some() => "id",
            _ => continue,
        };
        let same: Vec<String> = ops
            .iter()
            .filter(|o| {
                o.method != http::Method::POST && o.output.as_deref() == Some(out.as_str()) && o.vars.len() == 1
            })
            .map(|o| skeleton(&o.path))
            .collect();
        for target in &ops {
            let sk = skeleton(&target.path);
            if target.vars.len() != 1 || target.method == http::Method::POST || !same.contains(&sk) {
                continue;
            }
            let Some(id) = target.op.get("operationId").and_then(Value::as_str) else {
                continue;
            };
            let name = names
                .get(&sk)
                .and_then(|n| n.first())
                .map(|n| param(n))
                .unwrap_or_default();
            links.push((i, id.to_owned(), name, format!("$response.body#/{id_field}")));
        }
    }
    for (i, target, name, expr) in links {
        let key = target.replace(['.', ' ', '/', '{', '}', ':'], "_");
        if let Some(ok) = ops[i].op.pointer_mut("/responses/200") {
            ok["links"][key] = json!({"operationId": target, "parameters": {name: expr}});
        }
    }
    let mut paths: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for mut op in ops {
        let chosen = names.get(&skeleton(&op.path)).cloned().unwrap_or_default();
        let mut path = op.path.clone();
        for (own, shared) in op.vars.iter().zip(&chosen) {
            path = path.replacen(&format!("{{{own}}}"), &format!("{{{}}}", param(shared)), 1);
        }
        if let Some(params) = op.op.get_mut("parameters").and_then(Value::as_array_mut) {
            let mut k = 0;
            for p in params.iter_mut() {
                if p["in"] == "path" {
                    if let Some(shared) = chosen.get(k) {
                        p["name"] = param(shared).into();
                    }
                    k += 1;
                }
            }
        }
        paths
            .entry(path)
            .or_default()
            .insert(op.method.as_str().to_ascii_lowercase(), op.op);
    }
    paths
}

/// `/a/{x}/b` → `/a/{}/b`.
fn skeleton(path: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '{' => {
                depth += 1;
                out.push_str("{}");
            }
            '}' => depth -= 1,
            _ if depth > 0 => {}
            _ => out.push(c),
        }
    }
    out
}

fn nullable(mut schema: Value) -> Value {
    if let Some(t) = schema.get("type").and_then(Value::as_str).map(str::to_owned) {
        schema["type"] = json!([t, "null"]);
        schema
    } else {
        json!({"anyOf": [schema, {"type": "null"}]})
    }
}

impl Generator {
    fn operation_id(&mut self, base: &str) -> String {
        let mut id = base.to_owned();
        let mut n = 2;
        while !self.operation_ids.insert(id.clone()) {
            id = format!("{base}.{n}");
            n += 1;
        }
        id
    }

    fn reference(&mut self, message: &str, mode: Mode) -> Value {
        match message {
            "google.protobuf.Empty" => json!({"type": "object"}),
            _ => match wkt(message) {
                Some(s) => s,
                None => {
                    self.pending.push((message.to_owned(), mode));
                    json!({"$ref": format!("#/components/schemas/{}", mode.component(message))})
                }
            },
        }
    }

    fn enum_schema_nonzero(&self, name: &str) -> Value {
        let values: Vec<(String, i32)> = self
            .pool
            .enums
            .get(name)
            .map(|e| e.values.iter().filter(|(_, v)| *v != 0).cloned().collect())
            .unwrap_or_default();
        let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
        let numbers: Vec<i32> = values.iter().map(|(_, v)| *v).collect();
        json!({"oneOf": [{"type": "string", "enum": names}, {"type": "integer", "enum": numbers}]})
    }

    fn enum_schema(&self, name: &str) -> Value {
        let values = self.pool.enums.get(name).map(|e| e.values.clone()).unwrap_or_default();
        let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
        let numbers: Vec<i32> = values.iter().map(|(_, v)| *v).collect();
        json!({"oneOf": [{"type": "string", "enum": names}, {"type": "integer", "enum": numbers}]})
    }

    fn scalar_schema(&mut self, kind: &Kind, mode: Mode) -> Value {
        match kind {
            Kind::Bool => json!({"type": "boolean"}),
            Kind::String => json!({"type": "string"}),
            Kind::Bytes => json!({"type": "string", "contentEncoding": "base64",
                                  "pattern": "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"}),
            Kind::Int32 => json!({"oneOf": [
                {"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX},
                {"type": "string", "pattern": "^-?[0-9]{1,10}$"},
            ]}),
            Kind::Int64 => json!({"oneOf": [
                {"type": "integer"},
                {"type": "string", "pattern": "^-?[0-9]{1,19}$"},
            ]}),
            Kind::Float | Kind::Double => json!({"oneOf": [
                {"type": "number"},
                {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]},
            ]}),
            Kind::Enum(e) => self.enum_schema(e),
            // Nested messages of a PATCH body are whole values.
            Kind::Message(m) => self.reference(
                m,
                if matches!(mode, Mode::Patch | Mode::Replace) {
                    Mode::Input
                } else {
                    mode
                },
            ),
        }
    }

    fn message_schema(&mut self, name: &str, mode: Mode) -> Value {
        let Some(desc) = self.pool.message(name).cloned() else {
            return json!({"type": "object"});
        };
        let mut props = serde_json::Map::new();
        let mut required = Vec::new();
        for f in &desc.fields {
            let schema = if let Some(entry) = self.pool.map_entry(f).cloned() {
                let value = entry
                    .field("value")
                    .map(|v| self.scalar_schema(&v.kind, mode))
                    .unwrap_or_else(|| json!({}));
                let mut m = json!({"type": "object", "additionalProperties": value});
                if entry
                    .field("key")
                    .is_some_and(|k| matches!(k.kind, Kind::Int32 | Kind::Int64))
                {
                    m["propertyNames"] = json!({"pattern": "^-?[0-9]{1,18}$"});
                }
                m
            } else if f.repeated {
                let rule = f.schema.as_ref().filter(|_| mode != Mode::Output);
                let item = match &f.kind {
                    // UNSPECIFIED is never a member of a list a request sends.
                    Kind::Enum(e) if mode != Mode::Output => self.enum_schema_nonzero(e),
                    _ => constrain(self.scalar_schema(&f.kind, mode), rule),
                };
                let mut a = json!({"type": "array", "items": item});
                if let Some(n) = rule.map(|s| s.max_items).filter(|n| *n > 0) {
                    a["maxItems"] = n.into();
                }
                if let Some(n) = rule.map(|s| s.min_items).filter(|n| *n > 0) {
                    a["minItems"] = n.into();
                }
                a
            } else {
                let rule = f.schema.as_ref().filter(|_| mode != Mode::Output);
                match (&f.kind, rule.is_some_and(|r| r.required && !mode.keeps(r))) {
                    // A required enum is one set to something other than its zero value.
                    (Kind::Enum(e), true) => self.enum_schema_nonzero(e),
                    _ => constrain(self.scalar_schema(&f.kind, mode), rule),
                }
            };
            let rule = f.schema.clone().unwrap_or_default();
            let must = mode.requires(&rule);
            let kept = mode.keeps(&rule);
            let mut schema = schema;
            if kept {
                // Empty keeps the value, whatever the pattern, length or
                // format says.
                if let Some(p) = schema.get("pattern").and_then(Value::as_str).map(str::to_owned) {
                    schema["pattern"] = format!("^$|{p}").into();
                }
                if let Some(s) = schema.as_object_mut() {
                    s.remove("minLength");
                    s.remove("format");
                }
            }
            // `null` would clear it, which a required field refuses (PATCH too).
            let mut schema = if rule.required && mode != Mode::Output && !kept {
                schema
            } else {
                nullable(schema)
            };
            if must {
                required.push(f.json_name.clone());
            }
            if !f.comment.is_empty() || rule.output_only {
                schema = json!({"allOf": [schema]});
                if !f.comment.is_empty() {
                    schema["description"] = f.comment.clone().into();
                }
                if rule.output_only {
                    schema["readOnly"] = true.into();
                }
            }
            props.insert(f.json_name.clone(), schema);
        }
        let mut out = json!({"type": "object", "properties": props});
        if !required.is_empty() {
            out["required"] = required.into();
        }
        if mode != Mode::Output {
            let pairs = oneof_pairs(&desc);
            if !pairs.is_empty() {
                out["not"] = json!({"anyOf": pairs});
            }
        }
        if !desc.comment.is_empty() {
            out["description"] = desc.comment.clone().into();
        }
        out
    }

    /// Query parameters for the fields of `msg` not carried by the path or body.
    fn query_params(&mut self, msg: &MessageDesc, prefix: &str, skip: &[String], depth: usize, out: &mut Vec<Value>) {
        for f in &msg.fields {
            let snake = if prefix.is_empty() {
                f.name.clone()
            } else {
                format!("{prefix}.{}", f.name)
            };
            if skip.contains(&snake) || self.pool.map_entry(f).is_some() {
                continue;
            }
            let json_name = if prefix.is_empty() {
                f.json_name.clone()
            } else {
                format!("{}.{}", camel(prefix), f.json_name)
            };
            match &f.kind {
                Kind::Message(m) if wkt(m).is_none() => {
                    if f.repeated || depth >= MAX_QUERY_DEPTH {
                        continue;
                    }
                    if let Some(inner) = self.pool.message(m).cloned() {
                        self.query_params(&inner, &snake, skip, depth + 1, out);
                    }
                }
                kind => {
                    let mut item = constrain(query_schema(self, kind), f.schema.as_ref());
                    if let (Kind::Enum(e), Some(r)) = (kind, f.schema.as_ref())
                        && !r.pattern.is_empty()
                    {
                        // The pattern rules out the zero value's name; its number goes too.
                        let mut nonzero = self.enum_schema_nonzero(e);
                        nonzero["pattern"] = r.pattern.clone().into();
                        item = nonzero;
                    }
                    // An empty value of a repeated parameter is refused (it
                    // would silently widen the filter).
                    if f.repeated && matches!(kind, Kind::String) && item.get("minLength").is_none() {
                        item["minLength"] = 1.into();
                    }
                    let mut schema = if f.repeated {
                        json!({"type": "array", "items": item})
                    } else {
                        item
                    };
                    if let Some(n) = f.schema.as_ref().map(|s| s.max_items).filter(|n| *n > 0 && f.repeated) {
                        schema["maxItems"] = n.into();
                    }
                    if let Some(n) = f.schema.as_ref().map(|s| s.min_items).filter(|n| *n > 0 && f.repeated) {
                        schema["minItems"] = n.into();
                    }
                    let mut p = json!({"name": json_name, "in": "query", "schema": schema});
                    if f.schema.as_ref().is_some_and(|s| s.required) {
                        p["required"] = true.into();
                    }
                    if f.repeated {
                        p["explode"] = true.into();
                    }
                    if !f.comment.is_empty() {
                        p["description"] = f.comment.clone().into();
                    }
                    out.push(p);
                }
            }
        }
    }

    /// The field at a dotted path of message `msg`.
    fn field_at(&self, msg: &str, dotted: &str) -> Option<ward_proto::descriptors::Field> {
        let mut m = self.pool.message(msg)?;
        let mut parts = dotted.split('.').peekable();
        while let Some(p) = parts.next() {
            let f = m.field(p)?;
            if parts.peek().is_none() {
                return Some(f.clone());
            }
            match &f.kind {
                Kind::Message(n) => m = self.pool.message(n)?,
                _ => return None,
            }
        }
        None
    }

    fn rpc(&mut self, b: &Binding) {
        let Some(method) = self.pool.methods.get(b.name).cloned() else {
            return;
        };
        let template = Template::parse(b.path);
        let (path, fields) = template.openapi();
        let mut params: Vec<Value> = fields
            .iter()
            .map(|field| {
                let rule = self.field_at(&method.input, field).and_then(|f| f.schema);
                let mut schema = constrain(json!({"type": "string", "minLength": 1}), rule.as_ref());
                if rule.as_ref().is_some_and(|r| r.uidp_or_empty) {
                    schema["pattern"] = UIDP.into();
                }
                if schema.get("pattern").and_then(Value::as_str) == Some(UIDP) {
                    // Nested UIDPs hold `/`; an example shows clients (and
                    // schemathesis) that the parameter may.
                    schema["examples"] = json!([format!("{}/{}", "0".repeat(40), "0".repeat(16))]);
                }
                json!({"name": field, "in": "path", "required": true,
                       "description": format!("The request's `{field}` field (may contain `/`, sent as `%2F`)."),
                       "x-ward-field": field,
                       "schema": schema})
            })
            .collect();
        let input = self.pool.message(&method.input).cloned();
        let kept_on_replace = input.as_ref().is_some_and(|m| {
            m.fields
                .iter()
                .any(|f| f.schema.as_ref().is_some_and(|r| r.kept_on_replace))
        });
        let input_mode = if b.method == http::Method::PATCH {
            Mode::Patch
        } else if b.method == http::Method::PUT && b.body == "*" && kept_on_replace {
            Mode::Replace
        } else {
            Mode::Input
        };
        let mut body = None;
        let mut body_message: Option<String> = None;
        match (b.body, &input) {
            ("*", _) => {
                body = Some(self.reference(&method.input, input_mode));
                body_message = Some(method.input.clone());
            }
            ("", Some(msg)) => {
                let skip = self.path_fields.get(b.name).cloned().unwrap_or_default();
                self.query_params(msg, "", &skip, 0, &mut params);
            }
            (field, Some(msg)) => {
                let mut skip = self.path_fields.get(b.name).cloned().unwrap_or_default();
                skip.push(field.to_owned());
                self.query_params(msg, "", &skip, 0, &mut params);
                if let Some(f) = msg.field(field).cloned() {
                    if let (Kind::Message(m), false) = (&f.kind, f.repeated) {
                        body_message = Some(m.clone());
                    }
                    let s = match &f.kind {
                        Kind::Message(m) => self.reference(m, input_mode),
                        other => self.scalar_schema(other, input_mode),
                    };
                    body = Some(if f.repeated {
                        json!({"type": "array", "items": s})
                    } else {
                        s
                    });
                }
            }
            _ => {}
        }
        let mut responses = serde_json::Map::new();
        responses.insert(
            "200".into(),
            json!({"description": "OK", "content": {"application/json": {"schema": self.reference(&method.output, Mode::Output)}}}),
        );
        for code in RPC_ERRORS {
            responses.insert(
                code.to_string(),
                json!({"$ref": format!("#/components/responses/Error{code}")}),
            );
        }
        for code in TRANSPORT_ERRORS {
            responses.insert(code.to_string(), json!({"description": reason(*code)}));
        }
        let service = b.name.rsplit_once('.').map_or(b.name, |(s, _)| s);
        let mut op = json!({
            "operationId": self.operation_id(b.name),
            "tags": [service],
            "summary": if method.comment.is_empty() { b.name.to_owned() } else { method.comment.clone() },
            "parameters": params,
            "responses": responses,
            "security": if b.authenticated { json!([{"bearer": []}]) } else { json!([]) },
        });
        if let Some(schema) = body {
            // A body whose message has required fields must be sent.
            let required = body_message.is_some_and(|m| {
                self.pool.message(&m).is_some_and(|d| {
                    d.fields
                        .iter()
                        .any(|f| f.schema.as_ref().is_some_and(|r| input_mode.requires(r)))
                })
            });
            op["requestBody"] = json!({"required": required, "content": {"application/json": {"schema": schema}}});
        }
        self.ops.push(Op {
            method: b.method.clone(),
            path,
            vars: fields,
            output: Some(method.output.clone()),
            op,
        });
    }

    fn raw(&mut self, r: &Raw) {
        let vars: Vec<String> = r
            .path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(v, _)| v.to_owned()))
            .collect();
        let mut params: Vec<Value> = vars
            .iter()
            .map(|n| json!({"name": n, "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}}))
            .collect();
        for (name, description, required) in r.query {
            params.push(json!({"name": name, "in": "query", "required": required,
                               "description": description, "schema": {"type": "string"}}));
        }
        let mut responses = serde_json::Map::new();
        let (status, media) = r.success;
        let ok = if media.is_empty() {
            json!({"description": reason(status)})
        } else {
            json!({"description": reason(status), "content": {media: {"schema": {}}}})
        };
        responses.insert(status.to_string(), ok);
        // Other statuses (redirects, partial content, HTML or OCI errors) are
        // listed without asserting a body.
        for code in r.errors.iter().chain(TRANSPORT_ERRORS) {
            responses.insert(code.to_string(), json!({"description": reason(*code)}));
        }
        let base = format!("{} {}", r.method, r.path);
        let mut op = json!({
            "operationId": self.operation_id(&base),
            "tags": [tag(&r.path)],
            "summary": r.summary,
            "parameters": params,
            "responses": responses,
            "security": if r.authenticated { json!([{"bearer": []}]) } else { json!([]) },
        });
        if let Some(media) = r.request {
            op["requestBody"] = json!({"required": false, "content": {media: {"schema": {}}}});
        }
        self.ops.push(Op {
            method: r.method.clone(),
            path: r.path.clone(),
            vars,
            output: None,
            op,
        });
    }
}

/// "Both set" for each pair of members of each oneof: a request may set at
/// most one (a member sent as `null` is unset).
fn oneof_pairs(desc: &MessageDesc) -> Vec<Value> {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for f in &desc.fields {
        if let Some(o) = &f.oneof {
            groups.entry(o).or_default().push(&f.json_name);
        }
    }
    let set = json!({"not": {"type": "null"}});
    let mut pairs = Vec::new();
    for members in groups.values() {
        for (i, a) in members.iter().enumerate() {
            for b in &members[i + 1..] {
                pairs.push(json!({"required": [a, b], "properties": {*a: set.clone(), *b: set.clone()}}));
            }
        }
    }
    pairs
}

/// RFC 3339 as proto3 JSON reads it: years 0001–9999, real month days
/// (February 29 left out, as the pattern cannot tell leap years), `T`, `t`
/// or a space, any fraction, `Z` or an offset.
const TIMESTAMP: &str = "^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";

/// A UIDP, as the service layer parses it.
const UIDP: &str = "^[0-9a-f]{40}(/[0-9a-f]{16}){0,31}$";

/// Applies a field's `(ward.schema)` constraints to its value schema.
fn constrain(mut schema: Value, rule: Option<&ward_proto::descriptors::FieldSchema>) -> Value {
    let Some(r) = rule else { return schema };
    let bounded_int = r.minimum.is_some() || r.maximum.is_some();
    if bounded_int {
        // Bounds make it a plain integer (the string form is still accepted,
        // but the document need not offer it).
        schema = json!({"type": "integer"});
        if let Some(min) = r.minimum {
            schema["minimum"] = min.into();
        }
        if let Some(max) = r.maximum {
            schema["maximum"] = max.into();
        }
        return schema;
    }
    if r.uidp {
        schema["pattern"] = UIDP.into();
    } else if r.uidp_or_empty {
        schema["pattern"] = format!("^({})?$", &UIDP[1..UIDP.len() - 1]).into();
    } else if !r.pattern.is_empty() {
        schema["pattern"] = r.pattern.clone().into();
    }
    if r.min_length > 0 {
        schema["minLength"] = r.min_length.into();
    }
    if r.max_length > 0 {
        schema["maxLength"] = r.max_length.into();
    }
    if !r.format.is_empty() {
        schema["format"] = r.format.clone().into();
    }
    schema
}

/// A query parameter's value schema (strings on the wire, typed here).
fn query_schema(g: &mut Generator, kind: &Kind) -> Value {
    match kind {
        Kind::Int32 => json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX}),
        Kind::Int64 => json!({"type": "integer"}),
        // By name or number, as the body takes them.
        Kind::Enum(e) => g.enum_schema(e),
        Kind::Message(m) => wkt(m).unwrap_or_else(|| json!({"type": "string"})),
        other => g.scalar_schema(other, Mode::Input),
    }
}

/// Well-known types with a JSON form of their own.
fn wkt(name: &str) -> Option<Value> {
    Some(match name {
        "google.protobuf.Timestamp" => json!({"type": "string", "pattern": TIMESTAMP}),
        "google.protobuf.Duration" => json!({"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$"}),
        "google.protobuf.FieldMask" => json!({"type": "string"}),
        "google.protobuf.Struct" => json!({"type": "object"}),
        "google.protobuf.Value" => json!({}),
        "google.protobuf.StringValue" => json!({"type": "string"}),
        _ => return None,
    })
}

fn tag(path: &str) -> String {
    path.split('/')
        .filter(|s| !s.is_empty())
        .take(2)
        .collect::<Vec<_>>()
        .join("/")
}

fn reason(code: u16) -> &'static str {
    http::StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Response")
}

/// `GET /openapi.json`, built on first request and kept.
pub fn routes(issuer_path: &str) -> super::table::Routes {
    let issuer_path = issuer_path.to_owned();
    let cached: std::sync::Arc<std::sync::OnceLock<bytes::Bytes>> = Default::default();
    super::table::Routes::new().route(
        "/openapi.json",
        axum::routing::get(move || {
            let cached = cached.clone();
            let issuer_path = issuer_path.clone();
            async move {
                let body = cached
                    .get_or_init(|| {
                        let doc = document(&super::endpoints(&issuer_path));
                        bytes::Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
                    })
                    .clone();
                ([(http::header::CONTENT_TYPE, "application/json")], body)
            }
        }),
    )
}

/// The document's own endpoint.
pub fn endpoints() -> Vec<Endpoint> {
    vec![Endpoint::Raw(Raw {
        method: http::Method::GET,
        path: "/openapi.json".into(),
        summary: "This OpenAPI document.",
        authenticated: false,
        query: &[],
        request: None,
        success: (200, "application/json"),
        errors: &[],
    })]
}
