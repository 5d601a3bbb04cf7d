//! Browser login for people, end to end: Ward as the OpenID Connect relying
//! party of an organization's identity provider (an in-process [`TestIdp`]),
//! handing a Ward token to the `ward` CLI's loopback listener, with PKCE on
//! both legs.
//!
//! - the whole flow in headless Chromium with the real CLI waiting on its
//!   loopback (skipped with a note when Chromium is not installed);
//! - the CLI with the browser's part played over HTTP;
//! - the flow over HTTP only, checking what a login makes: one root-level
//!   identity per person, the IdP's default role bound on the first login
//!   only, and the roles mapped from the person's groups held by that session
//!   alone (never bound);
//! - refusals: forged, tampered and replayed state; a wrong, unknown or
//!   reused handoff; id_tokens wrong in one way each; non-loopback redirects;
//!   a missing challenge; an unknown IdP.
//!
//! Servers run with `--dev`, so Ward may fetch the IdP over plain http on
//! loopback. The HTTP-only flows carry the cookies Ward sets (if any) from
//! `/oauth` to its callback, as a browser would.

mod common;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::browser::Browser;
use common::idp::{TestIdp, s256};
use common::people::{
    ID, IDPS, LOOPBACK, Login, MAPPINGS, Reply, Terminal, assert_oauth_error, bindings_of, browse, claims, dev_servers,
    device_poll, form, get, get_with_cookies, person_uid, post_device_form, post_form, query, role_uid, test_idp_body,
    verified_org, verifier,
};
use common::{TestServer, enc, is_hex, total_count, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// Servers and the organization's IdP

/// A verified organization whose people log in at a [`TestIdp`]: default
/// role `viewer`; the IdP group "eng" mapped to `editor`.
struct Org {
    uid: String,
    name: String,
    /// The identity provider's uid.
    idp: String,
    viewer: String,
    editor: String,
}

async fn org_with_idp(s: &TestServer, idp: &TestIdp, name: &str) -> Org {
    let org = verified_org(s, name).await;
    let idp_uid = create_idp(s, idp, &org).await;
    Org {
        uid: org,
        name: name.to_owned(),
        idp: idp_uid,
        viewer: role_uid("viewer"),
        editor: role_uid("editor"),
    }
}

/// An identity provider at `org` for `idp` (default role viewer, "eng"
/// mapped to editor): its uid.
async fn create_idp(s: &TestServer, idp: &TestIdp, org: &str) -> String {
    let b = s.backend;
    let (viewer, editor) = (role_uid("viewer"), role_uid("editor"));
    let (status, created) = s.post(&format!("{IDPS}/{org}"), test_idp_body(idp, &viewer)).await;
    assert_eq!(status, StatusCode::OK, "[{b}] create the identity provider: {created}");
    assert!(
        !created.to_string().contains(&idp.client_secret),
        "[{b}] the client secret is never returned: {created}"
    );
    let idp_uid = uid(&created);
    let (status, mapping) = s
        .post(
            &format!("{MAPPINGS}/{idp_uid}"),
            json!({ "externalGroupId": "eng", "roleUid": editor }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{b}] map eng to editor: {mapping}");
    idp_uid
}

// ---------------------------------------------------------------------------
// URLs and codes

/// `url` with its `key` parameter set to `value`.
fn with_param(url: &str, key: &str, value: &str) -> String {
    let mut u = reqwest::Url::parse(url).expect("a URL");
    let pairs: Vec<(String, String)> = u.query_pairs().into_owned().collect();
    {
        let mut q = u.query_pairs_mut();
        q.clear();
        for (k, v) in &pairs {
            q.append_pair(k, if k == key { value } else { v.as_str() });
        }
    }
    u.to_string()
}

/// `s` with one character near its middle changed.
fn tamper(s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    let mid = chars.len() / 2;
    let i = (mid..chars.len())
        .chain(0..mid)
        .find(|&i| chars[i].is_ascii_alphanumeric())
        .expect("an alphanumeric character");
    // Letter to digit or digit to digit: a different value in any encoding
    // (case-insensitive hex included).
    chars[i] = if chars[i] == '0' { '1' } else { '0' };
    chars.into_iter().collect()
}

// ---------------------------------------------------------------------------
// The login flow, step by step, as the CLI and the browser do it

/// What the CLI picks for one login: a PKCE verifier and a state. `cookies`
/// are what Ward set on `/oauth`, for the callback.
struct Flow {
    verifier: String,
    challenge: String,
    state: String,
    cookies: Vec<String>,
}

impl Flow {
    fn new() -> Self {
        let verifier = verifier(); // 43 characters
        Self {
            challenge: s256(&verifier),
            state: URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()),
            verifier,
            cookies: Vec::new(),
        }
    }

    /// Ward's `/oauth` URL that starts this flow at `idp_id`.
    fn oauth_url(&self, s: &TestServer, idp_id: &str) -> String {
        oauth_url(
            s,
            &[
                ("idp_id", idp_id),
                ("redirect", LOOPBACK),
                ("state", &self.state),
                ("code_challenge", &self.challenge),
                ("code_challenge_method", "S256"),
            ],
        )
    }
}

fn oauth_url(s: &TestServer, pairs: &[(&str, &str)]) -> String {
    format!("{}/oauth?{}", s.base, form(pairs))
}

/// Step 1: Ward sends the browser to the IdP. Checks the authorization
/// request it makes, keeps Ward's cookies in `flow`, and returns the
/// request's URL.
async fn begin(s: &TestServer, idp: &TestIdp, idp_id: &str, flow: &mut Flow) -> String {
    let b = s.backend;
    let r = get(&flow.oauth_url(s, idp_id)).await;
    let to = r
        .redirect()
        .unwrap_or_else(|| panic!("[{b}] /oauth for {idp_id} redirects to the IdP: {r:?}"));
    assert!(
        to.starts_with(&format!("{}?", idp.authorize_endpoint())),
        "[{b}] to the IdP's authorization endpoint: {to}"
    );
    let q = query(&to);
    let param = |k: &str| q.get(k).map(String::as_str).unwrap_or_default();
    assert_eq!(param("response_type"), "code", "[{b}] {to}");
    assert_eq!(param("client_id"), idp.client_id, "[{b}] {to}");
    assert_eq!(
        param("redirect_uri"),
        format!("{}/oauth/callback", s.base),
        "[{b}] {to}"
    );
    assert!(param("scope").split(' ').any(|x| x == "openid"), "[{b}] scope: {to}");
    assert!(!param("state").is_empty(), "[{b}] a state: {to}");
    assert!(!param("nonce").is_empty(), "[{b}] a nonce: {to}");
    assert_eq!(
        param("code_challenge_method"),
        "S256",
        "[{b}] PKCE towards the IdP: {to}"
    );
    assert!(!param("code_challenge").is_empty(), "[{b}] PKCE towards the IdP: {to}");
    flow.cookies = r.cookies;
    to
}

/// Step 3: the browser arrives at Ward's callback (with the flow's cookies).
async fn callback(url: &str, flow: &Flow) -> Reply {
    get_with_cookies(url, &flow.cookies).await
}

/// The handoff code when `r` redirects to the CLI's loopback with the CLI's
/// state.
fn handoff(r: &Reply, flow: &Flow) -> Option<String> {
    let to = r.redirect()?;
    if !to.starts_with(&format!("{LOOPBACK}?")) {
        return None;
    }
    let q = query(&to);
    if q.get("state") != Some(&flow.state) {
        return None;
    }
    q.get("code").filter(|c| !c.is_empty()).cloned()
}

/// Step 3, expected to succeed: the handoff code.
async fn callback_ok(s: &TestServer, url: &str, flow: &Flow) -> String {
    let r = callback(url, flow).await;
    handoff(&r, flow).unwrap_or_else(|| {
        panic!(
            "[{}] the callback hands the CLI a code with its state at {LOOPBACK}: {r:?}",
            s.backend
        )
    })
}

/// Steps 1–3 as `username` (in no groups): the handoff code.
async fn handoff_code(s: &TestServer, idp: &TestIdp, org: &Org, flow: &mut Flow, username: &str) -> String {
    let authorize = begin(s, idp, &org.idp, flow).await;
    let url = idp.approve(&authorize, username, &[]).await;
    callback_ok(s, &url, flow).await
}

/// Step 4: the CLI redeems the handoff code.
async fn exchange(s: &TestServer, code: &str, verifier: &str) -> Reply {
    let url = format!("{}/oauth/token", s.base);
    let mut pairs = vec![("grant_type", "authorization_code"), ("code", code)];
    if !verifier.is_empty() {
        pairs.push(("code_verifier", verifier));
    }
    post_form(&url, &pairs).await
}

/// A whole login over HTTP as `username` in `groups`: the token response, or
/// the status and body of the step that refused (502 for the IdP).
async fn login_http(
    s: &TestServer,
    idp: &TestIdp,
    idp_id: &str,
    username: &str,
    groups: &[&str],
) -> Result<Value, (StatusCode, String)> {
    let flow = Flow::new();
    let r = get(&flow.oauth_url(s, idp_id)).await;
    let Some(authorize) = r.redirect() else {
        return Err((r.status, r.body));
    };
    let flow = Flow {
        cookies: r.cookies,
        ..flow
    };
    let url = idp
        .try_approve(&authorize, username, groups)
        .await
        .map_err(|e| (StatusCode::BAD_GATEWAY, e))?;
    let r = callback(&url, &flow).await;
    let Some(code) = handoff(&r, &flow) else {
        return Err((r.status, r.body));
    };
    let r = exchange(s, &code, &flow.verifier).await;
    if r.status != StatusCode::OK {
        return Err((r.status, r.body));
    }
    Ok(r.json())
}

/// [`login_http`], expected to succeed.
async fn login_ok(s: &TestServer, idp: &TestIdp, idp_id: &str, username: &str, groups: &[&str]) -> Value {
    login_http(s, idp, idp_id, username, groups)
        .await
        .unwrap_or_else(|(status, body)| panic!("[{}] {username} logs in at {idp_id}: {status}: {body}", s.backend))
}

/// Checks a token response; its token and the token's claims.
fn token_of(b: &str, resp: &Value) -> (String, Value) {
    let token = resp["token"]
        .as_str()
        .unwrap_or_else(|| panic!("[{b}] a token: {resp}"))
        .to_owned();
    assert!(
        resp["expiry"]
            .as_str()
            .is_some_and(|e| chrono::DateTime::parse_from_rfc3339(e).is_ok()),
        "[{b}] an RFC 3339 expiry: {resp}"
    );
    let c = claims(&token);
    assert_eq!(
        resp["identity"], c["sub"],
        "[{b}] identity is the token's subject: {resp}"
    );
    (token, c)
}

/// A 400 `invalid_grant` from the token endpoint.
fn assert_invalid_grant(b: &str, case: &str, r: &Reply) {
    assert_oauth_error(b, case, r, StatusCode::BAD_REQUEST, "invalid_grant");
}

// ---------------------------------------------------------------------------
// What a login makes

/// Whether the person `subject` at `issuer` exists.
async fn person_exists(s: &TestServer, issuer: &str, subject: &str) -> bool {
    let path = format!("{ID}:lookupIdentity?issuer={}&subject={}", enc(issuer), enc(subject));
    let (status, body) = s.get(&path).await;
    if status == StatusCode::NOT_FOUND {
        return false;
    }
    assert_eq!(status, StatusCode::OK, "[{}] lookupIdentity: {body}", s.backend);
    let person = body["uid"].as_str().expect("uid");
    let (status, body) = s.get(&format!("{ID}/{person}")).await;
    if status == StatusCode::NOT_FOUND {
        return false;
    }
    assert_eq!(status, StatusCode::OK, "[{}] get identity {person}: {body}", s.backend);
    true
}

/// How many root-level identities there are.
async fn root_identities(s: &TestServer) -> i64 {
    let (status, page) = s.get(&format!("{ID}?uidp.in_root=true&page_size=1")).await;
    assert_eq!(status, StatusCode::OK, "[{}] list identities: {page}", s.backend);
    total_count(&page)
}

/// Something `editor` may do and `viewer` may not: create a repository.
async fn create_repo_as(s: &TestServer, token: &str, org: &str, name: &str) -> (StatusCode, Value) {
    s.call_as(
        token,
        Method::POST,
        &format!("/registry/v2/repos/{org}"),
        Some(json!({ "name": name })),
    )
    .await
}

/// After `username`'s first login, in the IdP group "eng", with `token`: the
/// person exists at the root, holds one binding (the default role at the
/// organization), and the session holds `editor` from the group. Their uid.
async fn check_first_login(s: &TestServer, idp: &TestIdp, org: &Org, token: &str, username: &str) -> String {
    let b = s.backend;
    let subject = format!("user-{username}");
    let person = person_uid(s, &idp.issuer, &subject).await;
    assert!(is_hex(&person, 40), "[{b}] people are root-level identities: {person}");

    let c = claims(token);
    assert_eq!(c["sub"], person.as_str(), "[{b}] the token is the person's: {c}");
    assert_eq!(
        c["roles"],
        json!([{ "scope": org.uid, "role": org.editor }]),
        "[{b}] the session holds the role mapped from eng: {c}"
    );

    let (status, identity) = s.get(&format!("{ID}/{person}")).await;
    assert_eq!(status, StatusCode::OK, "[{b}] the person exists: {identity}");
    assert_eq!(identity["uid"], person.as_str(), "[{b}] {identity}");
    assert_eq!(
        identity["claimMatch"]["issuer"],
        idp.issuer.as_str(),
        "[{b}] {identity}"
    );
    assert_eq!(identity["claimMatch"]["subject"], subject.as_str(), "[{b}] {identity}");
    // What the login said about the person is kept (in the store).
    let kept = s
        .ward()
        .store
        .get_person(&person)
        .await
        .expect("get_person")
        .unwrap_or_else(|| panic!("[{b}] a person record for {person}"));
    assert_eq!(kept.email, format!("{username}@example.com"), "[{b}] {kept:?}");
    assert!(kept.email_verified, "[{b}] {kept:?}");
    assert_eq!(kept.identity_provider_uid, org.idp, "[{b}] {kept:?}");

    assert_eq!(
        bindings_of(s, &person).await,
        vec![(org.uid.clone(), org.viewer.clone())],
        "[{b}] one binding: the default role at the organization (the mapped editor is not bound)"
    );

    let (status, body) = create_repo_as(s, token, &org.uid, "app").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{b}] the session's editor role creates a repo: {body}"
    );
    person
}

