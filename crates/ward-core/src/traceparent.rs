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
