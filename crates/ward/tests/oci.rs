//! OCI Distribution (distribution-spec v1.1) conformance of Ward's registry at
//! `/v2/`: ping and auth challenge, the token endpoint, every blob push style
//! (single POST, POST+PUT, chunked, streamed, mount), range reads, upload
//! sessions, manifests of every media type, manifest errors, tags and catalog
//! listings with pagination, deletes, referrers, repository names, the REST
//! view of registry tags, and a pull-only identity. Cases follow the spec and
//! the checks its conformance suite makes. Every test runs once per backend.

mod common;

use base64::Engine as _;
use common::{TestServer, enc, uid};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256, Sha512};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";
const OCI_LAYER_ND: &str = "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
const ACCEPT_ALL: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json";
const OCTET: (&str, &str) = ("Content-Type", "application/octet-stream");

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(&Sha256::digest(data)[..]))
}

fn sha512(data: &[u8]) -> String {
    format!("sha512:{}", hex::encode(&Sha512::digest(data)[..]))
}

fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

fn random_hex(n: usize) -> String {
    hex::encode(random_bytes(n))
}

/// `loc` with `q` appended as a query parameter (the Location may carry its own).
fn with_query(loc: &str, q: &str) -> String {
    if loc.contains('?') {
        format!("{loc}&{q}")
    } else {
        format!("{loc}?{q}")
    }
}

/// The media type of a Content-Type value, without parameters.
fn base_type(ct: &str) -> String {
    ct.split(';').next().unwrap_or("").trim().to_owned()
}

fn desc(media_type: &str, data: &[u8]) -> Value {
    json!({ "mediaType": media_type, "digest": sha256(data), "size": data.len() })
}

/// Creates a root organization and returns its uid.
async fn org(s: &TestServer, name: &str) -> String {
    uid(&s.create_group(None, name).await)
}

#[derive(Clone)]
enum Auth {
    Anon,
    Bearer(String),
    /// Basic `_token:<token>`.
    Basic(String),
}

/// A registry client for one server with one set of credentials.
struct Reg {
    base: String,
    http: reqwest::Client,
    auth: Auth,
    backend: &'static str,
}

/// A response, read whole, with what was asked for assertion messages.
struct Resp {
    what: String,
    head: bool,
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reg {
    fn new(s: &TestServer, auth: Auth) -> Self {
        Reg {
            base: s.base.clone(),
            http: s.http.clone(),
            auth,
            backend: s.backend,
        }
    }

    fn admin(s: &TestServer) -> Self {
        Self::new(s, Auth::Bearer(s.token.clone()))
    }

    fn url(&self, p: &str) -> String {
        if p.starts_with("http://") || p.starts_with("https://") {
            p.to_owned()
        } else {
            format!("{}{p}", self.base)
        }
    }

    async fn send(&self, method: Method, path: &str, headers: &[(&str, &str)], body: Option<Vec<u8>>) -> Resp {
        let what = format!("[{}] {method} {path}", self.backend);
        let head = method == Method::HEAD;
        let mut rb = self.http.request(method, self.url(path));
        match &self.auth {
            Auth::Anon => {}
            Auth::Bearer(t) => rb = rb.bearer_auth(t),
            Auth::Basic(t) => rb = rb.basic_auth("_token", Some(t)),
        }
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.body(b);
        }
        let resp = rb.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("body read").to_vec();
        Resp {
            what,
            head,
            status,
            headers,
            body,
        }
    }

    async fn get(&self, p: &str) -> Resp {
        self.send(Method::GET, p, &[], None).await
    }

    async fn head(&self, p: &str) -> Resp {
        self.send(Method::HEAD, p, &[], None).await
    }

    async fn delete(&self, p: &str) -> Resp {
        self.send(Method::DELETE, p, &[], None).await
    }

    async fn post_empty(&self, p: &str) -> Resp {
        self.send(Method::POST, p, &[], Some(Vec::new())).await
    }
}

impl Resp {
    fn show(&self) -> String {
        let text: String = String::from_utf8_lossy(&self.body).chars().take(600).collect();
        format!(
            "{} -> {}; headers {:?}; body {text}",
            self.what, self.status, self.headers
        )
    }

    fn h(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    fn hv(&self, name: &str) -> String {
        self.h(name).unwrap_or_default()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn expect(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "{}", self.show());
        self
    }

    fn expect_any(&self, statuses: &[u16]) -> &Self {
        assert!(
            statuses.contains(&self.status),
            "expected one of {statuses:?}: {}",
            self.show()
        );
        self
    }

    /// An error status from `statuses` and (except for HEAD) a body
    /// `{"errors":[{"code":..}]}` with a code from `codes`.
    fn expect_err(&self, statuses: &[u16], codes: &[&str]) -> &Self {
        self.expect_any(statuses);
        if self.head {
            assert!(self.body.is_empty(), "HEAD with a body: {}", self.show());
            return self;
        }
        let body = self.json();
        let errors = body["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("no errors array: {}", self.show()));
        assert!(!errors.is_empty(), "empty errors: {}", self.show());
        for e in errors {
            let code = e["code"]
                .as_str()
                .unwrap_or_else(|| panic!("code not a string: {}", self.show()));
            assert!(
                !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
                "bad code {code}: {}",
                self.show()
            );
        }
        assert!(
            errors.iter().any(|e| codes.contains(&e["code"].as_str().unwrap_or(""))),
            "expected a code in {codes:?}: {}",
            self.show()
        );
        self
    }

    fn location(&self) -> String {
        let l = self
            .h("location")
            .unwrap_or_else(|| panic!("no Location: {}", self.show()));
        assert!(!l.is_empty(), "empty Location: {}", self.show());
        l
    }

    /// The target of a `Link: <...>; rel="next"` header.
    fn next_link(&self) -> Option<String> {
        let link = self.h("link")?;
        assert!(
            link.contains("rel=\"next\""),
            "Link without rel=\"next\": {}",
            self.show()
        );
        let start = link.find('<')? + 1;
        let end = link.find('>')?;
        Some(link[start..end].to_owned())
    }
}

/// Pushes a blob with one POST `?digest=` (digest percent-encoded, as Go
/// clients send it); returns its sha256 digest.
async fn push_blob(r: &Reg, name: &str, data: &[u8]) -> String {
    let d = sha256(data);
    push_blob_as(r, name, data, &d).await;
    d
}

async fn push_blob_as(r: &Reg, name: &str, data: &[u8], digest: &str) {
    let path = format!("/v2/{name}/blobs/uploads/?digest={}", enc(digest));
    let resp = r.send(Method::POST, &path, &[OCTET], Some(data.to_vec())).await;
    resp.expect(201);
    resp.location();
    assert_eq!(resp.hv("docker-content-digest"), digest, "{}", resp.show());
}

/// Opens an upload session: 202, a Location naming the Docker-Upload-UUID.
async fn start_upload(r: &Reg, name: &str, query: &str) -> String {
    let resp = r.post_empty(&format!("/v2/{name}/blobs/uploads/{query}")).await;
    resp.expect(202);
    let loc = resp.location();
    let id = resp
        .h("docker-upload-uuid")
        .unwrap_or_else(|| panic!("no Docker-Upload-UUID: {}", resp.show()));
    assert!(
        !id.is_empty() && loc.contains(&id),
        "Location should name the session: {}",
        resp.show()
    );
    loc
}

async fn patch_chunk(r: &Reg, loc: &str, data: &[u8], start: usize) -> Resp {
    let range = format!("{start}-{}", start + data.len() - 1);
    r.send(
        Method::PATCH,
        loc,
        &[OCTET, ("Content-Range", range.as_str())],
        Some(data.to_vec()),
    )
    .await
}

/// A PATCH that must be accepted; checks `Range: 0-<end>`; returns the next Location.
async fn patch_ok(r: &Reg, loc: &str, data: &[u8], start: usize) -> String {
    let resp = patch_chunk(r, loc, data, start).await;
    resp.expect(202);
    assert_eq!(
        resp.hv("range"),
        format!("0-{}", start + data.len() - 1),
        "{}",
        resp.show()
    );
    resp.location()
}

/// GET on an upload session: 204 with `Range: 0-<end>` and a Location.
async fn upload_status(r: &Reg, loc: &str, end: usize) -> String {
    let resp = r.get(loc).await;
    resp.expect(204);
    assert_eq!(resp.hv("range"), format!("0-{end}"), "{}", resp.show());
    resp.location()
}

/// HEAD and GET of a blob: 200, Content-Length, Docker-Content-Digest, body.
async fn check_blob(r: &Reg, name: &str, digest: &str, data: &[u8]) {
    let path = format!("/v2/{name}/blobs/{digest}");
    let h = r.head(&path).await;
    h.expect(200);
    assert_eq!(h.hv("content-length"), data.len().to_string(), "{}", h.show());
    assert_eq!(h.hv("docker-content-digest"), digest, "{}", h.show());
    assert!(h.body.is_empty(), "{}", h.show());
    let g = r.get(&path).await;
    g.expect(200);
    assert_eq!(g.hv("docker-content-digest"), digest, "{}", g.show());
    assert_eq!(g.hv("content-length"), data.len().to_string(), "{}", g.show());
    assert!(
        g.body == data,
        "{}: body differs ({} bytes, want {})",
        g.what,
        g.body.len(),
        data.len()
    );
}

/// Pushes a random config and layer to `name`; returns an OCI image manifest over them.
async fn image_json(r: &Reg, name: &str) -> Value {
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "rootfs": { "type": "layers", "diff_ids": [] },
        "config": { "Labels": { "nonce": random_hex(8) } },
    }))
    .unwrap();
    let layer = random_bytes(256);
    push_blob(r, name, &config).await;
    push_blob(r, name, &layer).await;
    json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": desc(OCI_CONFIG, &config),
        "layers": [desc(OCI_LAYER, &layer)],
    })
}