/// After a later login of `person` with no groups (token response `resp`):
/// the same identity, still one binding, no new identity, and no session
/// roles, so no editor.
async fn check_second_login(s: &TestServer, org: &Org, person: &str, resp: &Value, roots: i64) {
    let b = s.backend;
    let (token, c) = token_of(b, resp);
    assert_eq!(c["sub"], person, "[{b}] the same person: {c}");
    assert!(
        c["roles"].is_null() || c["roles"] == json!([]),
        "[{b}] no groups, no session roles: {c}"
    );
    assert_eq!(
        bindings_of(s, person).await,
        vec![(org.uid.clone(), org.viewer.clone())],
        "[{b}] still exactly the one binding"
    );
    assert_eq!(root_identities(s).await, roots, "[{b}] no new identity");
    let (status, body) = create_repo_as(s, &token, &org.uid, "app2").await;
    assert!(
        matches!(status.as_u16(), 403 | 404),
        "[{b}] without eng the session is a viewer: {status} {body}"
    );
}

// ---------------------------------------------------------------------------
// Tests

/// Headless Chromium, the real CLI and the IdP's login form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_login_end_to_end() {
    let Some(browser) = Browser::start().await else {
        eprintln!("note: browser_login_end_to_end skipped: no Chromium/chromedriver");
        return;
    };
    for s in dev_servers().await {
        browser_login_on(&s, &browser).await;
    }
}

