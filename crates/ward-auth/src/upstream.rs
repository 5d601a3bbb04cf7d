//! Verifying upstream OIDC tokens (a CI platform's identity token) for the
//! token exchange.
//!
//! Signing keys come from the issuer's `/.well-known/openid-configuration` →
//! `jwks_uri`, fetched only for an issuer that an identity names, never for an
//! arbitrary `iss`. Fetches are https-only, refuse redirects, time out after
//! [`FETCH_TIMEOUT`], read at most [`MAX_DOCUMENT_BYTES`], and never reach
//! loopback, private or link-local addresses unless the policy allows it (the
//! address checked is the address connected to). Key sets are cached for
//! [`KEYS_TTL`]; an unknown `kid` refetches at most once per
//! [`REFETCH_INTERVAL`] per issuer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde_json::Value;
use ward_core::clock::Clock;
use ward_core::{Error, Result};

pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
pub const KEYS_TTL_MS: i64 = 60 * 60 * 1000;
pub const REFETCH_INTERVAL_MS: i64 = 30 * 1000;
/// After a failed fetch, the same issuer is not tried again for this long:
/// forged tokens naming a down issuer cannot make every request wait on it.
pub const FAILURE_BACKOFF_MS: i64 = 10 * 1000;
/// Largest upstream token accepted.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Clock skew tolerated on `exp`, `nbf` and `iat`.
pub const LEEWAY_SECS: i64 = 60;

/// Algorithms accepted on upstream tokens: never `none` or HMAC.
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

fn reject(msg: impl Into<String>) -> Error {
    Error::Unauthenticated(msg.into())
}

/// A token whose header and claims were read but not yet verified.
pub struct Unverified {
    pub raw: String,
    pub header: Header,
    pub claims: serde_json::Map<String, Value>,
}

impl Unverified {
    /// Reads a token's header and claims, and checks its size and algorithm.
    pub fn peek(token: &str) -> Result<Self> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(reject("the identity token is too large"));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| reject("the identity token is malformed"))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(reject(format!(
                "the identity token's algorithm {:?} is not accepted",
                header.alg
            )));
        }
        let payload = token
            .split('.')
            .nth(1)
            .ok_or_else(|| reject("the identity token is malformed"))?;
        let bytes = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| reject("the identity token is malformed"))?;
        let claims: serde_json::Map<String, Value> =
            serde_json::from_slice(&bytes).map_err(|_| reject("the identity token is malformed"))?;
        Ok(Self {
            raw: token.to_owned(),
            header,
            claims,
        })
    }

    pub fn str_claim(&self, name: &str) -> Option<&str> {
        self.claims.get(name).and_then(Value::as_str)
    }

    /// `aud` as a list (a string or an array of strings).
    pub fn audiences(&self) -> Vec<String> {
        match self.claims.get("aud") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => Vec::new(),
        }
    }

    /// A NumericDate claim (RFC 7519: seconds, possibly fractional). Present
    /// but not a number is an error, so a malformed time is never skipped.
    fn numeric_date(&self, name: &str) -> Result<Option<f64>> {
        match self.claims.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| reject(format!("the identity token's {name} claim is not a number"))),
        }
    }

    /// Checks `exp` (required), `nbf` and `iat` against `now`, with leeway.
    /// Compared as f64: fractional dates count, and huge ones cannot overflow.
    pub fn check_times(&self, now_secs: i64) -> Result<()> {
        let (now, leeway) = (now_secs as f64, LEEWAY_SECS as f64);
        let exp = self
            .numeric_date("exp")?
            .ok_or_else(|| reject("the identity token has no exp claim"))?;
        if now > exp + leeway {
            return Err(reject("the identity token has expired"));
        }
        if self.numeric_date("nbf")?.is_some_and(|nbf| now + leeway < nbf) {
            return Err(reject("the identity token is not valid yet (nbf)"));
        }
        if self.numeric_date("iat")?.is_some_and(|iat| now + leeway < iat) {
            return Err(reject("the identity token was issued in the future (iat)"));
        }
        Ok(())
    }

    /// Verifies the signature with a key from `keys` (by `kid`, or the only
    /// key that fits when the token names none). Claims are checked elsewhere.
    pub fn verify_signature(&self, keys: &JwkSet) -> Result<()> {
        let bad = || reject("the identity token's signature is invalid");
        let candidates: Vec<_> = match &self.header.kid {
            Some(kid) => keys
                .keys
                .iter()
                .filter(|k| k.common.key_id.as_deref() == Some(kid.as_str()))
                .collect(),
            None => keys.keys.iter().collect(),
        };
        if candidates.is_empty() {
            return Err(reject(
                "the identity token's signing key (kid) is unknown to its issuer",
            ));
        }
        let mut validation = Validation::new(self.header.alg);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        for jwk in candidates {
            let Ok(key) = DecodingKey::from_jwk(jwk) else { continue };
            if jsonwebtoken::decode::<Value>(&self.raw, &key, &validation).is_ok() {
                return Ok(());
            }
        }
        Err(bad())
    }
}

/// Parses a JWKS document (static-keys identities store one).
pub fn parse_jwks(json: &str) -> Result<JwkSet> {
    serde_json::from_str(json).map_err(|_| Error::internal("stored JWKS does not parse"))
}

