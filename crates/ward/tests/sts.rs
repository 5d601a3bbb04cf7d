//! The token exchange (`{issuer}/sts/exchange`) end to end, against real
//! in-process upstream OIDC issuers (discovery + JWKS on 127.0.0.1, keys that
//! rotate at runtime, EdDSA and ES256): a workload's token becomes a Ward API
//! token for a claim-match or static-keys identity; a matrix of forged and
//! wrong tokens is refused with the check that failed; keys are fetched only
//! for issuers an identity names, within the fetch policy; scopes and
//! capabilities only narrow; Ward's own signing keys rotate and retire.
//!
//! Upstream tokens are minted against the server's clock, so moving that clock
//! moves their validity with it. Servers run with `--dev` (plain http to
//! loopback) unless a test says otherwise.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{TestServer, assert_error, enc, uid};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use ward_core::clock::Clock as _;

const G: &str = "/iam/v2beta1/groups";
const ID: &str = "/iam/v2/identities";
const RB: &str = "/iam/v2beta1/roleBindings";

/// A GitHub-Actions-shaped subject.
const SUB: &str = "repo:acme/app:ref:refs/heads/main";
const SUB_PATTERN: &str = "repo:acme/app:ref:refs/heads/(main|release)";
const LIB_SUB: &str = "repo:acme/lib:ref:refs/heads/main";
const DUP_SUB: &str = "repo:acme/dup:ref:refs/heads/main";
const STATIC_ISS: &str = "https://static.example.com";
const MISSING_UID: &str = "0123456789abcdef0123456789abcdef01234567";

// ---------------------------------------------------------------------------
// Keys and tokens

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A private signing key with its public JWK.
#[derive(Clone)]
struct Signer {
    kid: String,
    alg: Algorithm,
    key: EncodingKey,
    /// Raw public key bytes (for the HMAC-with-the-public-key forgery).
    public: Vec<u8>,
    jwk: Value,
}

impl Signer {
    /// A fresh Ed25519 key (EdDSA).
    fn ed25519() -> Self {
        let rec = ward_auth::generate_key(0).expect("generate an Ed25519 key");
        Self {
            jwk: json!({
                "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
                "kid": rec.kid, "x": b64(&rec.public_key),
            }),
            kid: rec.kid,
            alg: Algorithm::EdDSA,
            key: EncodingKey::from_ed_der(&rec.private_key),
            public: rec.public_key,
        }
    }

    /// A fresh P-256 key (ES256).
    fn es256() -> Self {
        use p256::elliptic_curve::sec1::ToEncodedPoint as _;
        use p256::pkcs8::EncodePrivateKey as _;
        let secret = p256::SecretKey::random(&mut rand::rngs::OsRng);
        let der = secret.to_pkcs8_der().expect("PKCS#8 DER");
        let point = secret.public_key().to_encoded_point(false);
        let (x, y) = (point.x().expect("x"), point.y().expect("y"));
        let kid = format!("es-{}", b64(&x[..9]));
        Self {
            jwk: json!({
                "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig",
                "kid": kid, "x": b64(x), "y": b64(y),
            }),
            kid,
            alg: Algorithm::ES256,
            key: EncodingKey::from_ec_der(der.as_bytes()),
            public: point.as_bytes().to_vec(),
        }
    }

    /// The same private key, claiming another key id.
    fn with_kid(&self, kid: &str) -> Self {
        let mut s = self.clone();
        s.kid = kid.to_owned();
        s.jwk["kid"] = json!(kid);
        s
    }

    fn header(&self) -> Header {
        let mut h = Header::new(self.alg);
        h.kid = Some(self.kid.clone());
        h
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_with(self.header(), claims)
    }

    fn sign_with(&self, header: Header, claims: &Value) -> String {
        jsonwebtoken::encode(&header, claims, &self.key).expect("sign")
    }

    /// A JWKS document holding only this key.
    fn jwks(&self) -> String {
        json!({ "keys": [self.jwk] }).to_string()
    }
}

