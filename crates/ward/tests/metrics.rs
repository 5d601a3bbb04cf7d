//! Prometheus metrics at `/metrics` on `--metrics-listen`: after a mixed
//! workload (REST, gRPC, registry push and pull, a refused token exchange,
//! an unknown path) the exposition parses with the reference parser of the
//! `prometheus-client` package and holds the documented series, labelled by
//! route template and never by a raw path.

mod common;

use std::collections::BTreeSet;

use common::{TestServer, uid};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// One parsed sample.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: serde_json::Map<String, Value>,
    value: f64,
}

/// The venv's python, if it has `prometheus_client` (installed by
/// `.ci/run`); without it the test is skipped with a note, unless
/// `WARD_TEST_REQUIRE_CLIENTS=1` (CI) makes that a failure.
fn parser_python() -> Option<std::path::PathBuf> {
    common::venv_python("prometheus_client.parser", "'prometheus-client==0.21.*'")
}

/// The exposition at `addr`, parsed by `prometheus_client.parser`.
async fn scrape(addr: std::net::SocketAddr) -> Vec<Sample> {
    let resp = reqwest::get(format!("http://{addr}/metrics")).await.expect("scrape");
    assert_eq!(resp.status(), StatusCode::OK);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let text = resp.text().await.expect("text");
    let venv = std::env::var("WARD_TEST_VENV").unwrap_or_else(|_| "target/ward-venv".into());
    let python = std::path::Path::new(&venv).join("bin/python");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/prom_parse.py");
    let mut child = std::process::Command::new(&python)
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (pip install prometheus-client)", python.display()));
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().expect("parser ran");
    assert!(
        out.status.success(),
        "the Prometheus parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json line");
            Sample {
                name: v["name"].as_str().unwrap().to_owned(),
                labels: v["labels"].as_object().unwrap().clone(),
                value: v["value"].as_f64().unwrap_or(f64::NAN),
            }
        })
        .collect()
}

/// The samples named `name` whose labels include every `(key, value)`.
fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).and_then(Value::as_str) == Some(*v))
        })
        .collect()
}

fn has(samples: &[Sample], name: &str, labels: &[(&str, &str)], ctx: &str) -> f64 {
    let found = find(samples, name, labels);
    assert!(
        !found.is_empty(),
        "{ctx}: no {name} with {labels:?}; names: {:?}",
        samples.iter().map(|s| s.name.as_str()).collect::<BTreeSet<_>>()
    );
    found.iter().map(|s| s.value).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_a_mixed_workload() {
    if parser_python().is_none() {
        return;
    }
    for db in ward_store::testing::backends().await {
        let s = TestServer::start_with(db, |c| c.metrics_listen = Some("127.0.0.1:0".parse().unwrap())).await;
        let b = s.backend;
        let metrics = s.metrics_addr().expect("a metrics address");

        // The public port does not serve them.
        let r = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap();
        let text = r.text().await.unwrap();
        assert!(
            !text.contains("ward_http_requests_total"),
            "[{b}] /metrics on the public port"
        );

        // REST.
        let org = uid(&s.create_group(None, "metered").await);
        let (status, _) = s.get(&format!("/iam/v2/groups/{org}")).await;
        assert_eq!(status, StatusCode::OK);
        let (status, _) = s.get(&format!("/iam/v2/groups/{org}/nope/at/all")).await;
        assert_ne!(status, StatusCode::OK);
        let (status, _) = s.get("/no/such/thing/4242").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // gRPC.
        let channel = tonic::transport::Channel::from_shared(s.base.clone())
            .unwrap()
            .connect()
            .await
            .expect("grpc");
        let mut groups = ward_proto::iam::v2::groups_service_client::GroupsServiceClient::with_interceptor(
            channel,
            common::Bearer(s.token.clone()),
        );
        groups
            .get_group(ward_proto::iam::v2::GetGroupRequest { uid: org.clone() })
            .await
            .expect("GetGroup over gRPC");
        let missing = groups
            .get_group(ward_proto::iam::v2::GetGroupRequest {
                uid: format!("{org}/0123456789abcdef"),
            })
            .await
            .expect_err("a missing group");
        assert_eq!(missing.code(), tonic::Code::NotFound);
        // The registry: a push and a pull.
        let (status, body) = s
            .post(&format!("/registry/v2/repos/{org}"), json!({"name": "app"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let blob = common::push_blob(&s, &format!("{org}/app"), b"some layer bytes, forty of them.........").await;
        let r = s
            .http
            .get(format!("{}/v2/{org}/app/blobs/{blob}", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        // A refused token exchange.
        let r = s
            .http
            .get(format!("{}/sts/exchange?aud={}", s.base, s.base))
            .bearer_auth("not.a.token")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "[{b}] a refused exchange");

        let m = scrape(metrics).await;
        let ctx = format!("[{b}]");
        assert!(
            has(
                &m,
                "ward_http_requests_total",
                &[
                    ("method", "GET"),
                    ("route", "/iam/v2/groups/{uid=**}"),
                    ("status", "200")
                ],
                &ctx
            ) >= 1.0
        );
        has(
            &m,
            "ward_http_requests_total",
            &[("route", "unmatched"), ("status", "404")],
            &ctx,
        );
        has(
            &m,
            "ward_http_request_duration_seconds_bucket",
            &[("route", "/iam/v2/groups/{uid=**}"), ("le", "+Inf")],
            &ctx,
        );
        has(
            &m,
            "ward_grpc_requests_total",
            &[
                ("rpc", "chainguard.platform.iam.v2.GroupsService.GetGroup"),
                ("code", "OK"),
            ],
            &ctx,
        );
        has(
            &m,
            "ward_grpc_requests_total",
            &[
                ("rpc", "chainguard.platform.iam.v2.GroupsService.GetGroup"),
                ("code", "NOT_FOUND"),
            ],
            &ctx,
        );
        has(&m, "ward_grpc_request_duration_seconds_count", &[], &ctx);
        has(&m, "ward_db_query_duration_seconds_count", &[("backend", b)], &ctx);
        if b == "sqlite" {
            has(&m, "ward_sqlite_writer_batch_size_count", &[], &ctx);
            has(&m, "ward_sqlite_writer_queue_depth", &[], &ctx);
        } else {
            has(&m, "ward_db_pool_connections", &[("state", "in_use")], &ctx);
        }
        assert!(has(&m, "ward_registry_bytes_total", &[("direction", "in")], &ctx) >= 40.0);
        assert!(has(&m, "ward_registry_bytes_total", &[("direction", "out")], &ctx) >= 40.0);
        has(
            &m,
            "ward_blob_operation_duration_seconds_count",
            &[("op", "commit")],
            &ctx,
        );
        has(
            &m,
            "ward_token_exchanges_total",
            &[("outcome", "UNAUTHENTICATED")],
            &ctx,
        );
        has(&m, "ward_jobs_queued", &[], &ctx);
        has(&m, "process_resident_memory_bytes", &[], &ctx);
        has(&m, "process_cpu_seconds_total", &[], &ctx);
        // Bounded labels: no sample carries a uid, a digest or a raw path.
        for sample in &m {
            for (k, v) in &sample.labels {
                let v = v.as_str().unwrap_or_default();
                assert!(
                    !v.contains(&org) && !v.contains("sha256:") && !v.contains("4242"),
                    "{ctx} {} has a request's own text in {k}={v}",
                    sample.name
                );
            }
        }
    }
}
