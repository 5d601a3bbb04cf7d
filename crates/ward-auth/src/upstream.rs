//! Verifying upstream OIDC tokens (a CI platform's identity token) for the
//! token exchange.
//!
//! Signing keys come from the issuer's `/.well-known/openid-configuration` →
//! `jwks_uri`, fetched only for an issuer that an identity names, never for an
//! arbitrary `iss`. Fetches are https-only, refuse redirects, time out after
//! [`FETCH_TIMEOUT`], read at most [`MAX_DOCUMENT_BYTES`], and never reach
//! loopback, private, link-local or otherwise non-global addresses unless the
//! policy allows it (the address checked is the address connected to, which is
//! verified on the response; environment proxies are ignored). Key sets are
//! cached for [`KEYS_TTL_MS`]; an unknown `kid` refetches at most once per
//! [`REFETCH_INTERVAL_MS`] per issuer; a failed fetch is not retried for
//! [`FAILURE_BACKOFF_MS`]. Both caches are bounded, and concurrent requests for
//! one issuer share a single fetch.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use moka::policy::EvictionPolicy;
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
/// Most issuers whose key sets are cached at once (least recently used out
/// first). Keys are fetched only for issuers an identity names, so this is far
/// above any real deployment's count.
pub const MAX_CACHED_ISSUERS: u64 = 1_000;
/// Most issuers whose last failure is remembered (for [`FAILURE_BACKOFF_MS`])
/// at once.
pub const MAX_FAILED_ISSUERS: u64 = 1_000;
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

/// Parses a JWKS document (static-keys identities store one). A document
/// that does not parse refuses the exchange (never a server error): the
/// identity's keys simply cannot verify anything.
pub fn parse_jwks(json: &str) -> Result<JwkSet> {
    serde_json::from_str(json).map_err(|_| reject("the identity's keys cannot be used"))
}

/// Where upstream fetches may go.
#[derive(Clone, Copy, Debug, Default)]
pub struct FetchPolicy {
    /// Plain http and loopback addresses (local testing, `--dev`).
    pub allow_loopback_http: bool,
    /// Plain http and any address (`--allow-insecure-issuers`).
    pub allow_insecure: bool,
}

impl FetchPolicy {
    /// Whether a fetch may connect to `ip`.
    pub fn allows(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allow_insecure || (self.allow_loopback_http && ip.is_loopback())
    }
}

struct CachedKeys {
    keys: JwkSet,
    fetched_ms: i64,
}

/// A failed fetch: when, and what went wrong.
#[derive(Clone)]
struct Failure {
    at_ms: i64,
    why: Arc<str>,
}

/// Per-issuer fetch turns: while one fetch for an issuer is in flight, other
/// callers for that issuer wait for its outcome instead of fetching too.
type InFlight = Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>;

/// Fetches and caches issuers' signing keys.
///
/// Both caches are bounded ([`MAX_CACHED_ISSUERS`], [`MAX_FAILED_ISSUERS`],
/// least recently used out first), and the in-flight map only holds issuers
/// that someone is fetching right now.
pub struct Upstream {
    policy: FetchPolicy,
    clock: Arc<dyn Clock>,
    keys: moka::sync::Cache<String, Arc<CachedKeys>>,
    /// Recent failed fetches, for [`FAILURE_BACKOFF_MS`].
    failures: moka::sync::Cache<String, Failure>,
    in_flight: InFlight,
    /// Identity providers' discovery documents, for logins.
    discovery: moka::sync::Cache<String, Arc<Value>>,
}

/// Holds an issuer's fetch turn slot; the last holder removes it from the map.
struct Turn<'a> {
    map: &'a InFlight,
    issuer: &'a str,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        // Clones are only taken under the map lock, so the count is exact
        // here: two (the map's and ours) means nobody else waits on it.
        if Arc::strong_count(&self.lock) == 2 && map.get(self.issuer).is_some_and(|l| Arc::ptr_eq(l, &self.lock)) {
            map.remove(self.issuer);
        }
    }
}