/// A hand-assembled token: base64url(header).base64url(claims).signature.
fn raw_jwt(header: &Value, claims: &Value, signature: &str) -> String {
    format!(
        "{}.{}.{signature}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

/// The claims of a valid upstream token at `now` (GitHub Actions shape).
fn upstream_claims(iss: &str, sub: &str, aud: &str, now: i64) -> Value {
    json!({
        "iss": iss,
        "sub": sub,
        "aud": aud,
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "jti": format!("{now}-{}", rand::random::<u64>()),
        "repository": "acme/app",
        "repository_owner": "acme",
        "ref": "refs/heads/main",
    })
}

fn with(claims: &Value, key: &str, value: Value) -> Value {
    let mut c = claims.clone();
    c[key] = value;
    c
}

fn without(claims: &Value, key: &str) -> Value {
    let mut c = claims.clone();
    c.as_object_mut().expect("claims object").remove(key);
    c
}

/// The (unverified) header and claims of a JWT.
fn jwt_parts(token: &str) -> (Value, Value) {
    let mut parts = token.split('.');
    let mut next = || {
        let bytes = URL_SAFE_NO_PAD
            .decode(parts.next().expect("jwt part"))
            .expect("base64url");
        serde_json::from_slice::<Value>(&bytes).expect("json")
    };
    let header = next();
    (header, next())
}

fn rfc3339(secs: i64) -> Value {
    serde_json::to_value(ward_proto::Timestamp {
        seconds: secs,
        nanos: 0,
    })
    .expect("timestamp json")
}

/// A JSON timestamp `offset_ms` from the server's now.
fn ts(s: &TestServer, offset_ms: i64) -> Value {
    serde_json::to_value(ward_proto::Timestamp::from_millis(s.clock.now_millis() + offset_ms)).expect("timestamp json")
}

// ---------------------------------------------------------------------------
// An in-process upstream OIDC issuer

/// How the issuer's discovery endpoint answers.
#[derive(Clone, Default)]
enum Discovery {
    #[default]
    Honest,
    /// Names another issuer in the document.
    ClaimsIssuer(String),
    /// Points `jwks_uri` elsewhere.
    JwksUri(String),
    /// Has no `jwks_uri`.
    NoJwksUri,
    /// Answers 302 to this location.
    Redirect(String),
    /// A document larger than Ward reads.
    Huge,
}

struct IssuerState {
    url: String,
    keys: Mutex<Vec<Value>>,
    discovery: Mutex<Discovery>,
    discovery_hits: AtomicUsize,
    jwks_hits: AtomicUsize,
}

struct Issuer {
    url: String,
    state: Arc<IssuerState>,
}

impl Issuer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind issuer");
        let url = format!("http://{}", listener.local_addr().expect("issuer addr"));
        let state = Arc::new(IssuerState {
            url: url.clone(),
            keys: Mutex::new(Vec::new()),
            discovery: Mutex::new(Discovery::Honest),
            discovery_hits: AtomicUsize::new(0),
            jwks_hits: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/keys", get(jwks))
            .with_state(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.expect("issuer serves") });
        Self { url, state }
    }

    /// An issuer publishing one fresh key, and that key.
    async fn with_key(signer: Signer) -> (Self, Signer) {
        let i = Self::start().await;
        i.publish(&signer);
        (i, signer)
    }

    fn publish(&self, s: &Signer) {
        self.state.keys.lock().unwrap().push(s.jwk.clone());
    }

    fn unpublish(&self, kid: &str) {
        self.state.keys.lock().unwrap().retain(|k| k["kid"] != kid);
    }

    fn misbehave(&self, d: Discovery) {
        *self.state.discovery.lock().unwrap() = d;
    }

    fn discovery_hits(&self) -> usize {
        self.state.discovery_hits.load(Ordering::SeqCst)
    }

    fn jwks_hits(&self) -> usize {
        self.state.jwks_hits.load(Ordering::SeqCst)
    }

    fn claims(&self, s: &TestServer, sub: &str) -> Value {
        upstream_claims(&self.url, sub, &s.base, s.clock.now_secs())
    }
}

async fn discovery(State(st): State<Arc<IssuerState>>) -> Response {
    st.discovery_hits.fetch_add(1, Ordering::SeqCst);
    let jwks_uri = format!("{}/keys", st.url);
    let mode = st.discovery.lock().unwrap().clone();
    match mode {
        Discovery::Honest => Json(json!({ "issuer": st.url, "jwks_uri": jwks_uri })).into_response(),
        Discovery::ClaimsIssuer(other) => Json(json!({ "issuer": other, "jwks_uri": jwks_uri })).into_response(),
        Discovery::JwksUri(uri) => Json(json!({ "issuer": st.url, "jwks_uri": uri })).into_response(),
        Discovery::NoJwksUri => Json(json!({ "issuer": st.url })).into_response(),
        Discovery::Redirect(to) => (StatusCode::FOUND, [(reqwest::header::LOCATION, to)]).into_response(),
        Discovery::Huge => Json(json!({
            "issuer": st.url,
            "jwks_uri": jwks_uri,
            "padding": "x".repeat(300 * 1024),
        }))
        .into_response(),
    }
}

async fn jwks(State(st): State<Arc<IssuerState>>) -> Json<Value> {
    st.jwks_hits.fetch_add(1, Ordering::SeqCst);
    Json(json!({ "keys": *st.keys.lock().unwrap() }))
}

// ---------------------------------------------------------------------------
// Servers, IAM helpers and the exchange call

/// One `--dev` server per backend.
async fn dev_servers() -> Vec<TestServer> {
    let mut v = Vec::new();
    for db in ward_store::testing::backends().await {
        v.push(TestServer::start_with(db, |c| c.dev = true).await);
    }
    v
}

fn encode_pairs(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A response: status, headers and JSON body.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

/// A request to `url` with `authorization` as the raw header value (None: no
/// header), the query, and for POST an optional form body.
async fn send(
    s: &TestServer,
    method: Method,
    url: &str,
    authorization: Option<&str>,
    query: &[(&str, &str)],
    form: Option<&[(&str, &str)]>,
) -> Reply {
    let url = if query.is_empty() {
        url.to_owned()
    } else {
        format!("{url}?{}", encode_pairs(query))
    };
    let mut req = s.http.request(method, url);
    if let Some(a) = authorization {
        req = req.header(reqwest::header::AUTHORIZATION, a);
    }
    if let Some(f) = form {
        req = req
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(encode_pairs(f));
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body read");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Reply { status, headers, body }
}

fn sts_url(s: &TestServer) -> String {
    format!("{}/sts/exchange", s.base)
}

/// GET `/sts/exchange` with `Authorization: Bearer <token>`.
async fn exchange(s: &TestServer, token: &str, query: &[(&str, &str)]) -> Reply {
    let auth = format!("Bearer {token}");
    send(s, Method::GET, &sts_url(s), Some(&auth), query, None).await
}

/// An exchange that must succeed; returns the Ward token.
async fn exchange_ok(s: &TestServer, token: &str, query: &[(&str, &str)]) -> String {
    let r = exchange(s, token, query).await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "[{}] exchange {query:?}: {}",
        s.backend,
        r.body
    );
    r.body["token"].as_str().expect("token").to_owned()
}

fn code_of(http: u16) -> (i64, &'static str) {
    match http {
        400 => (3, "INVALID_ARGUMENT"),
        401 => (16, "UNAUTHENTICATED"),
        403 => (7, "PERMISSION_DENIED"),
        404 => (5, "NOT_FOUND"),
        other => panic!("unexpected status {other}"),
    }
}

/// Asserts an AIP-193 refusal whose message contains `needle`
/// (401s also carry `WWW-Authenticate: Bearer`).
fn assert_refused(backend: &str, case: &str, r: &Reply, http: u16, needle: &str) {
    let (code, reason) = code_of(http);
    let ctx = format!("{backend}] [{case}");
    assert_error(&ctx, r.status, &r.body, http, code, reason);
    let msg = r.body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(needle),
        "[{ctx}] message should name {needle:?}: {}",
        r.body
    );
    if http == 401 {
        assert_eq!(
            r.headers.get(WWW_AUTHENTICATE).map(|v| v.to_str().unwrap()),
            Some("Bearer"),
            "[{ctx}] WWW-Authenticate"
        );
    }
}

async fn get_as(s: &TestServer, token: &str, path: &str) -> (StatusCode, Value) {
    s.call_as(token, Method::GET, path, None).await
}

/// Creates an identity under `group` with this relationship; returns its uid.
async fn create_identity(s: &TestServer, group: &str, name: &str, relationship: Value) -> String {
    let mut body = relationship;
    // Names are [a-z0-9 ._-]: derive one from a case description.
    let name: String = name
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || " ._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    body["name"] = json!(name);
    let (status, id) = s.post(&format!("{ID}/{group}"), body).await;
    assert_eq!(status, StatusCode::OK, "[{}] create identity {name}: {id}", s.backend);
    uid(&id)
}

fn claim_match(issuer: &str, subject: &str) -> Value {
    json!({ "claimMatch": { "issuer": issuer, "subject": subject } })
}

/// The uid of a built-in role, looked up by name the way a client would.
async fn builtin_role(s: &TestServer, name: &str) -> String {
    let (status, list) = s.get(&format!("/iam/v2/roles?name={name}&uidp.in_root=true")).await;
    assert_eq!(status, StatusCode::OK, "[{}] roles: {list}", s.backend);
    let roles = list["roles"].as_array().expect("roles");
    assert_eq!(roles.len(), 1, "[{}] one built-in {name}: {list}", s.backend);
    assert_eq!(roles[0]["name"], name, "[{}]", s.backend);
    uid(&roles[0])
}

async fn bind(s: &TestServer, group: &str, identity: &str, role: &str) -> String {
    let (status, body) = s
        .post(
            &format!("{RB}/{group}"),
            json!({ "identityUid": identity, "roleUid": role }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] bind: {body}", s.backend);
    uid(&body)
}

/// The uids a token can list (groups or identities).
async fn list_uids(s: &TestServer, token: &str, path: &str, key: &str) -> Vec<String> {
    let (status, page) = get_as(s, token, path).await;
    assert_eq!(status, StatusCode::OK, "[{}] list {path}: {page}", s.backend);
    let mut v: Vec<String> = page[key]
        .as_array()
        .unwrap_or_else(|| panic!("[{}] no {key} array: {page}", s.backend))
        .iter()
        .map(uid)
        .collect();
    v.sort();
    v
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// `GET /auth/v1/ok` as `token`: (group, sorted capabilities), sorted by group.
async fn who_am_i(s: &TestServer, token: &str) -> (Value, Vec<(String, Vec<String>)>) {
    let (status, me) = get_as(s, token, "/auth/v1/ok").await;
    assert_eq!(status, StatusCode::OK, "[{}] who-am-I: {me}", s.backend);
    let mut caps: Vec<(String, Vec<String>)> = me["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .map(|g| {
            let names = g["capabilities"]
                .as_array()
                .expect("names")
                .iter()
                .map(|c| c.as_str().expect("name").to_owned())
                .collect();
            (
                g["group"]["id"].as_str().expect("the group, a v1 Group").to_owned(),
                sorted(names),
            )
        })
        .collect();
    caps.sort();
    (me, caps)
}

async fn create_group_as(s: &TestServer, token: &str, parent: &str, name: &str) -> (StatusCode, Value) {
    s.call_as(
        token,
        Method::POST,
        &format!("{G}/{parent}"),
        Some(json!({ "name": name })),
    )
    .await
}

/// The fields of an error's BadRequest violations.
fn field_violations(body: &Value) -> Vec<String> {
    common::field_violations(body).into_iter().map(|(f, _)| f).collect()
}

/// The viewer role's capabilities, by enum name.
fn view_caps() -> Vec<String> {
    let viewer = ward_core::capability::builtin_role("viewer").expect("viewer");
    sorted(viewer.capabilities.iter().map(|c| c.enum_name().to_owned()).collect())
}

// ---------------------------------------------------------------------------
// End to end

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_end_to_end() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let viewer = builtin_role(&s, "viewer").await;
        let exact = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
        let pattern = create_identity(
            &s,
            &org,
            "release-ci",
            json!({ "claimMatch": { "issuer": iss.url, "subjectPattern": SUB_PATTERN } }),
        )
        .await;
        bind(&s, &org, &exact, &viewer).await;
        bind(&s, &org, &pattern, &viewer).await;
        let (status, before) = s.get(&format!("{ID}/{exact}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {before}");
        assert!(before.get("lastSeenTime").is_none_or(Value::is_null), "[{b}] {before}");

        // GET with identity=<uid>.
        let upstream = key.sign(&iss.claims(&s, SUB));
        let r = exchange(&s, &upstream, &[("identity", &exact)]).await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] {}", r.body);
        let token = r.body["token"].as_str().expect("token").to_owned();
        let (header, claims) = jwt_parts(&token);
        assert_eq!(header["alg"], "EdDSA", "[{b}] {header}");
        assert!(header["kid"].is_string(), "[{b}] {header}");
        assert_eq!(claims["iss"], s.base, "[{b}] {claims}");
        assert_eq!(claims["sub"], exact, "[{b}] {claims}");
        assert_eq!(claims["aud"], s.base, "[{b}] {claims}");
        let (iat, exp) = (claims["iat"].as_i64().unwrap(), claims["exp"].as_i64().unwrap());
        assert_eq!(exp - iat, 3600, "[{b}] one hour: {claims}");
        assert!((iat - s.clock.now_secs()).abs() <= 5, "[{b}] issued now: {claims}");
        assert_eq!(r.body["expiry"], rfc3339(exp), "[{b}] {}", r.body);
        assert_eq!(
            claims["act"],
            json!({ "iss": iss.url, "sub": SUB, "aud": s.base }),
            "[{b}] act is the upstream token: {claims}"
        );
        assert!(
            claims.get("scopes").is_none() && claims.get("cap").is_none(),
            "[{b}] not narrowed: {claims}"
        );
        assert_eq!((iss.discovery_hits(), iss.jwks_hits()), (1, 1), "[{b}] one fetch");

        // The token is the identity's: viewer at the org.
        let groups = list_uids(&s, &token, G, "groups").await;
        assert_eq!(groups, vec![org.clone()], "[{b}] sees the org");
        let (status, body) = create_group_as(&s, &token, &org, "child").await;
        assert_error(b, status, &body, 403, 7, "PERMISSION_DENIED");
        let (me, caps) = who_am_i(&s, &token).await;
        assert_eq!(me["subject"], exact, "[{b}] {me}");
        assert_eq!(me["issuer"], s.base, "[{b}] {me}");
        assert_eq!(me["audience"], json!([s.base]), "[{b}] {me}");
        assert_eq!(me["expiry"], rfc3339(exp), "[{b}] {me}");
        assert_eq!(me["issuedAt"], rfc3339(iat), "[{b}] {me}");
        assert!(
            me.get("serverAdmin").is_none(),
            "[{b}] only the SDK's WhoAmI fields: {me}"
        );
        assert_eq!(caps, vec![(org.clone(), view_caps())], "[{b}] {me}");

        // lastSeenTime records the exchange.
        let (_, seen) = s.get(&format!("{ID}/{exact}")).await;
        let first_seen = seen["lastSeenTime"].clone();
        assert!(first_seen.is_string(), "[{b}] lastSeenTime set: {seen}");
        assert_eq!(seen["updateTime"], before["updateTime"], "[{b}] not an update");
        s.clock.advance_millis(5_000);

        // No identity: an identity in a group is never found implicitly (any
        // organization could create one with this issuer and subject).
        let upstream = key.sign(&iss.claims(&s, SUB));
        let auth = format!("Bearer {upstream}");
        let r = send(
            &s,
            Method::POST,
            &sts_url(&s),
            Some(&auth),
            &[],
            Some(&[("aud", &s.base)]),
        )
        .await;
        assert_refused(b, "implicit", &r, 401, "pass identity=");
        // POST form with the identity.
        let r = send(
            &s,
            Method::POST,
            &sts_url(&s),
            Some(&auth),
            &[],
            Some(&[("aud", &s.base), ("identity", &exact)]),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] POST form: {}", r.body);
        let (_, claims) = jwt_parts(r.body["token"].as_str().unwrap());
        assert_eq!(claims["sub"], exact, "[{b}] the named identity: {claims}");
        // Within a minute of the last write, an exchange leaves lastSeenTime be.
        let (_, seen) = s.get(&format!("{ID}/{exact}")).await;
        assert_eq!(seen["lastSeenTime"], first_seen, "[{b}] written at most once a minute");
        // POST with the parameters in the query works too; a minute on,
        // lastSeenTime moves.
        s.clock.advance_millis(ward_server::ward::LAST_SEEN_EVERY_MS);
        let upstream = key.sign(&iss.claims(&s, SUB));
        let auth = format!("Bearer {upstream}");
        let r = send(
            &s,
            Method::POST,
            &sts_url(&s),
            Some(&auth),
            &[("identity", &exact)],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] POST query: {}", r.body);
        let (_, seen) = s.get(&format!("{ID}/{exact}")).await;
        assert!(
            seen["lastSeenTime"].is_string() && seen["lastSeenTime"] != first_seen,
            "[{b}] lastSeenTime moves: {first_seen} → {}",
            seen["lastSeenTime"]
        );

        // The subject-pattern identity (named; patterns are never searched).
        let release = "repo:acme/app:ref:refs/heads/release";
        let upstream = key.sign(&iss.claims(&s, release));
        let token = exchange_ok(&s, &upstream, &[("identity", &pattern)]).await;
        let (_, claims) = jwt_parts(&token);
        assert_eq!(claims["sub"], pattern, "[{b}] {claims}");
        assert_eq!(claims["act"]["sub"], release, "[{b}] {claims}");
        assert_eq!(list_uids(&s, &token, G, "groups").await, vec![org.clone()], "[{b}]");

        // An upstream aud list that includes Ward's issuer; act keeps the list.
        let auds = json!(["sigstore", s.base]);
        let upstream = key.sign(&with(&iss.claims(&s, SUB), "aud", auds.clone()));
        let (_, claims) = jwt_parts(&exchange_ok(&s, &upstream, &[("identity", &exact)]).await);
        assert_eq!(claims["act"]["aud"], auds, "[{b}] {claims}");

        // Times within the 60 s leeway are accepted.
        let now = s.clock.now_secs();
        let late = with(&iss.claims(&s, SUB), "exp", json!(now - 30));
        exchange_ok(&s, &key.sign(&late), &[("identity", &exact)]).await;
        let early = with(
            &with(&iss.claims(&s, SUB), "nbf", json!(now + 30)),
            "iat",
            json!(now + 30),
        );
        exchange_ok(&s, &key.sign(&early), &[("identity", &exact)]).await;
        // NumericDates may be fractional (RFC 7519), and huge ones do not overflow.
        let fractional = with(&iss.claims(&s, SUB), "exp", json!((now + 600) as f64 + 0.5));
        exchange_ok(&s, &key.sign(&fractional), &[("identity", &exact)]).await;
        for huge in [json!(i64::MAX), json!(u64::MAX)] {
            let c = with(&iss.claims(&s, SUB), "exp", huge);
            let (_, claims) = jwt_parts(&exchange_ok(&s, &key.sign(&c), &[("identity", &exact)]).await);
            assert_eq!(
                claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
                3600,
                "[{b}] Ward's token still lives an hour: {claims}"
            );
        }

        // An explicit audience on the identity replaces the default.
        let custom = create_identity(
            &s,
            &org,
            "custom-aud",
            json!({ "claimMatch": { "issuer": iss.url, "subject": "custom", "audience": "ward-custom" } }),
        )
        .await;
        let c = iss.claims(&s, "custom");
        exchange_ok(
            &s,
            &key.sign(&with(&c, "aud", json!("ward-custom"))),
            &[("identity", &custom)],
        )
        .await;
        let r = exchange(&s, &key.sign(&c), &[("identity", &custom)]).await;
        assert_refused(b, "Ward's issuer is not the identity's audience", &r, 401, "audience");
        let pat = create_identity(
            &s,
            &org,
            "aud-pattern",
            json!({ "claimMatch": { "issuer": iss.url, "subject": "pat", "audiencePattern": "ward-(dev|prod)" } }),
        )
        .await;
        let c = iss.claims(&s, "pat");
        exchange_ok(
            &s,
            &key.sign(&with(&c, "aud", json!("ward-prod"))),
            &[("identity", &pat)],
        )
        .await;
        let r = exchange(
            &s,
            &key.sign(&with(&c, "aud", json!("ward-production"))),
            &[("identity", &pat)],
        )
        .await;
        assert_refused(b, "audience pattern is anchored", &r, 401, "audience");

        // A second key family: ES256 from another issuer.
        let (iss2, es) = Issuer::with_key(Signer::es256()).await;
        let globex = create_identity(
            &s,
            &org,
            "es",
            claim_match(&iss2.url, "repo:acme/es:ref:refs/heads/main"),
        )
        .await;
        bind(&s, &org, &globex, &viewer).await;
        let upstream = es.sign(&iss2.claims(&s, "repo:acme/es:ref:refs/heads/main"));
        assert_eq!(jwt_parts(&upstream).0["alg"], "ES256");
        let token = exchange_ok(&s, &upstream, &[("identity", &globex)]).await;
        assert_eq!(jwt_parts(&token).1["sub"], globex, "[{b}]");
        assert_eq!(list_uids(&s, &token, G, "groups").await, vec![org.clone()], "[{b}]");

        // Keys were fetched once per issuer (cached since).
        assert_eq!(iss.discovery_hits(), 1, "[{b}] issuer 1 cached");
        assert_eq!(iss2.discovery_hits(), 1, "[{b}] issuer 2 fetched once");
    }
}

