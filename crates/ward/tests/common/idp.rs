//! An in-process OpenID Connect provider (an organization's IdP) for the
//! browser-login tests: discovery, JWKS, an authorization endpoint with an
//! HTML login form (no password: the person types a username and their
//! groups), and a token endpoint that checks the client, the one-time code,
//! the redirect URI and PKCE, and answers an ES256-signed id_token.
//!
//! Knobs make the id_token wrong in one way at a time (issuer, audience,
//! nonce, signing key) for the relying party's negative tests.
#![allow(dead_code)] // Each test binary uses a different part of the harness.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::enc;

/// The lifetime of the id_tokens it issues, in seconds.
const ID_TOKEN_SECS: i64 = 300;

/// The form fields the login page carries from the authorization request to
/// its POST.
const CARRIED: &[&str] = &[
    "client_id",
    "redirect_uri",
    "state",
    "nonce",
    "code_challenge",
    "code_challenge_method",
    "scope",
];

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// `n` random bytes as lowercase hex.
fn random_hex(n: usize) -> String {
    hex::encode((0..n).map(|_| rand::random::<u8>()).collect::<Vec<u8>>())
}

/// The PKCE S256 challenge of `verifier`: base64url-nopad(sha256(verifier)).
pub fn s256(verifier: &str) -> String {
    b64(&Sha256::digest(verifier.as_bytes()))
}

/// A P-256 signing key (ES256) with its public JWK.
struct Key {
    kid: String,
    key: EncodingKey,
    jwk: Value,
}