async fn put_manifest(r: &Reg, name: &str, reference: &str, media_type: &str, body: &[u8]) -> Resp {
    let path = format!("/v2/{name}/manifests/{reference}");
    r.send(Method::PUT, &path, &[("Content-Type", media_type)], Some(body.to_vec()))
        .await
}

/// A manifest PUT that must succeed: 201, Location, Docker-Content-Digest.
async fn push_manifest(r: &Reg, name: &str, reference: &str, media_type: &str, body: &[u8]) -> Resp {
    let resp = put_manifest(r, name, reference, media_type, body).await;
    resp.expect(201);
    resp.location();
    let want = if reference.starts_with("sha512:") {
        sha512(body)
    } else {
        sha256(body)
    };
    assert_eq!(resp.hv("docker-content-digest"), want, "{}", resp.show());
    resp
}

/// Pushes a fresh image under `tag` (by digest when None); returns (digest, bytes).
async fn push_image(r: &Reg, name: &str, tag: Option<&str>) -> (String, Vec<u8>) {
    let bytes = serde_json::to_vec(&image_json(r, name).await).unwrap();
    let d = sha256(&bytes);
    push_manifest(r, name, tag.unwrap_or(&d), OCI_MANIFEST, &bytes).await;
    (d, bytes)
}

/// GET and HEAD of a manifest: 200, exact bytes, Content-Type, Content-Length, digest.
async fn check_manifest(r: &Reg, name: &str, reference: &str, digest: &str, media_type: &str, bytes: &[u8]) {
    let path = format!("/v2/{name}/manifests/{reference}");
    for method in [Method::GET, Method::HEAD] {
        let is_get = method == Method::GET;
        let resp = r.send(method, &path, &[("Accept", ACCEPT_ALL)], None).await;
        resp.expect(200);
        assert_eq!(base_type(&resp.hv("content-type")), media_type, "{}", resp.show());
        assert_eq!(resp.hv("docker-content-digest"), digest, "{}", resp.show());
        assert_eq!(resp.hv("content-length"), bytes.len().to_string(), "{}", resp.show());
        if is_get {
            assert!(resp.body == bytes, "{}: stored bytes differ", resp.what);
        } else {
            assert!(resp.body.is_empty(), "{}", resp.show());
        }
    }
}

/// The `tags` (or other string list) of a listing; null counts as empty.
fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Follows `Link: rel="next"` from `first`; returns every page's `key` list
/// in order and the number of pages.
async fn walk(r: &Reg, first: &str, key: &str) -> (Vec<String>, usize) {
    let mut all = Vec::new();
    let mut next = Some(first.to_owned());
    let mut pages = 0;
    while let Some(p) = next {
        let resp = r.get(&p).await;
        resp.expect(200);
        all.extend(strings(&resp.json(), key));
        next = resp.next_link();
        pages += 1;
        assert!(pages < 50, "runaway pagination at {p}");
    }
    (all, pages)
}

// ---------------------------------------------------------------------------
// Ping, challenge, token endpoint
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn ping_and_auth_challenge() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let r = admin.get("/v2/").await;
        r.expect(200);
        assert_eq!(r.hv("docker-distribution-api-version"), "registry/2.0", "{}", r.show());
        Reg::new(&s, Auth::Basic(s.token.clone())).get("/v2/").await.expect(200);

        let host = s.base.trim_start_matches("http://").to_owned();
        let realm = format!("realm=\"{}/token\"", s.base);
        let service = format!("service=\"{host}\"");
        let anon = Reg::new(&s, Auth::Anon);
        let challenge = |r: &Resp| {
            let c = r.hv("www-authenticate");
            assert!(c.starts_with("Bearer "), "{}", r.show());
            assert!(c.contains(&realm) && c.contains(&service), "{}", r.show());
            c
        };
        let r = anon.get("/v2/").await;
        r.expect_err(&[401], &["UNAUTHORIZED"]);
        challenge(&r);

        let r = anon.get(&format!("/v2/{name}/manifests/latest")).await;
        r.expect_err(&[401], &["UNAUTHORIZED"]);
        let c = challenge(&r);
        assert!(c.contains(&format!("scope=\"repository:{name}:pull\"")), "{}", r.show());

        let r = anon.head(&format!("/v2/{name}/blobs/{}", sha256(b"x"))).await;
        r.expect_err(&[401], &["UNAUTHORIZED"]);
        challenge(&r);

        let r = anon.post_empty(&format!("/v2/{name}/blobs/uploads/")).await;
        r.expect_err(&[401], &["UNAUTHORIZED"]);
        let c = challenge(&r);
        assert!(
            c.contains(&format!("scope=\"repository:{name}:pull,push\""))
                || c.contains(&format!("scope=\"repository:{name}:push,pull\"")),
            "{}",
            r.show()
        );

        for bad in [Auth::Bearer("not-a-token".into()), Auth::Basic("not-a-token".into())] {
            Reg::new(&s, bad)
                .get("/v2/")
                .await
                .expect_err(&[401], &["UNAUTHORIZED"]);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn token_endpoint_scopes_to_one_repository() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let (name, other) = (format!("{o}/app"), format!("{o}/other"));
        let admin = Reg::admin(&s);
        let other_digest = push_blob(&admin, &other, &random_bytes(64)).await;
        let host = s.base.trim_start_matches("http://").to_owned();
        let basic = Reg::new(&s, Auth::Basic(s.token.clone()));
        let token_path = |scope: &str| {
            format!(
                "/token?service={}&scope={}",
                enc(&host),
                enc(&format!("repository:{name}:{scope}"))
            )
        };

        let r = basic.get(&token_path("pull,push")).await;
        r.expect(200);
        let body = r.json();
        let token = body["token"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", r.show()))
            .to_owned();
        assert!(!token.is_empty(), "{}", r.show());
        assert!(
            body["access_token"].as_str().is_some_and(|t| !t.is_empty()),
            "{}",
            r.show()
        );
        assert!(body["expires_in"].as_i64().is_some_and(|e| e > 0), "{}", r.show());
        assert!(
            body["issued_at"].as_str().is_some_and(|t| !t.is_empty()),
            "{}",
            r.show()
        );

        let scoped = Reg::new(&s, Auth::Bearer(token));
        let data = random_bytes(100);
        let d = push_blob(&scoped, &name, &data).await;
        check_blob(&scoped, &name, &d, &data).await;
        scoped
            .get(&format!("/v2/{other}/blobs/{other_digest}"))
            .await
            .expect_err(&[401, 403, 404], &["UNAUTHORIZED", "DENIED", "NAME_UNKNOWN"]);

        // A pull-only token reads but cannot write.
        let r = basic.get(&token_path("pull")).await;
        r.expect(200);
        let pull_only = Reg::new(&s, Auth::Bearer(r.json()["token"].as_str().unwrap().to_owned()));
        check_blob(&pull_only, &name, &d, &data).await;
        pull_only
            .post_empty(&format!("/v2/{name}/blobs/uploads/"))
            .await
            .expect_err(&[401, 403], &["UNAUTHORIZED", "DENIED"]);

        // No credentials, no token.
        Reg::new(&s, Auth::Anon).get(&token_path("pull")).await.expect(401);
    }
}

