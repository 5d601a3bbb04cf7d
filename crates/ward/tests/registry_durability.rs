//! The registry in the real `ward server` process: a SIGKILL in the middle of
//! concurrent pushes loses no acknowledged manifest, blob or tag, and a 1 GiB
//! blob goes up and comes back with the server's memory bounded.
//!
//! The kill scenario runs on SQLite (`<data-dir>/ward.db`) and, when
//! `WARD_TEST_POSTGRES_URL` is set, on PostgreSQL (`--database`).

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use ward_store::testing::TestDatabase;

/// How long a server may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Concurrent pushers in the kill scenario, and the acknowledged pushes to
/// wait for before the kill.
const PUSHERS: usize = 4;
const MIN_ACKS: usize = 40;
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const GIB: u64 = 1 << 30;
/// How much the server's resident memory may grow over its idle size while
/// 1 GiB streams through it: streaming holds a few buffers, never the blob.
/// (Growth, not an absolute size: an idle debug build's RSS moves with the
/// size of the binary.)
const RSS_GROWTH_LIMIT_KB: u64 = 65_536;

/// Where a scenario keeps its data: a data directory, and for PostgreSQL a
/// database. Dropped after the server.
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
        None => eprintln!("note: WARD_TEST_POSTGRES_URL unset; PostgreSQL registry durability skipped"),
    }
    v
}

/// A `ward server` subprocess. Dropping it kills the process.
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
    /// Starts `ward server` (default limits) over `store` and waits until it listens.
    async fn start(store: &Store) -> Self {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ward"));
        cmd.arg("server")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(store.data_dir.path());
        if let Some(db) = &store.database {
            cmd.arg("--database").arg(db);
        }
        for var in [
            "WARD_LISTEN",
            "WARD_DATA_DIR",
            "WARD_DATABASE",
            "WARD_ISSUER_URL",
            "WARD_API_URL",
            "WARD_DEV",
            "WARD_REGISTRY_URL",
            "WARD_MAX_BLOB_BYTES",
            "WARD_BODY_READ_TIMEOUT",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("WARD_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("log file"));
        let mut child = cmd.spawn().expect("spawn ward server");
        // Hand over the listening line, then keep draining stdout.
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
            _ => panic!(
                "[{}] ward server did not listen ({:?}); log:\n{}",
                store.backend,
                server.child.try_wait(),
                server.logs()
            ),
        };
        server.addr = url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected listening line: {url}"));
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

    /// A request to `path` as the admin.
    fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        let resp = self.req(Method::GET, path).send().await.expect("GET");
        let status = resp.status();
        let text = resp.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Creates a root organization; returns its uid.
    async fn create_org(&self, name: &str) -> String {
        let req = self.req(Method::POST, "/iam/v2/groups").json(&json!({ "name": name }));
        let body: Value = req.send().await.expect("create org").json().await.expect("JSON");
        body["uid"]
            .as_str()
            .unwrap_or_else(|| panic!("create {name}: {body}"))
            .to_owned()
    }
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(&Sha256::digest(data)[..]))
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

// ---------------------------------------------------------------------------
// SIGKILL during pushes
// ---------------------------------------------------------------------------

/// One push answered 201: its tag, manifest digest and blob digests (config, layer).
struct Push {
    tag: String,
    digest: String,
    blobs: Vec<String>,
}

#[derive(Default)]
struct Outcome {
    acked: Vec<Push>,
    /// HTTP answers other than the expected one (should not happen).
    unexpected: Vec<String>,
}

/// Sends `req`: `Ok(Some(headers))` for status `want`, `Ok(None)` when the
/// server is gone (transport error), `Err` for any other answer.
async fn send(req: reqwest::RequestBuilder, want: u16, what: &str) -> Result<Option<HeaderMap>, String> {
    let Ok(resp) = req.send().await else { return Ok(None) };
    let status = resp.status();
    let headers = resp.headers().clone();
    // The status line is the acknowledgement; the (empty) body may be cut off.
    let body = resp.text().await.unwrap_or_default();
    if status.as_u16() == want {
        Ok(Some(headers))
    } else {
        Err(format!("{what}: {status} {body}"))
    }
}

/// Pushes images tagged `t-<p>-0`, `t-<p>-1`, … to `name` until stopped, cut
/// off, or answered unexpectedly.
async fn pusher(
    base: String,
    token: String,
    name: String,
    p: usize,
    stop: Arc<AtomicBool>,
    outcome: Arc<Mutex<Outcome>>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for i in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let tag = format!("t-{p}-{i}");
        let config = serde_json::to_vec(&json!({
            "architecture": "amd64",
            "os": "linux",
            "rootfs": { "type": "layers", "diff_ids": [] },
            "config": { "Labels": { "nonce": format!("{tag}-{:016x}", rand::random::<u64>()) } },
        }))
        .unwrap();
        let layer: Vec<u8> = (0..256 + rand::random::<u16>() as usize % 4096)
            .map(|_| rand::random::<u8>())
            .collect();
        let mut blobs = Vec::new();
        for data in [&config, &layer] {
            let d = sha256(data);
            let req = http
                .post(format!("{base}/v2/{name}/blobs/uploads/?digest={}", enc(&d)))
                .bearer_auth(&token)
                .header("Content-Type", "application/octet-stream")
                .body(data.clone());
            match send(req, 201, &format!("{tag} blob {d}")).await {
                Ok(Some(_)) => blobs.push(d),
                Ok(None) => return,
                Err(e) => return outcome.lock().unwrap().unexpected.push(e),
            }
        }
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": { "mediaType": OCI_CONFIG, "digest": blobs[0], "size": config.len() },
            "layers": [{ "mediaType": OCI_LAYER, "digest": blobs[1], "size": layer.len() }],
        }))
        .unwrap();
        let digest = sha256(&manifest);
        let req = http
            .put(format!("{base}/v2/{name}/manifests/{tag}"))
            .bearer_auth(&token)
            .header("Content-Type", OCI_MANIFEST)
            .body(manifest);
        match send(req, 201, &format!("{tag} manifest")).await {
            Ok(Some(h)) => {
                let got = header(&h, "docker-content-digest");
                let mut o = outcome.lock().unwrap();
                if got != digest {
                    return o
                        .unexpected
                        .push(format!("{tag}: Docker-Content-Digest {got}, want {digest}"));
                }
                o.acked.push(Push { tag, digest, blobs });
            }
            Ok(None) => return,
            Err(e) => return outcome.lock().unwrap().unexpected.push(e),
        }
    }
}