// ---------------------------------------------------------------------------
// Forged and wrong tokens

struct Case {
    name: &'static str,
    /// The raw Authorization header value (None: no header).
    auth: Option<String>,
    identity: Option<String>,
    http: u16,
    needle: &'static str,
}

fn case(name: &'static str, token: &str, identity: Option<&str>, http: u16, needle: &'static str) -> Case {
    Case {
        name,
        auth: Some(format!("Bearer {token}")),
        identity: identity.map(str::to_owned),
        http,
        needle,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_wrong_tokens_are_refused() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, k1) = Issuer::with_key(Signer::ed25519()).await;
        let (iss2, k2) = Issuer::with_key(Signer::es256()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let viewer = builtin_role(&s, "viewer").await;
        let exact = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
        let pattern = create_identity(
            &s,
            &org,
            "release-ci",
            json!({ "claimMatch": { "issuer": iss.url, "subjectPattern": SUB_PATTERN } }),
        )
        .await;
        let with_claims = create_identity(
            &s,
            &org,
            "lib",
            json!({ "claimMatch": {
                "issuer": iss.url,
                "subject": LIB_SUB,
                "claims": { "repository_owner": "acme" },
                "claimPatterns": { "ref": "refs/heads/(main|release-.*)" },
            } }),
        )
        .await;
        create_identity(&s, &org, "dup-1", claim_match(&iss.url, DUP_SUB)).await;
        create_identity(&s, &org, "dup-2", claim_match(&iss.url, DUP_SUB)).await;
        let ks = Signer::ed25519();
        let stat = create_identity(
            &s,
            &org,
            "robot",
            json!({ "staticKeys": { "issuer": STATIC_ISS, "subject": "robot", "issuerKeys": ks.jwks() } }),
        )
        .await;
        for id in [&exact, &pattern, &with_claims, &stat] {
            bind(&s, &org, id, &viewer).await;
        }

        let now = s.clock.now_secs();
        let good = iss.claims(&s, SUB);
        let lib = iss.claims(&s, LIB_SUB);
        let robot = upstream_claims(STATIC_ISS, "robot", &s.base, now);

        // Controls: each identity accepts a proper token, so every refusal
        // below is down to the one thing that case changes.
        for (claims, id) in [
            (&good, &exact),
            (
                &with(&good, "sub", json!("repo:acme/app:ref:refs/heads/release")),
                &pattern,
            ),
            (&lib, &with_claims),
            (&with(&lib, "ref", json!("refs/heads/release-1.2")), &with_claims),
        ] {
            exchange_ok(&s, &k1.sign(claims), &[("identity", id)]).await;
        }
        exchange_ok(&s, &ks.sign(&robot), &[("identity", &stat)]).await;
        exchange_ok(&s, &k1.sign(&good), &[("identity", &exact)]).await;
        assert_eq!(iss.discovery_hits(), 1, "[{b}] controls fetched issuer 1 once");

        let e = Some(exact.as_str());
        let stranger = Signer::ed25519();
        let good_token = k1.sign(&good);
        let (good_h, good_p) = {
            let mut p = good_token.split('.');
            (p.next().unwrap().to_owned(), p.next().unwrap().to_owned())
        };
        let other_sig = k1
            .sign(&with(&good, "jti", json!("other")))
            .rsplit('.')
            .next()
            .unwrap()
            .to_owned();
        let mut hs256 = Header::new(Algorithm::HS256);
        hs256.kid = Some(k1.kid.clone());
        let hmac_forgery = jsonwebtoken::encode(&hs256, &good, &EncodingKey::from_secret(&k1.public)).unwrap();
        let hmac_jwk_forgery = jsonwebtoken::encode(
            &hs256,
            &good,
            &EncodingKey::from_secret(k1.jwk["x"].as_str().unwrap().as_bytes()),
        )
        .unwrap();
        let mut embedded = stranger.header();
        embedded.kid = Some(k1.kid.clone());
        embedded.jwk = Some(serde_json::from_value(stranger.jwk.clone()).expect("jwk"));
        embedded.jku = Some(format!("{}/keys", iss2.url));
        embedded.x5u = Some(format!("{}/keys", iss2.url));
        let tampered = {
            let signed = k1.sign(&with(&good, "sub", json!("repo:evil/app:ref:refs/heads/main")));
            let sig = signed.rsplit('.').next().unwrap().to_owned();
            format!("{good_h}.{}.{sig}", b64(good.to_string().as_bytes()))
        };
        let big = k1.sign(&with(&good, "padding", json!("x".repeat(17 * 1024))));
        assert!(big.len() > 16 * 1024);

        let cases = vec![
            // Algorithm and shape.
            case(
                "alg none",
                &format!("eyJhbGciOiJub25lIn0.{good_p}."),
                e,
                401,
                "malformed",
            ),
            case(
                "alg none with kid and signature",
                &raw_jwt(&json!({"alg": "none", "kid": k1.kid}), &good, &other_sig),
                e,
                401,
                "malformed",
            ),
            case(
                "HS256 keyed with the public key bytes",
                &hmac_forgery,
                e,
                401,
                "algorithm HS256",
            ),
            case(
                "HS256 keyed with the JWK x",
                &hmac_jwk_forgery,
                e,
                401,
                "algorithm HS256",
            ),
            case(
                "PS512 (not an accepted algorithm)",
                &raw_jwt(&json!({"alg": "PS512", "kid": k1.kid}), &good, &other_sig),
                e,
                401,
                "algorithm PS512",
            ),
            case(
                "RS256 header over an Ed25519 kid",
                &raw_jwt(&json!({"alg": "RS256", "kid": k1.kid}), &good, &other_sig),
                e,
                401,
                "signature",
            ),
            case(
                "ES256 header over an Ed25519 kid",
                &raw_jwt(&json!({"alg": "ES256", "kid": k1.kid}), &good, &other_sig),
                e,
                401,
                "signature",
            ),
            case("truncated", &good_token[..good_token.len() / 2], e, 401, "malformed"),
            case(
                "signature stripped",
                &format!("{good_h}.{good_p}."),
                e,
                401,
                "signature",
            ),
            case(
                "signature of another token",
                &format!("{good_h}.{good_p}.{other_sig}"),
                e,
                401,
                "signature",
            ),
            case("two segments", &format!("{good_h}.{good_p}"), e, 401, "malformed"),
            case(
                "tampered payload (sub changed after signing)",
                &tampered,
                e,
                401,
                "signature",
            ),
            case("oversized (> 16 KiB)", &big, e, 401, "too large"),
            case("garbage", "not-a-jwt", e, 401, "malformed"),
            case("garbage with dots", "a.b.c", e, 401, "malformed"),
            case(
                "header not JSON",
                &format!("{}.{good_p}.{other_sig}", b64(b"hello")),
                e,
                401,
                "malformed",
            ),
            case(
                "payload not JSON",
                &format!("{good_h}.{}.{other_sig}", b64(b"[1,2")),
                e,
                401,
                "malformed",
            ),
            // Keys.
            case("unknown kid", &stranger.sign(&good), e, 401, "kid"),
            case(
                "right kid, another key",
                &stranger.with_kid(&k1.kid).sign(&good),
                e,
                401,
                "signature",
            ),
            case(
                "no kid, another key",
                &stranger.sign_with(Header::new(Algorithm::EdDSA), &good),
                e,
                401,
                "signature",
            ),
            case(
                "embedded jwk / jku / x5u headers are ignored",
                &stranger.sign_with(embedded, &good),
                e,
                401,
                "signature",
            ),
            case("issuer 2's key for issuer 1's claims", &k2.sign(&good), e, 401, "kid"),
            // Times.
            case(
                "expired beyond the leeway",
                &k1.sign(&with(&with(&good, "exp", json!(now - 61)), "iat", json!(now - 700))),
                e,
                401,
                "expired",
            ),
            case(
                "long expired",
                &k1.sign(&with(&good, "exp", json!(now - 86_400))),
                e,
                401,
                "expired",
            ),
            case(
                "nbf in the future",
                &k1.sign(&with(&good, "nbf", json!(now + 120))),
                e,
                401,
                "nbf",
            ),
            case(
                "iat in the future",
                &k1.sign(&with(&good, "iat", json!(now + 120))),
                e,
                401,
                "iat",
            ),
            case(
                "nbf fractional, in the future",
                &k1.sign(&with(&good, "nbf", json!((now + 3600) as f64 + 0.5))),
                e,
                401,
                "nbf",
            ),
            case(
                "nbf a string, in the future",
                &k1.sign(&with(&good, "nbf", json!((now + 3600).to_string()))),
                e,
                401,
                "nbf claim is not a number",
            ),
            case(
                "iat fractional, in the future",
                &k1.sign(&with(&good, "iat", json!((now + 3600) as f64 + 0.5))),
                e,
                401,
                "iat",
            ),
            case(
                "iat null",
                &k1.sign(&with(&good, "iat", Value::Null)),
                e,
                401,
                "iat claim is not a number",
            ),
            case(
                "exp fractional, expired",
                &k1.sign(&with(&good, "exp", json!((now - 600) as f64 + 0.5))),
                e,
                401,
                "expired",
            ),
            case("missing exp", &k1.sign(&without(&good, "exp")), e, 401, "no exp claim"),
            case(
                "exp not a number",
                &k1.sign(&with(&good, "exp", json!((now + 600).to_string()))),
                e,
                401,
                "exp claim is not a number",
            ),
            // Issuer, subject, audience, claims.
            case("missing iss", &k1.sign(&without(&good, "iss")), e, 401, "no iss claim"),
            case("missing sub", &k1.sign(&without(&good, "sub")), e, 401, "no sub claim"),
            case(
                "wrong issuer",
                &k1.sign(&with(
                    &good,
                    "iss",
                    json!("https://token.actions.githubusercontent.com"),
                )),
                e,
                401,
                "issuer does not match",
            ),
            case(
                "issuer near-miss (trailing slash)",
                &k1.sign(&with(&good, "iss", json!(format!("{}/", iss.url)))),
                e,
                401,
                "issuer does not match",
            ),
            case(
                "another issuer's valid token for this identity",
                &k2.sign(&iss2.claims(&s, SUB)),
                e,
                401,
                "issuer does not match",
            ),
            case(
                "wrong subject",
                &k1.sign(&with(&good, "sub", json!("repo:acme/app:ref:refs/heads/dev"))),
                e,
                401,
                "subject does not match",
            ),
            case(
                "subject pattern near-miss (suffix)",
                &k1.sign(&with(&good, "sub", json!(format!("{SUB}x")))),
                Some(&pattern),
                401,
                "subject does not match",
            ),
            case(
                "subject pattern near-miss (prefix)",
                &k1.sign(&with(&good, "sub", json!(format!("x{SUB}")))),
                Some(&pattern),
                401,
                "subject does not match",
            ),
            case(
                "subject pattern near-miss (trailing newline)",
                &k1.sign(&with(&good, "sub", json!(format!("{SUB}\n")))),
                Some(&pattern),
                401,
                "subject does not match",
            ),
            case(
                "wrong audience",
                &k1.sign(&with(&good, "aud", json!("https://other.example.com"))),
                e,
                401,
                "audience does not match",
            ),
            case(
                "audience near-miss (trailing slash)",
                &k1.sign(&with(&good, "aud", json!(format!("{}/", s.base)))),
                e,
                401,
                "audience does not match",
            ),
            case(
                "audience list without Ward",
                &k1.sign(&with(&good, "aud", json!(["sigstore", "https://other.example.com"]))),
                e,
                401,
                "audience does not match",
            ),
            case(
                "missing audience",
                &k1.sign(&without(&good, "aud")),
                e,
                401,
                "audience does not match",
            ),
            case(
                "claim mismatch",
                &k1.sign(&with(&lib, "repository_owner", json!("acme-evil"))),
                Some(&with_claims),
                401,
                "claim \"repository_owner\"",
            ),
            case(
                "claim missing",
                &k1.sign(&without(&lib, "repository_owner")),
                Some(&with_claims),
                401,
                "claim \"repository_owner\"",
            ),
            case(
                "claim of another JSON type",
                &k1.sign(&with(&lib, "repository_owner", json!(["acme"]))),
                Some(&with_claims),
                401,
                "claim \"repository_owner\"",
            ),
            case(
                "claim pattern near-miss",
                &k1.sign(&with(&lib, "ref", json!("refs/heads/mainx"))),
                Some(&with_claims),
                401,
                "claim \"ref\"",
            ),
            case(
                "claim pattern missing",
                &k1.sign(&without(&lib, "ref")),
                Some(&with_claims),
                401,
                "claim \"ref\"",
            ),
            // Which identity.
            case(
                "unknown identity",
                &good_token,
                Some(MISSING_UID),
                401,
                "unknown identity",
            ),
            case(
                "identity uid names a group",
                &good_token,
                Some(&org),
                401,
                "unknown identity",
            ),
            case(
                "malformed identity uid",
                &good_token,
                Some("not-a-uid"),
                400,
                "identity",
            ),
            case(
                "no identity matches issuer+subject",
                &k1.sign(&with(&good, "sub", json!("repo:acme/nobody:ref:refs/heads/main"))),
                None,
                401,
                "no registered identity matches",
            ),
            case(
                "subject patterns are not searched",
                &k1.sign(&with(&good, "sub", json!("repo:acme/app:ref:refs/heads/release"))),
                None,
                401,
                "pass identity=",
            ),
            case(
                "two organizations' identities: never ambiguous, never resolved",
                &k1.sign(&with(&good, "sub", json!(DUP_SUB))),
                None,
                401,
                "pass identity=",
            ),
            case(
                "an issuer no identity names",
                &k2.sign(&iss2.claims(&s, SUB)),
                None,
                401,
                "no registered identity matches",
            ),
            // Static keys.
            case(
                "static: signed by another key",
                &stranger.sign(&robot),
                Some(&stat),
                401,
                "kid",
            ),
            case(
                "static: right kid, another key",
                &stranger.with_kid(&ks.kid).sign(&robot),
                Some(&stat),
                401,
                "signature",
            ),
            case(
                "static: wrong subject",
                &ks.sign(&with(&robot, "sub", json!("robot-2"))),
                Some(&stat),
                401,
                "subject does not match",
            ),
            case(
                "static: wrong issuer",
                &ks.sign(&with(&robot, "iss", json!(iss.url))),
                Some(&stat),
                401,
                "issuer does not match",
            ),
            case(
                "static: wrong audience",
                &ks.sign(&with(&robot, "aud", json!("https://other.example.com"))),
                Some(&stat),
                401,
                "audience does not match",
            ),
            case(
                "static: expired token",
                &ks.sign(&with(&robot, "exp", json!(now - 120))),
                Some(&stat),
                401,
                "expired",
            ),
            // No usable Authorization.
            Case {
                name: "no Authorization header",
                auth: None,
                identity: Some(exact.clone()),
                http: 401,
                needle: "identity token is required",
            },
            Case {
                name: "empty bearer",
                auth: Some("Bearer ".into()),
                identity: Some(exact.clone()),
                http: 401,
                needle: "identity token is required",
            },
            Case {
                name: "Basic scheme",
                auth: Some(format!("Basic {}", b64(b"user:pass"))),
                identity: Some(exact.clone()),
                http: 401,
                needle: "identity token is required",
            },
        ];
        assert!(cases.len() >= 25, "{} cases", cases.len());

        for c in &cases {
            let mut query = Vec::new();
            if let Some(id) = &c.identity {
                query.push(("identity", id.as_str()));
            }
            let r = send(&s, Method::GET, &sts_url(&s), c.auth.as_deref(), &query, None).await;
            assert_refused(b, c.name, &r, c.http, c.needle);
            // Messages name the check, never what the identity expects.
            let msg = r.body["message"].as_str().unwrap_or_default();
            for secret in ["acme", "refs/heads", "release", iss.url.as_str(), STATIC_ISS, "robot"] {
                assert!(!msg.contains(secret), "[{b}] [{}] leaks {secret:?}: {msg}", c.name);
            }
        }
        let r = exchange(&s, &good_token, &[("identity", "not-a-uid")]).await;
        assert_eq!(
            field_violations(&r.body),
            vec!["identity".to_owned()],
            "[{b}] {}",
            r.body
        );

        // Issuer 2 was never fetched: no identity names it, and checks that
        // come before the signature failed first. Issuer 1 was fetched once:
        // unknown kids within 30 s of the fetch do not refetch.
        assert_eq!(
            iss2.discovery_hits() + iss2.jwks_hits(),
            0,
            "[{b}] issuer 2 never fetched"
        );
        assert_eq!(
            (iss.discovery_hits(), iss.jwks_hits()),
            (1, 1),
            "[{b}] issuer 1 fetched once"
        );

        // A static identity past its expiration cannot be assumed.
        let short = create_identity(
            &s,
            &org,
            "short-lived",
            json!({ "staticKeys": {
                "issuer": STATIC_ISS,
                "subject": "short",
                "issuerKeys": ks.jwks(),
                "expirationTime": ts(&s, 5_000),
            } }),
        )
        .await;
        let short_claims = |s: &TestServer| upstream_claims(STATIC_ISS, "short", &s.base, s.clock.now_secs());
        exchange_ok(&s, &ks.sign(&short_claims(&s)), &[("identity", &short)]).await;
        s.clock.advance_millis(6_000);
        let r = exchange(&s, &ks.sign(&short_claims(&s)), &[("identity", &short)]).await;
        assert_refused(b, "static identity expired", &r, 401, "identity has expired");
    }
}

