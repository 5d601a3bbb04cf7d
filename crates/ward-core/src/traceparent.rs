//! The W3C `traceparent` of the work in progress, for outgoing calls (an
//! upstream OIDC issuer, a webhook sink), so a trace continues across them.
//! The server installs the source once tracing is set up; crates that make
//! calls ask here without depending on the tracing stack.

use std::sync::OnceLock;

static SOURCE: OnceLock<fn() -> Option<String>> = OnceLock::new();

/// Installs where the current `traceparent` comes from (once per process).
pub fn set_source(f: fn() -> Option<String>) {
    let _ = SOURCE.set(f);
}

/// The current span's `traceparent`, when traces are being exported.
pub fn current() -> Option<String> {
    SOURCE.get().and_then(|f| f())
}

/// The header's name.
pub const HEADER: &str = "traceparent";

/// The target of spans that exist for traces only (the service's and the
/// store's): logs leave them out, so they cost nothing unless traces are
/// exported.
pub const SPANS: &str = "ward_trace";

tokio::task_local! {
    /// Set while a sampled request's work runs (see [`traced_scope`]).
    static TRACED: ();
}

/// Whether the task runs a sampled request's work: only then are the
/// service's and the store's trace-only spans made. An unsampled request
/// (99% by default) skips them with this one task-local read, instead of
/// each span's callsite asking the subscriber's filters.
pub fn traced() -> bool {
    TRACED.try_with(|_| ()).is_ok()
}

/// Runs `f` as a sampled request's work.
pub async fn traced_scope<F: std::future::Future>(f: F) -> F::Output {
    TRACED.scope((), f).await
}