/// GETs `path` as the admin: status, Docker-Content-Digest, sha256 of the body, body.
async fn fetch(s: &Server, path: &str) -> Result<(StatusCode, String, String, Vec<u8>), String> {
    let resp = s
        .req(Method::GET, path)
        .send()
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = resp.status();
    let got = header(resp.headers(), "docker-content-digest");
    let body = resp
        .bytes()
        .await
        .map_err(|e| format!("GET {path}: body: {e}"))?
        .to_vec();
    Ok((status, got, sha256(&body), body))
}

/// Everything a client can check of one acknowledged push.
async fn check_push(s: &Server, name: &str, repo_uid: &str, p: &Push) -> Result<(), String> {
    let tag = &p.tag;
    let (status, got, hash, body) = fetch(s, &format!("/v2/{name}/manifests/{tag}")).await?;
    if status != StatusCode::OK || got != p.digest || hash != p.digest {
        let text = String::from_utf8_lossy(&body);
        return Err(format!(
            "{tag}: manifest {status}, digest {got}, body {hash} {text}; want {}",
            p.digest
        ));
    }
    let m: Value = serde_json::from_slice(&body).map_err(|e| format!("{tag}: manifest JSON: {e}"))?;
    let named: Vec<String> = std::iter::once(&m["config"])
        .chain(m["layers"].as_array().into_iter().flatten())
        .filter_map(|d| d["digest"].as_str().map(str::to_owned))
        .collect();
    if named != p.blobs {
        return Err(format!("{tag}: manifest names {named:?}, pushed {:?}", p.blobs));
    }
    for d in &named {
        let (status, _, hash, bytes) = fetch(s, &format!("/v2/{name}/blobs/{d}")).await?;
        if status != StatusCode::OK || hash != *d {
            return Err(format!(
                "{tag}: blob {d}: {status}, {} bytes hashing to {hash}",
                bytes.len()
            ));
        }
    }
    let (status, body) = s
        .get_json(&format!("/registry/v2/tags?uidp.childrenOf={repo_uid}&name={tag}"))
        .await;
    let tags = body["tags"].as_array().cloned().unwrap_or_default();
    if status != StatusCode::OK
        || tags.len() != 1
        || tags[0]["name"] != tag.as_str()
        || tags[0]["digest"] != p.digest.as_str()
    {
        return Err(format!("{tag}: REST tags {status}: {body}"));
    }
    Ok(())
}

