//! Prometheus metrics. One process-wide recorder behind the `metrics` facade
//! (so the store and the blob store record without plumbing), installed only
//! when `--metrics-listen` is given: without it every recording is a no-op.
//! The text exposition is served at `/metrics` on that address alone, never
//! on the public port.
//!
//! Every label value comes from a fixed set, never from a request as sent:
//! - `route`: the documented path template (`/iam/v2/groups/{uid}`), or
//!   `unmatched`; `method`: a standard HTTP method or `OTHER`; `status`: the
//!   numeric status.
//! - `rpc`: a gRPC method of Ward's descriptors (`chainguard.platform.iam.v2.Groups/List`),
//!   or `other`; `code`: the gRPC status name.
//! - `op`, `kind`, `backend` (store), `direction` (registry bytes),
//!   `outcome` (exchanges, logins: `ok` or an error code's name), `flow`,
//!   `state` (pool), `kind` (job queue: the job kinds of the code).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use ward_blob::{BlobError, BlobStore, ByteStream};
use ward_core::registry::Digest;

use crate::ward::Ward;

/// Latency buckets (seconds): 0.5 ms to 30 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Writer batch-size buckets (jobs per transaction).
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the recorder (once per process); the handle that renders it.
/// None if another recorder was installed first.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full("ward_sqlite_writer_batch_size".into()), BATCH_BUCKETS)
                });
            match builder.map(PrometheusBuilder::install_recorder) {
                Ok(Ok(handle)) => {
                    ward_store::record_metrics();
                    metrics_process::Collector::new("").describe();
                    Some(handle)
                }
                Ok(Err(e)) | Err(e) => {
                    tracing::warn!(error = %e, "could not install the metrics recorder");
                    None
                }
            }
        })
        .as_ref()
}

/// Whether metrics are being recorded (a `--metrics-listen` server started).
pub fn enabled() -> bool {
    matches!(HANDLE.get(), Some(Some(_)))
}

/// The `/metrics` text: gauges read now (pools, job queues, the process)
/// and everything recorded since start.
async fn render(ward: &Ward) -> String {
    let Some(handle) = install() else {
        return String::new();
    };
    ward.store.observe();
    match ward.store.job_backlog().await {
        Ok(rows) => {
            // Every kind reads, 0 when its queue is empty (not its last depth).
            static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
                std::sync::Mutex::new(std::collections::BTreeSet::new());
            let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            use crate::services::vulns::{BACKFILL, INVENTORY, REEVAL, REPORT};
            for kind in [INVENTORY, REPORT, REEVAL, BACKFILL, ward_store::events::DELIVER] {
                seen.insert(kind.to_owned());
            }
            for kind in seen.iter() {
                gauge!("ward_jobs_queued", "kind" => kind.clone()).set(0.0);
                gauge!("ward_jobs_oldest_due_seconds", "kind" => kind.clone()).set(0.0);
            }
            let now = ward.clock.now_millis();
            for (kind, n, oldest) in rows {
                gauge!("ward_jobs_queued", "kind" => kind.clone()).set(n as f64);
                let lag = (now - oldest).max(0) as f64 / 1000.0;
                gauge!("ward_jobs_oldest_due_seconds", "kind" => kind.clone()).set(lag);
                seen.insert(kind);
            }
        }
        Err(e) => tracing::warn!(error = %e.message(), "reading the job queue for metrics failed"),
    }
    gauge!("ward_registry_pulls_waiting").set(ward.pulls.len() as f64);
    metrics_process::Collector::new("").collect();
    handle.run_upkeep();
    handle.render()
}

/// Serves `/metrics` on `listener` until the task is aborted.
pub fn serve(listener: tokio::net::TcpListener, ward: Arc<Ward>) -> tokio::task::JoinHandle<()> {
    use axum::response::IntoResponse;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let ward = ward.clone();
            async move {
                (
                    [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                    render(&ward).await,
                )
                    .into_response()
            }
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the metrics listener stopped");
        }
    })
}

/// The gRPC methods Ward serves, by request path (`/pkg.Service/Method`),
/// with their label.
fn grpc_methods() -> &'static HashMap<String, &'static str> {
    static METHODS: OnceLock<HashMap<String, &'static str>> = OnceLock::new();
    METHODS.get_or_init(|| {
        ward_proto::descriptors::pool()
            .methods
            .keys()
            .filter_map(|full| {
                let (service, method) = full.rsplit_once('.')?;
                Some((format!("/{service}/{method}"), full.as_str()))
            })
            .collect()
    })
}

/// The label of a gRPC request path, if it is one of Ward's methods.
pub fn grpc_method(path: &str) -> Option<&'static str> {
    grpc_methods().get(path).copied()
}

