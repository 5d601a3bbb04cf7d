//! Traces and logs of the `ward server` binary, as an operator runs it:
//! - with `OTEL_EXPORTER_OTLP_ENDPOINT`, a request's trace arrives at an
//!   OTLP/gRPC collector in the test (built on the `opentelemetry-proto`
//!   crate's service definition), continuing the caller's `traceparent`, with
//!   spans for the transport, the service and the store;
//! - with `WARD_LOG_FORMAT=json`, every log line is a JSON object, lines
//!   written during a request carry its trace id, and no token, invite code
//!   or client secret of a whole workload appears in any line, even at debug.

mod common;

use std::io::BufRead as _;
use std::sync::{Arc, Mutex};

use axum::response::IntoResponse as _;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// An OTLP/gRPC trace collector keeping what it receives.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A `ward server` process on a fresh data directory; stopped with SIGTERM
/// when dropped.
struct Server {
    child: std::process::Child,
    base: String,
    token: String,
    stderr: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ward"))
            // --dev: the upstream issuer below is plain http on loopback.
            .args(["server", "--dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env_remove("WARD_DATABASE")
            .env_remove("WARD_LOG")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("ward server starts");
        let stderr: Arc<Mutex<Vec<String>>> = Arc::default();
        let lines = stderr.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let base = loop {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "the server exited: {:?}",
                stderr.lock().unwrap()
            );
            if let Some(url) = line.trim().strip_prefix("ward listening on ") {
                break url.to_owned();
            }
        };
        std::thread::spawn(move || for _ in out.lines() {});
        let token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
        Self {
            child,
            base,
            token,
            stderr,
            _dir: dir,
        }
    }