async fn sigkill_during_pushes(store: &Store) {
    let b = store.backend;
    let mut server = Server::start(store).await;
    let org = server.create_org("acme").await;
    let name = format!("{org}/app");

    let stop = Arc::new(AtomicBool::new(false));
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let tasks: Vec<_> = (0..PUSHERS)
        .map(|p| {
            let (base, token) = (server.base.clone(), server.token.clone());
            tokio::spawn(pusher(base, token, name.clone(), p, stop.clone(), outcome.clone()))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        {
            let o = outcome.lock().unwrap();
            assert!(
                o.unexpected.is_empty(),
                "[{b}] unexpected answers while pushing: {:#?}\nlog:\n{}",
                o.unexpected,
                server.logs()
            );
            if o.acked.len() >= MIN_ACKS {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "[{b}] fewer than {MIN_ACKS} pushes acknowledged in 120 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Mid-stream: the pushers are still going when the server dies.
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.sigkill();
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("pusher finished")
            .expect("pusher did not panic");
    }
    let o = Arc::try_unwrap(outcome)
        .ok()
        .expect("pushers done")
        .into_inner()
        .unwrap();
    assert!(o.unexpected.is_empty(), "[{b}] unexpected answers: {:#?}", o.unexpected);
    assert!(o.acked.len() >= MIN_ACKS, "[{b}] the pushes ran");
    drop(server);

    let server = Server::start(store).await;
    let (status, body) = server
        .get_json(&format!("/registry/v2/repos?name=app&uidp.descendantsOf={org}"))
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] list repos: {body}");
    let repo_uid = body["repos"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == "app"))
        .and_then(|r| r["uid"].as_str())
        .unwrap_or_else(|| panic!("[{b}] repo app missing after restart: {body}"))
        .to_owned();
    let mut damaged = Vec::new();
    for p in &o.acked {
        if let Err(e) = check_push(&server, &name, &repo_uid, p).await {
            damaged.push(e);
        }
    }
    assert!(
        damaged.is_empty(),
        "[{b}] {} of {} acknowledged pushes damaged after SIGKILL and restart: {:#?}\nlog:\n{}",
        damaged.len(),
        o.acked.len(),
        &damaged[..damaged.len().min(10)],
        server.logs()
    );
    eprintln!("[{b}] SIGKILL: {} acknowledged pushes all intact", o.acked.len());

    // The restarted server takes pushes again (over blobs pushed before the kill).
    let first = &o.acked[0];
    let (_, _, _, bytes) = fetch(&server, &format!("/v2/{name}/manifests/{}", first.digest))
        .await
        .unwrap_or_else(|e| panic!("[{b}] {e}"));
    let req = server
        .req(Method::PUT, &format!("/v2/{name}/manifests/after-restart"))
        .header("Content-Type", OCI_MANIFEST)
        .body(bytes);
    let h = send(req, 201, "push after restart").await;
    let h = h.unwrap_or_else(|e| panic!("[{b}] {e}")).expect("server up");
    assert_eq!(header(&h, "docker-content-digest"), first.digest, "[{b}]");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_during_pushes_loses_no_acknowledged_manifest() {
    for store in stores().await {
        sigkill_during_pushes(&store).await;
    }
}

// ---------------------------------------------------------------------------
// A 1 GiB blob with bounded server memory
// ---------------------------------------------------------------------------

/// The `VmRSS` of process `pid`, in kB.
fn vm_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Samples a process's RSS every 100 ms on a thread of its own; keeps the maximum.
struct RssSampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(0));
        let (s, m) = (stop.clone(), max.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                if let Some(kb) = vm_rss_kb(pid) {
                    m.fetch_max(kb, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        RssSampler { stop, max, thread }
    }

    fn max_kb(&self) -> u64 {
        self.max.load(Ordering::SeqCst)
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("sampler thread");
        self.max.load(Ordering::SeqCst)
    }
}

/// Deterministic pseudo-random bytes (xorshift64).
struct Noise(u64);

impl Noise {
    fn fill(&mut self, buf: &mut [u8]) {
        for w in buf.chunks_mut(8) {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            w.copy_from_slice(&self.0.to_le_bytes()[..w.len()]);
        }
    }
}

/// PATCHes `size` bytes of [`Noise`] to the upload session at `path` in ONE
/// HTTP/1.1 request whose body is generated and written 1 MiB at a time
/// (reqwest cannot stream a request body without its `stream` feature).
/// Returns the response head and the sha256 digest of what was sent.
async fn stream_patch(addr: SocketAddr, path: &str, token: &str, size: u64) -> (String, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "PATCH {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/octet-stream\r\nContent-Range: 0-{}\r\n\
         Content-Length: {size}\r\nConnection: close\r\n\r\n",
        size - 1
    );
    conn.write_all(head.as_bytes()).await.expect("request head");
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut sent = 0u64;
    while sent < size {
        let n = (size - sent).min(buf.len() as u64) as usize;
        noise.fill(&mut buf[..n]);
        hasher.update(&buf[..n]);
        if let Err(e) = conn.write_all(&buf[..n]).await {
            // The server answered early (an error): show what it said.
            let mut answer = Vec::new();
            let _ = conn.read_to_end(&mut answer).await;
            panic!(
                "upload cut off after {sent} bytes: {e}; server said: {}",
                String::from_utf8_lossy(&answer)
            );
        }
        sent += n as u64;
    }
    conn.flush().await.expect("flush");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(300), conn.read_to_end(&mut answer))
        .await
        .expect("PATCH answered within 300 s")
        .expect("read PATCH response");
    let digest = format!("sha256:{}", hex::encode(&hasher.finalize()[..]));
    (String::from_utf8_lossy(&answer).into_owned(), digest)
}