fn method_label(m: &http::Method) -> &'static str {
    match *m {
        http::Method::GET => "GET",
        http::Method::HEAD => "HEAD",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        http::Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// Counts and times every request: REST by route template, gRPC by method.
/// A pass-through while metrics are off.
pub async fn observe(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    if !enabled() {
        return next.run(req).await;
    }
    let started = Instant::now();
    let grpc = crate::grpc::is_grpc(req.headers());
    if grpc {
        let rpc = grpc_method(req.uri().path()).unwrap_or("other");
        let resp = next.run(req).await;
        // Ward's RPCs are unary: an error is a trailers-only answer, whose
        // status is in the headers; an answer with a body succeeded.
        let code = resp
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i32>().ok())
            .map_or("OK", grpc_code_name);
        counter!("ward_grpc_requests_total", "rpc" => rpc, "code" => code).increment(1);
        histogram!("ward_grpc_request_duration_seconds", "rpc" => rpc).record(started.elapsed().as_secs_f64());
        return resp;
    }
    let method = method_label(req.method());
    let resp = next.run(req).await;
    // The route the router's method check matched (`unmatched` without one).
    let route = resp
        .extensions()
        .get::<crate::rest::table::RouteLabel>()
        .map(|r| r.0.clone());
    let (count, time) = http_series(route, method, resp.status());
    count.increment(1);
    time.record(started.elapsed().as_secs_f64());
    resp
}

/// A request's series: (route, method, status) → its counter and histogram.
type HttpSeries = HashMap<(Option<Arc<str>>, &'static str, u16), (metrics::Counter, metrics::Histogram)>;

/// The handles of a request's series, registered once: registering hashes
/// the whole labelled key, a lookup here only the route. Bounded: routes ×
/// methods × statuses are all fixed sets.
fn http_series(
    route: Option<Arc<str>>,
    method: &'static str,
    status: http::StatusCode,
) -> (metrics::Counter, metrics::Histogram) {
    static SERIES: OnceLock<std::sync::RwLock<HttpSeries>> = OnceLock::new();
    let series = SERIES.get_or_init(Default::default);
    let key = (route, method, status.as_u16());
    if let Some(h) = series
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
    {
        return h.clone();
    }
    let label: metrics::SharedString = match &key.0 {
        Some(r) => r.clone().into(),
        None => metrics::SharedString::const_str("unmatched"),
    };
    let handles = (
        counter!("ward_http_requests_total", "method" => method, "route" => label.clone(), "status" => status_label(status)),
        histogram!("ward_http_request_duration_seconds", "method" => method, "route" => label),
    );
    series
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(key, handles.clone());
    handles
}

/// The status label: a static string for the statuses Ward answers with.
fn status_label(s: http::StatusCode) -> metrics::SharedString {
    const KNOWN: &[&str] = &[
        "200", "201", "202", "204", "206", "301", "302", "303", "304", "307", "308", "400", "401", "403", "404", "405",
        "406", "408", "409", "411", "412", "413", "415", "416", "422", "429", "431", "499", "500", "501", "502", "503",
        "504",
    ];
    match KNOWN.iter().find(|k| **k == s.as_str()) {
        Some(k) => metrics::SharedString::const_str(k),
        None => s.as_str().to_owned().into(),
    }
}

fn grpc_code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "OTHER",
    }
}

/// The outcome label of a service result: `ok` or the error code's name.
pub fn outcome<T>(r: &ward_core::Result<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code().name(),
    }
}

/// A blob store that times its operations and counts registry bytes.
pub struct MeteredBlobs(pub Arc<dyn BlobStore>);

fn timed(op: &'static str, started: Instant) {
    histogram!("ward_blob_operation_duration_seconds", "op" => op).record(started.elapsed().as_secs_f64());
}

#[async_trait::async_trait]
impl BlobStore for MeteredBlobs {
    async fn append(&self, id: &str, offset: u64, body: ByteStream, limit: u64) -> Result<u64, BlobError> {
        let started = Instant::now();
        let r = self.0.append(id, offset, body, limit).await;
        timed("append", started);
        if let Ok(len) = &r {
            counter!("ward_registry_bytes_total", "direction" => "in").increment(len.saturating_sub(offset));
        }
        r
    }

    async fn commit(&self, id: &str, len: u64, digest: &Digest) -> Result<u64, BlobError> {
        let started = Instant::now();
        let r = self.0.commit(id, len, digest).await;
        timed("commit", started);
        r
    }

    async fn cancel(&self, id: &str) -> std::io::Result<()> {
        let started = Instant::now();
        let r = self.0.cancel(id).await;
        timed("cancel", started);
        r
    }

    async fn size(&self, digest: &Digest) -> std::io::Result<Option<u64>> {
        let started = Instant::now();
        let r = self.0.size(digest).await;
        timed("size", started);
        r
    }

    async fn read(&self, digest: &Digest, start: u64, end: u64) -> std::io::Result<Option<ByteStream>> {
        let started = Instant::now();
        let r = self.0.read(digest, start, end).await;
        timed("read", started);
        if let Ok(Some(_)) = &r {
            counter!("ward_registry_bytes_total", "direction" => "out").increment(end.saturating_sub(start));
        }
        r
    }

    async fn remove(&self, digest: &Digest, grace: Duration) -> std::io::Result<bool> {
        let started = Instant::now();
        let r = self.0.remove(digest, grace).await;
        timed("remove", started);
        r
    }
}