async fn browser_login_on(s: &TestServer, browser: &Browser) {
    let b = s.backend;
    let idp = TestIdp::start().await;
    let org = org_with_idp(s, &idp, "acme").await;
    let roots = root_identities(s).await;
    let term = Terminal::new();

    let mut login = term.start_login(s, &org.idp);
    let url = login.url().await;
    assert!(
        url.starts_with(&format!("{}/oauth?", s.base)),
        "[{b}] the login URL is Ward's /oauth: {url}"
    );
    let Some(loopback) = query(&url).get("redirect").cloned() else {
        panic!(
            "[{b}] no redirect in the login URL {url}; ward:\n{}",
            login.kill().await
        );
    };
    assert!(
        loopback.starts_with("http://127.0.0.1:") || loopback.starts_with("http://[::1]:"),
        "[{b}] the CLI listens on loopback: {loopback}"
    );

    // Ward sends the browser to the IdP, where the person signs in.
    browser.goto(&url).await;
    if let Err(at) = browser
        .wait_for_url(|u| u.starts_with(&idp.authorize_endpoint()), Duration::from_secs(10))
        .await
    {
        let page = browser.page_source().await;
        panic!(
            "[{b}] the browser is not at the IdP but at {at}:\n{page}\nward:\n{}",
            login.kill().await
        );
    }
    let field = browser.find_css("#username").await;
    browser.send_keys(&field, "alice").await;
    let field = browser.find_css("#groups").await;
    browser.send_keys(&field, "eng").await;
    let button = browser.find_css("#login").await;
    browser.click(&button).await;
    // Back through Ward to the CLI's loopback, which then exits: only the
    // browser can have brought it the code.
    if login.exited(Duration::from_secs(60)).await.is_none() {
        let at = browser.current_url().await;
        let page = browser.page_source().await;
        panic!(
            "[{b}] ward auth login still waits; the browser is at {at}:\n{page}\nward:\n{}",
            login.kill().await
        );
    }
    let (status, out) = login.finish().await;
    assert!(status.success(), "[{b}] ward auth login: {status}:\n{out}");
    let alice = person_uid(s, &idp.issuer, "user-alice").await;
    assert!(
        out.contains(&format!("Logged in as {alice}")),
        "[{b}] ward auth login names the person {alice}:\n{out}"
    );

    // The cached token is the person's, with the session's editor role.
    let token = term.token(s).await;
    assert_eq!(check_first_login(s, &idp, &org, &token, "alice").await, alice);
    assert_eq!(root_identities(s).await, roots + 1, "[{b}] one new person");

    // Again (without the browser), no longer in eng.
    let resp = login_ok(s, &idp, &org.idp, "alice", &[]).await;
    check_second_login(s, &org, &alice, &resp, roots + 1).await;
}