/// A valid registry token that lacks an action is re-challenged, as
/// distribution does: 401 `UNAUTHORIZED` with `error="insufficient_scope"`
/// and the scope the request needs, named as the client named the
/// repository; the token that scope gets then works. Uploads need
/// `pull,push` whatever the method (status, chunks, cancel), deletes
/// `delete`; `*` grants every action the caller holds; `registry:catalog:*`
/// is granted to any caller and lists what it may see.
#[tokio::test(flavor = "multi_thread")]
async fn registry_tokens_are_rechallenged_for_what_they_lack() {
    for s in common::registry_servers().await {
        let b = s.backend;
        org(&s, "acme").await;
        let name = "acme/app";
        let admin = Reg::admin(&s);
        let (digest, _) = push_image(&admin, name, Some("v1")).await;
        let host = s.base.trim_start_matches("http://").to_owned();
        let basic = Reg::new(&s, Auth::Basic(s.token.clone()));
        let server = &s;
        let token_for = |scope: String| {
            let basic = &basic;
            let host = host.clone();
            async move {
                let r = basic
                    .get(&format!("/token?service={}&scope={}", enc(&host), enc(&scope)))
                    .await;
                r.expect(200);
                Reg::new(
                    server,
                    Auth::Bearer(r.json()["token"].as_str().expect("a token").to_owned()),
                )
            }
        };
        // The scope a 401 names, with the insufficient_scope marker.
        let rechallenged = |r: &Resp, want: &str| {
            r.expect_err(&[401], &["UNAUTHORIZED"]);
            let c = r.hv("www-authenticate");
            assert!(c.contains("error=\"insufficient_scope\""), "[{b}] {}", r.show());
            assert!(
                c.contains(&format!("scope=\"{want}\"")),
                "[{b}] want {want}: {}",
                r.show()
            );
            want.to_owned()
        };

        let pull_push = token_for(format!("repository:{name}:pull,push")).await;
        let r = pull_push.delete(&format!("/v2/{name}/manifests/v1")).await;
        let scope = rechallenged(&r, &format!("repository:{name}:delete"));
        let deleter = token_for(scope).await;
        deleter.delete(&format!("/v2/{name}/manifests/v1")).await.expect(202);

        // Uploads: a pull-only token is asked for pull,push at every step.
        let pull_only = token_for(format!("repository:{name}:pull")).await;
        let r = pull_only.post_empty(&format!("/v2/{name}/blobs/uploads/")).await;
        rechallenged(&r, &format!("repository:{name}:pull,push"));
        let loc = start_upload(&admin, name, "").await;
        let r = pull_only.get(&loc).await;
        rechallenged(&r, &format!("repository:{name}:pull,push"));
        let r = pull_only.delete(&loc).await;
        let scope = rechallenged(&r, &format!("repository:{name}:pull,push"));
        let pusher = token_for(scope).await;
        pusher.get(&loc).await.expect(204);
        pusher.delete(&loc).await.expect(204);

        // `*`: everything the caller holds, delete included.
        let all = token_for(format!("repository:{name}:*")).await;
        all.get(&format!("/v2/{name}/manifests/{digest}")).await.expect(200);
        all.delete(&format!("/v2/{name}/manifests/{digest}")).await.expect(202);

        // The catalog needs its own scope, which any caller gets.
        let r = pull_only.get("/v2/_catalog").await;
        let scope = rechallenged(&r, "registry:catalog:*");
        let lister = token_for(scope).await;
        let r = lister.get("/v2/_catalog").await;
        r.expect(200);
        assert!(
            strings(&r.json(), "repositories").iter().any(|n| n.ends_with("/app")),
            "[{b}] {}",
            r.show()
        );

        // A mount asks for pull on its source too, and the token for both
        // scopes mounts (201).
        let blob = random_bytes(48);
        let d = push_blob(&admin, "acme/source", &blob).await;
        let mount = format!("/v2/acme/copy/blobs/uploads/?mount={d}&from=acme/source");
        let r = Reg::new(&s, Auth::Anon).post_empty(&mount).await;
        r.expect_err(&[401], &["UNAUTHORIZED"]);
        let want = "repository:acme/copy:pull,push repository:acme/source:pull";
        assert!(
            r.hv("www-authenticate").contains(&format!("scope=\"{want}\"")),
            "[{b}] {}",
            r.show()
        );
        // A token for the target alone, from a caller who may pull the
        // source, is re-challenged for both.
        let target_only = token_for("repository:acme/copy:pull,push".into()).await;
        rechallenged(&target_only.post_empty(&mount).await, want);
        let both = {
            let r = basic
                .get(&format!(
                    "/token?service={}&scope={}&scope={}",
                    enc(&host),
                    enc("repository:acme/copy:pull,push"),
                    enc("repository:acme/source:pull")
                ))
                .await;
            r.expect(200);
            Reg::new(&s, Auth::Bearer(r.json()["token"].as_str().expect("token").to_owned()))
        };
        both.post_empty(&mount).await.expect(201);

        // A reference that cannot be a tag names no manifest.
        for r in [
            admin.get(&format!("/v2/{name}/manifests/.INVALID_MANIFEST_NAME")).await,
            admin
                .head(&format!("/v2/{name}/manifests/.INVALID_MANIFEST_NAME"))
                .await,
        ] {
            r.expect_err(&[404], &["MANIFEST_UNKNOWN"]);
        }
        // A Content-Type that contradicts the manifest's mediaType is refused.
        let body = serde_json::to_vec(&image_json(&admin, name).await).unwrap();
        put_manifest(&admin, name, "v2", "application/vnd.oci.image.index.v1+json", &body)
            .await
            .expect_err(&[400], &["MANIFEST_INVALID"]);
    }
}