// ---------------------------------------------------------------------------
// Static keys

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_keys_identities_verify_offline() {
    for s in dev_servers().await {
        let b = s.backend;
        // A live issuer whose URL the static identity names: its own keys are
        // never fetched, the stored JWKS is.
        let (live, live_key) = Issuer::with_key(Signer::ed25519()).await;
        let ks = Signer::es256();
        let org = uid(&s.create_group(None, "acme").await);
        let viewer = builtin_role(&s, "viewer").await;
        let expires_ms = 30 * 60 * 1000;
        // Whole seconds, like the token's exp.
        let expiration = rfc3339(s.clock.now_secs() + expires_ms / 1000);
        let robot = create_identity(
            &s,
            &org,
            "robot",
            json!({ "staticKeys": {
                "issuer": live.url, "subject": "robot", "issuerKeys": ks.jwks(), "expirationTime": expiration,
            } }),
        )
        .await;
        bind(&s, &org, &robot, &viewer).await;

        let token = exchange_ok(&s, &ks.sign(&live.claims(&s, "robot")), &[("identity", &robot)]).await;
        let (_, claims) = jwt_parts(&token);
        assert_eq!(claims["sub"], robot, "[{b}] {claims}");
        assert_eq!(
            rfc3339(claims["exp"].as_i64().unwrap()),
            expiration,
            "[{b}] the token ends with the identity: {claims}"
        );
        assert_eq!(list_uids(&s, &token, G, "groups").await, vec![org.clone()], "[{b}]");
        let (me, _) = who_am_i(&s, &token).await;
        assert_eq!(me["expiry"], expiration, "[{b}] {me}");

        // The same exchange over gRPC, as SDK clients (the Terraform
        // provider) make it: the identity token as the bearer, the identity
        // and the audience (the API URL) in the request; a RawToken back.
        let mut sts = ward_proto::oidc::security_token_service_client::SecurityTokenServiceClient::new(
            tonic::transport::Channel::from_shared(format!("http://{}", s.addr()))
                .expect("uri")
                .connect()
                .await
                .expect("connect"),
        );
        let mut req = tonic::Request::new(ward_proto::oidc::ExchangeRequest {
            aud: vec![s.base.clone()],
            identity: robot.clone(),
            ..Default::default()
        });
        let bearer = format!("Bearer {}", ks.sign(&live.claims(&s, "robot")));
        req.metadata_mut()
            .insert("authorization", bearer.parse().expect("ascii"));
        let raw = sts.exchange(req).await.expect("Exchange over gRPC").into_inner();
        assert!(raw.refresh_token.is_empty(), "[{b}] Ward issues no refresh tokens");
        assert_eq!(
            raw.expiry.map(|t| rfc3339(t.seconds)),
            Some(expiration.clone()),
            "[{b}] the expiry is the token's"
        );
        assert_eq!(jwt_parts(&raw.token).1["sub"], robot, "[{b}]");
        assert_eq!(list_uids(&s, &raw.token, G, "groups").await, vec![org.clone()], "[{b}]");
        let mut req = tonic::Request::new(ward_proto::oidc::ExchangeRequest {
            identity: robot.clone(),
            ..Default::default()
        });
        req.metadata_mut()
            .insert("authorization", "Bearer not-a-token".parse().expect("ascii"));
        let refused = sts.exchange(req).await.expect_err("a malformed token");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "[{b}] {refused:?}");

        // The issuer's published key does not help: only the stored JWKS counts.
        let r = exchange(&s, &live_key.sign(&live.claims(&s, "robot")), &[("identity", &robot)]).await;
        assert_refused(b, "static: the issuer's live key", &r, 401, "kid");
        assert_eq!(live.discovery_hits() + live.jwks_hits(), 0, "[{b}] never fetched");

        // A static audience replaces the default one.
        let aud = create_identity(
            &s,
            &org,
            "robot-aud",
            json!({ "staticKeys": {
                "issuer": STATIC_ISS, "subject": "robot-aud", "issuerKeys": ks.jwks(), "audiences": ["robots"],
            } }),
        )
        .await;
        let c = upstream_claims(STATIC_ISS, "robot-aud", "robots", s.clock.now_secs());
        exchange_ok(&s, &ks.sign(&c), &[("identity", &aud)]).await;
        let r = exchange(&s, &ks.sign(&with(&c, "aud", json!(s.base))), &[("identity", &aud)]).await;
        assert_refused(
            b,
            "static: Ward's issuer is not the identity's audience",
            &r,
            401,
            "audience",
        );

        // Past the expiration: refused, and tokens issued before stop too.
        s.clock.advance_millis(expires_ms + 1_000);
        let r = exchange(&s, &ks.sign(&live.claims(&s, "robot")), &[("identity", &robot)]).await;
        assert_refused(b, "static identity expired", &r, 401, "identity has expired");
        let (status, body) = get_as(&s, &token, G).await;
        assert_error(b, status, &body, 401, 16, "UNAUTHENTICATED");
    }
}