/// Whether an address is globally reachable, so that an upstream fetch may go
/// there. IPv6 forms that embed an IPv4 address (mapped, compatible,
/// translated, 6to4) are judged by that address; NAT64 and Teredo, which reach
/// IPv4 hosts this process cannot judge, are refused.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    let [a, b, c, _] = v4.octets();
    !(a == 0 // "this network" 0.0.0.0/8
        || v4.is_private() // 10/8, 172.16/12, 192.168/16
        || v4.is_loopback() // 127/8
        || v4.is_link_local() // 169.254/16
        || (a == 100 && (b & 0xc0) == 64) // CGNAT 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments 192.0.0/24
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1 192.0.2/24
        || (a == 198 && (b & 0xfe) == 18) // benchmarking 198.18/15
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2 198.51.100/24
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3 203.0.113/24
        || a >= 224) // multicast 224/4, reserved 240/4, broadcast
}

fn is_public_v6(v6: Ipv6Addr) -> bool {
    let seg = v6.segments();
    let embedded = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    // ::a.b.c.d (IPv4-compatible, deprecated; also :: and ::1),
    // ::ffff:a.b.c.d (IPv4-mapped), ::ffff:0:a.b.c.d (IPv4-translated).
    if seg[..4] == [0; 4] && matches!((seg[4], seg[5]), (0, 0) | (0, 0xffff) | (0xffff, 0)) {
        return is_public_v4(embedded(seg[6], seg[7]));
    }
    // 6to4 2002::/16 carries the IPv4 address in bits 16..48.
    if seg[0] == 0x2002 {
        return is_public_v4(embedded(seg[1], seg[2]));
    }
    // Only global unicast 2000::/3 is public: this leaves out NAT64 64:ff9b::/96
    // and 64:ff9b:1::/48, discard 100::/64, unique local fc00::/7, link local
    // fe80::/10, site local fec0::/10, multicast ff00::/8 and everything
    // unassigned.
    let special = match (seg[0], seg[1]) {
        (0x2001, 0x0000) => true,              // Teredo 2001::/32
        (0x2001, 0x0002) => seg[2] == 0,       // benchmarking 2001:2::/48
        (0x2001, 0x0db8) => true,              // documentation 2001:db8::/32
        (0x2001, s) => (s & 0xfff0) == 0x0010, // ORCHID 2001:10::/28
        (0x3fff, s) => (s & 0xf000) == 0,      // documentation 3fff::/20
        _ => false,
    };
    (seg[0] & 0xe000) == 0x2000 && !special
}

impl Upstream {
    pub fn new(policy: FetchPolicy, clock: Arc<dyn Clock>) -> Self {
        Self::with_capacity(policy, clock, MAX_CACHED_ISSUERS, MAX_FAILED_ISSUERS)
    }

    fn with_capacity(policy: FetchPolicy, clock: Arc<dyn Clock>, keys: u64, failures: u64) -> Self {
        // The injected clock decides freshness; the caches' own (real-time)
        // expiry only frees memory, never later than the clock would.
        let ms = |ms: i64| Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        Self {
            policy,
            clock,
            keys: moka::sync::Cache::builder()
                .max_capacity(keys)
                .eviction_policy(EvictionPolicy::lru())
                .time_to_live(ms(KEYS_TTL_MS))
                .build(),
            failures: moka::sync::Cache::builder()
                .max_capacity(failures)
                .eviction_policy(EvictionPolicy::lru())
                .time_to_live(ms(FAILURE_BACKOFF_MS))
                .build(),
            in_flight: Mutex::new(HashMap::new()),
            discovery: moka::sync::Cache::builder()
                .max_capacity(keys)
                .time_to_live(ms(KEYS_TTL_MS))
                .build(),
        }
    }