// ---------------------------------------------------------------------------
// Blobs
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn blob_post_then_put_and_single_post() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);

        let data = random_bytes(1000);
        let d = sha256(&data);
        let loc = start_upload(&admin, &name, "").await;
        let r = admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={d}")),
                &[OCTET],
                Some(data.clone()),
            )
            .await;
        r.expect(201);
        assert_eq!(r.hv("docker-content-digest"), d, "{}", r.show());
        let blob_loc = r.location();
        let g = admin.get(&blob_loc).await;
        g.expect(200);
        assert!(g.body == data, "{}", g.what);
        check_blob(&admin, &name, &d, &data).await;

        // Single POST, and pushing the same content again.
        let data = random_bytes(777);
        let d = push_blob(&admin, &name, &data).await;
        check_blob(&admin, &name, &d, &data).await;
        push_blob(&admin, &name, &data).await;

        // Bodies past the REST API's 1 MiB limit: 3 MiB in one POST, 3 MiB by PUT.
        let big = random_bytes(3 << 20);
        let d = push_blob(&admin, &name, &big).await;
        check_blob(&admin, &name, &d, &big).await;
        let big = random_bytes(3 << 20);
        let d = sha256(&big);
        let loc = start_upload(&admin, &name, "").await;
        let r = admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={}", enc(&d))),
                &[OCTET],
                Some(big.clone()),
            )
            .await;
        r.expect(201);
        check_blob(&admin, &name, &d, &big).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_digest_errors() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let data = random_bytes(500);
        push_blob(&admin, &name, &random_bytes(10)).await; // the repository exists

        // Content that does not hash to the digest: single POST, POST+PUT.
        let wrong = sha256(b"something else");
        let path = format!("/v2/{name}/blobs/uploads/?digest={}", enc(&wrong));
        let r = admin.send(Method::POST, &path, &[OCTET], Some(data.clone())).await;
        r.expect_err(&[400], &["DIGEST_INVALID"]);
        let loc = start_upload(&admin, &name, "").await;
        admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={wrong}")),
                &[OCTET],
                Some(data.clone()),
            )
            .await
            .expect_err(&[400], &["DIGEST_INVALID"]);
        admin.head(&format!("/v2/{name}/blobs/{wrong}")).await.expect(404);
        admin
            .head(&format!("/v2/{name}/blobs/{}", sha256(&data)))
            .await
            .expect(404);

        // Malformed digests and unsupported algorithms: 400, never a 5xx.
        let upper = format!("sha256:{}", hex::encode(&Sha256::digest(&data)[..]).to_uppercase());
        let short512 = format!("sha512:{}", hex::encode(&Sha256::digest(&data)[..]));
        let bad = [
            "sha256:baddigeststring",
            upper.as_str(),
            short512.as_str(),
            "md5:d41d8cd98f00b204e9800998ecf8427e",
            "nocolon",
            "sha256:",
        ];
        for b in bad {
            let path = format!("/v2/{name}/blobs/uploads/?digest={}", enc(b));
            admin
                .send(Method::POST, &path, &[OCTET], Some(data.clone()))
                .await
                .expect_err(&[400], &["DIGEST_INVALID", "UNSUPPORTED"]);
            let blob = format!("/v2/{name}/blobs/{b}");
            admin
                .get(&blob)
                .await
                .expect_err(&[400], &["DIGEST_INVALID", "UNSUPPORTED"]);
            admin.head(&blob).await.expect(400);
            admin
                .delete(&blob)
                .await
                .expect_err(&[400], &["DIGEST_INVALID", "UNSUPPORTED"]);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_sha512() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);

        let data = random_bytes(700);
        let d = sha512(&data);
        push_blob_as(&admin, &name, &data, &d).await;
        check_blob(&admin, &name, &d, &data).await;

        // POST+PUT announcing the algorithm.
        let data = random_bytes(900);
        let d = sha512(&data);
        let loc = start_upload(&admin, &name, "?digest-algorithm=sha512").await;
        let r = admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={}", enc(&d))),
                &[OCTET],
                Some(data.clone()),
            )
            .await;
        r.expect(201);
        assert_eq!(r.hv("docker-content-digest"), d, "{}", r.show());
        check_blob(&admin, &name, &d, &data).await;

        // Chunked, closing with the last chunk.
        let data = random_bytes(1500);
        let d = sha512(&data);
        let loc = start_upload(&admin, &name, "").await;
        let loc = patch_ok(&admin, &loc, &data[..1000], 0).await;
        let r = admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={d}")),
                &[OCTET, ("Content-Range", "1000-1499")],
                Some(data[1000..].to_vec()),
            )
            .await;
        r.expect(201);
        check_blob(&admin, &name, &d, &data).await;

        // A sha512 digest of other content.
        let path = format!("/v2/{name}/blobs/uploads/?digest={}", sha512(b"other"));
        admin
            .send(Method::POST, &path, &[OCTET], Some(random_bytes(10)))
            .await
            .expect_err(&[400], &["DIGEST_INVALID"]);

        admin.delete(&format!("/v2/{name}/blobs/{d}")).await.expect(202);
        admin
            .get(&format!("/v2/{name}/blobs/{d}"))
            .await
            .expect_err(&[404], &["BLOB_UNKNOWN"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_chunked_upload() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);

        // Two PATCHes, the last chunk in the closing PUT; status checked between.
        let data = random_bytes(3000);
        let d = sha256(&data);
        let mut loc = start_upload(&admin, &name, "").await;
        admin.get(&loc).await.expect(204);
        for (a, b) in [(0, 1000), (1000, 2000)] {
            loc = patch_ok(&admin, &loc, &data[a..b], a).await;
            let st = admin.get(&loc).await;
            st.expect(204);
            assert_eq!(st.hv("range"), format!("0-{}", b - 1), "{}", st.show());
            assert!(st.h("docker-upload-uuid").is_some(), "{}", st.show());
            loc = st.location();
        }
        let r = admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={}", enc(&d))),
                &[OCTET, ("Content-Range", "2000-2999")],
                Some(data[2000..].to_vec()),
            )
            .await;
        r.expect(201);
        assert_eq!(r.hv("docker-content-digest"), d, "{}", r.show());
        r.location();
        check_blob(&admin, &name, &d, &data).await;
        // The session is closed.
        admin.get(&loc).await.expect_err(&[404], &["BLOB_UPLOAD_UNKNOWN"]);

        // Every chunk by PATCH, then a PUT with no body; chunks past 1 MiB.
        let data = random_bytes(5 << 20);
        let d = sha256(&data);
        let half = data.len() / 2;
        let loc = start_upload(&admin, &name, "").await;
        let loc = patch_ok(&admin, &loc, &data[..half], 0).await;
        let loc = patch_ok(&admin, &loc, &data[half..], half).await;
        upload_status(&admin, &loc, data.len() - 1).await;
        let r = admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={d}")),
                &[OCTET],
                Some(Vec::new()),
            )
            .await;
        r.expect(201);
        check_blob(&admin, &name, &d, &data).await;

        // A wrong digest on close.
        let data = random_bytes(400);
        let loc = start_upload(&admin, &name, "").await;
        let loc = patch_ok(&admin, &loc, &data, 0).await;
        admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={}", sha256(b"nope"))),
                &[OCTET],
                Some(Vec::new()),
            )
            .await
            .expect_err(&[400], &["DIGEST_INVALID"]);
        admin
            .head(&format!("/v2/{name}/blobs/{}", sha256(&data)))
            .await
            .expect(404);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_chunks_out_of_order() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let data = random_bytes(3000);
        let d = sha256(&data);
        let loc = start_upload(&admin, &name, "").await;

        // A first chunk that does not start at 0; the session survives.
        patch_chunk(&admin, &loc, &data[1000..2000], 1000).await.expect(416);
        admin.get(&loc).await.expect(204);
        let loc = patch_ok(&admin, &loc, &data[..1000], 0).await;

        // Rewinding, overlapping and skipping ahead are all refused.
        patch_chunk(&admin, &loc, &data[..1000], 0).await.expect(416);
        patch_chunk(&admin, &loc, &data[500..1500], 500).await.expect(416);
        patch_chunk(&admin, &loc, &data[2000..], 2000).await.expect(416);
        let loc = upload_status(&admin, &loc, 999).await;
        let loc = patch_ok(&admin, &loc, &data[1000..2000], 1000).await;

        // The final chunk out of order in the closing PUT.
        let put = with_query(&loc, &format!("digest={d}"));
        admin
            .send(
                Method::PUT,
                &put,
                &[OCTET, ("Content-Range", "2500-2999")],
                Some(data[2500..].to_vec()),
            )
            .await
            .expect(416);
        let loc = upload_status(&admin, &loc, 1999).await;
        let put = with_query(&loc, &format!("digest={d}"));
        admin
            .send(
                Method::PUT,
                &put,
                &[OCTET, ("Content-Range", "2000-2999")],
                Some(data[2000..].to_vec()),
            )
            .await
            .expect(201);
        check_blob(&admin, &name, &d, &data).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_streamed_patch() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let data = random_bytes(5000);
        let d = sha256(&data);
        let loc = start_upload(&admin, &name, "").await;
        // No Content-Range: the body is the next chunk.
        let r = admin.send(Method::PATCH, &loc, &[OCTET], Some(data.clone())).await;
        r.expect(202);
        assert_eq!(r.hv("range"), "0-4999", "{}", r.show());
        let loc = r.location();
        let r = admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={d}")),
                &[OCTET],
                Some(Vec::new()),
            )
            .await;
        r.expect(201);
        r.location();
        check_blob(&admin, &name, &d, &data).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_upload_cancel_and_unknown_sessions() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let (name, other) = (format!("{o}/app"), format!("{o}/other"));
        let admin = Reg::admin(&s);
        push_blob(&admin, &other, &random_bytes(10)).await;

        let loc = start_upload(&admin, &name, "").await;
        let loc = patch_ok(&admin, &loc, &random_bytes(100), 0).await;
        admin.delete(&loc).await.expect(204);
        admin.get(&loc).await.expect_err(&[404], &["BLOB_UPLOAD_UNKNOWN"]);
        patch_chunk(&admin, &loc, &random_bytes(10), 100)
            .await
            .expect_err(&[404], &["BLOB_UPLOAD_UNKNOWN"]);
        admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={}", sha256(b""))),
                &[OCTET],
                Some(Vec::new()),
            )
            .await
            .expect_err(&[404], &["BLOB_UPLOAD_UNKNOWN"]);
        admin.delete(&loc).await.expect_err(&[404], &["BLOB_UPLOAD_UNKNOWN"]);

        // A session nobody opened.
        let fake = format!("/v2/{name}/blobs/uploads/{}", random_hex(16));
        admin
            .get(&fake)
            .await
            .expect_err(&[400, 404], &["BLOB_UPLOAD_UNKNOWN", "BLOB_UPLOAD_INVALID"]);

        // A session belongs to its repository.
        let loc = start_upload(&admin, &name, "").await;
        let moved = loc.replacen(&format!("/v2/{name}/"), &format!("/v2/{other}/"), 1);
        if moved != loc {
            admin.get(&moved).await.expect_err(&[404], &["BLOB_UPLOAD_UNKNOWN"]);
        }
        admin.get(&loc).await.expect(204);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_range_requests() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let data = random_bytes(2048);
        let d = push_blob(&admin, &name, &data).await;
        let path = format!("/v2/{name}/blobs/{d}");
        for (range, a, b) in [
            ("bytes=500-1499", 500, 1500),
            ("bytes=500-", 500, 2048),
            ("bytes=-500", 1548, 2048),
            ("bytes=2000-5000", 2000, 2048),
            ("bytes=0-0", 0, 1),
        ] {
            let r = admin.send(Method::GET, &path, &[("Range", range)], None).await;
            r.expect(206);
            assert!(r.body == data[a..b], "{}: wrong bytes for {range}", r.what);
            assert_eq!(r.hv("content-length"), (b - a).to_string(), "{}", r.show());
            let cr = r.hv("content-range");
            assert!(
                cr == format!("bytes {a}-{}/2048", b - 1) || cr == format!("bytes {a}-{}/*", b - 1),
                "{range}: {}",
                r.show()
            );
        }
        for range in ["bytes=500-0", "bytes=5000-10000", "bytes=2048-"] {
            admin
                .send(Method::GET, &path, &[("Range", range)], None)
                .await
                .expect(416);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_missing_delete_and_empty() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let name = format!("{o}/app");
        let admin = Reg::admin(&s);
        let unknown = sha256(&random_bytes(32));
        let path = format!("/v2/{name}/blobs/{unknown}");
        push_blob(&admin, &name, &random_bytes(10)).await;
        admin.head(&path).await.expect(404);
        admin.get(&path).await.expect_err(&[404], &["BLOB_UNKNOWN"]);
        admin.delete(&path).await.expect_err(&[404], &["BLOB_UNKNOWN"]);
        admin
            .get(&format!("/v2/{o}/never-pushed/blobs/{unknown}"))
            .await
            .expect_err(&[404], &["NAME_UNKNOWN", "BLOB_UNKNOWN"]);

        let data = random_bytes(300);
        let d = push_blob(&admin, &name, &data).await;
        let path = format!("/v2/{name}/blobs/{d}");
        admin.delete(&path).await.expect(202);
        admin.head(&path).await.expect(404);
        admin.get(&path).await.expect_err(&[404], &["BLOB_UNKNOWN"]);
        admin.delete(&path).await.expect_err(&[404], &["BLOB_UNKNOWN"]);

        // The empty blob and the empty JSON object, by single POST and POST+PUT.
        for data in [Vec::new(), b"{}".to_vec()] {
            let d = push_blob(&admin, &name, &data).await;
            check_blob(&admin, &name, &d, &data).await;
            admin.delete(&format!("/v2/{name}/blobs/{d}")).await.expect(202);
            let loc = start_upload(&admin, &name, "").await;
            admin
                .send(
                    Method::PUT,
                    &with_query(&loc, &format!("digest={d}")),
                    &[OCTET],
                    Some(data.clone()),
                )
                .await
                .expect(201);
            check_blob(&admin, &name, &d, &data).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blob_cross_repository_mount() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let (src, dst, third) = (format!("{o}/src"), format!("{o}/dst"), format!("{o}/team/third"));
        let admin = Reg::admin(&s);
        let data = random_bytes(600);
        let d = push_blob(&admin, &src, &data).await;

        let mount = |to: &str, digest: &str, from: Option<&str>| {
            let mut p = format!("/v2/{to}/blobs/uploads/?mount={}", enc(digest));
            if let Some(f) = from {
                p.push_str(&format!("&from={}", enc(f)));
            }
            p
        };
        let r = admin.post_empty(&mount(&dst, &d, Some(src.as_str()))).await;
        r.expect(201);
        r.location();
        assert_eq!(r.hv("docker-content-digest"), d, "{}", r.show());
        check_blob(&admin, &dst, &d, &data).await;

        // `from` lacks the blob: a fresh upload session to finish normally.
        let data2 = random_bytes(500);
        let d2 = sha256(&data2);
        let r = admin.post_empty(&mount(&dst, &d2, Some(src.as_str()))).await;
        r.expect(202);
        let loc = r.location();
        assert!(r.h("docker-upload-uuid").is_some(), "{}", r.show());
        admin
            .send(
                Method::PUT,
                &with_query(&loc, &format!("digest={d2}")),
                &[OCTET],
                Some(data2.clone()),
            )
            .await
            .expect(201);
        check_blob(&admin, &dst, &d2, &data2).await;

        // `from` that does not exist; no `from` at all (mounting is optional then).
        let missing = format!("{o}/no-such-repo");
        admin
            .post_empty(&mount(&third, &d2, Some(missing.as_str())))
            .await
            .expect_any(&[201, 202]);
        let r = admin.post_empty(&mount(&third, &d, None)).await;
        r.expect_any(&[201, 202]);
        if r.status == 202 {
            let loc = r.location();
            admin
                .send(
                    Method::PUT,
                    &with_query(&loc, &format!("digest={d}")),
                    &[OCTET],
                    Some(data.clone()),
                )
                .await
                .expect(201);
        }
        check_blob(&admin, &third, &d, &data).await;

        // Blob deletes are per repository.
        admin.delete(&format!("/v2/{dst}/blobs/{d}")).await.expect(202);
        admin.head(&format!("/v2/{dst}/blobs/{d}")).await.expect(404);
        check_blob(&admin, &src, &d, &data).await;
        admin.delete(&format!("/v2/{src}/blobs/{d}")).await.expect(202);
        admin.head(&format!("/v2/{src}/blobs/{d}")).await.expect(404);
    }
}

