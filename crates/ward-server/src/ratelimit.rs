//! Rate limits: token buckets (GCRA, `governor`) per authenticated identity
//! and, for requests without a valid Ward token (the token exchange, the
//! registry's `/token`, login pages, anything anonymous), per client
//! address. Both are off unless configured; each replica counts its own.
//!
//! A request over its limit is answered at once, before any other work:
//! HTTP 429 with `Retry-After` and a `google.rpc.Status` of code 8
//! (RESOURCE_EXHAUSTED) with a `RetryInfo` detail; over gRPC the same status
//! and detail; under `/v2/` the registry's `TOOMANYREQUESTS` error.
//!
//! Behind a proxy, `--client-address-header` names the header the proxy
//! sets; its right-most address (the one the proxy appended) is then the
//! client's for these limits and every other per-client cap. Without the
//! flag the header is ignored: a client cannot choose its own address.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use serde_json::json;

use crate::serve::ClientAddr;
use crate::ward::Ward;

/// One bucket's rate and burst (`0` requests per second: no limit).
#[derive(Clone, Copy, Debug, Default)]
pub struct Rate {
    pub per_second: u32,
    pub burst: u32,
}

impl Rate {
    fn quota(self) -> Option<Quota> {
        let rate = NonZeroU32::new(self.per_second)?;
        let burst = NonZeroU32::new(self.burst).unwrap_or(rate);
        Some(Quota::per_second(rate).allow_burst(burst))
    }
}

/// The limiters of one server.
#[derive(Default)]
pub struct RateLimits {
    identities: Option<DefaultKeyedRateLimiter<String>>,
    clients: Option<DefaultKeyedRateLimiter<IpAddr>>,
    /// The trusted proxy's client-address header, lowercase.
    client_header: Option<http::HeaderName>,
}

impl RateLimits {
    pub fn new(identity: Rate, client: Rate, client_header: Option<http::HeaderName>) -> Self {
        Self {
            identities: identity.quota().map(governor::RateLimiter::keyed),
            clients: client.quota().map(governor::RateLimiter::keyed),
            client_header,
        }
    }

    /// Forgets buckets that are full again (keeps memory to active keys).
    pub fn sweep(&self) {
        if let Some(l) = &self.identities {
            l.retain_recent();
            l.shrink_to_fit();
        }
        if let Some(l) = &self.clients {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }

    /// The client's address: the trusted header's right-most address when
    /// one is configured and present, else the connection's.
    fn client_of(&self, req: &axum::extract::Request) -> Option<IpAddr> {
        let peer = req.extensions().get::<ClientAddr>().map(|c| c.0);
        let Some(name) = &self.client_header else {
            return peer;
        };
        let forwarded = req
            .headers()
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|s| parse_addr(s.trim()))
            .next_back();
        forwarded.or(peer)
    }
}

/// An address as proxies write it: `192.0.2.1`, `2001:db8::1`,
/// `[2001:db8::1]:443` or `192.0.2.1:443`.
fn parse_addr(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    s.parse::<std::net::SocketAddr>().ok().map(|a| a.ip())
}

/// How long until the request would conform, if it is over its limit.
fn over<K: std::hash::Hash + Eq + Clone>(limiter: &DefaultKeyedRateLimiter<K>, key: &K) -> Option<Duration> {
    limiter
        .check_key(key)
        .err()
        .map(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
}

/// The limits, applied before anything else runs.
pub async fn limit(
    axum::extract::State(ward): axum::extract::State<Arc<Ward>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let limits = &ward.rate_limits;
    let client = limits.client_of(&req);
    if limits.client_header.is_some()
        && let Some(ip) = client
    {
        // Every per-client cap downstream counts this address too.
        req.extensions_mut().insert(ClientAddr(ip.to_canonical()));
    }
    if limits.identities.is_none() && limits.clients.is_none() {
        return next.run(req).await;
    }
    // A valid Ward token: its identity's bucket (verification is cached,
    // and the handler's own is then a cache hit). Anything else: the
    // client's.
    let subject = match req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(ward_auth::bearer)
    {
        Some(token) => ward.tokens.verify(token).await.ok().map(|c| c.sub.clone()),
        None => None,
    };
    let bucket = if subject.is_some() { "identity" } else { "client" };
    let wait = match subject {
        Some(sub) => limits.identities.as_ref().and_then(|l| over(l, &sub)),
        None => match (&limits.clients, client) {
            (Some(l), Some(ip)) => over(l, &ClientAddr(ip).key()),
            _ => None,
        },
    };
    match wait {
        None => next.run(req).await,
        Some(wait) => {
            metrics::counter!("ward_rate_limited_total", "bucket" => bucket).increment(1);
            too_many(&req, wait)
        }
    }
}

/// The answer to a request over its limit, in its transport's own shape.
fn too_many(req: &axum::extract::Request, wait: Duration) -> Response {
    // Whole seconds for Retry-After (at least 1); the exact delay in RetryInfo.
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let secs = secs.max(1);
    let message = format!("rate limit exceeded; retry in {secs} s");
    let is_grpc = crate::grpc::is_grpc(req.headers());
    if is_grpc {
        use tonic_types::{ErrorDetails, StatusExt};
        let mut details = ErrorDetails::with_error_info(
            "RESOURCE_EXHAUSTED",
            crate::status::IAM_DOMAIN,
            std::collections::HashMap::<String, String>::new(),
        );
        details.set_retry_info(Some(wait));
        let status = tonic::Status::with_error_details(tonic::Code::ResourceExhausted, message, details);
        let mut resp = status.into_http::<axum::body::Body>();
        if let Ok(v) = http::HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(http::header::RETRY_AFTER, v);
        }
        return resp;
    }
    let body = if crate::oci::is_registry_path(req.uri().path()) {
        json!({"errors": [{"code": "TOOMANYREQUESTS", "message": message, "detail": {"retryAfterSeconds": secs}}]})
    } else {
        json!({
            "code": 8,
            "message": message,
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RESOURCE_EXHAUSTED",
                    "domain": crate::status::IAM_DOMAIN,
                    "metadata": {},
                },
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": format!("{:.3}s", wait.as_secs_f64()),
                },
            ],
        })
    };
    (
        http::StatusCode::TOO_MANY_REQUESTS,
        [(http::header::RETRY_AFTER, secs.to_string())],
        axum::Json(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_addresses() {
        assert_eq!(parse_addr("192.0.2.1"), Some("192.0.2.1".parse().unwrap()));
        assert_eq!(parse_addr("192.0.2.1:443"), Some("192.0.2.1".parse().unwrap()));
        assert_eq!(parse_addr("[2001:db8::1]:443"), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(parse_addr("2001:db8::1"), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(parse_addr("unknown"), None);
    }

    #[test]
    fn a_zero_rate_is_no_limit() {
        assert!(Rate::default().quota().is_none());
        assert!(
            Rate {
                per_second: 5,
                burst: 0
            }
            .quota()
            .is_some()
        );
    }
}