    /// The key set for `issuer`; `refresh` asks for a refetch (unknown kid),
    /// honoured at most once per interval. Concurrent calls for one issuer
    /// share a single fetch.
    pub async fn keys(&self, issuer: &str, refresh: bool) -> Result<JwkSet> {
        if let Some(answer) = self.cached(issuer, refresh) {
            return answer;
        }
        let turn = self.turn(issuer);
        let _held = turn.lock.lock().await;
        // Whoever held the turn before may have just fetched, or failed.
        if let Some(answer) = self.cached(issuer, refresh) {
            return answer;
        }
        let now = self.clock.now_millis();
        match self.fetch_keys(issuer).await {
            Ok(keys) => {
                self.failures.invalidate(issuer);
                self.keys.insert(
                    issuer.to_owned(),
                    Arc::new(CachedKeys {
                        keys: keys.clone(),
                        fetched_ms: now,
                    }),
                );
                Ok(keys)
            }
            Err(e) => {
                let why = match &e {
                    Error::Unauthenticated(m) => m.clone(),
                    other => other.to_string(),
                };
                self.failures.insert(
                    issuer.to_owned(),
                    Failure {
                        at_ms: now,
                        why: why.into(),
                    },
                );
                Err(e)
            }
        }
    }

    /// What the caches answer for `issuer` right now, if they answer.
    fn cached(&self, issuer: &str, refresh: bool) -> Option<Result<JwkSet>> {
        let now = self.clock.now_millis();
        if let Some(c) = self.keys.get(issuer) {
            let age = now - c.fetched_ms;
            let fresh = age < KEYS_TTL_MS;
            let may_refetch = age >= REFETCH_INTERVAL_MS;
            if fresh && !(refresh && may_refetch) {
                return Some(Ok(c.keys.clone()));
            }
        }
        if let Some(f) = self.failures.get(issuer)
            && now - f.at_ms < FAILURE_BACKOFF_MS
        {
            return Some(Err(reject(format!("{} (not retried for a few seconds)", f.why))));
        }
        None
    }

    /// The issuer's fetch turn, shared with every concurrent caller for it.
    fn turn<'a>(&'a self, issuer: &'a str) -> Turn<'a> {
        let mut map = self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        let lock = map.entry(issuer.to_owned()).or_default().clone();
        Turn {
            map: &self.in_flight,
            issuer,
            lock,
        }
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
        self.request_json(url, None, "could not fetch the issuer's keys").await
    }

    /// Whether plain-http issuers may be fetched at all (`--dev` on loopback,
    /// `--allow-insecure-issuers` anywhere).
    pub fn allows_http(&self) -> bool {
        self.policy.allow_insecure || self.policy.allow_loopback_http
    }

    /// The issuer's discovery document (cached like its keys), checked to
    /// name that issuer: for a login, where its endpoints are.
    pub async fn discovery(&self, issuer: &str) -> Result<Arc<Value>> {
        if let Some(d) = self.discovery.get(issuer) {
            return Ok(d);
        }
        let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
        let doc: Value = self
            .request_json(&url, None, "could not reach the identity provider")
            .await?;
        if doc
            .get("issuer")
            .and_then(Value::as_str)
            .map(|s| s.trim_end_matches('/'))
            != Some(issuer.trim_end_matches('/'))
        {
            return Err(reject(
                "the identity provider's discovery document names another issuer",
            ));
        }
        let doc = Arc::new(doc);
        self.discovery.insert(issuer.to_owned(), doc.clone());
        Ok(doc)
    }

    /// POSTs a form (an OAuth token request) within the fetch policy and reads
    /// the JSON answer, whatever its status: OAuth errors come as JSON 400s.
    pub async fn post_form(&self, url: &str, form: &[(&str, &str)], basic: Option<(&str, &str)>) -> Result<Value> {
        self.request_json(url, Some((form, basic)), "could not reach the identity provider")
            .await
    }

