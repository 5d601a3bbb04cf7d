//! Logs and traces for `ward server`.
//!
//! - Logs go to stderr as text, or as JSON lines with
//!   `WARD_LOG_FORMAT=json`; `WARD_LOG` filters them (`info` by default).
//! - With `OTEL_EXPORTER_OTLP_ENDPOINT` set (an OTLP/gRPC collector, e.g.
//!   `http://collector:4317`), spans are exported over OTLP: one per request
//!   (the transport), one per RPC (the service) and one per database query
//!   (the store). `OTEL_SERVICE_NAME` names the service (`ward` by default);
//!   `WARD_TRACE` filters spans like `WARD_LOG` filters logs (`info`).
//! - Every request's span carries a `trace_id`: an incoming W3C
//!   `traceparent`'s when the request has one, else a new one. JSON log lines
//!   written while the request runs carry it. Outgoing calls (upstream OIDC
//!   issuers, webhook sinks) send the current span's `traceparent`.
//!
//! Nothing here logs request headers or bodies, so tokens never reach a log
//! (a test scans a whole workload's logs for them).

use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Flushes exported spans when dropped (keep it for the process's life).
pub struct Guard(Option<opentelemetry_sdk::trace::SdkTracerProvider>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take()
            && let Err(e) = p.shutdown()
        {
            eprintln!("warning: flushing traces failed: {e}");
        }
    }
}

/// The share of requests without a `traceparent` that start a trace, unless
/// `OTEL_TRACES_SAMPLER` is set (`always_on` traces all).
pub const DEFAULT_SAMPLE_RATIO: f64 = 0.01;

/// The ratio in force (set when exporting starts).
static RATIO: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// Targets of the spans that start a sampled trace.
const SAMPLED_PREFIX: &str = "ward::sampled";
const SAMPLED_REQUEST: &str = "ward::sampled::request";
pub const SAMPLED_DELIVERY: &str = "ward::sampled::deliver";

/// The sampling ratio from the standard variables: `always_on` 1,
/// `always_off` 0, `traceidratio` its `OTEL_TRACES_SAMPLER_ARG`; the
/// `parentbased_` forms alike (a caller's sampled `traceparent` is always
/// followed, an unsampled one never).
fn sample_ratio() -> f64 {
    let arg = || {
        std::env::var("OTEL_TRACES_SAMPLER_ARG")
            .ok()
            .and_then(|a| a.trim().parse::<f64>().ok())
            .filter(|r| (0.0..=1.0).contains(r))
            .unwrap_or(1.0)
    };
    match std::env::var("OTEL_TRACES_SAMPLER").as_deref().map(str::trim) {
        Ok("always_on" | "parentbased_always_on") => 1.0,
        Ok("always_off" | "parentbased_always_off") => 0.0,
        Ok("traceidratio" | "parentbased_traceidratio") => arg(),
        _ => DEFAULT_SAMPLE_RATIO,
    }
}

/// Whether work that starts a trace of its own (no caller) is sampled.
pub fn sampled_root() -> bool {
    exporting() && rand::random::<f64>() < RATIO.get().copied().unwrap_or(DEFAULT_SAMPLE_RATIO)
}

static OTEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether spans are exported (OpenTelemetry is on).
pub fn exporting() -> bool {
    OTEL.load(std::sync::atomic::Ordering::Relaxed)
}

/// Installs the process's subscriber. Call once, inside the runtime.
pub fn init() -> anyhow::Result<Guard> {
    let filter =
        || EnvFilter::try_from_env("WARD_LOG").unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=warn"));
    // Spans that exist for traces only stay out of the logs (and, with no
    // exporter, are never created).
    let log_filter = || {
        let off = format!("{}=off", ward_core::traceparent::SPANS);
        filter().add_directive(off.parse().expect("a directive"))
    };
    let json = std::env::var("WARD_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let fmt = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(log_filter())
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(log_filter())
            .boxed()
    };
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .ok()
        .filter(|e| !e.trim().is_empty());
    let (otel, provider) = match endpoint {
        None => (None, None),
        Some(_) => {
            // The exporter reads the endpoint (and OTEL_EXPORTER_OTLP_* settings) itself.
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build()
                .map_err(|e| anyhow::anyhow!("OTEL_EXPORTER_OTLP_ENDPOINT: {e}"))?;
            let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "ward".into());
            // Ward samples when a request (or a delivery) starts (see
            // `sampled_root`); what reaches the SDK is to be exported.
            let _ = RATIO.set(sample_ratio());
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOn)
                .with_resource(
                    opentelemetry_sdk::Resource::builder()
                        .with_service_name(service)
                        .build(),
                )
                .build();
            let tracer = provider.tracer("ward");
            opentelemetry::global::set_text_map_propagator(
                opentelemetry_sdk::propagation::TraceContextPropagator::new(),
            );
            OTEL.store(true, std::sync::atomic::Ordering::Relaxed);
            ward_core::traceparent::set_source(current_traceparent);
            (
                // Only sampled requests and deliveries, and what runs inside
                // them, reach the exporter: an unsampled request costs a
                // filter check per span, not a span. Spans follow WARD_TRACE
                // (default `info`), not the log level.
                Some(
                    tracing_opentelemetry::layer()
                        .with_tracer(tracer)
                        // Busy/idle time, thread and source location on every
                        // span cost more than they tell here.
                        .with_tracked_inactivity(false)
                        .with_threads(false)
                        .with_location(false)
                        .with_filter(
                            EnvFilter::try_from_env("WARD_TRACE")
                                .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,h2=warn"))
                                .and(
                                    tracing_subscriber::filter::DynFilterFn::new(|meta, cx| {
                                        meta.target().starts_with(SAMPLED_PREFIX) || cx.lookup_current().is_some()
                                    })
                                    // Only Ward's own trace spans are decided per
                                    // use; every other callsite (events, other
                                    // crates' spans) is off for good, so its
                                    // checks stay as cheap as without traces.
                                    .with_callsite_filter(|meta| {
                                        let ours = meta.target().starts_with(SAMPLED_PREFIX)
                                            || meta.target().starts_with(ward_core::traceparent::SPANS);
                                        if meta.is_span() && ours {
                                            tracing::subscriber::Interest::sometimes()
                                        } else {
                                            tracing::subscriber::Interest::never()
                                        }
                                    }),
                                ),
                        ),
                ),
                Some(provider),
            )
        }
    };
    tracing_subscriber::registry().with(fmt).with(otel).try_init()?;
    Ok(Guard(provider))
}

