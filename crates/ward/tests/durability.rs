//! Durability of the real `ward server` process: SIGKILL in the middle of a
//! stream of writes, graceful SIGTERM, and restarts on the same data.
//!
//! Every scenario runs on SQLite (the default: `<data-dir>/ward.db`) and, when
//! `WARD_TEST_POSTGRES_URL` is set, on PostgreSQL (`--database`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use ward_store::testing::TestDatabase;

mod common;

/// How long a server may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Concurrent writers in the load scenarios, per transport.
const REST_WRITERS: usize = 6;
const GRPC_WRITERS: usize = 2;

/// Where a scenario keeps its data: a data directory, and for PostgreSQL a
/// database. Dropped after the server (see [`Scenario`]).
struct Store {
    backend: &'static str,
    data_dir: tempfile::TempDir,
    /// `--database`; `None` is the SQLite default in the data directory.
    database: Option<String>,
    _db: Option<TestDatabase>,
}

fn sqlite_store() -> Store {
    Store {
        backend: "sqlite",
        data_dir: tempfile::tempdir().expect("temp dir"),
        database: None,
        _db: None,
    }
}

async fn stores() -> Vec<Store> {
    let mut v = vec![sqlite_store()];
    match ward_store::testing::postgres().await {
        Some(db) => v.push(Store {
            backend: "postgres",
            data_dir: tempfile::tempdir().expect("temp dir"),
            database: Some(db.url.clone()),
            _db: Some(db),
        }),
        None if std::env::var("WARD_TEST_REQUIRE_POSTGRES").as_deref() == Ok("1") => {
            panic!("WARD_TEST_REQUIRE_POSTGRES=1 but WARD_TEST_POSTGRES_URL is not set")
        }
        None => {
            eprintln!("note: WARD_TEST_POSTGRES_URL unset; PostgreSQL durability tests skipped")
        }
    }
    v
}