    /// One request within the fetch policy: https (or loopback http when
    /// allowed), only to addresses the policy allows, connecting to exactly
    /// the address checked, no redirects or proxies, bounded in time and size.
    /// A GET must answer 2xx; a form POST's JSON is returned whatever its status.
    async fn request_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        form: Option<FormPost<'_>>,
        context: &str,
    ) -> Result<T> {
        let unreachable = |why: String| reject(format!("{context}: {why}"));
        let Pinned {
            client,
            url: parsed,
            addr,
        } = pinned(url, self.policy, FETCH_TIMEOUT).await.map_err(unreachable)?;
        let request = match form {
            None => match ward_core::traceparent::current() {
                Some(tp) => client.get(parsed).header(ward_core::traceparent::HEADER, tp),
                None => client.get(parsed),
            },
            Some((fields, basic)) => {
                let body: String = form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(fields.iter())
                    .finish();
                let r = client
                    .post(parsed)
                    .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .header(reqwest::header::ACCEPT, "application/json")
                    .body(body);
                match basic {
                    Some((user, password)) => r.basic_auth(form_component(user), Some(form_component(password))),
                    None => r,
                }
            }
        };
        let mut resp = request.send().await.map_err(|e| unreachable(e.to_string()))?;
        check_peer(&resp, addr, url).map_err(unreachable)?;
        if form.is_none() && !resp.status().is_success() {
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

/// A client bound to the one address of a URL's host that the fetch policy
/// allows: see [`pinned`].
pub struct Pinned {
    pub client: reqwest::Client,
    pub url: reqwest::Url,
    pub addr: std::net::SocketAddr,
}

/// Checks `url` against `policy` (https, or http where allowed), resolves
/// its host, and picks an address the policy allows (public, or loopback or
/// any where allowed); the client connects to exactly that address (no
/// second lookup, so no DNS rebinding), with no proxy from the environment,
/// no redirects, and `timeout` per request. Check the response with
/// [`check_peer`]. The error says why, for the caller to wrap.
pub async fn pinned(url: &str, policy: FetchPolicy, timeout: Duration) -> std::result::Result<Pinned, String> {
    let parsed = reqwest::Url::parse(url).map_err(|_| format!("{url} is not a URL"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("{url} has no host"))?
        .to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let insecure_ok = policy.allow_insecure || policy.allow_loopback_http;
    match parsed.scheme() {
        "https" => {}
        "http" if insecure_ok => {}
        _ => return Err(format!("{url} is not https")),
    }
    let host_for_lookup = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let addrs: Vec<std::net::SocketAddr> =
        tokio::time::timeout(FETCH_TIMEOUT, tokio::net::lookup_host((host_for_lookup.as_str(), port)))
            .await
            .map_err(|_| "name lookup timed out".to_owned())?
            .map_err(|e| format!("name lookup failed: {e}"))?
            .collect();
    let addr = *addrs
        .iter()
        .find(|a| policy.allows(a.ip()))
        .ok_or_else(|| format!("{host} resolves only to addresses that may not be fetched"))?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .resolve(&host, addr)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(Pinned {
        client,
        url: parsed,
        addr,
    })
}

/// Checks that `resp` came from `addr`, the address [`pinned`] checked.
pub fn check_peer(resp: &reqwest::Response, addr: std::net::SocketAddr, url: &str) -> std::result::Result<(), String> {
    match resp.remote_addr() {
        Some(peer) if peer.ip() == addr.ip() && peer.port() == addr.port() => Ok(()),
        _ => Err(format!("{url} was not reached at the address that was checked")),
    }
}

/// A form POST: its fields, and HTTP Basic credentials (user, password).
type FormPost<'a> = (&'a [(&'a str, &'a str)], Option<(&'a str, &'a str)>);

/// RFC 6749 §2.3.1: client credentials in HTTP Basic are form-encoded first.
fn form_component(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use ward_core::clock::OffsetClock;

    #[test]
    fn public_addresses() {
        for private in [
            // IPv4
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.0.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            // IPv6
            "::",
            "::1",
            "::127.0.0.1",
            "::10.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0:127.0.0.1",
            "64:ff9b::8.8.8.8",
            "64:ff9b::7f00:1",
            "64:ff9b:1::8.8.8.8",
            "100::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "2001:10::1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2002:a00:1::1",
            "2002:a9fe:a9fe::1",
            "3fff::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "feff::1",
            "ff02::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "8.8.8.8",
            "140.82.112.3",
            "100.128.0.1",
            "192.0.1.1",
            "198.20.0.1",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "::8.8.8.8",
            "2002:808:808::1",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn unparsable_stored_jwks_is_unauthenticated() {
        assert!(matches!(parse_jwks("not json"), Err(Error::Unauthenticated(_))));
        assert!(matches!(parse_jwks(r#"{"keys": 1}"#), Err(Error::Unauthenticated(_))));
    }

    /// An OIDC issuer on 127.0.0.1 that counts requests by path. Issuer
    /// `{base}/{name}` has its discovery document at
    /// `/{name}/.well-known/openid-configuration` (500 when `name` starts with
    /// `down`), and every issuer shares the JWKS at `/jwks`. Every answer
    /// waits `delay` first, so that concurrent callers overlap.
    struct TestIssuer {
        base: String,
        hits: Arc<Mutex<HashMap<String, usize>>>,
    }

    impl TestIssuer {
        async fn start(delay: Duration) -> Self {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let hits = Arc::new(Mutex::new(HashMap::new()));
            let key = crate::generate_key(0).unwrap();
            let jwks = serde_json::json!({"keys": [{
                "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
                "kid": key.kid, "x": URL_SAFE_NO_PAD.encode(&key.public_key),
            }]})
            .to_string();
            let (b, h) = (base.clone(), hits.clone());
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(Self::answer(stream, b.clone(), h.clone(), jwks.clone(), delay));
                }
            });
            Self { base, hits }
        }

        async fn answer(
            mut stream: tokio::net::TcpStream,
            base: String,
            hits: Arc<Mutex<HashMap<String, usize>>>,
            jwks: String,
            delay: Duration,
        ) {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let request = String::from_utf8_lossy(&request);
            let path = request.split_whitespace().nth(1).unwrap_or_default().to_owned();
            *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
            tokio::time::sleep(delay).await;
            let (status, body) = match path.strip_suffix("/.well-known/openid-configuration") {
                _ if path == "/jwks" => ("200 OK", jwks),
                Some(name) if name.starts_with("/down") => ("500 Internal Server Error", "{}".to_owned()),
                Some(name) => (
                    "200 OK",
                    serde_json::json!({"issuer": format!("{base}{name}"), "jwks_uri": format!("{base}/jwks")})
                        .to_string(),
                ),
                None => ("404 Not Found", String::new()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        }

        fn issuer(&self, name: &str) -> String {
            format!("{}/{name}", self.base)
        }

        fn discoveries(&self, name: &str) -> usize {
            let path = format!("/{name}/.well-known/openid-configuration");
            self.hits.lock().unwrap().get(&path).copied().unwrap_or(0)
        }

        fn jwks_fetches(&self) -> usize {
            self.hits.lock().unwrap().get("/jwks").copied().unwrap_or(0)
        }
    }

    const LOOPBACK: FetchPolicy = FetchPolicy {
        allow_loopback_http: true,
        allow_insecure: false,
    };

    /// Runs `n` concurrent `keys(issuer, refresh)` calls.
    async fn concurrently(up: &Arc<Upstream>, issuer: &str, refresh: bool, n: usize) -> Vec<Result<JwkSet>> {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let (up, issuer) = (up.clone(), issuer.to_owned());
                tokio::spawn(async move { up.keys(&issuer, refresh).await })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }

    fn in_flight(up: &Upstream) -> usize {
        up.in_flight.lock().unwrap().len()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_fetches_of_one_issuer_coalesce() {
        let server = TestIssuer::start(Duration::from_millis(200)).await;
        let clock = OffsetClock::default();
        let up = Arc::new(Upstream::new(LOOPBACK, Arc::new(clock.clone())));
        let iss = server.issuer("ci");

        let results = concurrently(&up, &iss, false, 16).await;
        assert!(results.iter().all(|r| r.as_ref().is_ok_and(|k| k.keys.len() == 1)));
        assert_eq!((server.discoveries("ci"), server.jwks_fetches()), (1, 1));
        assert_eq!(in_flight(&up), 0, "finished fetches leave no turn behind");

        // Cached: no fetch, and an unknown kid within the refetch interval
        // does not refetch either.
        up.keys(&iss, false).await.unwrap();
        concurrently(&up, &iss, true, 4).await;
        assert_eq!(server.discoveries("ci"), 1);

        // After the interval, many unknown-kid refetches are one fetch.
        clock.advance_millis(REFETCH_INTERVAL_MS);
        let results = concurrently(&up, &iss, true, 16).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!((server.discoveries("ci"), server.jwks_fetches()), (2, 2));

        // Expired keys are fetched again, once.
        clock.advance_millis(KEYS_TTL_MS);
        concurrently(&up, &iss, false, 16).await;
        assert_eq!((server.discoveries("ci"), server.jwks_fetches()), (3, 3));
        assert_eq!(in_flight(&up), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_failures_coalesce_and_back_off() {
        let server = TestIssuer::start(Duration::from_millis(200)).await;
        let clock = OffsetClock::default();
        let up = Arc::new(Upstream::new(LOOPBACK, Arc::new(clock.clone())));
        let iss = server.issuer("down");

        let results = concurrently(&up, &iss, false, 16).await;
        assert!(results.iter().all(|r| matches!(r, Err(Error::Unauthenticated(_)))));
        assert_eq!(server.discoveries("down"), 1);
        assert_eq!(in_flight(&up), 0);

        let Err(Error::Unauthenticated(m)) = up.keys(&iss, true).await else {
            panic!("a failed issuer answered within its backoff");
        };
        assert!(m.contains("500") && m.contains("not retried"), "{m}");
        assert_eq!(server.discoveries("down"), 1);

        clock.advance_millis(FAILURE_BACKOFF_MS);
        assert!(up.keys(&iss, false).await.is_err());
        assert_eq!(server.discoveries("down"), 2);

        // A failure never hides another issuer's keys.
        up.keys(&server.issuer("up"), false).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn caches_are_bounded() {
        // The key cache, at a small capacity: the newest issuers stay.
        let server = TestIssuer::start(Duration::ZERO).await;
        let up = Upstream::with_capacity(LOOPBACK, Arc::new(OffsetClock::default()), 4, 4);
        for i in 0..12 {
            up.keys(&server.issuer(&format!("i{i}")), false).await.unwrap();
        }
        up.keys.run_pending_tasks();
        assert!(up.keys.entry_count() <= 4, "{} cached key sets", up.keys.entry_count());
        assert!(up.keys.contains_key(&server.issuer("i11")));

        // The failure cache, at its real capacity, against many issuers
        // refused without any network (not https).
        let up = Upstream::new(FetchPolicy::default(), Arc::new(OffsetClock::default()));
        let n = 3 * MAX_FAILED_ISSUERS;
        for i in 0..n {
            assert!(up.keys(&format!("ftp://issuer-{i}.example"), false).await.is_err());
        }
        up.failures.run_pending_tasks();
        assert!(
            up.failures.entry_count() <= MAX_FAILED_ISSUERS,
            "{} failures remembered",
            up.failures.entry_count()
        );
        assert!(up.failures.contains_key(&format!("ftp://issuer-{}.example", n - 1)));
        assert_eq!(up.keys.entry_count(), 0);
        assert_eq!(in_flight(&up), 0);
    }
}