// ---------------------------------------------------------------------------
// Fetch policy

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_policy_without_dev_refuses_http_and_private_addresses() {
    let (iss, key) = Issuer::with_key(Signer::ed25519()).await;

    // Default policy: https only, public addresses only.
    let s = TestServer::start(ward_store::testing::sqlite()).await;
    assert!(!s.config.dev && !s.config.allow_insecure_issuers);
    let org = uid(&s.create_group(None, "acme").await);
    let plain = create_identity(&s, &org, "plain", claim_match(&iss.url, SUB)).await;
    let r = exchange(&s, &key.sign(&iss.claims(&s, SUB)), &[("identity", &plain)]).await;
    assert_refused("default", "http issuer", &r, 401, "is not https");
    assert_eq!(iss.discovery_hits(), 0, "never contacted");
    for (name, issuer) in [
        (
            "https loopback",
            format!("https://{}", iss.url.trim_start_matches("http://")),
        ),
        ("https localhost", "https://localhost:1".to_owned()),
        ("https private", "https://10.1.2.3".to_owned()),
        ("https link-local metadata", "https://169.254.169.254".to_owned()),
    ] {
        let id = create_identity(&s, &org, name, claim_match(&issuer, SUB)).await;
        let c = upstream_claims(&issuer, SUB, &s.base, s.clock.now_secs());
        let r = exchange(&s, &key.sign(&c), &[("identity", &id)]).await;
        assert_refused("default", name, &r, 401, "addresses that may not be fetched");
    }
    assert_eq!(iss.discovery_hits(), 0, "never contacted");

    // --dev: http and loopback only.
    let d = TestServer::start_with(ward_store::testing::sqlite(), |c| c.dev = true).await;
    let org = uid(&d.create_group(None, "acme").await);
    for (name, issuer) in [
        ("http private", "http://10.1.2.3"),
        ("http link-local metadata", "http://169.254.169.254"),
        ("http CGNAT", "http://100.64.0.1"),
    ] {
        let id = create_identity(&d, &org, name, claim_match(issuer, SUB)).await;
        let c = upstream_claims(issuer, SUB, &d.base, d.clock.now_secs());
        let r = exchange(&d, &key.sign(&c), &[("identity", &id)]).await;
        assert_refused("dev", name, &r, 401, "addresses that may not be fetched");
    }
    let id = create_identity(&d, &org, "loopback", claim_match(&iss.url, SUB)).await;
    exchange_ok(&d, &key.sign(&iss.claims(&d, SUB)), &[("identity", &id)]).await;
    assert_eq!(iss.discovery_hits(), 1);

    // --allow-insecure-issuers: http to any address.
    let i = TestServer::start_with(ward_store::testing::sqlite(), |c| c.allow_insecure_issuers = true).await;
    let org = uid(&i.create_group(None, "acme").await);
    let id = create_identity(&i, &org, "loopback", claim_match(&iss.url, SUB)).await;
    exchange_ok(&i, &key.sign(&iss.claims(&i, SUB)), &[("identity", &id)]).await;
    assert_eq!(iss.discovery_hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_issuers_are_refused() {
    let s = TestServer::start_with(ward_store::testing::sqlite(), |c| c.dev = true).await;
    let org = uid(&s.create_group(None, "acme").await);
    let (honest, _) = Issuer::with_key(Signer::ed25519()).await;
    let modes = [
        (
            "discovery names another issuer",
            Discovery::ClaimsIssuer("https://accounts.google.com".into()),
            "names another issuer",
        ),
        ("no jwks_uri", Discovery::NoJwksUri, "has no jwks_uri"),
        (
            "jwks_uri on a private address",
            Discovery::JwksUri("http://10.0.0.1/keys".into()),
            "addresses that may not be fetched",
        ),
        (
            "jwks_uri not a URL",
            Discovery::JwksUri("keys.json".into()),
            "is not a URL",
        ),
        (
            "redirects are not followed",
            Discovery::Redirect(format!("{}/.well-known/openid-configuration", honest.url)),
            "answered 302",
        ),
        ("document too large", Discovery::Huge, "larger than"),
    ];
    for (name, mode, needle) in modes {
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        iss.misbehave(mode);
        let id = create_identity(&s, &org, name, claim_match(&iss.url, SUB)).await;
        let c = iss.claims(&s, SUB);
        let r = exchange(&s, &key.sign(&c), &[("identity", &id)]).await;
        assert_refused("dev", name, &r, 401, needle);
        assert_eq!((iss.discovery_hits(), iss.jwks_hits()), (1, 0), "[{name}]");
        // A failure is remembered briefly: an immediate retry does not reach
        // the issuer, even once it behaves again…
        iss.misbehave(Discovery::Honest);
        let r = exchange(&s, &key.sign(&c), &[("identity", &id)]).await;
        assert_refused("dev", name, &r, 401, "not retried");
        assert_eq!(iss.discovery_hits(), 1, "[{name}] no refetch within the backoff");
        // …and after the backoff the identity works.
        s.clock.advance_millis(ward_auth::upstream::FAILURE_BACKOFF_MS + 1);
        exchange_ok(&s, &key.sign(&c), &[("identity", &id)]).await;
    }
    assert_eq!(honest.discovery_hits(), 0, "the redirect was not followed");

    // Nothing listens on port 1.
    let down = "http://127.0.0.1:1";
    let id = create_identity(&s, &org, "unreachable", claim_match(down, SUB)).await;
    let c = upstream_claims(down, SUB, &s.base, s.clock.now_secs());
    let r = exchange(&s, &Signer::ed25519().sign(&c), &[("identity", &id)]).await;
    assert_refused("dev", "unreachable", &r, 401, "could not fetch the issuer's keys");
}

// ---------------------------------------------------------------------------
// Upstream key rotation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_key_rotation_refetches_at_most_every_30s() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, k1) = Issuer::with_key(Signer::ed25519()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let id = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
        let q = [("identity", id.as_str())];
        let hits = || (iss.discovery_hits(), iss.jwks_hits());

        exchange_ok(&s, &k1.sign(&iss.claims(&s, SUB)), &q).await;
        assert_eq!(hits(), (1, 1), "[{b}]");

        // The issuer rotates to an ES256 key. Right after the fetch, an unknown
        // kid does not refetch (at most once every 30 s per issuer).
        let k2 = Signer::es256();
        iss.publish(&k2);
        let r = exchange(&s, &k2.sign(&iss.claims(&s, SUB)), &q).await;
        assert_refused(b, "new kid right after a fetch", &r, 401, "kid");
        assert_eq!(hits(), (1, 1), "[{b}] throttled");

        // 30 s on: the first token with the new kid refetches and succeeds.
        s.clock.advance_millis(30_000);
        exchange_ok(&s, &k2.sign(&iss.claims(&s, SUB)), &q).await;
        assert_eq!(hits(), (2, 2), "[{b}] one refetch");
        exchange_ok(&s, &k2.sign(&iss.claims(&s, SUB)), &q).await;
        exchange_ok(&s, &k1.sign(&iss.claims(&s, SUB)), &q).await;
        assert_eq!(hits(), (2, 2), "[{b}] cached again");

        // The old key is withdrawn: cached keys still verify it until a refetch.
        iss.unpublish(&k1.kid);
        let k3 = Signer::ed25519();
        iss.publish(&k3);
        let r = exchange(&s, &k3.sign(&iss.claims(&s, SUB)), &q).await;
        assert_refused(b, "another new kid within 30 s", &r, 401, "kid");
        assert_eq!(hits(), (2, 2), "[{b}] throttled");
        exchange_ok(&s, &k1.sign(&iss.claims(&s, SUB)), &q).await;
        s.clock.advance_millis(31_000);
        exchange_ok(&s, &k3.sign(&iss.claims(&s, SUB)), &q).await;
        assert_eq!(hits(), (3, 3), "[{b}]");
        let r = exchange(&s, &k1.sign(&iss.claims(&s, SUB)), &q).await;
        assert_refused(b, "withdrawn key", &r, 401, "kid");

        // Key sets expire after an hour even when every kid is known.
        exchange_ok(&s, &k3.sign(&iss.claims(&s, SUB)), &q).await;
        assert_eq!(hits(), (3, 3), "[{b}]");
        s.clock.advance_millis(60 * 60 * 1000);
        exchange_ok(&s, &k3.sign(&iss.claims(&s, SUB)), &q).await;
        assert_eq!(hits(), (4, 4), "[{b}] refetched after the TTL");
    }
}