    /// SIGTERM, then waits for the exit (the server drains and flushes).
    fn stop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.child.try_wait().expect("try_wait").is_none() {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the server still runs a minute after SIGTERM");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// A stand-in for a server Ward calls (an issuer, a bucket): records each
/// request as `METHOD path traceparent` and answers with `answer`.
async fn recording_server(
    answer: fn(axum::http::Method) -> axum::response::Response,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(
        move |method: axum::http::Method, uri: axum::http::Uri, headers: axum::http::HeaderMap| {
            let log = log.clone();
            async move {
                let tp = headers
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("none");
                log.lock().unwrap().push(format!("{method} {} {tp}", uri.path()));
                answer(method)
            }
        },
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, seen)
}

/// An in-test OTLP/gRPC collector, and its endpoint.
async fn start_collector() -> (Collector, String) {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let svc = TraceServiceServer::new(collector.clone());
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    (collector, endpoint)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_trace_arrives_over_otlp_with_transport_service_and_store_spans() {
    let (collector, endpoint) = start_collector().await;
    let mut server = Server::start(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]);
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/iam/v2beta1/groups", server.base))
        .bearer_auth(&server.token)
        .json(&json!({"name": "traced"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let org = common::uid(&r.json::<Value>().await.unwrap());
    let r = http
        .get(format!("{}/iam/v2/groups/{org}", server.base))
        .bearer_auth(&server.token)
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // An exchange whose issuer Ward asks for its keys: the issuer sees the
    // trace continue.
    let (issuer, seen) = recording_server(|_| StatusCode::NOT_FOUND.into_response()).await;
    let r = http
        .post(format!("{}/iam/v2/identities/{org}", server.base))
        .bearer_auth(&server.token)
        .json(&json!({"name": "robot", "claimMatch": {"issuer": issuer, "subject": "robot"}}))
        .send()
        .await
        .unwrap();
    let robot: Value = r.json().await.unwrap();
    let robot = common::uid(&robot);
    let b64 = |v: Value| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, v.to_string());
    let now = chrono::Utc::now().timestamp();
    let upstream = format!(
        "{}.{}.c2ln",
        b64(json!({"alg": "RS256", "kid": "k1"})),
        b64(json!({"iss": issuer, "sub": "robot", "aud": server.base, "iat": now, "exp": now + 300}))
    );
    let r = http
        .get(format!(
            "{}/sts/exchange?aud={}&identity={robot}",
            server.base, server.base
        ))
        .bearer_auth(&upstream)
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let answer = r.text().await.unwrap();
    assert!(status.is_client_error(), "the issuer has no keys: {answer}");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|tp| tp.contains(&format!(" 00-{TRACE}-")) && !tp.contains(PARENT)),
        "the upstream issuer got the trace (as a child span): {seen:?}; the exchange: {answer}"
    );
    // Spans are exported in batches: wait for ours (SIGTERM flushes the rest).
    let want = hex::decode(TRACE).unwrap();
    let spans = || {
        collector
            .0
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| r.resource_spans.iter())
            .flat_map(|r| r.scope_spans.iter())
            .flat_map(|s| s.spans.iter())
            .filter(|s| s.trace_id == want)
            .cloned()
            .collect::<Vec<_>>()
    };
    for _ in 0..100 {
        if spans().iter().any(|s| s.name == "request") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    server.stop();
    let spans = spans();
    let named = |n: &str| {
        spans
            .iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("no {n} span in {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>()))
    };
    let request = named("request");
    assert_eq!(
        request.parent_span_id,
        hex::decode(PARENT).unwrap(),
        "the caller's span is the parent"
    );
    let rpc = named("rpc");
    assert_eq!(
        rpc.parent_span_id, request.span_id,
        "the service runs inside the transport"
    );
    let store: Vec<_> = spans.iter().filter(|s| s.name == "store").collect();
    assert!(!store.is_empty(), "store spans");
    let ids: std::collections::HashSet<_> = spans.iter().map(|s| s.span_id.clone()).collect();
    for s in &store {
        assert!(ids.contains(&s.parent_span_id), "a store span's parent is in the trace");
    }
    // The resource names the service.
    let requests = collector.0.lock().unwrap();
    let service = requests
        .iter()
        .flat_map(|r| r.resource_spans.iter())
        .filter_map(|r| r.resource.as_ref())
        .flat_map(|r| r.attributes.iter())
        .find(|a| a.key == "service.name")
        .and_then(|a| a.value.as_ref())
        .map(|v| format!("{:?}", v.value));
    assert!(service.is_some_and(|s| s.contains("ward")), "service.name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_trace_ids_and_never_a_secret() {
    let mut server = Server::start(&[("WARD_LOG_FORMAT", "json"), ("WARD_LOG", "debug")]);
    let http = reqwest::Client::new();
    let mut secrets = vec![server.token.trim().to_owned()];
    let post = |path: String, body: Value| {
        http.post(format!("{}{path}", server.base))
            .bearer_auth(server.token.trim())
            .json(&body)
            .send()
    };
    let org = common::uid(
        &post("/iam/v2beta1/groups".into(), json!({"name": "logged"}))
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap(),
    );
    // An identity provider's client secret.
    let viewer = ward_core::capability::builtin_role("viewer").unwrap().uid();
    let secret = "client-secret-that-must-not-be-logged";
    let r = post(
        format!("/iam/v2/identityProviders/{org}"),
        json!({"name": "corp", "defaultRole": viewer,
               "oidc": {"issuer": "https://idp.example.com", "clientId": "ward",
                        "clientSecret": secret, "groupsClaim": "groups"}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    secrets.push(secret.into());
    // An invite's code.
    let r = post(
        format!("/iam/v2/groupInvites/{org}"),
        json!({"roleUid": viewer, "ttl": "3600s", "singleUse": true}),
    )
    .await
    .unwrap();
    let invite: Value = r.json().await.unwrap();
    secrets.push(invite["code"].as_str().expect("an invite code").to_owned());
    // A refused exchange of an upstream token, and registry logins.
    let upstream = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzb21lb25lIn0.c2lnbmF0dXJlLW11c3Qtbm90LWJlLWxvZ2dlZA";
    secrets.push(upstream.into());
    let r = http
        .get(format!("{}/sts/exchange?aud={}", server.base, server.base))
        .bearer_auth(upstream)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http
        .get(format!("{}/token?scope=repository:{org}/app:pull", server.base))
        .basic_auth("_token", Some(server.token.trim()))
        .send()
        .await
        .unwrap();
    let registry_token = r.json::<Value>().await.unwrap()["token"]
        .as_str()
        .expect("a registry token")
        .to_owned();
    secrets.push(registry_token.clone());
    let r = http
        .get(format!("{}/v2/{org}/app/tags/list", server.base))
        .bearer_auth(&registry_token)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error());
    // A failing request with our traceparent: its log line names the trace.
    let r = http
        .get(format!("{}/iam/v2/groups/{org}/0123456789abcdef", server.base))
        .bearer_auth(server.token.trim())
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    server.stop();

    let lines = server.stderr.lock().unwrap().clone();
    assert!(lines.len() > 10, "a debug workload logs: {lines:?}");
    let mut traced = false;
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        for s in &secrets {
            assert!(!line.contains(s.as_str()), "a secret in the log: {line}");
        }
        // No token of any kind: a JWT's header starts `eyJ`.
        assert!(!line.contains("eyJ"), "a JWT in the log: {line}");
        if v["span"]["trace_id"] == TRACE && line.contains("request failed") {
            traced = true;
        }
    }
    assert!(traced, "the failed request's line carries its trace id: {lines:#?}");
}

/// Requests to an S3-compatible blob store carry the trace of the push that
/// caused them: a stand-in bucket records each request's `traceparent`.
#[tokio::test(flavor = "multi_thread")]
async fn blob_store_requests_carry_the_trace() {
    let (_collector, endpoint) = start_collector().await;
    // A PUT is stored (as S3 answers it); nothing is there to read.
    let (bucket, seen) = recording_server(|method| {
        if method == axum::http::Method::PUT {
            (StatusCode::OK, [("etag", "\"e\"")]).into_response()
        } else {
            StatusCode::NOT_FOUND.into_response()
        }
    })
    .await;
    let store = format!("s3://bucket?endpoint={bucket}");
    let mut server = Server::start(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("WARD_BLOB_STORE", store.as_str()),
        ("AWS_ACCESS_KEY_ID", "ward-test"),
        ("AWS_SECRET_ACCESS_KEY", "ward-test"),
    ]);
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/iam/v2/groups", server.base))
        .bearer_auth(server.token.trim())
        .json(&json!({"name": "bucketed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let org = common::uid(&r.json::<Value>().await.unwrap());
    let data = b"a layer".to_vec();
    let digest = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data)));
    // The stand-in keeps nothing, so the upload itself may fail; what
    // matters is what the bucket was sent.
    let _ = http
        .post(format!(
            "{}/v2/{org}/app/blobs/uploads/?digest={}",
            server.base,
            digest.replace(':', "%3A")
        ))
        .bearer_auth(server.token.trim())
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .header("content-type", "application/octet-stream")
        .body(data)
        .send()
        .await
        .unwrap();
    server.stop();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|r| r.contains(" /bucket/uploads/") && r.contains(&format!(" 00-{TRACE}-")) && !r.contains(PARENT)),
        "the bucket got the push's trace (as a child span): {seen:?}"
    );
}