impl Key {
    /// A fresh key named `kid` (as `Signer::es256` in sts.rs).
    fn es256(kid: &str) -> Self {
        use p256::elliptic_curve::sec1::ToEncodedPoint as _;
        use p256::pkcs8::EncodePrivateKey as _;
        let secret = p256::SecretKey::random(&mut rand::rngs::OsRng);
        let der = secret.to_pkcs8_der().expect("PKCS#8 DER");
        let point = secret.public_key().to_encoded_point(false);
        let (x, y) = (point.x().expect("x"), point.y().expect("y"));
        Self {
            jwk: json!({
                "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig",
                "kid": kid, "x": b64(x), "y": b64(y),
            }),
            kid: kid.to_owned(),
            key: EncodingKey::from_ec_der(der.as_bytes()),
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        header.typ = Some("JWT".into());
        jsonwebtoken::encode(&header, claims, &self.key).expect("sign an id_token")
    }
}

/// What an authorization code stands for until the token endpoint redeems it.
#[derive(Clone, Debug)]
struct Grant {
    client_id: String,
    username: String,
    groups: Vec<String>,
    nonce: String,
    redirect_uri: String,
    code_challenge: Option<String>,
}

/// Ways to make the next id_tokens wrong (None/false: honest).
#[derive(Clone, Debug, Default)]
struct Knobs {
    issuer: Option<String>,
    audience: Option<String>,
    nonce: Option<String>,
    other_key: bool,
}

struct IdpState {
    issuer: String,
    client_id: String,
    client_secret: String,
    /// The key the JWKS publishes.
    key: Key,
    /// A key it does not publish (same kid, so only the signature tells).
    other: Key,
    codes: Mutex<HashMap<String, Grant>>,
    knobs: Mutex<Knobs>,
    authorize_hits: AtomicUsize,
    token_hits: AtomicUsize,
    /// The form of the last token request (client_secret included when sent
    /// in the body).
    last_token_request: Mutex<Option<HashMap<String, String>>>,
}

/// The in-process IdP; serves until the test's runtime ends.
pub struct TestIdp {
    /// `http://127.0.0.1:<port>`: the issuer, and the base of every endpoint.
    pub issuer: String,
    /// The client Ward is registered as ("ward").
    pub client_id: String,
    pub client_secret: String,
    state: Arc<IdpState>,
    http: reqwest::Client,
}

impl TestIdp {
    /// Starts an IdP on 127.0.0.1 with client "ward" / "s3cret".
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the IdP");
        let issuer = format!("http://{}", listener.local_addr().expect("IdP addr"));
        let kid = format!("idp-{}", random_hex(6));
        let state = Arc::new(IdpState {
            issuer: issuer.clone(),
            client_id: "ward".into(),
            client_secret: "s3cret".into(),
            key: Key::es256(&kid),
            other: Key::es256(&kid),
            codes: Mutex::new(HashMap::new()),
            knobs: Mutex::new(Knobs::default()),
            authorize_hits: AtomicUsize::new(0),
            token_hits: AtomicUsize::new(0),
            last_token_request: Mutex::new(None),
        });
        let app = axum::Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize_page).post(authorize_submit))
            .route("/token", axum::routing::post(token))
            .with_state(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.expect("IdP serves") });
        Self {
            issuer,
            client_id: state.client_id.clone(),
            client_secret: state.client_secret.clone(),
            state,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("http client"),
        }
    }

    /// Overrides the id_token's `iss` (None: the issuer).
    pub fn set_issuer_claim(&self, iss: Option<String>) {
        self.state.knobs.lock().unwrap().issuer = iss;
    }

    /// Overrides the id_token's `aud` (None: the client id).
    pub fn set_audience_claim(&self, aud: Option<String>) {
        self.state.knobs.lock().unwrap().audience = aud;
    }

    /// Overrides the id_token's `nonce` (None: the authorization request's).
    pub fn set_nonce_claim(&self, nonce: Option<String>) {
        self.state.knobs.lock().unwrap().nonce = nonce;
    }

    /// Signs id_tokens with a key the JWKS does not hold (same `kid`).
    pub fn set_sign_with_other_key(&self, other: bool) {
        self.state.knobs.lock().unwrap().other_key = other;
    }

    /// Back to honest id_tokens.
    pub fn reset_knobs(&self) {
        *self.state.knobs.lock().unwrap() = Knobs::default();
    }

    /// How many times the login page was requested.
    pub fn authorize_hits(&self) -> usize {
        self.state.authorize_hits.load(Ordering::SeqCst)
    }

    /// How many requests the token endpoint received (good or bad).
    pub fn token_hits(&self) -> usize {
        self.state.token_hits.load(Ordering::SeqCst)
    }

    /// The form of the last token request.
    pub fn last_token_request(&self) -> Option<HashMap<String, String>> {
        self.state.last_token_request.lock().unwrap().clone()
    }

    /// The login page's URL prefix (`{issuer}/authorize`).
    pub fn authorize_endpoint(&self) -> String {
        format!("{}/authorize", self.issuer)
    }

    /// What a person does in the browser, without one: loads the login page
    /// at `authorize_url` (Ward's redirect to the IdP), submits it as
    /// `username` in `groups`, and returns where the IdP redirects (Ward's
    /// callback URL with `code` and `state`). Panics if the IdP refuses.
    pub async fn approve(&self, authorize_url: &str, username: &str, groups: &[&str]) -> String {
        self.try_approve(authorize_url, username, groups)
            .await
            .unwrap_or_else(|e| panic!("the IdP refused {authorize_url}: {e}"))
    }

    /// [`Self::approve`], returning the IdP's refusal instead of panicking.
    pub async fn try_approve(&self, authorize_url: &str, username: &str, groups: &[&str]) -> Result<String, String> {
        let url = reqwest::Url::parse(authorize_url).map_err(|e| format!("not a URL: {e}"))?;
        if !authorize_url.starts_with(&self.authorize_endpoint()) {
            return Err(format!("not this IdP's authorization endpoint ({})", self.issuer));
        }
        // The login page, as the browser would load it (it validates the request).
        let page = self.http.get(url.clone()).send().await.map_err(|e| e.to_string())?;
        let status = page.status();
        if status != StatusCode::OK {
            let body = page.text().await.unwrap_or_default();
            return Err(format!("login page: {status}: {body}"));
        }
        // Its form, submitted.
        let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
        let joined = groups.join(",");
        let mut fields: Vec<(&str, &str)> = CARRIED
            .iter()
            .filter_map(|k| query.get(*k).map(|v| (*k, v.as_str())))
            .collect();
        fields.push(("username", username));
        fields.push(("groups", joined.as_str()));
        let body = fields
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect::<Vec<_>>()
            .join("&");
        let resp = self
            .http
            .post(self.authorize_endpoint())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status();
        let location = resp
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match location {
            Some(l) if status == StatusCode::FOUND => Ok(l),
            _ => Err(format!("login: {status}: {}", resp.text().await.unwrap_or_default())),
        }
    }
}