// ---------------------------------------------------------------------------
// Narrowing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_and_capabilities_only_narrow() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let deep = uid(&s.create_group(Some(&team), "deep").await);
        let other = uid(&s.create_group(Some(&org), "other").await);
        let globex = uid(&s.create_group(None, "globex").await);
        let viewer = builtin_role(&s, "viewer").await;
        let id = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
        bind(&s, &org, &id, &viewer).await;
        let upstream = || key.sign(&iss.claims(&s, SUB));

        // Unnarrowed: the whole org.
        let full = exchange_ok(&s, &upstream(), &[("identity", &id)]).await;
        assert_eq!(
            list_uids(&s, &full, G, "groups").await,
            sorted(vec![org.clone(), team.clone(), deep.clone(), other.clone()]),
            "[{b}]"
        );

        // scopes=<team>: the team and below, not the org or a sibling.
        let scoped = exchange_ok(&s, &upstream(), &[("identity", &id), ("scopes", &team)]).await;
        let (_, claims) = jwt_parts(&scoped);
        assert_eq!(claims["scopes"], json!([team]), "[{b}] {claims}");
        assert_eq!(
            list_uids(&s, &scoped, G, "groups").await,
            sorted(vec![team.clone(), deep.clone()]),
            "[{b}] only under the scope"
        );
        for g in [&org, &other] {
            let (status, body) = get_as(&s, &scoped, &format!("{G}/{g}")).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        }
        let (status, body) = get_as(&s, &scoped, &format!("{G}/{deep}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (_, caps) = who_am_i(&s, &scoped).await;
        assert_eq!(caps, vec![(team.clone(), view_caps())], "[{b}]");

        // Two scopes, comma-separated (and the deprecated `scope` spelling).
        let two = exchange_ok(
            &s,
            &upstream(),
            &[("identity", &id), ("scopes", &format!("{team},{other}"))],
        )
        .await;
        let (_, caps) = who_am_i(&s, &two).await;
        assert_eq!(
            caps,
            sorted_pairs(vec![(team.clone(), view_caps()), (other.clone(), view_caps())]),
            "[{b}]"
        );
        let old = exchange_ok(&s, &upstream(), &[("identity", &id), ("scope", &other)]).await;
        assert_eq!(
            list_uids(&s, &old, G, "groups").await,
            vec![other.clone()],
            "[{b}] scope="
        );

        // cap=groups.list: groups yes, identities no.
        let listing = exchange_ok(&s, &upstream(), &[("identity", &id), ("cap", "groups.list")]).await;
        let (_, claims) = jwt_parts(&listing);
        assert_eq!(claims["cap"], json!(["groups.list"]), "[{b}] {claims}");
        assert_eq!(list_uids(&s, &listing, G, "groups").await.len(), 4, "[{b}]");
        let (status, body) = get_as(&s, &listing, &format!("{ID}/{id}")).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        assert!(
            list_uids(&s, &listing, ID, "identities").await.is_empty(),
            "[{b}] no identities"
        );
        assert_eq!(list_uids(&s, &full, ID, "identities").await, vec![id.clone()], "[{b}]");
        let (_, caps) = who_am_i(&s, &listing).await;
        assert_eq!(
            caps,
            vec![(org.clone(), vec!["CAP_IAM_GROUPS_LIST".to_owned()])],
            "[{b}]"
        );

        // Both, with an enum name.
        let both = exchange_ok(
            &s,
            &upstream(),
            &[("identity", &id), ("scopes", &team), ("cap", "CAP_IAM_GROUPS_LIST")],
        )
        .await;
        let (_, caps) = who_am_i(&s, &both).await;
        assert_eq!(
            caps,
            vec![(team.clone(), vec!["CAP_IAM_GROUPS_LIST".to_owned()])],
            "[{b}]"
        );

        // Never wider.
        for (name, query, http, needle) in [
            (
                "a capability not held",
                vec![("cap", "groups.delete")],
                403,
                "groups.delete",
            ),
            (
                "a held capability plus one not held",
                vec![("cap", "groups.list,groups.create")],
                403,
                "groups.create",
            ),
            (
                "another organization",
                vec![("scopes", globex.as_str())],
                403,
                "holds nothing",
            ),
            (
                "one good scope and one foreign",
                vec![("scopes", team.as_str()), ("scopes", globex.as_str())],
                403,
                "holds nothing",
            ),
            ("not a capability", vec![("cap", "groups.fly")], 400, "not a capability"),
            ("malformed scope", vec![("scopes", "not-a-group")], 400, "scopes"),
            ("unknown parameter", vec![("scopez", team.as_str())], 400, "scopez"),
        ] {
            let mut q = vec![("identity", id.as_str())];
            q.extend(query);
            let r = exchange(&s, &upstream(), &q).await;
            assert_refused(b, name, &r, http, needle);
        }

        // Grants stay live, intersected with the narrowing: an owner binding
        // at the team lets the scoped token create there, never the
        // capability-narrowed one, nor the scoped one outside its scope.
        let owner = builtin_role(&s, "owner").await;
        bind(&s, &team, &id, &owner).await;
        let (status, body) = create_group_as(&s, &scoped, &team, "made-by-scoped").await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (status, body) = create_group_as(&s, &both, &team, "made-by-both").await;
        assert_error(b, status, &body, 403, 7, "PERMISSION_DENIED");
        let (status, body) = create_group_as(&s, &scoped, &other, "x").await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
    }
}