// ---------------------------------------------------------------------------
// Manifests
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn manifest_push_and_pull() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        // Pretty-printed with a trailing newline: stored and served byte for byte.
        let mut m = serde_json::to_vec_pretty(&image_json(&admin, &name).await).unwrap();
        m.extend_from_slice(b"\n");
        let d = sha256(&m);
        let r = push_manifest(&admin, &name, "v1", OCI_MANIFEST, &m).await;
        let g = admin
            .send(Method::GET, &r.location(), &[("Accept", ACCEPT_ALL)], None)
            .await;
        g.expect(200);
        assert!(g.body == m, "{}", g.what);
        check_manifest(&admin, &name, "v1", &d, OCI_MANIFEST, &m).await;
        check_manifest(&admin, &name, &d, &d, OCI_MANIFEST, &m).await;
        push_manifest(&admin, &name, &d, OCI_MANIFEST, &m).await;

        // A tag moves; the old manifest stays by digest.
        let m2 = serde_json::to_vec(&image_json(&admin, &name).await).unwrap();
        let d2 = sha256(&m2);
        push_manifest(&admin, &name, "v1", OCI_MANIFEST, &m2).await;
        check_manifest(&admin, &name, "v1", &d2, OCI_MANIFEST, &m2).await;
        check_manifest(&admin, &name, &d, &d, OCI_MANIFEST, &m).await;

        // Tags of the full grammar.
        let long = format!("_{}", "a".repeat(127));
        for tag in ["UPPER_lower.1-2", "_x", long.as_str()] {
            push_manifest(&admin, &name, tag, OCI_MANIFEST, &m).await;
            check_manifest(&admin, &name, tag, &d, OCI_MANIFEST, &m).await;
        }
    }
}

/// Pushes `m` under `reference` as `mt`, checks it reads back; returns its descriptor.
async fn push_check(r: &Reg, name: &str, m: Value, reference: &str, mt: &str) -> Value {
    let bytes = serde_json::to_vec(&m).unwrap();
    let d = sha256(&bytes);
    push_manifest(r, name, reference, mt, &bytes).await;
    check_manifest(r, name, reference, &d, mt, &bytes).await;
    json!({ "mediaType": mt, "digest": d, "size": bytes.len() })
}

#[tokio::test(flavor = "multi_thread")]
async fn manifest_media_types() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        // Docker schema 2 image and manifest list.
        let config = serde_json::to_vec(&json!({"architecture": "amd64", "os": "linux", "n": random_hex(4)})).unwrap();
        let layer = random_bytes(128);
        push_blob(&admin, &name, &config).await;
        push_blob(&admin, &name, &layer).await;
        let docker = json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST,
            "config": desc(DOCKER_CONFIG, &config),
            "layers": [desc(DOCKER_LAYER, &layer)],
        });
        let mut dd = push_check(&admin, &name, docker, "docker", DOCKER_MANIFEST).await;
        dd["platform"] = json!({"architecture": "amd64", "os": "linux"});
        let list = json!({ "schemaVersion": 2, "mediaType": DOCKER_LIST, "manifests": [dd] });
        push_check(&admin, &name, list, "docker-list", DOCKER_LIST).await;

        // OCI index over two images, an index of indexes, an empty index.
        let mut a = push_check(&admin, &name, image_json(&admin, &name).await, "amd64", OCI_MANIFEST).await;
        let mut b = push_check(&admin, &name, image_json(&admin, &name).await, "arm64", OCI_MANIFEST).await;
        a["platform"] = json!({"architecture": "amd64", "os": "linux"});
        b["platform"] = json!({"architecture": "arm64", "os": "linux"});
        let index = json!({ "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [a, b] });
        let i = push_check(&admin, &name, index, "index", OCI_INDEX).await;
        let nested = json!({ "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [i] });
        push_check(&admin, &name, nested, "nested", OCI_INDEX).await;
        let empty = json!({ "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [] });
        push_check(&admin, &name, empty, "empty", OCI_INDEX).await;

        // No mediaType field: the Content-Type names it.
        let mut m = image_json(&admin, &name).await;
        m.as_object_mut().unwrap().remove("mediaType");
        push_check(&admin, &name, m, "no-media-type", OCI_MANIFEST).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn manifest_artifacts_and_unusual_shapes() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let empty_config = desc(OCI_EMPTY, b"{}");
        push_blob(&admin, &name, b"{}").await;
        let layer = random_bytes(64);
        push_blob(&admin, &name, &layer).await;

        let artifact = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.example.thing.v1",
            "config": empty_config,
            "layers": [desc("application/vnd.example.thing.v1", &layer)],
        });
        let no_layers = json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.example.thing.v1",
            "config": empty_config, "layers": [],
        });
        let mut with_data = image_json(&admin, &name).await;
        let cfg = with_data["config"].clone();
        let cfg_bytes = admin
            .get(&format!("/v2/{name}/blobs/{}", cfg["digest"].as_str().unwrap()))
            .await
            .body;
        with_data["config"]["data"] = json!(base64::engine::general_purpose::STANDARD.encode(&cfg_bytes));
        let mut custom = image_json(&admin, &name).await;
        custom["x-custom-field"] = json!({ "anything": [1, 2, 3] });
        custom["layers"][0]["x-unknown"] = json!("kept");
        // Non-distributable layers are never pushed.
        let foreign = random_bytes(32);
        let mut nondist = image_json(&admin, &name).await;
        nondist["layers"].as_array_mut().unwrap().push(json!({
            "mediaType": OCI_LAYER_ND,
            "digest": sha256(&foreign),
            "size": 123456,
            "urls": [format!("https://store.example.com/blobs/{}", sha256(&foreign))],
        }));

        for (tag, m) in [
            ("artifact", artifact),
            ("no-layers", no_layers),
            ("data-field", with_data),
            ("custom-fields", custom),
            ("non-distributable", nondist),
        ] {
            let bytes = serde_json::to_vec(&m).unwrap();
            push_manifest(&admin, &name, tag, OCI_MANIFEST, &bytes).await;
            check_manifest(&admin, &name, tag, &sha256(&bytes), OCI_MANIFEST, &bytes).await;
        }

        // Near the 4 MiB every registry should take (the conformance suite's
        // large manifest: 390 annotations of 10,000 bytes).
        let mut large = image_json(&admin, &name).await;
        let mut ann = serde_json::Map::new();
        for i in 0..390 {
            ann.insert(format!("large-annotation-{i}"), json!("A".repeat(10_000)));
        }
        large["annotations"] = Value::Object(ann);
        let bytes = serde_json::to_vec(&large).unwrap();
        push_manifest(&admin, &name, "large", OCI_MANIFEST, &bytes).await;
        check_manifest(&admin, &name, "large", &sha256(&bytes), OCI_MANIFEST, &bytes).await;
    }
}