/// The real CLI, with the browser's part played over HTTP (runs without
/// Chromium); the IdP named by its organization's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_login_with_http_browser() {
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = org_with_idp(&s, &idp, "acme").await;
        let term = Terminal::new();

        let mut login = term.start_login(&s, &org.name);
        let url = login.url().await;
        let r = match browse(&url, &idp, "bob", &["eng"]).await {
            Ok(r) => r,
            Err(e) => panic!("[{b}] browsing {url}: {e}\nward:\n{}", login.kill().await),
        };
        assert!(
            r.status.is_success() || r.status.is_redirection(),
            "[{b}] the CLI's loopback answers the browser: {r:?}"
        );
        let (status, out) = login.finish().await;
        assert!(status.success(), "[{b}] ward auth login: {status}:\n{out}");
        let bob = person_uid(&s, &idp.issuer, "user-bob").await;
        assert!(out.contains(&format!("Logged in as {bob}")), "[{b}] {out}");

        let token = term.token(&s).await;
        check_first_login(&s, &idp, &org, &token, "bob").await;
    }
}

/// The flow over HTTP: the requests Ward makes on each leg, and what the first
/// and a later login make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_login_end_to_end() {
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = org_with_idp(&s, &idp, "acme").await;
        let roots = root_identities(&s).await;

        let mut flow = Flow::new();
        let authorize = begin(&s, &idp, &org.idp, &mut flow).await;
        let url = idp.approve(&authorize, "alice", &["eng", "unmapped"]).await;
        assert!(
            url.starts_with(&format!("{}/oauth/callback?", s.base)),
            "[{b}] the IdP sends the browser to Ward's callback: {url}"
        );
        let code = callback_ok(&s, &url, &flow).await;
        let sent = idp.last_token_request().expect("Ward redeemed the IdP's code");
        assert_eq!(
            sent.get("code_verifier").map(String::as_str).map(s256),
            query(&authorize).get("code_challenge").cloned(),
            "[{b}] Ward proves PKCE to the IdP: {sent:?}"
        );
        assert_eq!(idp.token_hits(), 1, "[{b}] one token request");

        let r = exchange(&s, &code, &flow.verifier).await;
        assert_eq!(r.status, StatusCode::OK, "[{b}] the handoff: {r:?}");
        let (token, _) = token_of(b, &r.json());
        let alice = check_first_login(&s, &idp, &org, &token, "alice").await;
        assert_eq!(root_identities(&s).await, roots + 1, "[{b}] one new person");

        // Again, at the organization's name, no longer in eng.
        let resp = login_ok(&s, &idp, &org.name, "alice", &[]).await;
        check_second_login(&s, &org, &alice, &resp, roots + 1).await;
    }
}