/// The current span's `traceparent`, when spans are exported.
fn current_traceparent() -> Option<String> {
    let cx = tracing::Span::current().context();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid()
        .then(|| format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}

/// The trace id of a valid `traceparent` header (`00-<32 hex>-<16 hex>-<2
/// hex>`), and whether its caller sampled it.
fn incoming_trace(headers: &http::HeaderMap) -> Option<(String, bool)> {
    let v = headers.get(ward_core::traceparent::HEADER)?.to_str().ok()?;
    let mut parts = v.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && trace != "0".repeat(32)
        && hex(span, 16)
        && span != "0".repeat(16)
        && hex(flags, 2);
    let sampled = u8::from_str_radix(flags, 16).is_ok_and(|f| f & 1 == 1);
    valid.then(|| (trace.to_owned(), sampled))
}

/// A request's span (tower-http's `make_span_with`): method, path and its
/// trace id, with the incoming `traceparent` as its parent.
pub fn request_span<B>(req: &http::Request<B>) -> tracing::Span {
    let incoming = incoming_trace(req.headers());
    let sampled = match &incoming {
        Some((_, sampled)) => exporting() && *sampled,
        None => sampled_root(),
    };
    let span = if sampled {
        tracing::info_span!(
            target: SAMPLED_REQUEST,
            "request",
            method = %req.method(),
            path = %req.uri().path(),
            trace_id = tracing::field::Empty,
        )
    } else {
        tracing::info_span!(
            "request",
            method = %req.method(),
            path = %req.uri().path(),
            trace_id = tracing::field::Empty,
        )
    };
    let trace_id = if sampled {
        let parent = opentelemetry::global::get_text_map_propagator(|p| {
            p.extract(&opentelemetry_http_headers::Extractor(req.headers()))
        });
        let _ = span.set_parent(parent);
        let id = span.context().span().span_context().trace_id();
        (id != opentelemetry::trace::TraceId::INVALID).then(|| id.to_string())
    } else {
        None
    };
    let trace_id = trace_id.or_else(|| incoming.map(|(id, _)| id)).unwrap_or_else(|| {
        use rand::RngCore as _;
        let mut b = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut b);
        hex::encode(b)
    });
    span.record("trace_id", trace_id.as_str());
    span
}

/// The service's span around routing and the handler (inside the
/// transport's `request` span; the store's spans nest in it), named `rpc`
/// with the documented route template or the gRPC method. Only while spans
/// are exported: logs do not need it.
pub async fn service_span(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    if !exporting() {
        return next.run(req).await;
    }
    // Only a sampled request's work is traced (the transport's span, which
    // is current here, says whether it was sampled): an unsampled one makes
    // no `rpc` span and, outside the scope, no store spans.
    let sampled = tracing::Span::current()
        .metadata()
        .is_some_and(|m| m.target() == SAMPLED_REQUEST);
    if !sampled {
        return next.run(req).await;
    }
    let grpc = crate::grpc::is_grpc(req.headers());
    let span = if grpc {
        let rpc = crate::telemetry::grpc_method(req.uri().path()).unwrap_or("other");
        tracing::info_span!(target: ward_core::traceparent::SPANS, "rpc", rpc = rpc, transport = "grpc")
    } else {
        let route = req.extensions().get::<crate::rest::table::RouteLabel>();
        tracing::info_span!(target: ward_core::traceparent::SPANS, "rpc", rpc = route.map_or("unmatched", |r| &*r.0), transport = "rest")
    };
    ward_core::traceparent::traced_scope(tracing::Instrument::instrument(next.run(req), span)).await
}

/// Reads W3C trace context from request headers (what
/// `opentelemetry-http`'s extractor does, without the extra crate).
mod opentelemetry_http_headers {
    pub struct Extractor<'a>(pub &'a http::HeaderMap);

    impl opentelemetry::propagation::Extractor for Extractor<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }

        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(http::HeaderName::as_str).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents() {
        let mut h = http::HeaderMap::new();
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        h.insert("traceparent", ok.parse().unwrap());
        assert_eq!(
            incoming_trace(&h),
            Some(("4bf92f3577b34da6a3ce929d0e0e4736".into(), true))
        );
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        h.insert("traceparent", unsampled.parse().unwrap());
        assert_eq!(incoming_trace(&h).map(|t| t.1), Some(false), "not sampled");
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f35-00f067aa0ba902b7-01",
            "garbage",
        ] {
            h.insert("traceparent", bad.parse().unwrap());
            assert_eq!(incoming_trace(&h), None, "{bad}");
        }
    }
}