// ---------------------------------------------------------------------------
// Handlers

/// A plain-text refusal.
fn refuse(status: StatusCode, message: &str) -> Response {
    (status, message.to_owned()).into_response()
}

/// An OAuth 2.0 error response (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({ "error": error, "error_description": description })),
    )
        .into_response()
}

/// An `application/x-www-form-urlencoded` body (or query) as a map; the last
/// of repeated keys wins.
fn parse_form(body: &str) -> HashMap<String, String> {
    reqwest::Url::parse(&format!("http://form.invalid/?{body}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

/// Escapes text for an HTML attribute value or element content.
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

async fn discovery(State(st): State<Arc<IdpState>>) -> Json<Value> {
    let iss = &st.issuer;
    Json(json!({
        "issuer": iss,
        "authorization_endpoint": format!("{iss}/authorize"),
        "token_endpoint": format!("{iss}/token"),
        "jwks_uri": format!("{iss}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
        "scopes_supported": ["openid", "email", "profile"],
    }))
}

async fn jwks(State(st): State<Arc<IdpState>>) -> Json<Value> {
    Json(json!({ "keys": [st.key.jwk] }))
}

/// Checks what both the login page and its submission need: the client, a
/// redirect URI, and an S256 challenge when there is one.
fn check_request(st: &IdpState, q: &HashMap<String, String>) -> Result<(), Box<Response>> {
    if q.get("client_id") != Some(&st.client_id) {
        return Err(Box::new(refuse(StatusCode::BAD_REQUEST, "unknown client_id")));
    }
    let redirect = q.get("redirect_uri").map(String::as_str).unwrap_or_default();
    match reqwest::Url::parse(redirect) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => {}
        _ => {
            return Err(Box::new(refuse(
                StatusCode::BAD_REQUEST,
                "redirect_uri is not an http(s) URL",
            )));
        }
    }
    let challenge = q.get("code_challenge").filter(|c| !c.is_empty());
    let method = q.get("code_challenge_method").map(String::as_str).unwrap_or_default();
    if challenge.is_some() && method != "S256" {
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            "code_challenge_method must be S256",
        )));
    }
    Ok(())
}

/// `GET /authorize`: the login form.
async fn authorize_page(State(st): State<Arc<IdpState>>, Query(q): Query<HashMap<String, String>>) -> Response {
    st.authorize_hits.fetch_add(1, Ordering::SeqCst);
    if q.get("response_type").map(String::as_str) != Some("code") {
        return refuse(StatusCode::BAD_REQUEST, "response_type must be code");
    }
    if let Err(r) = check_request(&st, &q) {
        return *r;
    }
    let hidden: String = CARRIED
        .iter()
        .filter_map(|k| q.get(*k).map(|v| (k, v)))
        .map(|(k, v)| {
            format!(
                "    <input type=\"hidden\" name=\"{k}\" value=\"{}\">\n",
                html_escape(v)
            )
        })
        .collect();
    Html(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Test IdP: sign in</title></head>\n\
         <body>\n  <h1>Sign in to the test IdP</h1>\n\
         <form method=\"post\" action=\"/authorize\">\n{hidden}\
             <label>Username <input name=\"username\" id=\"username\" autocomplete=\"off\"></label>\n\
             <label>Groups (comma-separated) <input name=\"groups\" id=\"groups\" autocomplete=\"off\"></label>\n\
             <button type=\"submit\" id=\"login\">Sign in</button>\n\
         </form>\n</body></html>\n"
    ))
    .into_response()
}