fn sorted_pairs(mut v: Vec<(String, Vec<String>)>) -> Vec<(String, Vec<String>)> {
    v.sort();
    v
}

// ---------------------------------------------------------------------------
// Audiences

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audiences_ward_serves() {
    let (iss, key) = Issuer::with_key(Signer::ed25519()).await;

    // Issuer and API URL are the same by default: aud=<it> is the API token.
    let s = TestServer::start_with(ward_store::testing::sqlite(), |c| c.dev = true).await;
    let org = uid(&s.create_group(None, "acme").await);
    let viewer = builtin_role(&s, "viewer").await;
    let id = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
    bind(&s, &org, &id, &viewer).await;
    let t = exchange_ok(
        &s,
        &key.sign(&iss.claims(&s, SUB)),
        &[("identity", &id), ("aud", &s.base)],
    )
    .await;
    assert_eq!(jwt_parts(&t).1["aud"], s.base);
    assert_eq!(list_uids(&s, &t, G, "groups").await, vec![org.clone()]);
    let r = exchange(
        &s,
        &key.sign(&iss.claims(&s, SUB)),
        &[("identity", &id), ("aud", "https://elsewhere.example.com")],
    )
    .await;
    assert_refused("default", "an audience Ward does not serve", &r, 400, "not an audience");
    assert_eq!(field_violations(&r.body), vec!["aud".to_owned()], "{}", r.body);

    // A distinct issuer URL (with a path): the exchange lives under it, the
    // upstream token must be meant for it, and an issuer-audience token is not
    // an API token.
    let issuer_url = "https://ward.example.com/tenant";
    let t2 = TestServer::start_with(ward_store::testing::sqlite(), |c| {
        c.dev = true;
        c.issuer_url = Some(issuer_url.into());
    })
    .await;
    let org = uid(&t2.create_group(None, "acme").await);
    let viewer = builtin_role(&t2, "viewer").await;
    let id = create_identity(&t2, &org, "ci", claim_match(&iss.url, SUB)).await;
    bind(&t2, &org, &id, &viewer).await;
    let url = format!("{}/tenant/sts/exchange", t2.base);
    let (status, disco) = t2.get("/tenant/.well-known/openid-configuration").await;
    assert_eq!(status, StatusCode::OK, "{disco}");
    assert_eq!(disco["issuer"], issuer_url);
    let for_ward = |aud: &str| {
        let c = upstream_claims(&iss.url, SUB, aud, t2.clock.now_secs());
        format!("Bearer {}", key.sign(&c))
    };
    let ex = |auth: String, query: Vec<(&'static str, String)>| {
        let url = url.clone();
        let t2 = &t2;
        async move {
            let q: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
            send(t2, Method::GET, &url, Some(&auth), &q, None).await
        }
    };
    let idq = ("identity", id.clone());

    // Default aud: the API URL.
    let r = ex(for_ward(issuer_url), vec![idq.clone()]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let api_token = r.body["token"].as_str().unwrap().to_owned();
    let (_, claims) = jwt_parts(&api_token);
    assert_eq!(
        (claims["iss"].as_str(), claims["aud"].as_str()),
        (Some(issuer_url), Some(t2.base.as_str()))
    );
    assert_eq!(list_uids(&t2, &api_token, G, "groups").await, vec![org.clone()]);

    // aud=<issuer>: minted, but not accepted by the API.
    let r = ex(for_ward(issuer_url), vec![idq.clone(), ("aud", issuer_url.into())]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let issuer_token = r.body["token"].as_str().unwrap().to_owned();
    assert_eq!(jwt_parts(&issuer_token).1["aud"], issuer_url);
    let (status, body) = get_as(&t2, &issuer_token, G).await;
    assert_error("tenant", status, &body, 401, 16, "UNAUTHENTICATED");
    assert!(body["message"].as_str().unwrap().contains("audience"), "{body}");

    // Both (trailing slashes trimmed, duplicates dropped): accepted by the API.
    let r = ex(
        for_ward(issuer_url),
        vec![
            idq.clone(),
            ("aud", format!("{}/,{issuer_url}", t2.base)),
            ("aud", t2.base.clone()),
        ],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let both = r.body["token"].as_str().unwrap().to_owned();
    assert_eq!(jwt_parts(&both).1["aud"], json!([t2.base, issuer_url]));
    assert_eq!(list_uids(&t2, &both, G, "groups").await, vec![org.clone()]);

    // The upstream token must name Ward's issuer, not its API URL.
    let r = ex(for_ward(&t2.base), vec![idq.clone()]).await;
    assert_refused(
        "tenant",
        "upstream aud is the API URL, not the issuer",
        &r,
        401,
        "audience",
    );
    // Not served at the root.
    let r = send(
        &t2,
        Method::GET,
        &format!("{}/sts/exchange", t2.base),
        Some(&for_ward(issuer_url)),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    // Any other aud is refused.
    let r = ex(
        for_ward(issuer_url),
        vec![idq, ("aud", "https://ward.example.com".into())],
    )
    .await;
    assert_refused("tenant", "issuer host without its path", &r, 400, "not an audience");
}

// ---------------------------------------------------------------------------
// Ward's own signing keys

/// A Ward token signed directly with a stored signing key (as another replica would).
fn sign_as_ward(key: &ward_store::SigningKeyRecord, claims: &Value) -> String {
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&h, claims, &EncodingKey::from_ed_der(&key.private_key)).expect("sign")
}

async fn jwks_kids(s: &TestServer) -> Vec<String> {
    let (status, jwks) = s.call_as("", Method::GET, "/.well-known/jwks.json", None).await;
    assert_eq!(status, StatusCode::OK, "{jwks}");
    jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["kid"].as_str().expect("kid").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ward_signing_keys_rotate_and_retire() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let viewer = builtin_role(&s, "viewer").await;
        let id = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
        bind(&s, &org, &id, &viewer).await;
        let q = [("identity", id.as_str())];
        let store = s.ward().store.clone();

        let used = exchange_ok(&s, &key.sign(&iss.claims(&s, SUB)), &q).await;
        let unused = exchange_ok(&s, &key.sign(&iss.claims(&s, SUB)), &q).await;
        let old_kid = jwt_parts(&used).0["kid"].as_str().unwrap().to_owned();
        assert_eq!(jwks_kids(&s).await, vec![old_kid.clone()], "[{b}]");
        assert_eq!(list_uids(&s, &used, G, "groups").await, vec![org.clone()], "[{b}]");

        let new_kid = ward_auth::rotate_key(store.as_ref(), &s.ward().secret, s.clock.now_millis())
            .await
            .expect("rotate");
        assert_ne!(new_kid, old_kid);
        s.ward().tokens.refresh().await.expect("refresh");
        assert_eq!(
            jwks_kids(&s).await,
            vec![old_kid.clone(), new_kid.clone()],
            "[{b}] both listed"
        );

        // Old tokens still work (one seen before, one never verified yet).
        for t in [&used, &unused] {
            assert_eq!(list_uids(&s, t, G, "groups").await, vec![org.clone()], "[{b}]");
        }
        // New tokens use the new key.
        let fresh = exchange_ok(&s, &key.sign(&iss.claims(&s, SUB)), &q).await;
        assert_eq!(jwt_parts(&fresh).0["kid"], new_kid, "[{b}]");
        assert_eq!(list_uids(&s, &fresh, G, "groups").await, vec![org.clone()], "[{b}]");

        // A token the old key signs now (another replica that has not yet
        // refreshed) is still accepted.
        let keys = store.signing_keys().await.expect("keys");
        let old = keys.iter().find(|k| k.kid == old_kid).expect("old key").clone();
        let old = ward_store::SigningKeyRecord {
            private_key: ward_auth::private_key_der(&old, &s.ward().secret).expect("the key opens"),
            ..old
        };
        let successor = keys.iter().find(|k| k.kid == new_kid).expect("new key").create_time;
        let ward_claims = |jti: &str| {
            let now = s.clock.now_secs();
            json!({ "iss": s.base, "sub": id, "aud": s.base, "iat": now, "exp": now + 3600, "jti": jti })
        };
        let late = sign_as_ward(&old, &ward_claims("late"));
        assert_eq!(list_uids(&s, &late, G, "groups").await, vec![org.clone()], "[{b}]");

        // Pruning before 1 h 5 min keeps the old key; after, it is gone.
        ward_auth::prune_keys(store.as_ref(), successor + 60 * 60 * 1000)
            .await
            .expect("prune");
        assert_eq!(store.signing_keys().await.unwrap().len(), 2, "[{b}] kept");
        ward_auth::prune_keys(store.as_ref(), successor + 70 * 60 * 1000)
            .await
            .expect("prune");
        let left: Vec<String> = store.signing_keys().await.unwrap().into_iter().map(|k| k.kid).collect();
        assert_eq!(left, vec![new_kid.clone()], "[{b}] old key retired");
        s.ward().tokens.refresh().await.expect("refresh");
        assert_eq!(jwks_kids(&s).await, vec![new_kid.clone()], "[{b}]");

        // Tokens signed with the retired key then fail.
        let retired = sign_as_ward(&old, &ward_claims("retired"));
        let (status, body) = get_as(&s, &retired, G).await;
        assert_error(b, status, &body, 401, 16, "UNAUTHENTICATED");
        assert!(
            body["message"].as_str().unwrap().contains("not signed by this issuer"),
            "[{b}] {body}"
        );
        assert_eq!(list_uids(&s, &fresh, G, "groups").await, vec![org.clone()], "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotate_key_cli_adds_a_key_servers_pick_up() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let id = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
        let before = jwks_kids(&s).await;

        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"))
            .args(["admin", "rotate-key", "--data-dir"])
            .arg(&s.config.data_dir)
            .args(["--database", s.config.database.as_deref().expect("database url")])
            .env_remove("WARD_DATABASE")
            .env_remove("WARD_DATA_DIR")
            .env_remove("WARD_LISTEN")
            .kill_on_drop(true)
            .output()
            .await
            .expect("ward runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "[{b}] {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let kid = stdout
            .trim()
            .strip_prefix("added signing key ")
            .unwrap_or_else(|| panic!("[{b}] output: {stdout:?}"))
            .to_owned();
        assert!(!before.contains(&kid), "[{b}]");

        // Signing switches at the next refresh (every KEY_REFRESH_PERIOD).
        assert_eq!(ward_auth::KEY_REFRESH_PERIOD, std::time::Duration::from_secs(60));
        s.ward().tokens.refresh().await.expect("refresh");
        let kids = jwks_kids(&s).await;
        assert_eq!(kids.last(), Some(&kid), "[{b}] {kids:?}");
        assert_eq!(kids.len(), before.len() + 1, "[{b}] {kids:?}");
        let t = exchange_ok(&s, &key.sign(&iss.claims(&s, SUB)), &[("identity", &id)]).await;
        assert_eq!(jwt_parts(&t).0["kid"], kid, "[{b}]");
        let (status, _) = get_as(&s, &t, "/auth/v1/ok").await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
    }
}

/// The CI-workload flow through the `ward` binary against the real exchange:
/// log in with an upstream identity token, read with the cached Ward token,
/// and see a write refused.
#[tokio::test]
async fn cli_login_exchanges_and_acts_as_the_identity() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let id = create_identity(&s, &org, "ci", claim_match(&iss.url, SUB)).await;
        bind(&s, &org, &id, &builtin_role(&s, "viewer").await).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let oidc = dir.path().join("oidc-token");
        std::fs::write(&oidc, key.sign(&iss.claims(&s, SUB))).expect("write the identity token");
        let ward = |args: Vec<String>| {
            let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"));
            c.args(args)
                .env("WARD_API", &s.base)
                .env("WARD_CONFIG_DIR", dir.path().join("config"))
                .env_remove("WARD_TOKEN")
                .env_remove("WARD_TOKEN_FILE")
                .env_remove("WARD_ISSUER");
            async move {
                let out = c.output().await.expect("run ward");
                (
                    out.status.success(),
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                )
            }
        };
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

        let (ok, out, err) = ward(args(&[
            "auth",
            "login",
            "--identity",
            &id,
            "--identity-token",
            &oidc.display().to_string(),
        ]))
        .await;
        assert!(ok, "[{b}] login: {out} {err}");
        assert!(out.contains(&id), "[{b}] login names the identity: {out}");

        let (ok, out, err) = ward(args(&["iam", "groups", "list", "-o", "json"])).await;
        assert!(ok, "[{b}] list: {err}");
        let groups: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(groups[0]["uid"], org, "[{b}] the identity sees its org: {out}");

        let (ok, out, err) = ward(args(&["iam", "groups", "create", "team", "--parent", &org])).await;
        assert!(!ok, "[{b}] a viewer cannot create: {out}");
        assert!(err.contains("HTTP 403"), "[{b}] refused with 403: {err}");

        let (ok, out, err) = ward(args(&["auth", "status", "-o", "json"])).await;
        assert!(ok, "[{b}] status: {err}");
        let status: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(status["subject"], id, "[{b}] {status}");

        let (ok, out, _) = ward(args(&["auth", "token"])).await;
        assert!(ok, "[{b}] token");
        let (_, claims) = jwt_parts(out.trim());
        assert_eq!(claims["sub"], id, "[{b}] {claims}");
        assert_eq!(claims["act"]["iss"], iss.url, "[{b}] {claims}");
    }
}

// ---------------------------------------------------------------------------
// Hardening regressions

/// A token that is not validly signed by the identity's issuer learns nothing
/// about what the identity expects of subject, audience or claims: the
/// signature is checked before them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tokens_learn_nothing_about_required_claims() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        let stranger = Signer::ed25519().with_kid(&key.kid);
        let org = uid(&s.create_group(None, "acme").await);
        let id = create_identity(
            &s,
            &org,
            "secretive",
            json!({"claimMatch": {
                "issuer": iss.url, "subject": SUB,
                "claims": {"repository_owner_id": "4711"},
                "claimPatterns": {"job_workflow_ref": "acme/deploy/.*"},
            }}),
        )
        .await;
        for (case, token) in [
            ("forged, claims missing", stranger.sign(&iss.claims(&s, SUB))),
            ("forged, wrong subject", stranger.sign(&iss.claims(&s, "repo:evil/x"))),
        ] {
            let r = exchange(&s, &token, &[("identity", &id)]).await;
            assert_refused(b, case, &r, 401, "signature");
            let text = r.body.to_string();
            for secret in ["repository_owner_id", "job_workflow_ref", "4711", "subject"] {
                assert!(!text.contains(secret), "[{b}] {case}: leaked {secret}: {text}");
            }
        }
        // Validly signed: now the failing claim is named.
        let r = exchange(&s, &key.sign(&iss.claims(&s, SUB)), &[("identity", &id)]).await;
        assert_refused(b, "signed, claim missing", &r, 401, "claim \"repository_owner_id\"");
    }
}

/// The exchange bounds what it is asked for, and never mints a token Ward
/// itself would refuse (over 8 KiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_requests_are_bounded() {
    for s in dev_servers().await {
        let b = s.backend;
        let (iss, key) = Issuer::with_key(Signer::ed25519()).await;
        let org = uid(&s.create_group(None, "acme").await);
        let long_sub = format!("repo:acme/{}", "x".repeat(7_000));
        let id = create_identity(
            &s,
            &org,
            "anything",
            json!({"claimMatch": {"issuer": iss.url, "subjectPattern": "repo:acme/.*"}}),
        )
        .await;
        bind(&s, &org, &id, &builtin_role(&s, "viewer").await).await;
        let nine: Vec<(&str, &str)> = std::iter::repeat_n(("scopes", org.as_str()), 9)
            .chain([("identity", id.as_str())])
            .collect();
        let r = exchange(&s, &key.sign(&iss.claims(&s, SUB)), &nine).await;
        assert_refused(b, "9 scopes", &r, 400, "scopes");
        let deep = format!("{org}{}", "/0123456789abcdef".repeat(40));
        let r = exchange(
            &s,
            &key.sign(&iss.claims(&s, SUB)),
            &[("identity", &id), ("scopes", &deep)],
        )
        .await;
        assert_refused(b, "deep scope", &r, 400, "scopes");
        // A 7 KB subject (allowed by the pattern) would make a token over 8 KiB.
        let r = exchange(&s, &key.sign(&iss.claims(&s, &long_sub)), &[("identity", &id)]).await;
        assert_refused(b, "oversized token", &r, 400, "exceed");
        let token = exchange_ok(&s, &key.sign(&iss.claims(&s, SUB)), &[("identity", &id)]).await;
        let (status, body) = get_as(&s, &token, G).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        // Sixty long upstream audiences are not all copied into `act`.
        let mut auds = vec![json!(s.base)];
        auds.extend((0..60).map(|i| json!(format!("https://aud{i}.example.com/{}", "x".repeat(80)))));
        let many = with(&iss.claims(&s, SUB), "aud", json!(auds));
        let token = exchange_ok(&s, &key.sign(&many), &[("identity", &id)]).await;
        assert!(token.len() <= 8192, "[{b}] {}", token.len());
        let (_, claims) = jwt_parts(&token);
        assert!(
            claims["act"]["aud"].as_array().is_some_and(|a| a.len() <= 4),
            "[{b}] {claims}"
        );
    }
}