/// Where upstream fetches may go.
#[derive(Clone, Copy, Debug, Default)]
pub struct FetchPolicy {
    /// Plain http and loopback addresses (local testing, `--dev`).
    pub allow_loopback_http: bool,
    /// Plain http and any address (`--allow-insecure-issuers`).
    pub allow_insecure: bool,
}

struct CachedKeys {
    keys: JwkSet,
    fetched_ms: i64,
}

/// Fetches and caches issuers' signing keys.
pub struct Upstream {
    policy: FetchPolicy,
    clock: std::sync::Arc<dyn Clock>,
    keys: Mutex<HashMap<String, std::sync::Arc<CachedKeys>>>,
    /// Recent failed fetches: issuer → (when, what went wrong).
    failures: Mutex<HashMap<String, (i64, String)>>,
}

fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64) // CGNAT 100.64/10
        }
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg[0] & 0xfe00) == 0xfc00 // unique local
                || (seg[0] & 0xffc0) == 0xfe80 // link local
                || v6.to_ipv4_mapped().is_some_and(|v4| !is_public(IpAddr::V4(v4))))
        }
    }
}

impl Upstream {
    pub fn new(policy: FetchPolicy, clock: std::sync::Arc<dyn Clock>) -> Self {
        Self {
            policy,
            clock,
            keys: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// The key set for `issuer`; `refresh` asks for a refetch (unknown kid),
    /// honoured at most once per interval.
    pub async fn keys(&self, issuer: &str, refresh: bool) -> Result<JwkSet> {
        let now = self.clock.now_millis();
        let cached = self.keys.lock().expect("keys lock").get(issuer).cloned();
        if let Some(c) = &cached {
            let fresh = now - c.fetched_ms < KEYS_TTL_MS;
            let may_refetch = now - c.fetched_ms >= REFETCH_INTERVAL_MS;
            if fresh && !(refresh && may_refetch) {
                return Ok(c.keys.clone());
            }
        }
        if let Some((at, why)) = self.failures.lock().expect("failures lock").get(issuer)
            && now - at < FAILURE_BACKOFF_MS
        {
            return Err(reject(format!("{why} (not retried for a few seconds)")));
        }
        let keys = match self.fetch_keys(issuer).await {
            Ok(k) => k,
            Err(e) => {
                let why = match &e {
                    Error::Unauthenticated(m) => m.clone(),
                    other => other.to_string(),
                };
                self.failures
                    .lock()
                    .expect("failures lock")
                    .insert(issuer.to_owned(), (now, why));
                return Err(e);
            }
        };
        self.failures.lock().expect("failures lock").remove(issuer);
        self.keys.lock().expect("keys lock").insert(
            issuer.to_owned(),
            std::sync::Arc::new(CachedKeys {
                keys: keys.clone(),
                fetched_ms: now,
            }),
        );
        Ok(keys)
    }

    async fn fetch_keys(&self, issuer: &str) -> Result<JwkSet> {
        let discovery_url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
        let discovery: Value = self.fetch_json(&discovery_url).await?;
        if discovery
            .get("issuer")
            .and_then(Value::as_str)
            .map(|s| s.trim_end_matches('/'))
            != Some(issuer.trim_end_matches('/'))
        {
            return Err(reject("the issuer's discovery document names another issuer"));
        }
        let jwks_uri = discovery
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| reject("the issuer's discovery document has no jwks_uri"))?;
        self.fetch_json(jwks_uri).await
    }

    /// GETs a small JSON document within the fetch policy.
    async fn fetch_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T> {
        let unreachable = |why: String| reject(format!("could not fetch the issuer's keys: {why}"));
        let parsed = reqwest::Url::parse(url).map_err(|_| unreachable(format!("{url} is not a URL")))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| unreachable(format!("{url} has no host")))?
            .to_owned();
        let port = parsed.port_or_known_default().unwrap_or(443);
        let insecure_ok = self.policy.allow_insecure || self.policy.allow_loopback_http;
        match parsed.scheme() {
            "https" => {}
            "http" if insecure_ok => {}
            _ => return Err(unreachable(format!("{url} is not https"))),
        }
        let host_for_lookup = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let addrs: Vec<std::net::SocketAddr> =
            tokio::time::timeout(FETCH_TIMEOUT, tokio::net::lookup_host((host_for_lookup.as_str(), port)))
                .await
                .map_err(|_| unreachable("name lookup timed out".into()))?
                .map_err(|e| unreachable(format!("name lookup failed: {e}")))?
                .collect();
        let allowed = |ip: IpAddr| {
            is_public(ip) || self.policy.allow_insecure || (self.policy.allow_loopback_http && ip.is_loopback())
        };
        let addr = *addrs
            .iter()
            .find(|a| allowed(a.ip()))
            .ok_or_else(|| unreachable(format!("{host} resolves only to addresses that may not be fetched")))?;
        // Connect to exactly the address that was checked.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(FETCH_TIMEOUT)
            .resolve(&host, addr)
            .build()
            .map_err(|e| unreachable(e.to_string()))?;
        let mut resp = client
            .get(parsed)
            .send()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(unreachable(format!("{url} answered {}", resp.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| unreachable(e.to_string()))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(unreachable(format!("{url} is larger than {MAX_DOCUMENT_BYTES} bytes")));
            }
        }
        serde_json::from_slice(&body).map_err(|_| unreachable(format!("{url} is not the expected JSON")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "0.0.0.0",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["8.8.8.8", "140.82.112.3", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