/// `POST /authorize`: the person signed in; a one-time code goes back to the
/// client's redirect URI with its state.
async fn authorize_submit(State(st): State<Arc<IdpState>>, body: String) -> Response {
    let f = parse_form(&body);
    if let Err(r) = check_request(&st, &f) {
        return *r;
    }
    let username = f.get("username").map(|u| u.trim()).unwrap_or_default();
    if username.is_empty()
        || !username
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return refuse(StatusCode::BAD_REQUEST, "a username is [A-Za-z0-9._-]+");
    }
    let groups: Vec<String> = f
        .get("groups")
        .map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
        .collect();
    let grant = Grant {
        client_id: st.client_id.clone(),
        username: username.to_owned(),
        groups,
        nonce: f.get("nonce").cloned().unwrap_or_default(),
        redirect_uri: f["redirect_uri"].clone(),
        code_challenge: f.get("code_challenge").filter(|c| !c.is_empty()).cloned(),
    };
    let code = random_hex(16);
    let mut location = reqwest::Url::parse(&grant.redirect_uri).expect("checked above");
    {
        let mut q = location.query_pairs_mut();
        q.append_pair("code", &code);
        if let Some(state) = f.get("state") {
            q.append_pair("state", state);
        }
    }
    st.codes.lock().unwrap().insert(code, grant);
    (StatusCode::FOUND, [(header::LOCATION, location.to_string())]).into_response()
}

/// The client credentials of a token request: HTTP Basic (client_secret_basic)
/// or the form (client_secret_post).
fn client_credentials(headers: &HeaderMap, f: &HashMap<String, String>) -> Option<(String, String)> {
    if let Some(auth) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let encoded = auth.strip_prefix("Basic ")?;
        let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
        let (id, secret) = decoded.split_once(':')?;
        // Each half is form-urlencoded before encoding (RFC 6749 §2.3.1).
        let id = parse_form(&format!("v={id}")).remove("v").unwrap_or_default();
        let secret = parse_form(&format!("v={secret}")).remove("v").unwrap_or_default();
        return Some((id, secret));
    }
    Some((f.get("client_id")?.clone(), f.get("client_secret")?.clone()))
}

/// `POST /token`: redeems a code once for an id_token.
async fn token(State(st): State<Arc<IdpState>>, headers: HeaderMap, body: String) -> Response {
    st.token_hits.fetch_add(1, Ordering::SeqCst);
    let f = parse_form(&body);
    *st.last_token_request.lock().unwrap() = Some(f.clone());

    if f.get("grant_type").map(String::as_str) != Some("authorization_code") {
        return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type", "grant_type");
    }
    match client_credentials(&headers, &f) {
        Some((id, secret)) if id == st.client_id && secret == st.client_secret => {}
        _ => {
            return oauth_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "client authentication failed",
            );
        }
    }
    // One use only: the code is gone whatever happens next.
    let code = f.get("code").map(String::as_str).unwrap_or_default();
    let Some(grant) = st.codes.lock().unwrap().remove(code) else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "unknown or used code");
    };
    if grant.client_id != st.client_id {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "code issued to another client",
        );
    }
    if f.get("redirect_uri") != Some(&grant.redirect_uri) {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "redirect_uri does not match");
    }
    if let Some(challenge) = &grant.code_challenge {
        match f.get("code_verifier") {
            Some(v) if s256(v) == *challenge => {}
            Some(_) => return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "PKCE verification failed"),
            None => return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", "code_verifier is required"),
        }
    }

    let knobs = st.knobs.lock().unwrap().clone();
    let now = now_secs();
    let mut claims = json!({
        "iss": knobs.issuer.unwrap_or_else(|| st.issuer.clone()),
        "sub": format!("user-{}", grant.username),
        "aud": knobs.audience.unwrap_or_else(|| grant.client_id.clone()),
        "iat": now,
        "auth_time": now,
        "exp": now + ID_TOKEN_SECS,
        "email": format!("{}@example.com", grant.username),
        "email_verified": true,
        "name": grant.username,
    });
    if let Some(nonce) = knobs
        .nonce
        .or_else(|| Some(grant.nonce.clone()).filter(|n| !n.is_empty()))
    {
        claims["nonce"] = json!(nonce);
    }
    if !grant.groups.is_empty() {
        claims["groups"] = json!(grant.groups);
    }
    let key = if knobs.other_key { &st.other } else { &st.key };
    Json(json!({
        "access_token": random_hex(24),
        "token_type": "Bearer",
        "expires_in": 3600,
        "scope": "openid email profile",
        "id_token": key.sign(&claims),
    }))
    .into_response()
}