/// Tag parameters (distribution-spec 1.1): a manifest pushed by digest,
/// sha256 or sha512, with `?tag=` parameters is tagged with each, and the
/// reply lists them in `OCI-Tag` and keeps the pushed digest; a tag
/// parameter on a push by tag, an invalid tag, or too many are refused.
#[tokio::test(flavor = "multi_thread")]
async fn manifest_tag_parameters() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        for (algo, digest_of) in [("sha256", sha256 as fn(&[u8]) -> String), ("sha512", sha512)] {
            let m = serde_json::to_vec(&image_json(&admin, &name).await).unwrap();
            let d = digest_of(&m);
            let (one, two) = (format!("{algo}-one"), format!("{algo}-two"));
            let r = put_manifest(
                &admin,
                &name,
                &format!("{d}?tag={one}&tag={two}&tag={one}"),
                OCI_MANIFEST,
                &m,
            )
            .await;
            r.expect(201);
            assert_eq!(r.hv("docker-content-digest"), d, "{}", r.show());
            assert_eq!(r.hv("oci-tag"), format!("{one}, {two}"), "{}", r.show());
            for tag in [&one, &two] {
                check_manifest(&admin, &name, tag, &d, OCI_MANIFEST, &m).await;
            }
        }
        let m = serde_json::to_vec(&image_json(&admin, &name).await).unwrap();
        let d = sha256(&m);
        put_manifest(&admin, &name, "plain?tag=other", OCI_MANIFEST, &m)
            .await
            .expect_err(&[400], &["TAG_INVALID"]);
        put_manifest(&admin, &name, &format!("{d}?tag=.bad"), OCI_MANIFEST, &m)
            .await
            .expect_err(&[400], &["TAG_INVALID"]);
        let many: Vec<String> = (0..33).map(|i| format!("tag={i}")).collect();
        put_manifest(&admin, &name, &format!("{d}?{}", many.join("&")), OCI_MANIFEST, &m)
            .await
            .expect_err(&[414], &["TAG_INVALID"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn manifest_sha512() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let m = serde_json::to_vec(&image_json(&admin, &name).await).unwrap();
        let d = sha512(&m);
        push_manifest(&admin, &name, &d, OCI_MANIFEST, &m).await;
        check_manifest(&admin, &name, &d, &d, OCI_MANIFEST, &m).await;

        let index = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{ "mediaType": OCI_MANIFEST, "digest": d, "size": m.len() }],
        }))
        .unwrap();
        let i = sha512(&index);
        push_manifest(&admin, &name, &i, OCI_INDEX, &index).await;
        check_manifest(&admin, &name, &i, &i, OCI_INDEX, &index).await;

        let mut other = m.clone();
        other.extend_from_slice(b"  ");
        put_manifest(&admin, &name, &d, OCI_MANIFEST, &other)
            .await
            .expect_err(&[400], &["DIGEST_INVALID"]);

        admin.delete(&format!("/v2/{name}/manifests/{i}")).await.expect(202);
        admin.delete(&format!("/v2/{name}/manifests/{d}")).await.expect(202);
        admin
            .get(&format!("/v2/{name}/manifests/{d}"))
            .await
            .expect_err(&[404], &["MANIFEST_UNKNOWN"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn manifest_errors() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let (_, base) = push_image(&admin, &name, Some("base")).await;

        // Unknown references.
        let unknown = sha256(&random_bytes(64));
        for reference in ["missing", unknown.as_str()] {
            let path = format!("/v2/{name}/manifests/{reference}");
            admin.get(&path).await.expect_err(&[404], &["MANIFEST_UNKNOWN"]);
            admin.head(&path).await.expect(404);
        }

        // A descriptor naming a blob never pushed.
        let mut m = image_json(&admin, &name).await;
        m["layers"]
            .as_array_mut()
            .unwrap()
            .push(desc(OCI_LAYER, &random_bytes(50)));
        let bytes = serde_json::to_vec(&m).unwrap();
        put_manifest(&admin, &name, "v1", OCI_MANIFEST, &bytes)
            .await
            .expect_err(&[400], &["MANIFEST_BLOB_UNKNOWN"]);
        admin.head(&format!("/v2/{name}/manifests/v1")).await.expect(404);
        let mut m = image_json(&admin, &name).await;
        m["config"] = desc(OCI_CONFIG, &random_bytes(50));
        put_manifest(&admin, &name, "v1", OCI_MANIFEST, &serde_json::to_vec(&m).unwrap())
            .await
            .expect_err(&[400], &["MANIFEST_BLOB_UNKNOWN"]);

        // An index naming a manifest never pushed.
        let index = json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{ "mediaType": OCI_MANIFEST, "digest": unknown, "size": 100 }],
        });
        put_manifest(&admin, &name, "idx", OCI_INDEX, &serde_json::to_vec(&index).unwrap())
            .await
            .expect_err(&[400], &["MANIFEST_BLOB_UNKNOWN", "MANIFEST_UNKNOWN"]);

        // Not JSON; JSON that is not a manifest.
        put_manifest(&admin, &name, "bad", OCI_MANIFEST, b"{not json")
            .await
            .expect_err(&[400], &["MANIFEST_INVALID"]);
        let no_config = json!({ "schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [] });
        put_manifest(
            &admin,
            &name,
            "bad",
            OCI_MANIFEST,
            &serde_json::to_vec(&no_config).unwrap(),
        )
        .await
        .expect_err(&[400], &["MANIFEST_INVALID"]);

        // By digest, with a body that does not hash to it.
        let mut padded = base.clone();
        padded.extend_from_slice(b"  ");
        let other = serde_json::to_vec(&image_json(&admin, &name).await).unwrap();
        let d_other = sha256(&other);
        put_manifest(&admin, &name, &d_other, OCI_MANIFEST, &padded)
            .await
            .expect_err(&[400], &["DIGEST_INVALID"]);
        admin.head(&format!("/v2/{name}/manifests/{d_other}")).await.expect(404);

        // A malformed digest as the reference.
        put_manifest(&admin, &name, "sha256:baddigeststring", OCI_MANIFEST, &base)
            .await
            .expect_err(&[400], &["DIGEST_INVALID"]);
        admin
            .get(&format!("/v2/{name}/manifests/sha256:baddigeststring"))
            .await
            .expect_err(&[400, 404], &["DIGEST_INVALID", "MANIFEST_UNKNOWN"]);

        // Tags outside the grammar.
        let too_long = "a".repeat(129);
        for tag in [".dot", "-dash", too_long.as_str()] {
            let r = put_manifest(&admin, &name, tag, OCI_MANIFEST, &base).await;
            r.expect_any(&[400, 404]);
        }

        // Over 4 MiB.
        let mut huge = image_json(&admin, &name).await;
        huge["annotations"] = json!({ "big": "B".repeat(4 * 1024 * 1024 + 1024) });
        let r = put_manifest(&admin, &name, "huge", OCI_MANIFEST, &serde_json::to_vec(&huge).unwrap()).await;
        r.expect_any(&[400, 413]);
        if r.status == 400 {
            r.expect_err(&[400], &["SIZE_INVALID", "MANIFEST_INVALID"]);
        }
        admin.head(&format!("/v2/{name}/manifests/huge")).await.expect(404);
    }
}

// ---------------------------------------------------------------------------
// Listings
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn tags_list_and_pagination() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let name = format!("{o}/app");
        let admin = Reg::admin(&s);
        let (_, m) = push_image(&admin, &name, None).await;
        let tags = ["v2", "latest", "v1.1", "alpha", "v1", "beta", "v1.0"];
        for t in tags {
            push_manifest(&admin, &name, t, OCI_MANIFEST, &m).await;
        }
        let mut sorted: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        sorted.sort();
        let list = format!("/v2/{name}/tags/list");

        let r = admin.get(&list).await;
        r.expect(200);
        assert_eq!(r.json()["name"], name.as_str(), "{}", r.show());
        assert_eq!(strings(&r.json(), "tags"), sorted, "{}", r.show());
        assert!(r.h("link").is_none(), "{}", r.show());

        let r = admin.get(&format!("{list}?n=3")).await;
        r.expect(200);
        assert_eq!(strings(&r.json(), "tags"), sorted[..3].to_vec(), "{}", r.show());
        let next = r.next_link().unwrap_or_else(|| panic!("no Link: {}", r.show()));
        assert!(next.contains(&format!("/v2/{name}/tags/list?")), "{next}");
        assert!(
            next.contains("n=3") && next.contains(&format!("last={}", sorted[2])),
            "{next}"
        );
        let (walked, pages) = walk(&admin, &format!("{list}?n=3"), "tags").await;
        assert_eq!(walked, sorted);
        assert_eq!(pages, 3, "7 tags in pages of 3");

        let after = |t: &str| sorted.iter().filter(|x| x.as_str() > t).cloned().collect::<Vec<_>>();
        let r = admin.get(&format!("{list}?last=v1")).await;
        assert_eq!(strings(&r.expect(200).json(), "tags"), after("v1"), "{}", r.show());
        let r = admin.get(&format!("{list}?n=2&last=beta")).await;
        assert_eq!(
            strings(&r.expect(200).json(), "tags"),
            after("beta")[..2].to_vec(),
            "{}",
            r.show()
        );
        let r = admin.get(&format!("{list}?n=0")).await;
        assert!(strings(&r.expect(200).json(), "tags").is_empty(), "{}", r.show());
        assert!(r.h("link").is_none(), "n=0 has no Link: {}", r.show());
        let r = admin.get(&format!("{list}?n=100")).await;
        assert_eq!(strings(&r.expect(200).json(), "tags"), sorted, "{}", r.show());
        assert!(r.h("link").is_none(), "{}", r.show());
        let r = admin.get(&format!("{list}?last=zzz")).await;
        assert!(strings(&r.expect(200).json(), "tags").is_empty(), "{}", r.show());

        // A repository nothing was pushed to.
        let r = admin.get(&format!("/v2/{o}/nothing/tags/list")).await;
        if r.status == 200 {
            assert!(strings(&r.json(), "tags").is_empty(), "{}", r.show());
        } else {
            r.expect_err(&[404], &["NAME_UNKNOWN"]);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn catalog_lists_repositories() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let admin = Reg::admin(&s);
        let mut names: Vec<String> = ["zeta", "alpha", "team/app", "beta"]
            .iter()
            .map(|r| format!("{o}/{r}"))
            .collect();
        for n in &names {
            push_image(&admin, n, Some("v1")).await;
        }
        names.sort();

        let r = admin.get("/v2/_catalog").await;
        r.expect(200);
        let all = strings(&r.json(), "repositories");
        let mut sorted_all = all.clone();
        sorted_all.sort();
        assert_eq!(all, sorted_all, "catalog is sorted: {}", r.show());
        let ours: Vec<String> = all
            .iter()
            .filter(|n| n.starts_with(&format!("{o}/")))
            .cloned()
            .collect();
        assert_eq!(ours, names, "{}", r.show());

        let r = admin.get("/v2/_catalog?n=2").await;
        assert_eq!(
            strings(&r.expect(200).json(), "repositories"),
            all[..2].to_vec(),
            "{}",
            r.show()
        );
        let next = r.next_link().unwrap_or_else(|| panic!("no Link: {}", r.show()));
        assert!(next.contains("/v2/_catalog?") && next.contains("n=2"), "{next}");
        let (walked, _) = walk(&admin, "/v2/_catalog?n=2", "repositories").await;
        assert_eq!(walked, all);
        let r = admin.get(&format!("/v2/_catalog?last={}", enc(&all[0]))).await;
        assert_eq!(
            strings(&r.expect(200).json(), "repositories"),
            all[1..].to_vec(),
            "{}",
            r.show()
        );

        Reg::new(&s, Auth::Anon)
            .get("/v2/_catalog")
            .await
            .expect_err(&[401], &["UNAUTHORIZED"]);
    }
}