#[tokio::test(flavor = "multi_thread")]
async fn one_gib_blob_streams_with_bounded_memory() {
    let store = sqlite_store();
    let server = Server::start(&store).await;
    let name = format!("{}/app", server.create_org("acme").await);
    let long = Duration::from_secs(900);
    let pid = server.child.id();
    let idle_kb = vm_rss_kb(pid).expect("server RSS");
    let rss = RssSampler::start(pid);

    // Upload: POST opens a session, one PATCH streams the GiB, PUT finishes.
    let started = Instant::now();
    let resp = server
        .req(Method::POST, &format!("/v2/{name}/blobs/uploads/"))
        .body(Vec::<u8>::new())
        .send()
        .await
        .expect("POST upload");
    assert_eq!(resp.status().as_u16(), 202, "open upload: {:?}", resp.headers());
    let loc = header(resp.headers(), "location");
    let path = loc.strip_prefix(server.base.as_str()).unwrap_or(&loc).to_owned();
    assert!(path.starts_with("/v2/"), "Location {loc}");
    let (answer, digest) = stream_patch(server.addr, &path, &server.token, GIB).await;
    let range = format!("\r\nrange: 0-{}\r\n", GIB - 1);
    assert!(
        answer.starts_with("HTTP/1.1 202") && answer.to_ascii_lowercase().contains(&range),
        "PATCH of 1 GiB: {answer}\nlog:\n{}",
        server.logs()
    );
    let sep = if path.contains('?') { '&' } else { '?' };
    let req = server
        .req(Method::PUT, &format!("{path}{sep}digest={}", enc(&digest)))
        .timeout(long)
        .body(Vec::<u8>::new());
    let h = send(req, 201, "finish upload").await.expect("201").expect("server up");
    assert_eq!(header(&h, "docker-content-digest"), digest, "finish upload");
    let upload_secs = started.elapsed().as_secs_f64();
    let upload_max_kb = rss.max_kb();

    // Download, hashing the body as it streams in.
    let started = Instant::now();
    let mut resp = server
        .req(Method::GET, &format!("/v2/{name}/blobs/{digest}"))
        .timeout(long)
        .send()
        .await
        .expect("GET blob");
    assert_eq!(resp.status().as_u16(), 200, "GET blob: {:?}", resp.headers());
    assert_eq!(resp.content_length(), Some(GIB), "Content-Length");
    let mut hasher = Sha256::new();
    let mut received = 0u64;
    while let Some(chunk) = resp.chunk().await.expect("blob body") {
        hasher.update(&chunk);
        received += chunk.len() as u64;
    }
    let download_secs = started.elapsed().as_secs_f64();
    assert_eq!(received, GIB, "bytes downloaded");
    let got = format!("sha256:{}", hex::encode(&hasher.finalize()[..]));
    assert_eq!(got, digest, "downloaded bytes");

    let max_kb = rss.finish();
    println!(
        "1 GiB blob: server RSS idle {idle_kb} kB, max {upload_max_kb} kB during upload, {max_kb} kB overall \
         (growth limit {RSS_GROWTH_LIMIT_KB} kB); upload {upload_secs:.1} s, download {download_secs:.1} s"
    );
    assert!(
        max_kb.saturating_sub(idle_kb) < RSS_GROWTH_LIMIT_KB,
        "server RSS grew from {idle_kb} kB to {max_kb} kB (limit: {RSS_GROWTH_LIMIT_KB} kB more) streaming a 1 GiB blob"
    );
}