/// Each way a login can go wrong is refused, and refused without handing the
/// CLI a code or creating anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals() {
    for s in dev_servers().await {
        refusals_on(&s).await;
    }
}

async fn refusals_on(s: &TestServer) {
    let b = s.backend;
    let idp = TestIdp::start().await;
    let org = org_with_idp(s, &idp, "acme").await;

    // A state Ward never issued.
    let forged = format!(
        "{}/oauth/callback?code=anything&state={}",
        s.base,
        URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
    );
    let r = get(&forged).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] a forged state: {r:?}");
    assert!(!r.hands_off(), "[{b}] a forged state: {r:?}");

    // One real flow: a tampered copy of its state is refused before the IdP
    // is asked; the real callback hands off once; its replay is refused.
    let mut flow = Flow::new();
    let authorize = begin(s, &idp, &org.idp, &mut flow).await;
    let url = idp.approve(&authorize, "mallory", &[]).await;
    let state = query(&url).get("state").cloned().expect("the IdP returns the state");
    let hits = idp.token_hits();
    let r = callback(&with_param(&url, "state", &tamper(&state)), &flow).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] a tampered state: {r:?}");
    assert!(!r.hands_off(), "[{b}] a tampered state: {r:?}");
    assert_eq!(
        idp.token_hits(),
        hits,
        "[{b}] a bad state is refused before the code is redeemed"
    );
    let code = callback_ok(s, &url, &flow).await;
    let r = callback(&url, &flow).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] the callback replayed: {r:?}");

    // A code the IdP never issued, with a real state: the IdP refuses to
    // redeem it, and Ward hands nothing off.
    let mut forged_flow = Flow::new();
    let authorize = begin(s, &idp, &org.idp, &mut forged_flow).await;
    let real = idp.approve(&authorize, "mallory", &[]).await;
    let r = callback(&with_param(&real, "code", "a-code-the-idp-never-issued"), &forged_flow).await;
    assert!(
        matches!(r.status, StatusCode::UNAUTHORIZED | StatusCode::BAD_REQUEST),
        "[{b}] a forged code: {r:?}"
    );
    assert!(!r.hands_off(), "[{b}] a forged code: {r:?}");
    assert!(!r.hands_off(), "[{b}] the callback replayed: {r:?}");

    // The handoff code: once, with the right verifier.
    let r = exchange(s, &code, &flow.verifier).await;
    assert_eq!(r.status, StatusCode::OK, "[{b}] the handoff: {r:?}");
    token_of(b, &r.json());
    let r = exchange(s, &code, &flow.verifier).await;
    assert_invalid_grant(b, "the handoff code reused", &r);

    // A wrong verifier, no verifier, an unknown code.
    let mut flow = Flow::new();
    let code = handoff_code(s, &idp, &org, &mut flow, "mallory").await;
    let r = exchange(s, &code, &Flow::new().verifier).await;
    assert_invalid_grant(b, "a wrong PKCE verifier", &r);
    let mut flow = Flow::new();
    let code = handoff_code(s, &idp, &org, &mut flow, "mallory").await;
    let r = exchange(s, &code, "").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] no PKCE verifier: {r:?}");
    let r = exchange(s, "not-a-code", &flow.verifier).await;
    assert_invalid_grant(b, "an unknown handoff code", &r);

    // id_tokens wrong in one way each.
    let roots = root_identities(s).await;
    idp.set_issuer_claim(Some("https://other-idp.example.com".into()));
    refused_id_token(s, &idp, &org, "an id_token from another issuer", "eve-iss").await;
    assert!(
        !person_exists(s, "https://other-idp.example.com", "user-eve-iss").await,
        "[{b}] nobody for the other issuer either"
    );
    idp.reset_knobs();
    idp.set_audience_claim(Some("another-client".into()));
    refused_id_token(s, &idp, &org, "an id_token for another client", "eve-aud").await;
    idp.reset_knobs();
    idp.set_nonce_claim(Some("not-the-nonce".into()));
    refused_id_token(s, &idp, &org, "an id_token with another nonce", "eve-nonce").await;
    idp.reset_knobs();
    idp.set_sign_with_other_key(true);
    refused_id_token(
        s,
        &idp,
        &org,
        "an id_token signed with a key not in the JWKS",
        "eve-key",
    )
    .await;
    idp.reset_knobs();
    assert_eq!(
        root_identities(s).await,
        roots,
        "[{b}] no identity from a refused id_token"
    );
    // Honest again, the same IdP works: the refusals were the tokens'.
    login_ok(s, &idp, &org.idp, "eve", &[]).await;

    // Redirects that are not http to a loopback host: refused at once.
    for redirect in [
        "https://evil.example/cb",
        "http://10.0.0.1/cb",
        "http://127.0.0.1.evil.example/cb",
        "http://127.0.0.1@evil.example/cb",
        "http://localhost.evil.example/cb",
    ] {
        let flow = Flow::new();
        let url = oauth_url(
            s,
            &[
                ("idp_id", &org.idp),
                ("redirect", redirect),
                ("state", &flow.state),
                ("code_challenge", &flow.challenge),
                ("code_challenge_method", "S256"),
            ],
        );
        let r = get(&url).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] redirect={redirect}: {r:?}");
        assert_eq!(r.location, None, "[{b}] redirect={redirect}: no redirect at all");
    }

    // No PKCE challenge from the CLI, or one that is not a S256 digest.
    let flow = Flow::new();
    for (case, challenge) in [
        ("no code_challenge", None),
        ("a malformed code_challenge", Some("short")),
    ] {
        let mut pairs = vec![
            ("idp_id", org.idp.as_str()),
            ("redirect", LOOPBACK),
            ("state", flow.state.as_str()),
        ];
        if let Some(c) = challenge {
            pairs.push(("code_challenge", c));
            pairs.push(("code_challenge_method", "S256"));
        }
        let r = get(&oauth_url(s, &pairs)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] {case}: {r:?}");
        assert_eq!(r.location, None, "[{b}] {case}: no redirect");
    }

    // An IdP that does not exist, and an unverified organization's name
    // (anyone allowed to create organizations could take a name).
    let unverified = uid(&s.create_group(None, "unverified").await);
    create_idp(s, &TestIdp::start().await, &unverified).await;
    for idp_id in [tamper(&org.idp), "no-such-org".to_owned(), "unverified".to_owned()] {
        let r = get(&Flow::new().oauth_url(s, &idp_id)).await;
        assert!(
            matches!(r.status.as_u16(), 400 | 404),
            "[{b}] unknown idp_id {idp_id}: {r:?}"
        );
        assert_eq!(r.location, None, "[{b}] unknown idp_id {idp_id}: no redirect");
    }
}

