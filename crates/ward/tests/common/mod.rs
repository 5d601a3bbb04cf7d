//! Shared harness for Ward's integration tests: a real server on port 0, one per
//! storage backend, with an adjustable clock and a small JSON client.
#![allow(dead_code)] // Each test binary uses a different part of the harness.

pub mod browser;
pub mod clients;
pub mod idp;
pub mod log_scan;
pub mod people;
pub mod receiver;
pub mod stubs;

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use ward_core::clock::OffsetClock;
use ward_server::{Running, ServerConfig};
use ward_store::testing::TestDatabase;

pub struct TestServer {
    running: Option<Running>,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// A valid server-admin token.
    pub token: String,
    /// The server's clock; `clock.advance_millis` moves time for the server.
    pub clock: OffsetClock,
    pub backend: &'static str,
    pub config: ServerConfig,
    pub http: reqwest::Client,
    // Dropped last: the database, data directory and blob bucket outlive the server.
    _data_dir: tempfile::TempDir,
    db: Arc<TestDatabase>,
    _s3: Option<Moto>,
}

/// A test whose server logged a credential fails when the server goes.
impl Drop for TestServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            log_scan::check();
        }
    }
}

impl TestServer {
    /// Starts a server on `db` with a fresh data directory.
    pub async fn start(db: TestDatabase) -> Self {
        Self::start_shared(Arc::new(db)).await
    }

    /// Starts a server on `db` with a fresh data directory, after `configure`
    /// adjusts its config (e.g. `cfg.allow_org_creation = true`).
    pub async fn start_with(db: TestDatabase, configure: impl FnOnce(&mut ServerConfig)) -> Self {
        Self::start_shared_with(Arc::new(db), configure).await
    }

    /// Starts a server on a database another server may share (replicas).
    pub async fn start_shared(db: Arc<TestDatabase>) -> Self {
        Self::start_shared_with(db, |_| {}).await
    }

    async fn start_shared_with(db: Arc<TestDatabase>, configure: impl FnOnce(&mut ServerConfig)) -> Self {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), data_dir.path().to_path_buf());
        config.database = Some(db.url.clone());
        configure(&mut config);
        let clock = OffsetClock::default();
        let running = ward_server::start(&config, Arc::new(clock.clone()), std::future::pending())
            .await
            .expect("server starts");
        let base = format!("http://{}", running.addr);
        let token = std::fs::read_to_string(data_dir.path().join("admin.token")).expect("admin token written");
        log_scan::watch(&token);
        Self {
            base,
            token,
            clock,
            backend: db.backend,
            config,
            // Bounded, so a request the server never answers fails the test
            // instead of hanging the run.
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(120))
                .build()
                .expect("http client"),
            running: Some(running),
            _data_dir: data_dir,
            db,
            _s3: None,
        }
    }

    /// Another server on the same database (a replica), with its own clock.
    /// Replicas share the server's secret key (it seals the signing keys).
    pub async fn replica(&self) -> Self {
        self.replica_with(|_| {}).await
    }

    /// [`TestServer::replica`] after `configure` adjusts its config.
    pub async fn replica_with(&self, configure: impl FnOnce(&mut ServerConfig)) -> Self {
        let key = match &self.config.secret_key {
            Some(k) => k.clone(),
            None => std::fs::read_to_string(self.config.data_dir.join("secret.key")).expect("the secret key file"),
        };
        Self::start_shared_with(self.db.clone(), |c| {
            c.secret_key = Some(key.trim().to_owned());
            configure(c);
        })
        .await
    }

    /// Stops gracefully and starts again on the same database and data directory
    /// (on a new port). The admin token is re-read.
    pub async fn restart(&mut self) {
        self.running.take().expect("running").stop().await.expect("clean stop");
        let running = ward_server::start(&self.config, Arc::new(self.clock.clone()), std::future::pending())
            .await
            .expect("restart");
        self.base = format!("http://{}", running.addr);
        self.token = std::fs::read_to_string(self.config.data_dir.join("admin.token")).expect("admin token");
        log_scan::watch(&self.token);
        self.running = Some(running);
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.running.as_ref().expect("running").addr
    }

    /// Where `/metrics` is served, with `--metrics-listen`.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.running.as_ref().expect("running").metrics_addr
    }

    pub fn ward(&self) -> &Arc<ward_server::Ward> {
        &self.running.as_ref().expect("running").ward
    }

    /// Sends a request with the admin token; returns the status and JSON body.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.call_as(&self.token, method, path, body).await
    }

    /// Sends a request with `token` ("" for none).
    pub async fn call_as(&self, token: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if !token.is_empty() {
            req = req.bearer_auth(token);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.expect("body read");
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, json)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PATCH, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, None).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// Creates a group (a root organization when `parent` is None) and returns it;
    /// panics unless the create succeeds.
    pub async fn create_group(&self, parent: Option<&str>, name: &str) -> Value {
        let path = match parent {
            Some(p) => format!("/iam/v2beta1/groups/{p}"),
            None => "/iam/v2beta1/groups".to_owned(),
        };
        let (status, body) = self.post(&path, serde_json::json!({ "name": name })).await;
        assert_eq!(status, StatusCode::OK, "[{}] create {name}: {body}", self.backend);
        body
    }
}