// ---------------------------------------------------------------------------
// Deletes
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn delete_tags_and_manifests() {
    for s in common::registry_servers().await {
        let name = format!("{}/app", org(&s, "acme").await);
        let admin = Reg::admin(&s);
        let (d, m) = push_image(&admin, &name, Some("keep")).await;
        push_manifest(&admin, &name, "drop", OCI_MANIFEST, &m).await;
        push_manifest(&admin, &name, "other", OCI_MANIFEST, &m).await;
        let mpath = |r: &str| format!("/v2/{name}/manifests/{r}");

        // By tag: only the tag goes.
        admin.delete(&mpath("drop")).await.expect(202);
        admin
            .get(&mpath("drop"))
            .await
            .expect_err(&[404], &["MANIFEST_UNKNOWN"]);
        check_manifest(&admin, &name, "keep", &d, OCI_MANIFEST, &m).await;
        check_manifest(&admin, &name, &d, &d, OCI_MANIFEST, &m).await;
        let r = admin.get(&format!("/v2/{name}/tags/list")).await;
        assert_eq!(
            strings(&r.expect(200).json(), "tags"),
            vec!["keep", "other"],
            "{}",
            r.show()
        );
        admin
            .delete(&mpath("drop"))
            .await
            .expect_err(&[404], &["MANIFEST_UNKNOWN"]);

        // By digest: the manifest and every tag on it go.
        admin.delete(&mpath(&d)).await.expect(202);
        for r in [d.as_str(), "keep", "other"] {
            admin.get(&mpath(r)).await.expect_err(&[404], &["MANIFEST_UNKNOWN"]);
            admin.head(&mpath(r)).await.expect(404);
        }
        let r = admin.get(&format!("/v2/{name}/tags/list")).await;
        if r.status == 200 {
            assert!(strings(&r.json(), "tags").is_empty(), "{}", r.show());
        } else {
            r.expect_err(&[404], &["NAME_UNKNOWN"]);
        }
        admin.delete(&mpath(&d)).await.expect_err(&[404], &["MANIFEST_UNKNOWN"]);

        // Pushing it again works.
        push_manifest(&admin, &name, "keep", OCI_MANIFEST, &m).await;
        check_manifest(&admin, &name, "keep", &d, OCI_MANIFEST, &m).await;
    }
}

// ---------------------------------------------------------------------------
// Referrers
// ---------------------------------------------------------------------------

/// A referrer: its bytes, media type, expected artifactType, annotations.
type Referrer = (Vec<u8>, &'static str, Option<&'static str>, Value);

/// A referrers response: 200, an OCI index listing exactly `want` of `expected`.
fn check_referrers(r: &Resp, expected: &[Referrer], want: &[usize]) {
    r.expect(200);
    assert_eq!(base_type(&r.hv("content-type")), OCI_INDEX, "{}", r.show());
    let body = r.json();
    assert_eq!(body["schemaVersion"], 2, "{}", r.show());
    assert_eq!(body["mediaType"], OCI_INDEX, "{}", r.show());
    let got = body["manifests"]
        .as_array()
        .unwrap_or_else(|| panic!("manifests: {}", r.show()));
    assert_eq!(got.len(), want.len(), "{}", r.show());
    for &i in want {
        let (bytes, mt, at, ann) = &expected[i];
        let digest = sha256(bytes);
        let e = got
            .iter()
            .find(|e| e["digest"] == digest.as_str())
            .unwrap_or_else(|| panic!("referrer {i} missing: {}", r.show()));
        assert_eq!(e["mediaType"], *mt, "{}", r.show());
        assert_eq!(e["size"], bytes.len(), "{}", r.show());
        match at {
            Some(at) => assert_eq!(e["artifactType"], *at, "{}", r.show()),
            None => assert!(e.get("artifactType").is_none(), "omitted for an index: {}", r.show()),
        }
        for (k, v) in ann.as_object().unwrap() {
            assert_eq!(&e["annotations"][k], v, "{}", r.show());
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn referrers_api() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let (name, other) = (format!("{o}/app"), format!("{o}/other"));
        let admin = Reg::admin(&s);
        const SBOM: &str = "application/vnd.example.sbom.v1";
        const SIG_CONFIG: &str = "application/vnd.example.sig.config.v1+json";
        const BUNDLE: &str = "application/vnd.example.bundle.v1";
        push_blob(&admin, &name, b"{}").await;
        push_blob(&admin, &other, b"{}").await;
        let layer = random_bytes(64);
        push_blob(&admin, &name, &layer).await;
        push_blob(&admin, &other, &layer).await;

        // The subject is built now but pushed after its first referrer.
        let subject = serde_json::to_vec(&image_json(&admin, &name).await).unwrap();
        let sd = sha256(&subject);
        let sdesc = json!({ "mediaType": OCI_MANIFEST, "digest": sd, "size": subject.len() });
        let nonce = random_hex(6);
        // (bytes, media type, expected artifactType, annotations)
        let mut expected: Vec<Referrer> = Vec::new();

        let ann_a = json!({ "org.example.kind": "sbom", "org.example.nonce": nonce });
        let a = json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": SBOM,
            "config": desc(OCI_EMPTY, b"{}"), "layers": [desc(SBOM, &layer)],
            "subject": sdesc, "annotations": ann_a,
        });
        expected.push((serde_json::to_vec(&a).unwrap(), OCI_MANIFEST, Some(SBOM), ann_a));
        let sig_config = random_bytes(40);
        push_blob(&admin, &name, &sig_config).await;
        let ann_b = json!({ "org.example.kind": "signature" });
        let b = json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": desc(SIG_CONFIG, &sig_config), "layers": [desc(OCI_LAYER, &layer)],
            "subject": sdesc, "annotations": ann_b,
        });
        expected.push((serde_json::to_vec(&b).unwrap(), OCI_MANIFEST, Some(SIG_CONFIG), ann_b));
        let ann_c = json!({ "org.example.kind": "bundle" });
        let c = json!({
            "schemaVersion": 2, "mediaType": OCI_INDEX, "artifactType": BUNDLE,
            "manifests": [], "subject": sdesc, "annotations": ann_c,
        });
        expected.push((serde_json::to_vec(&c).unwrap(), OCI_INDEX, Some(BUNDLE), ann_c));
        let ann_d = json!({ "org.example.kind": "plain-index" });
        let d = json!({
            "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [], "subject": sdesc, "annotations": ann_d,
        });
        expected.push((serde_json::to_vec(&d).unwrap(), OCI_INDEX, None, ann_d));

        for (i, (bytes, mt, _, _)) in expected.iter().enumerate() {
            let digest = sha256(bytes);
            let reference = if i == 1 { "signature" } else { digest.as_str() };
            let r = push_manifest(&admin, &name, reference, mt, bytes).await;
            assert_eq!(r.hv("oci-subject"), sd, "{}", r.show());
            if i == 0 {
                let r = push_manifest(&admin, &name, "v1", OCI_MANIFEST, &subject).await;
                assert!(r.h("oci-subject").is_none(), "{}", r.show());
            }
        }
        // The same referrer in another repository is not listed here.
        push_manifest(&admin, &other, &sha256(&expected[0].0), OCI_MANIFEST, &expected[0].0).await;

        let list = format!("/v2/{name}/referrers/{sd}");
        check_referrers(&admin.get(&list).await, &expected, &[0, 1, 2, 3]);

        // Filtering by artifactType.
        let filters: [(&str, Vec<usize>); 4] = [
            (SBOM, vec![0]),
            (SIG_CONFIG, vec![1]),
            (BUNDLE, vec![2]),
            ("application/x-none", Vec::new()),
        ];
        for (at, want) in filters {
            let r = admin.get(&format!("{list}?artifactType={}", enc(at))).await;
            check_referrers(&r, &expected, &want);
            assert!(
                r.hv("oci-filters-applied")
                    .split(',')
                    .any(|f| f.trim() == "artifactType"),
                "{}",
                r.show()
            );
        }

        // A deleted referrer leaves the list.
        admin
            .delete(&format!("/v2/{name}/manifests/{}", sha256(&expected[0].0)))
            .await
            .expect(202);
        check_referrers(&admin.get(&list).await, &expected, &[1, 2, 3]);

        // Nothing refers: an empty index, also in a repository never pushed to.
        let none = sha256(&random_bytes(16));
        let never = format!("{o}/never-pushed");
        for n in [name.as_str(), never.as_str()] {
            let r = admin.get(&format!("/v2/{n}/referrers/{none}")).await;
            check_referrers(&r, &expected, &[]);
        }
        admin
            .get(&format!("/v2/{name}/referrers/sha256:baddigeststring"))
            .await
            .expect_err(&[400], &["DIGEST_INVALID"]);
    }
}