/// With the IdP's id_tokens made wrong (by a knob set beforehand), a login as
/// `username` is refused at Ward's callback, after Ward redeemed the code,
/// without a handoff or a new identity.
async fn refused_id_token(s: &TestServer, idp: &TestIdp, org: &Org, case: &str, username: &str) {
    let b = s.backend;
    let mut flow = Flow::new();
    let authorize = begin(s, idp, &org.idp, &mut flow).await;
    let url = idp.approve(&authorize, username, &["eng"]).await;
    let hits = idp.token_hits();
    let r = callback(&url, &flow).await;
    assert!(
        matches!(r.status.as_u16(), 400 | 401),
        "[{b}] {case}: the callback refuses: {r:?}"
    );
    assert!(!r.hands_off(), "[{b}] {case}: nothing for the CLI: {r:?}");
    assert_eq!(
        idp.token_hits(),
        hits + 1,
        "[{b}] {case}: Ward redeemed the code at the IdP"
    );
    assert!(
        !person_exists(s, &idp.issuer, &format!("user-{username}")).await,
        "[{b}] {case}: no identity created"
    );
}

/// The headless (device-code) login: the CLI prints a URL and a code; the
/// person opens the URL on another device, types the code, logs in at the
/// IdP; the CLI, polling, ends logged in. Cross-site form posts, wrong codes,
/// replayed callbacks and reused device codes are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_login_end_to_end() {
    // The code: two groups of four consonants.
    let code_re = regex::Regex::new(r"\b([B-DF-HJ-NP-TV-XZ]{4}-[B-DF-HJ-NP-TV-XZ]{4})\b").unwrap();
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = org_with_idp(&s, &idp, "acme").await;
        let term = Terminal::new();
        let mut login = Login::spawn(term.command(&s, &["auth", "login", "--headless", "--idp", &org.idp]));
        let user_code = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = login.lines.recv().await {
                if let Some(c) = code_re.captures(&line) {
                    return Some(c[1].to_owned());
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("[{b}] no user code printed:\n{}", login.transcript()));
        assert!(
            login.transcript().contains(&format!("{}/oauth/device", s.base)),
            "[{b}] the verification URL is printed:\n{}",
            login.transcript()
        );

        // The page shows what the code logs in to.
        let page = get(&format!(
            "{}/oauth/device?user_code={}",
            s.base,
            enc(&user_code.to_lowercase())
        ))
        .await;
        assert_eq!(page.status, StatusCode::OK, "[{b}] {page:?}");
        assert!(
            page.body.contains("corp-sso") && page.body.contains(&user_code),
            "[{b}] {}",
            page.body
        );
        // Another site cannot submit the code for the person.
        let r = post_device_form(&s, &user_code, "https://evil.example").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "[{b}] cross-site post: {r:?}");
        assert!(r.location.is_none(), "[{b}] {r:?}");
        // A wrong code is refused.
        let r = post_device_form(&s, "BCDF-GHJK", &s.base).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] wrong code: {r:?}");

        // The person confirms (typing it with spaces is fine), logs in at the IdP.
        let r = post_device_form(&s, &user_code.replace('-', " "), &s.base).await;
        let authorize = r.redirect().unwrap_or_else(|| panic!("[{b}] confirm: {r:?}"));
        assert!(authorize.starts_with(&idp.authorize_endpoint()), "[{b}] {authorize}");
        let callback = idp.approve(&authorize, "carol", &["eng"]).await;
        let done = get(&callback).await;
        assert_eq!(done.status, StatusCode::OK, "[{b}] callback: {done:?}");
        assert!(done.body.contains("logged in"), "[{b}] {}", done.body);
        assert!(done.location.is_none(), "[{b}] nothing is handed to a redirect");
        // The same callback again is refused.
        let again = get(&callback).await;
        assert_eq!(
            again.status,
            StatusCode::BAD_REQUEST,
            "[{b}] replayed callback: {again:?}"
        );
        // The code no longer starts a login.
        let r = post_device_form(&s, &user_code, &s.base).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] a used code: {r:?}");

        let (status, out) = login.finish().await;
        assert!(status.success(), "[{b}] ward auth login --headless: {status}\n{out}");
        let carol = person_uid(&s, &idp.issuer, "user-carol").await;
        assert!(out.contains(&format!("Logged in as {carol}")), "[{b}] {out}");
        let token = term.token(&s).await;
        let claims = claims(&token);
        assert_eq!(claims["sub"], carol.as_str(), "[{b}] {claims}");
        assert_eq!(
            claims["roles"],
            json!([{ "scope": org.uid, "role": org.editor }]),
            "[{b}] the mapped role rides in the session: {claims}"
        );

        // Polling with an unknown device code, or without a matching verifier.
        let r = device_poll(&s, "not-a-device-code", &"v".repeat(43)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "[{b}] {r:?}");
        assert_eq!(r.json()["error"], "invalid_grant", "[{b}] {r:?}");
    }
}