/// A `ward server` subprocess. Dropping it kills the process, so a failing
/// test never leaves a server behind.
struct Server {
    child: Child,
    backend: &'static str,
    addr: SocketAddr,
    base: String,
    /// The admin token this process wrote to `<data-dir>/admin.token`.
    token: String,
    log: tempfile::NamedTempFile,
    http: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Server {
    /// Starts `ward server` on `listen` over `store` and waits until it listens.
    async fn start(store: &Store, listen: &str) -> Self {
        Self::start_with(store, listen, &[]).await
    }

    /// [`Server::start`] with further flags.
    async fn start_with(store: &Store, listen: &str, flags: &[&str]) -> Self {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ward"));
        cmd.arg("server")
            .arg("--listen")
            .arg(listen)
            .arg("--data-dir")
            .arg(store.data_dir.path());
        if let Some(db) = &store.database {
            cmd.arg("--database").arg(db);
        }
        cmd.args(flags);
        for var in [
            "WARD_LISTEN",
            "WARD_DATA_DIR",
            "WARD_DATABASE",
            "WARD_ISSUER_URL",
            "WARD_API_URL",
            "WARD_DEV",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("WARD_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("log file"));
        let mut child = cmd.spawn().expect("spawn ward server");

        // Read stdout on a thread: hand over the listening line, then keep
        // draining so the server never blocks on a full pipe.
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = tokio::sync::oneshot::channel::<String>();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("ward listening on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let mut server = Server {
            child,
            backend: store.backend,
            addr: "127.0.0.1:0".parse().unwrap(),
            base: String::new(),
            token: String::new(),
            log,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        };
        let url = match tokio::time::timeout(START_TIMEOUT, rx).await {
            Ok(Ok(url)) => url,
            Ok(Err(_)) => panic!(
                "[{}] ward server exited before listening ({:?}); log:\n{}",
                store.backend,
                server.child.try_wait(),
                server.logs()
            ),
            Err(_) => panic!(
                "[{}] ward server did not listen within {START_TIMEOUT:?}; log:\n{}",
                store.backend,
                server.logs()
            ),
        };
        let addr = url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected listening line: {url}"));
        server.addr = addr;
        server.base = url;
        server.token = std::fs::read_to_string(store.data_dir.path().join("admin.token"))
            .expect("admin.token written before listening")
            .trim()
            .to_owned();
        assert!(!server.token.is_empty(), "empty admin.token");
        server
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// SIGKILL, and reap the process.
    fn sigkill(&mut self) {
        self.child.kill().expect("SIGKILL");
        let status = self.child.wait().expect("wait");
        assert!(!status.success(), "[{}] killed, not exited: {status:?}", self.backend);
    }

    /// SIGTERM; waits up to `limit` for the exit and returns its status and how
    /// long it took.
    async fn sigterm(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let sent = Instant::now();
        let kill = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(kill.success(), "kill -TERM failed");
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return (status, sent.elapsed());
            }
            if sent.elapsed() > limit {
                panic!(
                    "[{}] ward server still running {limit:?} after SIGTERM; log:\n{}",
                    self.backend,
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn call(&self, token: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("[{}] {path}: {e}", self.backend));
        let status = resp.status();
        let text = resp.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(&self.token, reqwest::Method::GET, path, None).await
    }

    async fn create(&self, parent: Option<&str>, name: &str) -> Value {
        let path = match parent {
            Some(p) => format!("/iam/v2/groups/{p}"),
            None => "/iam/v2/groups".to_owned(),
        };
        let (status, body) = self
            .call(&self.token, reqwest::Method::POST, &path, Some(json!({ "name": name })))
            .await;
        assert_eq!(status, StatusCode::OK, "[{}] create {name}: {body}", self.backend);
        body
    }

    /// Every group matching `query` (e.g. `uidp.children_of=…`), walking pages.
    async fn list_all(&self, query: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut token = String::new();
        for _ in 0..10_000 {
            let mut path = format!("/iam/v2/groups?page_size=200&{query}");
            if !token.is_empty() {
                path.push_str(&format!("&page_token={token}"));
            }
            let (status, page) = self.get(&path).await;
            assert_eq!(status, StatusCode::OK, "[{}] list: {page}", self.backend);
            out.extend(page["groups"].as_array().cloned().unwrap_or_default());
            token = page["nextPageToken"].as_str().unwrap_or_default().to_owned();
            if token.is_empty() {
                return out;
            }
        }
        panic!("runaway pagination");
    }
}

fn uid(v: &Value) -> String {
    v["uid"].as_str().expect("uid").to_owned()
}

/// A JWT's header and claims.
fn jwt_parts(token: &str) -> (Value, Value) {
    let part = |i: usize| {
        let seg = token.split('.').nth(i).expect("JWT segment");
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(seg)
            .expect("base64url");
        serde_json::from_slice::<Value>(&bytes).expect("JSON")
    };
    (part(0), part(1))
}

/// What a stream of concurrent creates saw.
#[derive(Default)]
struct Outcome {
    /// name → uid of every create answered 200 with a group.
    acked: BTreeMap<String, String>,
    /// Names whose create failed in transport (maybe applied, maybe not).
    in_doubt: BTreeSet<String>,
    /// HTTP answers other than 200 (should not happen).
    unexpected: Vec<String>,
}

/// Creates a stream of children of `org` from several writers (REST over
/// HTTP/1.1 and gRPC over HTTP/2, one connection each) until stopped or until
/// their connection fails.
struct Load {
    stop: Arc<AtomicBool>,
    outcome: Arc<Mutex<Outcome>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Creates `<prefix>-0`, `<prefix>-1`, … over REST until stopped or cut off.
async fn rest_writer(url: String, token: String, prefix: String, stop: Arc<AtomicBool>, outcome: Arc<Mutex<Outcome>>) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for i in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let name = format!("{prefix}-{i}");
        let sent = http
            .post(&url)
            .bearer_auth(&token)
            .json(&json!({ "name": name }))
            .send()
            .await;
        let result = match sent {
            Ok(resp) => {
                let status = resp.status();
                resp.json::<Value>().await.map(|body| (status, body))
            }
            Err(e) => Err(e),
        };
        let mut o = outcome.lock().unwrap();
        match result {
            Ok((StatusCode::OK, body)) => {
                o.acked.insert(name, uid(&body));
            }
            Ok((status, body)) => o.unexpected.push(format!("{name}: {status} {body}")),
            Err(_) => {
                // The server is gone (or going): this writer is done.
                o.in_doubt.insert(name);
                return;
            }
        }
    }
}

/// Creates `<prefix>-0`, `<prefix>-1`, … over gRPC until stopped or cut off.
async fn grpc_writer(
    base: String,
    token: String,
    org: String,
    prefix: String,
    stop: Arc<AtomicBool>,
    outcome: Arc<Mutex<Outcome>>,
) {
    use tonic_types::StatusExt as _;
    use ward_proto::iam::v2::groups_service_client::GroupsServiceClient;
    use ward_proto::iam::v2::{CreateGroupRequest, Group};

    let channel = tonic::transport::Channel::from_shared(base)
        .unwrap()
        .connect()
        .await
        .expect("gRPC connect");
    let mut client = GroupsServiceClient::new(channel);
    let auth: tonic::metadata::MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    for i in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let name = format!("{prefix}-{i}");
        let mut req = tonic::Request::new(CreateGroupRequest {
            parent: org.clone(),
            group: Some(Group {
                name: name.clone(),
                ..Default::default()
            }),
        });
        req.metadata_mut().insert("authorization", auth.clone());
        let result = client.create_group(req).await;
        let mut o = outcome.lock().unwrap();
        match result {
            Ok(g) => {
                o.acked.insert(name, g.into_inner().uid);
            }
            // Ward's own errors carry ErrorInfo; transport failures do not.
            Err(st) if st.get_error_details().error_info().is_some() => o.unexpected.push(format!("{name}: {st:?}")),
            Err(_) => {
                o.in_doubt.insert(name);
                return;
            }
        }
    }
}

impl Load {
    fn start(server: &Server, org: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let outcome = Arc::new(Mutex::new(Outcome::default()));
        let mut tasks: Vec<_> = (0..REST_WRITERS)
            .map(|w| {
                tokio::spawn(rest_writer(
                    format!("{}/iam/v2/groups/{org}", server.base),
                    server.token.clone(),
                    format!("w{w}"),
                    stop.clone(),
                    outcome.clone(),
                ))
            })
            .collect();
        tasks.extend((0..GRPC_WRITERS).map(|w| {
            tokio::spawn(grpc_writer(
                server.base.clone(),
                server.token.clone(),
                org.to_owned(),
                format!("g{w}"),
                stop.clone(),
                outcome.clone(),
            ))
        }));
        Load { stop, outcome, tasks }
    }

    /// Waits until at least `n` creates are acknowledged (the load is really running).
    async fn wait_for_acks(&self, n: usize, backend: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.outcome.lock().unwrap().acked.len() < n {
            assert!(
                Instant::now() < deadline,
                "[{backend}] fewer than {n} creates acknowledged in 60s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn finish(self) -> Outcome {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .expect("writer finished")
                .expect("writer did not panic");
        }
        Arc::try_unwrap(self.outcome)
            .ok()
            .expect("writers done")
            .into_inner()
            .unwrap()
    }
}

/// Checks the children of `org` on `server` against what the writers saw:
/// every acknowledged create is there with its uid, and nothing is there that
/// was never attempted. After a SIGTERM (`what`), no create that failed in
/// transport may have been applied either.
async fn check_outcome(what: &str, server: &Server, org: &str, o: &Outcome) {
    let b = server.backend;
    assert!(
        o.unexpected.is_empty(),
        "[{b}] non-200 answers under concurrent creates: {:#?}",
        o.unexpected
    );
    for (prefix, transport) in [('w', "REST"), ('g', "gRPC")] {
        assert!(
            o.acked.keys().any(|n| n.starts_with(prefix)),
            "[{b}] no {transport} create was acknowledged"
        );
    }
    let present: BTreeMap<String, String> = server
        .list_all(&format!("uidp.children_of={org}"))
        .await
        .iter()
        .map(|g| (g["name"].as_str().unwrap().to_owned(), uid(g)))
        .collect();
    let lost: Vec<_> = o
        .acked
        .iter()
        .filter(|(name, u)| present.get(*name) != Some(u))
        .collect();
    assert!(
        lost.is_empty(),
        "[{b}] {} of {} acknowledged creates are missing after restart, e.g. {:?}",
        lost.len(),
        o.acked.len(),
        &lost[..lost.len().min(5)]
    );
    let phantom: Vec<_> = present
        .keys()
        .filter(|n| !o.acked.contains_key(*n) && !o.in_doubt.contains(*n))
        .collect();
    assert!(phantom.is_empty(), "[{b}] groups nobody created: {phantom:?}");
    let applied_unanswered: Vec<_> = o.in_doubt.iter().filter(|n| present.contains_key(*n)).collect();
    if what == "SIGTERM" {
        // A graceful drain answers every request it takes in: a create that
        // failed in transport must not have been applied.
        assert!(
            applied_unanswered.is_empty(),
            "[{b}] creates applied but never answered during a graceful shutdown: {applied_unanswered:?}"
        );
    }
    eprintln!(
        "[{b}] {what}: {} acknowledged, {} in doubt of which {} applied",
        o.acked.len(),
        o.in_doubt.len(),
        applied_unanswered.len()
    );
}

async fn sigkill_during_creates_loses_nothing_acknowledged(store: &Store) {
    let b = store.backend;
    let mut server = Server::start(store, "127.0.0.1:0").await;
    let org = uid(&server.create(None, "acme").await);

    let load = Load::start(&server, &org);
    load.wait_for_acks(20, b).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    server.sigkill();
    let outcome = load.finish().await;
    assert!(outcome.acked.len() >= 20, "[{b}] the load ran");
    drop(server);

    let server = Server::start(store, "127.0.0.1:0").await;
    let (status, body) = server.get(&format!("/iam/v2/groups/{org}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] the org survives: {body}");
    check_outcome("SIGKILL", &server, &org, &outcome).await;

    // The restarted server takes writes again.
    server.create(Some(&org), "after-restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_during_creates() {
    for store in stores().await {
        sigkill_during_creates_loses_nothing_acknowledged(&store).await;
    }
}

async fn sigterm_drains_and_exits_zero(store: &Store) {
    let b = store.backend;
    let mut server = Server::start(store, "127.0.0.1:0").await;
    let org = uid(&server.create(None, "acme").await);

    let load = Load::start(&server, &org);
    load.wait_for_acks(20, b).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (status, took) = server.sigterm(Duration::from_secs(10)).await;
    assert!(
        status.success(),
        "[{b}] exit status after SIGTERM: {status:?}; log:\n{}",
        server.logs()
    );
    assert!(took < Duration::from_secs(5), "[{b}] took {took:?} to drain");
    let logs = server.logs();
    assert!(logs.contains("shutdown signal received"), "[{b}] log:\n{logs}");
    let outcome = load.finish().await;
    drop(server);

    let server = Server::start(store, "127.0.0.1:0").await;
    check_outcome("SIGTERM", &server, &org, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_during_creates() {
    for store in stores().await {
        sigterm_drains_and_exits_zero(&store).await;
    }
}

/// Everything a client can see of the data, for before/after comparisons.
async fn snapshot(server: &Server) -> Vec<Value> {
    let mut all = server.list_all("order_by=name").await;
    all.sort_by_key(uid);
    all
}

async fn restarts_keep_data_identity_and_keys(store: &Store) {
    let b = store.backend;
    let mut first = Server::start(store, "127.0.0.1:0").await;
    // Restarts listen on the same address: the token audience is the API URL.
    let listen = first.addr.to_string();

    let org = uid(&first.create(None, "acme").await);
    let mut kids = Vec::new();
    for name in ["a", "b", "c", "d"] {
        kids.push(uid(&first.create(Some(&org), name).await));
    }
    let (status, body) = first
        .call(
            &first.token,
            reqwest::Method::PATCH,
            &format!("/iam/v2/groups/{}?update_mask=description", kids[0]),
            Some(json!({ "description": "changed before restart" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] {body}");
    let (status, body) = first
        .call(
            &first.token,
            reqwest::Method::DELETE,
            &format!("/iam/v2/groups/{}", kids[3]),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] {body}");

    // A paged listing started before the restart.
    let page_query = format!("/iam/v2/groups?uidp.children_of={org}&order_by=name&page_size=1");
    let (_, page1) = first.get(&page_query).await;
    let page_token = page1["nextPageToken"].as_str().expect("more pages").to_owned();
    let (_, page2) = first.get(&format!("{page_query}&page_token={page_token}")).await;

    let before = snapshot(&first).await;
    assert_eq!(before.len(), 4, "[{b}] org + 3 children");
    let old_token = first.token.clone();
    let (old_header, old_claims) = jwt_parts(&old_token);

    // Graceful restart.
    let (status, _) = first.sigterm(Duration::from_secs(10)).await;
    assert!(status.success(), "[{b}] {status:?}");
    drop(first);
    let mut second = Server::start(store, &listen).await;
    assert_eq!(second.addr.to_string(), listen);
    assert_eq!(snapshot(&second).await, before, "[{b}] data after a graceful restart");

    // Abrupt restart.
    second.sigkill();
    let second_token = second.token.clone();
    drop(second);
    let third = Server::start(store, &listen).await;
    assert_eq!(snapshot(&third).await, before, "[{b}] data after SIGKILL");

    for (what, token) in [
        ("first", &old_token),
        ("second", &second_token),
        ("third", &third.token),
    ] {
        let (header, claims) = jwt_parts(token);
        assert_eq!(
            claims["sub"], old_claims["sub"],
            "[{b}] the admin identity is stable ({what} start)"
        );
        assert_eq!(
            header["kid"], old_header["kid"],
            "[{b}] the signing key persists ({what} start)"
        );
        let (status, body) = third.call(token, reqwest::Method::GET, "/iam/v2/groups", None).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "[{b}] the {what} start's token is accepted: {body}"
        );
    }

    // The page token from the first process continues the listing.
    let (status, resumed) = third.get(&format!("{page_query}&page_token={page_token}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] page token across restarts: {resumed}");
    // (The next token differs: tokens carry their issue time.)
    assert_eq!(resumed["groups"], page2["groups"], "[{b}] same second page");
    assert_eq!(resumed["totalCount"], page2["totalCount"], "[{b}]");

    // `ward admin token` on the same data mints for the same identity.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ward"));
    cmd.arg("admin")
        .arg("token")
        .arg("--data-dir")
        .arg(store.data_dir.path())
        .arg("--listen")
        .arg(&listen);
    if let Some(db) = &store.database {
        cmd.arg("--database").arg(db);
    }
    for var in ["WARD_LISTEN", "WARD_DATA_DIR", "WARD_DATABASE"] {
        cmd.env_remove(var);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("ward admin token");
    assert!(out.status.success(), "[{b}] {}", String::from_utf8_lossy(&out.stderr));
    let minted = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(jwt_parts(&minted).1["sub"], old_claims["sub"], "[{b}]");
    let (status, _) = third.call(&minted, reqwest::Method::GET, "/iam/v2/groups", None).await;
    assert_eq!(status, StatusCode::OK, "[{b}] admin token accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_keep_everything() {
    for store in stores().await {
        restarts_keep_data_identity_and_keys(&store).await;
    }
}

#[tokio::test]
async fn first_start_writes_a_private_admin_token() {
    let store = sqlite_store();
    let server = Server::start(&store, "127.0.0.1:0").await;
    let path = store.data_dir.path().join("admin.token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "admin.token is private");
    }
    assert!(
        store.data_dir.path().join("ward.db").exists(),
        "SQLite in the data dir by default"
    );
    let (status, _) = server.get("/iam/v2/groups").await;
    assert_eq!(status, StatusCode::OK);
}

/// An event committed but not yet delivered survives SIGKILL: a delivery in
/// flight when the server dies (its sink still holding the request) is
/// delivered by the restarted server, with the same `Ce-Id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_in_flight_survives_sigkill() {
    for store in stores().await {
        let b = store.backend;
        let Some(mut rx) = common::receiver::Receiver::start("hang").await else {
            return;
        };
        let mut server = Server::start_with(&store, "127.0.0.1:0", &["--allow-insecure-sinks"]).await;
        let post = |s: &Server, path: String, body: Value| {
            let req = s
                .http
                .post(format!("{}{path}", s.base))
                .bearer_auth(&s.token)
                .json(&body);
            async move {
                let resp = req.send().await.expect("request");
                assert_eq!(resp.status(), StatusCode::OK);
                resp.json::<Value>().await.expect("json")
            }
        };
        let org = post(&server, "/iam/v2/groups".into(), json!({"name": "durable-events"})).await;
        let org = org["uid"].as_str().unwrap().to_owned();
        post(
            &server,
            format!("/events/v2/subscriptions/{org}"),
            json!({"sink": rx.url}),
        )
        .await;
        // The subscription's creation is being delivered; the sink holds it.
        let held = rx.next().await;
        assert_eq!(held["answered"], 0, "[{b}] {held}");
        server.sigkill();
        let server = Server::start_with(&store, "127.0.0.1:0", &["--allow-insecure-sinks"]).await;
        // On PostgreSQL another replica would take it when the lease
        // expires; the restarted server is that replica here.
        let again = rx.next().await;
        assert_eq!(
            again["headers"]["ce-id"], held["headers"]["ce-id"],
            "[{b}] the same event"
        );
        assert_eq!(again["answered"], 200, "[{b}] {again}");
        assert_eq!(
            again["event"]["type"], "dev.chainguard.api.events.subscription.created.v1",
            "[{b}]"
        );
        drop(server);
    }
}

/// SIGTERM while a request is in flight: the server stops accepting new
/// connections at once, lets the request finish (its body still arriving),
/// answers it, and exits 0; what it acknowledged is there after a restart.
async fn sigterm_lets_a_request_in_flight_finish(store: &Store) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let b = store.backend;
    let mut server = Server::start(store, "127.0.0.1:0").await;
    let org = uid(&server.create(None, "acme").await);
    let (status, body) = server
        .call(
            &server.token.clone(),
            reqwest::Method::POST,
            &format!("/registry/v2/repos/{org}"),
            Some(json!({"name": "app"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] repo: {body}");
    let blob = vec![7u8; 64 * 1024];
    let digest = common::sha256(&blob);
    // A monolithic upload whose body is half sent when SIGTERM arrives.
    let mut conn = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /v2/{org}/app/blobs/uploads/?digest={digest} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        server.addr,
        server.token,
        blob.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&blob[..blob.len() / 2]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let kill = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // No new connection is accepted once the signal is handled.
    let mut refused = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if tokio::net::TcpStream::connect(server.addr).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "[{b}] still accepting after SIGTERM; log:\n{}", server.logs());
    // The request in flight finishes and is answered.
    conn.write_all(&blob[blob.len() / 2..]).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "[{b}] the connection closed without an answer");
        answer.extend_from_slice(&buf[..n]);
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 201"), "[{b}] {answer}");
    drop(conn);
    let (status, _) = server.sigterm(Duration::from_secs(35)).await;
    assert!(status.success(), "[{b}] exit after draining: {status:?}");
    drop(server);
    let server = Server::start(store, "127.0.0.1:0").await;
    let r = server
        .http
        .head(format!("{}/v2/{org}/app/blobs/{digest}", server.base))
        .bearer_auth(&server.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "[{b}] the drained upload is stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_lets_requests_in_flight_finish() {
    for store in stores().await {
        sigterm_lets_a_request_in_flight_finish(&store).await;
    }
}

/// Events are written with their change (an outbox): a server killed after
/// the commits, with some deliveries in flight (held by the receiver) and
/// the rest never attempted, delivers every one after it restarts, each
/// under the `Ce-Id` its first attempt had.
async fn sigkill_between_commit_and_delivery_loses_no_event(store: &Store) {
    let b = store.backend;
    let Some(mut rx) = common::receiver::Receiver::start("held").await else {
        return;
    };
    let mut server = Server::start_with(store, "127.0.0.1:0", &["--dev"]).await;
    let listen = server.addr.to_string();
    let org = uid(&server.create(None, "outbox").await);
    let (status, sub) = server
        .call(
            &server.token,
            reqwest::Method::POST,
            &format!("/events/v2/subscriptions/{org}"),
            Some(json!({ "sink": rx.url })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] {sub}");
    // More events than a subscription's tail has in flight (4 while it
    // keeps up, at most 32): some are held by the receiver, the others
    // wait in the log.
    let mut expected = BTreeSet::from([uid(&sub)]);
    for i in 0..40 {
        expected.insert(uid(&server.create(Some(&org), &format!("g{i}")).await));
    }
    // Deliveries are under way (and held) when the server dies.
    let mut first_ids = BTreeMap::<String, String>::new();
    let held = rx.next().await;
    assert_eq!(held["answered"], 0, "[{b}] {held}");
    while let Some(d) = rx.next_within(Duration::from_millis(300)).await {
        assert_eq!(d["answered"], 0, "[{b}] nothing is answered before the kill: {d}");
        first_ids.insert(subject(&d), ce_id(&d));
    }
    first_ids.insert(subject(&held), ce_id(&held));
    server.sigkill();
    drop(server);
    eprintln!(
        "[{b}] killed with {} of {} events attempted and held",
        first_ids.len(),
        expected.len()
    );
    assert!(
        first_ids.len() < expected.len(),
        "[{b}] some events were never attempted before the kill"
    );

    rx.release().await;
    let _server = Server::start_with(store, &listen, &["--dev"]).await;
    let mut delivered = BTreeMap::<String, String>::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while delivered.len() < expected.len() {
        assert!(
            Instant::now() < deadline,
            "[{b}] undelivered after the restart: {:?}",
            expected
                .iter()
                .filter(|u| !delivered.contains_key(*u))
                .collect::<Vec<_>>()
        );
        let Some(d) = rx.next_within(Duration::from_secs(5)).await else {
            continue;
        };
        if d["answered"] == 200 {
            assert!(d["error"].is_null(), "[{b}] the cloudevents package parses it: {d}");
            delivered.insert(subject(&d), ce_id(&d));
        }
    }
    assert_eq!(
        delivered.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "[{b}] every committed change's event, and nothing else"
    );
    for (subject, id) in &first_ids {
        assert_eq!(
            delivered.get(subject),
            Some(id),
            "[{b}] a retried delivery keeps its Ce-Id"
        );
    }
}

fn subject(delivery: &Value) -> String {
    delivery["headers"]["ce-subject"]
        .as_str()
        .expect("ce-subject")
        .to_owned()
}

fn ce_id(delivery: &Value) -> String {
    delivery["headers"]["ce-id"].as_str().expect("ce-id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_between_commit_and_delivery() {
    for store in stores().await {
        sigkill_between_commit_and_delivery_loses_no_event(&store).await;
    }
}