// ---------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn repository_names() {
    for s in common::registry_servers().await {
        let o = org(&s, "acme").await;
        let admin = Reg::admin(&s);

        // Nested paths and every separator of the grammar.
        for r in ["team/sub/app", "a--b", "a__b", "a.b_c-d/e0"] {
            let name = format!("{o}/{r}");
            let (d, m) = push_image(&admin, &name, Some("v1")).await;
            check_manifest(&admin, &name, "v1", &d, OCI_MANIFEST, &m).await;
            let t = admin.get(&format!("/v2/{name}/tags/list")).await;
            assert_eq!(t.expect(200).json()["name"], name.as_str(), "{}", t.show());
        }

        // The organization's name stands for its uid.
        let (d, m) = push_image(&admin, &format!("{o}/named"), Some("v1")).await;
        check_manifest(&admin, "acme/named", "v1", &d, OCI_MANIFEST, &m).await;
        let (d2, m2) = push_image(&admin, "acme/by-name", Some("v1")).await;
        check_manifest(&admin, &format!("{o}/by-name"), "v1", &d2, OCI_MANIFEST, &m2).await;

        // Unknown organizations.
        for unknown in [format!("{}/app", random_hex(20)), "no-such-org/app".to_owned()] {
            admin
                .get(&format!("/v2/{unknown}/manifests/v1"))
                .await
                .expect_err(&[404], &["NAME_UNKNOWN"]);
            admin
                .get(&format!("/v2/{unknown}/tags/list"))
                .await
                .expect_err(&[404], &["NAME_UNKNOWN"]);
            admin
                .post_empty(&format!("/v2/{unknown}/blobs/uploads/"))
                .await
                .expect_err(&[404], &["NAME_UNKNOWN"]);
        }

        // Outside the grammar.
        for bad in ["App", "app-", "-app", "a..b", "app_", "a___b", "team/.x"] {
            let name = format!("{o}/{bad}");
            admin
                .post_empty(&format!("/v2/{name}/blobs/uploads/"))
                .await
                .expect_err(&[400], &["NAME_INVALID"]);
            admin
                .get(&format!("/v2/{name}/manifests/v1"))
                .await
                .expect_err(&[400], &["NAME_INVALID"]);
        }
        admin
            .get("/v2/ACME/app/manifests/v1")
            .await
            .expect_err(&[400, 404], &["NAME_INVALID", "NAME_UNKNOWN"]);
    }
}

// ---------------------------------------------------------------------------
// The REST API's view, and a pull-only identity
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn rest_api_sees_registry_tags() {
    for s in common::registry_servers().await {
        let b = s.backend;
        let o = org(&s, "acme").await;
        let name = format!("{o}/app");
        let admin = Reg::admin(&s);
        let (d, m) = push_image(&admin, &name, Some("v1")).await;
        push_manifest(&admin, &name, "v2", OCI_MANIFEST, &m).await;

        let (status, body) = s
            .get(&format!("/registry/v2/repos?name=app&uidp.descendantsOf={o}"))
            .await;
        assert_eq!(status.as_u16(), 200, "[{b}] list repos: {body}");
        let repo = body["repos"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == "app"))
            .unwrap_or_else(|| panic!("[{b}] repo app missing: {body}"))
            .clone();
        let repo_uid = uid(&repo);

        let tags_path = format!("/registry/v2/tags?uidp.childrenOf={repo_uid}");
        let (status, body) = s.get(&tags_path).await;
        assert_eq!(status.as_u16(), 200, "[{b}] list tags: {body}");
        let tags = body["tags"].as_array().cloned().unwrap_or_default();
        let tag_names: Vec<&str> = tags.iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(tag_names.contains(&"v1") && tag_names.contains(&"v2"), "[{b}] {body}");
        let v1 = tags.iter().find(|t| t["name"] == "v1").unwrap();
        assert_eq!(v1["digest"], d.as_str(), "[{b}] {body}");
        let v1_uid = v1["uid"].as_str().or(v1["id"].as_str()).expect("tag uid").to_owned();

        let (status, body) = s.delete(&format!("/registry/v2/tags/{v1_uid}")).await;
        assert!(status.is_success(), "[{b}] delete tag: {status} {body}");
        admin
            .get(&format!("/v2/{name}/manifests/v1"))
            .await
            .expect_err(&[404], &["MANIFEST_UNKNOWN"]);
        check_manifest(&admin, &name, "v2", &d, OCI_MANIFEST, &m).await;
        let r = admin.get(&format!("/v2/{name}/tags/list")).await;
        assert_eq!(strings(&r.expect(200).json(), "tags"), vec!["v2"], "{}", r.show());

        // And a tag deleted at /v2/ leaves the REST listing.
        admin.delete(&format!("/v2/{name}/manifests/v2")).await.expect(202);
        let (status, body) = s.get(&tags_path).await;
        assert_eq!(status.as_u16(), 200, "[{b}] list tags: {body}");
        assert!(
            !body["tags"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .any(|t| t["name"] == "v2"),
            "[{b}] {body}"
        );
    }
}

/// A root-level identity made in the store (as authz.rs does).
async fn root_identity(s: &TestServer, name: &str) -> String {
    use ward_core::clock::Clock as _;
    let now = s.clock.now_millis();
    let uid = ward_core::uidp::Uidp::new_root().as_str().to_owned();
    let record = ward_store::IdentityRecord {
        uid: uid.clone(),
        parent_uid: None,
        name: name.to_owned(),
        description: String::new(),
        company: String::new(),
        relationship_type: 1,
        relationship: json!({"issuer": "https://people.example.com", "subject": name}).to_string(),
        issuer: "https://people.example.com".into(),
        subject: name.to_owned(),
        last_seen_time: None,
        create_time: now,
        update_time: now,
    };
    s.ward()
        .store
        .create_identity(&record, ward_store::testing::emit())
        .await
        .expect("root identity");
    uid
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_role_reads_only_its_organization() {
    for s in common::registry_servers().await {
        let b = s.backend;
        let (oa, ob) = (org(&s, "pulled").await, org(&s, "hidden").await);
        let (na, nb) = (format!("{oa}/app"), format!("{ob}/app"));
        let admin = Reg::admin(&s);
        let (da, ma) = push_image(&admin, &na, Some("v1")).await;
        let (db, _) = push_image(&admin, &nb, Some("v1")).await;
        let mv: Value = serde_json::from_slice(&ma).unwrap();
        let layer = mv["layers"][0]["digest"].as_str().unwrap().to_owned();

        let who = root_identity(&s, "puller").await;
        let role = ward_core::capability::builtin_role("registry.pull").unwrap().uid();
        let (status, body) = s
            .post(
                &format!("/iam/v2/roleBindings/{oa}"),
                json!({ "identityUid": who, "roleUid": role }),
            )
            .await;
        assert_eq!(status.as_u16(), 200, "[{b}] bind: {body}");
        let puller = Reg::new(&s, Auth::Bearer(s.ward().tokens.mint(&who).expect("mint")));

        puller.get("/v2/").await.expect(200);
        check_manifest(&puller, &na, "v1", &da, OCI_MANIFEST, &ma).await;
        puller.head(&format!("/v2/{na}/blobs/{layer}")).await.expect(200);
        puller.get(&format!("/v2/{na}/tags/list")).await.expect(200);
        puller.get(&format!("/v2/{na}/referrers/{da}")).await.expect(200);

        let denied: &[&str] = &["UNAUTHORIZED", "DENIED"];
        puller
            .post_empty(&format!("/v2/{na}/blobs/uploads/"))
            .await
            .expect_err(&[401, 403], denied);
        put_manifest(&puller, &na, "v2", OCI_MANIFEST, &ma)
            .await
            .expect_err(&[401, 403], denied);
        puller
            .delete(&format!("/v2/{na}/manifests/v1"))
            .await
            .expect_err(&[401, 403], denied);
        puller
            .delete(&format!("/v2/{na}/blobs/{layer}"))
            .await
            .expect_err(&[401, 403], denied);
        check_manifest(&admin, &na, "v1", &da, OCI_MANIFEST, &ma).await;
        admin.head(&format!("/v2/{na}/blobs/{layer}")).await.expect(200);

        // The other organization is out of sight.
        for path in [format!("/v2/{nb}/manifests/v1"), format!("/v2/{nb}/manifests/{db}")] {
            puller
                .get(&path)
                .await
                .expect_err(&[401, 403, 404], &["UNAUTHORIZED", "DENIED", "NAME_UNKNOWN"]);
        }
        let r = puller.get("/v2/_catalog").await;
        let repos = strings(&r.expect(200).json(), "repositories");
        assert_eq!(repos, vec![na.clone()], "{}", r.show());
    }
}