/// One fresh server per backend (SQLite always; PostgreSQL when configured).
pub async fn servers() -> Vec<TestServer> {
    let mut v = Vec::new();
    for db in ward_store::testing::backends().await {
        v.push(TestServer::start(db).await);
    }
    v
}

/// A local S3-compatible server (moto, from the test venv) with one bucket;
/// killed when dropped.
pub struct Moto {
    child: std::process::Child,
    pub url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts moto and creates a bucket; None when moto is not installed
    /// (a failure when `WARD_TEST_REQUIRE_CLIENTS=1`, as in CI).
    pub async fn start() -> Option<Self> {
        let venv = std::env::var("WARD_TEST_VENV")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/ward-venv").to_owned());
        let bin = std::path::Path::new(&venv).join("bin/moto_server");
        // The server signs its requests with the usual AWS_* variables
        // (.ci/run sets dummy ones; moto accepts any).
        let creds = std::env::var_os("AWS_ACCESS_KEY_ID").is_some();
        if !bin.exists() || !creds {
            assert!(
                std::env::var("WARD_TEST_REQUIRE_CLIENTS").as_deref() != Ok("1"),
                "moto_server and AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are required \
                 (WARD_TEST_REQUIRE_CLIENTS=1); {} exists: {}",
                bin.display(),
                bin.exists()
            );
            eprintln!("note: no moto_server or AWS_* credentials; S3 blob-store tests skipped");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start moto_server");
        let moto = Moto {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let http = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(r) = http.put(format!("{}/ward-test", moto.url)).send().await
                && r.status().is_success()
            {
                return Some(moto);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("moto_server did not come up on port {port}");
    }

    /// The `--blob-store` URL of its bucket.
    pub fn blob_store(&self) -> String {
        format!("s3://ward-test?endpoint={}&region=us-east-1", self.url)
    }
}

/// [`servers`], plus a SQLite server whose blobs live in a local S3-compatible
/// bucket (when moto is available): the registry on every storage.
pub async fn registry_servers() -> Vec<TestServer> {
    let mut v = servers().await;
    if let Some(moto) = Moto::start().await {
        let url = moto.blob_store();
        let mut s = TestServer::start_with(ward_store::testing::sqlite(), |c| c.blob_store = Some(url)).await;
        s.backend = "sqlite+s3";
        s._s3 = Some(moto);
        v.push(s);
    }
    v
}

/// The uid string of a group JSON.
pub fn uid(v: &Value) -> String {
    v["uid"].as_str().expect("uid").to_owned()
}

/// Asserts an AIP-193 error body: `code`, ErrorInfo reason, and returns the body.
pub fn assert_error(backend: &str, status: StatusCode, body: &Value, http: u16, code: i64, reason: &str) {
    assert_eq!(status.as_u16(), http, "[{backend}] status; body: {body}");
    assert_eq!(body["code"], code, "[{backend}] code; body: {body}");
    let details = body["details"].as_array().expect("details array");
    let info = details
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo")
        .unwrap_or_else(|| panic!("[{backend}] no ErrorInfo in {body}"));
    assert_eq!(info["reason"], reason, "[{backend}] reason; body: {body}");
    assert_eq!(info["domain"], "iam.chainguard.dev", "[{backend}] domain");
}

/// Percent-encodes a query value.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `s` is `len` lowercase hex digits.
pub fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The BadRequest field violations of an AIP-193 error body, as
/// (field, description).
pub fn field_violations(body: &Value) -> Vec<(String, String)> {
    body["details"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["@type"] == "type.googleapis.com/google.rpc.BadRequest")
        .flat_map(|d| d["fieldViolations"].as_array().cloned().unwrap_or_default())
        .map(|v| {
            (
                v["field"].as_str().unwrap_or_default().to_owned(),
                v["description"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A tonic interceptor adding `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct Bearer(pub String);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let value = format!("Bearer {}", self.0).parse().expect("ascii token");
        req.metadata_mut().insert("authorization", value);
        Ok(req)
    }
}

/// A root-level identity (a registered user, as people are), made in the
/// store: the API creates identities only in groups, and only root-level ones
/// may be bound in any organization. Its uid.
pub async fn root_identity(s: &TestServer, name: &str) -> String {
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
        relationship: serde_json::json!({"issuer": "https://people.example.com", "subject": name}).to_string(),
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

/// Binds the built-in role named `role` to `identity` at `group`, as the
/// server admin; panics unless the binding is created.
pub async fn bind_builtin(s: &TestServer, group: &str, identity: &str, role: &str) {
    let role_uid = ward_core::capability::builtin_role(role)
        .unwrap_or_else(|| panic!("no built-in role {role}"))
        .uid();
    let (status, body) = s
        .post(
            &format!("/iam/v2/roleBindings/{group}"),
            serde_json::json!({ "identityUid": identity, "roleUid": role_uid }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] bind {role}: {body}", s.backend);
}

/// An API token for `identity`, signed by the server.
pub fn mint(s: &TestServer, identity: &str) -> String {
    s.ward().tokens.mint(identity).expect("mint a token")
}

/// A root-level identity named `name` holding the built-in roles `bindings`
/// (`(group, role name)`): its (uid, token).
pub async fn person(s: &TestServer, name: &str, bindings: &[(&str, &str)]) -> (String, String) {
    let identity = root_identity(s, name).await;
    for (group, role) in bindings {
        bind_builtin(s, group, &identity, role).await;
    }
    let token = mint(s, &identity);
    (identity, token)
}

/// The server admin's identity uid (the subject of `TestServer::token`).
pub fn admin_uid(s: &TestServer) -> String {
    s.ward().admin.as_str().to_owned()
}

/// A `totalCount` (an int64: a decimal string in JSON) as a number.
pub fn total_count(page: &Value) -> i64 {
    match &page["totalCount"] {
        Value::String(t) => t.parse().expect("decimal totalCount"),
        t => t.as_i64().unwrap_or_else(|| panic!("no totalCount in {page}")),
    }
}

/// The `id` (uid) of a v1 resource.
pub fn v1_id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}")).to_owned()
}

/// The CGA id of an advisory (v1 or v2).
pub fn cga(v: &Value) -> String {
    v["advisoryId"]
        .as_str()
        .unwrap_or_else(|| panic!("no advisoryId in {v}"))
        .to_owned()
}

/// What one run of the `ward` CLI did.
#[derive(Debug)]
pub struct CliRun {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    /// Its stdout, once it succeeded.
    pub fn ok(&self, what: &str) -> &str {
        assert!(self.status.success(), "`{what}` failed: {self:#?}");
        &self.stdout
    }

    /// Its stdout as JSON, once it succeeded.
    pub fn json(&self, what: &str) -> Value {
        let out = self.ok(what);
        serde_json::from_str(out).unwrap_or_else(|e| panic!("`{what}` printed non-JSON ({e}): {out}"))
    }

    /// Its stderr, once it failed.
    pub fn failed(&self, what: &str) -> &str {
        assert!(!self.status.success(), "`{what}` should have failed: {self:#?}");
        &self.stderr
    }
}

/// `ward <args>` against `s` with `token`, as a [`CliRun`].
pub async fn ward_run(s: &TestServer, token: &str, args: &[&str]) -> CliRun {
    let out = ward_cli(s, token, args).await;
    CliRun {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the `ward` CLI against `s` with `token`, isolated from the test's
/// environment: exit status, stdout, stderr.
pub async fn ward_cli(s: &TestServer, token: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"));
    cmd.args(args)
        .env_remove("WARD_TOKEN_FILE")
        .env_remove("WARD_ISSUER")
        .env_remove("COLUMNS")
        .env("WARD_API", &s.base)
        .env("WARD_TOKEN", token)
        .kill_on_drop(true);
    tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
        .await
        .expect("ward finished within 120s")
        .expect("ward runs")
}

/// A custom role with these capabilities at `org`, bound to a new identity;
/// its uid and a token.
pub async fn identity_with(s: &TestServer, org: &str, name: &str, caps: &[&str]) -> (String, String) {
    let (status, role) = s
        .post(
            &format!("/iam/v2/roles/{org}"),
            serde_json::json!({"name": name, "capabilities": caps}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "role: {role}");
    let (status, identity) = s
        .post(
            &format!("/iam/v2/identities/{org}"),
            serde_json::json!({"name": name, "claimMatch": {"issuer": "https://issuer.example.com", "subject": name}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "identity: {identity}");
    let uid = uid(&identity);
    let (status, binding) = s
        .post(
            &format!("/iam/v2/roleBindings/{org}"),
            serde_json::json!({"identityUid": uid, "roleUid": self::uid(&role)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "binding: {binding}");
    let token = s.ward().tokens.mint(&uid).expect("mint a token");
    (uid, token)
}

pub fn sha256(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b)))
}

/// Pushes `bytes` as a blob of `<name>`; its digest.
pub async fn push_blob(s: &TestServer, name: &str, bytes: &[u8]) -> String {
    let d = sha256(bytes);
    let r = s
        .http
        .post(format!("{}/v2/{name}/blobs/uploads/?digest={d}", s.base))
        .bearer_auth(&s.token)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "[{}] push blob", s.backend);
    d
}

/// Pushes a manifest (or index) under `reference`; its digest.
pub async fn push_manifest(s: &TestServer, name: &str, reference: &str, media_type: &str, body: &Value) -> String {
    let bytes = serde_json::to_vec(body).unwrap();
    let r = s
        .http
        .put(format!("{}/v2/{name}/manifests/{reference}", s.base))
        .bearer_auth(&s.token)
        .header("content-type", media_type)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    let status = r.status();
    assert_eq!(
        status,
        201,
        "[{}] push manifest: {}",
        s.backend,
        r.text().await.unwrap_or_default()
    );
    sha256(&bytes)
}

/// The test venv's python (`$WARD_TEST_VENV`, else `target/ward-venv`) if
/// `import` runs there; otherwise a note and None, or a failure when
/// `WARD_TEST_REQUIRE_CLIENTS=1` (CI) requires it (`pip` says what to
/// install).
pub fn venv_python(import: &str, pip: &str) -> Option<std::path::PathBuf> {
    let venv = std::env::var_os("WARD_TEST_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/ward-venv")));
    let python = venv.join("bin/python");
    let ok = std::process::Command::new(&python)
        .args(["-c", &format!("import {import}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("WARD_TEST_REQUIRE_CLIENTS").as_deref() != Ok("1"),
            "WARD_TEST_REQUIRE_CLIENTS=1 but {} cannot import {import} (pip install {pip})",
            python.display()
        );
        eprintln!("note: no {import} in {}; its tests are skipped", venv.display());
    }
    ok.then_some(python)
}