/// A person can be bound before their first login, as the Terraform
/// provider does it (`chainguard_identity` data source, then a binding): an
/// organization owner (not the server admin) asks `LookupIdentity` for the
/// uid of an issuer and subject, binds it (v2beta1 over REST; the same
/// answer for a person who exists and one who does not), and the binding
/// takes effect at the first login. The pending identity cannot be assumed
/// by a token exchange, and a binding still needs the role's capabilities.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_are_bound_before_their_first_login() {
    for s in dev_servers().await {
        let b = s.backend;
        let idp = TestIdp::start().await;
        let org = org_with_idp(&s, &idp, "acme").await;
        let team = uid(&s.create_group(Some(&org.uid), "team").await);
        let (_, owner) = common::person(&s, "owner", &[(org.uid.as_str(), "owner")]).await;
        let (_, viewer) = common::person(&s, "viewer", &[(org.uid.as_str(), "viewer")]).await;
        let globex = uid(&s.create_group(None, "globex").await);
        let (stranger, _) = common::person(&s, "stranger", &[(globex.as_str(), "viewer")]).await;

        // What is no person, or a person registered elsewhere, cannot be
        // bound by an organization owner: NOT_FOUND, like a hidden identity.
        for (what, who) in [
            ("an organization's uid", globex.clone()),
            ("the organization's own uid", org.uid.clone()),
            ("a built-in role's uid", org.editor.clone()),
            ("a person registered elsewhere", stranger.clone()),
        ] {
            let body = json!({ "identityUid": who, "roleUid": org.viewer });
            let (status, refused) = s
                .call_as(
                    &owner,
                    Method::POST,
                    &format!("/iam/v2beta1/roleBindings/{team}"),
                    Some(body),
                )
                .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] {what}: {refused}");
        }
        // A pending person exists only while a binding waits for them.
        let ghost = "0123456789abcdef0123456789abcdef01234567";
        let body = json!({ "identityUid": ghost, "roleUid": org.viewer });
        let (status, made) = s
            .call_as(
                &owner,
                Method::POST,
                &format!("/iam/v2beta1/roleBindings/{team}"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {made}");
        let (status, _) = s.get(&format!("/iam/v2/identities/{ghost}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] pending while bound");
        let (status, _) = s
            .call_as(
                &owner,
                Method::DELETE,
                &format!("/iam/v2beta1/roleBindings/{}", uid(&made)),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        let (status, _) = s.get(&format!("/iam/v2/identities/{ghost}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] gone with its last binding");

        let lookup = format!(
            "/iam/v2beta1/identities:lookupIdentity?issuer={}&subject=user-erin",
            enc(&idp.issuer)
        );
        let (status, found) = s.call_as(&owner, Method::GET, &lookup, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {found}");
        let erin = found["uid"].as_str().expect("uid").to_owned();

        // A viewer may not bind anyone.
        let body = json!({ "identityUid": erin, "roleUid": org.editor });
        let (status, refused) = s
            .call_as(
                &viewer,
                Method::POST,
                &format!("/iam/v2beta1/roleBindings/{team}"),
                Some(body.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "[{b}] {refused}");
        let (status, binding) = s
            .call_as(
                &owner,
                Method::POST,
                &format!("/iam/v2beta1/roleBindings/{team}"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] bind before the first login: {binding}");
        let (status, read) = s
            .call_as(
                &owner,
                Method::GET,
                &format!("/iam/v2beta1/roleBindings/{}", uid(&binding)),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {read}");

        // The pending identity cannot be assumed.
        let (status, _) = s
            .call_as(
                &s.token.clone(),
                Method::POST,
                &format!("/sts/exchange?identity={erin}"),
                None,
            )
            .await;
        assert!(status.is_client_error(), "[{b}] {status}");

        // Erin logs in: she is the identity bound, editor at the team.
        let resp = login_ok(&s, &idp, &org.idp, "erin", &[]).await;
        let (token, claims) = token_of(b, &resp);
        assert_eq!(claims["sub"], json!(erin), "[{b}]");
        let (status, groups) = s.call_as(&token, Method::GET, "/iam/v2/groups", None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {groups}");
        let (status, made) = s
            .call_as(
                &token,
                Method::POST,
                &format!("/registry/v2/repos/{team}"),
                Some(json!({ "name": "erins-app" })),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::OK,
            "[{b}] the editor binding holds at the first login: {made}"
        );
        let (status, me) = s
            .call_as(
                &s.token.clone(),
                Method::GET,
                &format!("/iam/v2/identities/{erin}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {me}");
        assert!(
            me["claimMatch"]["issuer"] == json!(idp.issuer),
            "[{b}] filled in at login: {me}"
        );
    }
}
