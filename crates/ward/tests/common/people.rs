//! Shared helpers for the people tests (`login`, `people_api`,
//! `people_regressions`): `--dev` servers, verified organizations, identity
//! providers for a [`TestIdp`], the browser and headless (device-code) login
//! flows over HTTP without following redirects, and the `ward` CLI's
//! `auth login` driven from a person's own terminal.
#![allow(dead_code)] // Each test binary uses a different part of these helpers.

use std::collections::HashMap;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::sync::mpsc;
use ward_core::clock::Clock as _;
use ward_core::uidp::Uidp;

use super::idp::{TestIdp, s256};
use super::{TestServer, assert_error, enc, field_violations, uid};

pub const IDPS: &str = "/iam/v2/identityProviders";
pub const MAPPINGS: &str = "/iam/v2/externalGroupRoleMappings";
pub const RB: &str = "/iam/v2/roleBindings";
pub const ID: &str = "/iam/v2/identities";
/// The loopback the HTTP-only logins give as the CLI's. Nothing listens
/// there: those flows stop at Ward's redirect to it.
pub const LOOPBACK: &str = "http://127.0.0.1:49152/callback";
/// RFC 8628's grant type.
pub const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

// ---------------------------------------------------------------------------
// Servers, organizations, roles, providers

/// One `--dev` server per backend (Ward may fetch a [`TestIdp`] over plain
/// http on loopback).
pub async fn dev_servers() -> Vec<TestServer> {
    let mut v = Vec::new();
    for db in ward_store::testing::backends().await {
        v.push(TestServer::start_with(db, |c| c.dev = true).await);
    }
    v
}

/// The uid of the built-in role `name`.
pub fn role_uid(name: &str) -> String {
    ward_core::capability::builtin_role(name)
        .unwrap_or_else(|| panic!("no built-in role {name}"))
        .uid()
}

/// A verified organization, made in the store (the API makes unverified
/// ones; only a verified organization's name may stand for its IdP at
/// `/oauth`). Its uid.
pub async fn verified_org(s: &TestServer, name: &str) -> String {
    verified_org_at(s, name, Uidp::new_root().as_str()).await
}

/// A verified organization with the uid `uid`.
pub async fn verified_org_at(s: &TestServer, name: &str, uid: &str) -> String {
    let now = s.clock.now_millis();
    let record = ward_store::GroupRecord {
        uid: uid.to_owned(),
        parent_uid: None,
        name: name.to_owned(),
        description: String::new(),
        verified: true,
        create_time: now,
        update_time: now,
        kind: 0,
    };
    s.ward()
        .store
        .create_group(&record, None, ward_store::testing::emit())
        .await
        .expect("a verified organization");
    uid.to_owned()
}

/// A custom role at `group` holding `caps`: its uid.
pub async fn custom_role(s: &TestServer, group: &str, name: &str, caps: &[&str]) -> String {
    let (status, role) = s
        .post(
            &format!("/iam/v2/roles/{group}"),
            json!({ "name": name, "capabilities": caps }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] create role {name}: {role}", s.backend);
    uid(&role)
}

/// The create body of an identity provider named "corp-sso" for the
/// [`TestIdp`] `idp` with `default_role` (PKCE on, the IdP's client secret).
pub fn test_idp_body(idp: &TestIdp, default_role: &str) -> Value {
    json!({
        "name": "corp-sso",
        "defaultRole": default_role,
        "oidc": {
            "issuer": idp.issuer,
            "clientId": idp.client_id,
            "clientSecret": idp.client_secret,
            "groupsClaim": "groups",
            "pkceEnabled": true,
        },
    })
}

/// An identity provider at `org` for the [`TestIdp`] `idp` with
/// `default_role` (PKCE on, a client secret), made with the admin token: its
/// uid.
pub async fn create_test_idp(s: &TestServer, idp: &TestIdp, org: &str, default_role: &str) -> String {
    let (status, created) = s.post(&format!("{IDPS}/{org}"), test_idp_body(idp, default_role)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] create an identity provider at {org}: {created}",
        s.backend
    );
    uid(&created)
}

/// Creates a mapping at the identity provider `idp` from `body` with the
/// admin token: the mapping.
pub async fn create_mapping(s: &TestServer, idp: &str, body: Value) -> Value {
    let (status, mapping) = s.post(&format!("{MAPPINGS}/{idp}"), body.clone()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] create a mapping at {idp} with {body}: {mapping}",
        s.backend
    );
    mapping
}

/// The stored record of an identity provider.
pub async fn stored_idp(s: &TestServer, idp: &str) -> ward_store::people::IdentityProviderRecord {
    s.ward()
        .store
        .get_identity_provider(&Uidp::parse("uid", idp).expect("a uid"))
        .await
        .expect("get_identity_provider")
        .unwrap_or_else(|| panic!("[{}] {idp} is stored", s.backend))
}

/// The uid of the person `subject` at `issuer`.
pub async fn person_uid(s: &TestServer, issuer: &str, subject: &str) -> String {
    let path = format!("{ID}:lookupIdentity?issuer={}&subject={}", enc(issuer), enc(subject));
    let (status, body) = s.get(&path).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] lookupIdentity {subject}: {body}",
        s.backend
    );
    body["uid"].as_str().expect("uid").to_owned()
}

/// Every binding of `identity`, as the admin sees them: sorted
/// (group uid, role uid).
pub async fn bindings_of(s: &TestServer, identity: &str) -> Vec<(String, String)> {
    let (status, list) = s.get(&format!("{RB}?identity={identity}&page_size=100")).await;
    assert_eq!(status, StatusCode::OK, "[{}] list bindings: {list}", s.backend);
    let mut v: Vec<(String, String)> = list["roleBindings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|x| {
            (
                x["group"]["uid"].as_str().unwrap_or_default().to_owned(),
                x["role"]["uid"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

/// A 400 INVALID_ARGUMENT naming `field` among its violations.
pub fn assert_invalid(ctx: &str, status: StatusCode, body: &Value, field: &str) {
    assert_error(ctx, status, body, 400, 3, "INVALID_ARGUMENT");
    let violations = field_violations(body);
    assert!(
        violations.iter().any(|(f, _)| f == field),
        "{ctx}: a violation of {field} in {violations:?}; body: {body}"
    );
}

/// The (unverified) claims of a JWT.
pub fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap_or_else(|| panic!("not a JWT: {token}"));
    let bytes = URL_SAFE_NO_PAD.decode(payload).expect("base64url claims");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

/// A fresh PKCE verifier (43 characters).
pub fn verifier() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

// ---------------------------------------------------------------------------
// HTTP without following redirects (the browser's and the CLI's part)

/// A response, redirects not followed.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub location: Option<String>,
    /// `name=value` of each Set-Cookie.
    pub cookies: Vec<String>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// Whether it redirects to the CLI's loopback (a refusal never does).
    pub fn hands_off(&self) -> bool {
        self.location.as_deref().is_some_and(|l| l.starts_with(LOOPBACK))
    }

    /// The Location of a 302.
    pub fn redirect(&self) -> Option<String> {
        self.location.clone().filter(|_| self.status == StatusCode::FOUND)
    }
}

/// An HTTP client that does not follow redirects.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client")
}

/// Sends `req`: its [`Reply`].
pub async fn reply(req: reqwest::RequestBuilder) -> Reply {
    let resp = req.send().await.expect("request sent");
    let status = resp.status();
    let location = resp
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let cookies = resp
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|c| c.split(';').next())
        .map(|c| c.trim().to_owned())
        .collect();
    let body = resp.text().await.unwrap_or_default();
    Reply {
        status,
        location,
        cookies,
        body,
    }
}

pub async fn get(url: &str) -> Reply {
    get_with_cookies(url, &[]).await
}

pub async fn get_with_cookies(url: &str, cookies: &[String]) -> Reply {
    let mut req = client().get(url);
    if !cookies.is_empty() {
        req = req.header(COOKIE, cookies.join("; "));
    }
    reply(req).await
}

/// `pairs` as an `application/x-www-form-urlencoded` body (or query).
pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

pub async fn post_form(url: &str, pairs: &[(&str, &str)]) -> Reply {
    let req = client()
        .post(url)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(pairs));
    reply(req).await
}

/// The query parameters of `url`.
pub fn query(url: &str) -> HashMap<String, String> {
    reqwest::Url::parse(url)
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Logins over HTTP

/// A whole browser login over HTTP as `username` in `groups` at `idp_id`,
/// as the CLI and a browser do it: the person's (identity uid, Ward token).
pub async fn login(s: &TestServer, idp: &TestIdp, idp_id: &str, username: &str, groups: &[&str]) -> (String, String) {
    let b = s.backend;
    let verifier = verifier();
    let state = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let start = format!(
        "{}/oauth?{}",
        s.base,
        form(&[
            ("idp_id", idp_id),
            ("redirect", LOOPBACK),
            ("state", &state),
            ("code_challenge", &s256(&verifier)),
            ("code_challenge_method", "S256"),
        ])
    );
    let r = get(&start).await;
    let authorize = r
        .redirect()
        .unwrap_or_else(|| panic!("[{b}] /oauth sends {username} to the IdP: {r:?}"));
    let callback = idp.approve(&authorize, username, groups).await;
    let back = get_with_cookies(&callback, &r.cookies).await;
    let to = back
        .redirect()
        .unwrap_or_else(|| panic!("[{b}] the callback hands {username}'s login to the CLI: {back:?}"));
    assert!(
        to.starts_with(&format!("{LOOPBACK}?")),
        "[{b}] to the CLI's loopback: {to}"
    );
    let q = query(&to);
    assert_eq!(q.get("state"), Some(&state), "[{b}] the CLI's state comes back: {to}");
    let code = q
        .get("code")
        .cloned()
        .unwrap_or_else(|| panic!("[{b}] a handoff code: {to}"));
    let r = post_form(
        &format!("{}/oauth/token", s.base),
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &verifier),
        ],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "[{b}] {username} redeems the handoff: {r:?}");
    let resp = r.json();
    let identity = resp["identity"]
        .as_str()
        .unwrap_or_else(|| panic!("[{b}] an identity: {resp}"))
        .to_owned();
    let token = resp["token"]
        .as_str()
        .unwrap_or_else(|| panic!("[{b}] a token: {resp}"))
        .to_owned();
    (identity, token)
}

/// `POST /oauth/device/code`: a headless login's start, as the CLI asks.
pub async fn device_start(s: &TestServer, idp_id: &str, challenge: &str) -> Reply {
    device_start_from(s, idp_id, challenge, std::net::Ipv4Addr::LOCALHOST.into()).await
}

/// [`device_start`] from the client address `from` (any of 127.0.0.0/8
/// reaches a server on 127.0.0.1).
pub async fn device_start_from(s: &TestServer, idp_id: &str, challenge: &str, from: std::net::IpAddr) -> Reply {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(from)
        .build()
        .expect("http client");
    let req = client
        .post(format!("{}/oauth/device/code", s.base))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form(&[
            ("idp_id", idp_id),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
        ]));
    reply(req).await
}

/// `POST /oauth/token` with a device code: the CLI's poll.
pub async fn device_poll(s: &TestServer, device_code: &str, verifier: &str) -> Reply {
    post_form(
        &format!("{}/oauth/token", s.base),
        &[
            ("grant_type", DEVICE_GRANT),
            ("device_code", device_code),
            ("code_verifier", verifier),
        ],
    )
    .await
}

/// Posts the device page's form with `origin` as the browser's Origin.
pub async fn post_device_form(s: &TestServer, user_code: &str, origin: &str) -> Reply {
    let req = client()
        .post(format!("{}/oauth/device", s.base))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(reqwest::header::ORIGIN, origin)
        .body(form(&[("user_code", user_code)]));
    reply(req).await
}

/// A reply from the token endpoint with `status` and OAuth error `error`.
pub fn assert_oauth_error(b: &str, case: &str, r: &Reply, status: StatusCode, error: &str) {
    assert_eq!(r.status, status, "[{b}] {case}: {r:?}");
    assert_eq!(r.json()["error"], error, "[{b}] {case}: {r:?}");
}

// ---------------------------------------------------------------------------
// The CLI

/// A person's terminal: their own `ward` config directory.
pub struct Terminal {
    dir: tempfile::TempDir,
}

impl Terminal {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// `ward <args>` against `s` with this terminal's config directory and
    /// nothing else from the test's environment.
    pub fn command(&self, s: &TestServer, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"));
        cmd.args(args)
            .env("WARD_CONFIG_DIR", self.dir.path().join("config"))
            .env("WARD_API", &s.base)
            .env_remove("WARD_TOKEN")
            .env_remove("WARD_TOKEN_FILE")
            .env_remove("WARD_ISSUER")
            .env_remove("WARD_IDP")
            .env_remove("BROWSER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// `ward auth login --no-browser --idp <idp_id>`, running.
    pub fn start_login(&self, s: &TestServer, idp_id: &str) -> Login {
        Login::spawn(self.command(s, &["auth", "login", "--no-browser", "--idp", idp_id]))
    }

    /// `ward auth token`: the cached token.
    pub async fn token(&self, s: &TestServer) -> String {
        let out = tokio::time::timeout(Duration::from_secs(60), self.command(s, &["auth", "token"]).output())
            .await
            .expect("ward auth token finished within 60s")
            .expect("ward runs");
        assert!(
            out.status.success(),
            "[{}] ward auth token: {}",
            s.backend,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// A running `ward auth login`, its stdout and stderr read line by line.
pub struct Login {
    child: tokio::process::Child,
    /// Each line it prints (both streams), as printed.
    pub lines: mpsc::UnboundedReceiver<String>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    /// Everything it printed so far (both streams).
    transcript: Arc<Mutex<String>>,
}

fn read_lines(
    pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    tx: mpsc::UnboundedSender<String>,
    transcript: Arc<Mutex<String>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            transcript.lock().unwrap().push_str(&format!("{line}\n"));
            let _ = tx.send(line);
        }
    })
}

/// The login URL in a line the CLI printed.
pub fn login_url_in(line: &str) -> Option<String> {
    let start = line.find("http://")?;
    let url = line[start..].split_whitespace().next()?;
    let url = url.trim_end_matches(['.', ',', ')', '>', '"', '\'']);
    if url.contains("/oauth?") {
        Some(url.to_owned())
    } else {
        None
    }
}

impl Login {
    pub fn spawn(mut cmd: tokio::process::Command) -> Self {
        let mut child = cmd.spawn().expect("ward runs");
        let (tx, lines) = mpsc::unbounded_channel();
        let transcript = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            read_lines(
                child.stdout.take().expect("stdout piped"),
                tx.clone(),
                transcript.clone(),
            ),
            read_lines(child.stderr.take().expect("stderr piped"), tx, transcript.clone()),
        ];
        Self {
            child,
            lines,
            readers,
            transcript,
        }
    }

    pub fn transcript(&self) -> String {
        self.transcript.lock().unwrap().clone()
    }

    /// The login URL it prints (within 30 s).
    pub async fn url(&mut self) -> String {
        let lines = &mut self.lines;
        let found = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.recv().await {
                if let Some(url) = login_url_in(&line) {
                    return Some(url);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(url)) => url,
            Ok(None) => panic!("ward auth login exited without a login URL:\n{}", self.transcript()),
            Err(_) => panic!(
                "ward auth login printed no login URL within 30s:\n{}",
                self.transcript()
            ),
        }
    }

    /// Waits up to `timeout` for it to exit: its status, None if it still runs.
    pub async fn exited(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let waited = tokio::time::timeout(timeout, self.child.wait()).await.ok()?;
        Some(waited.expect("wait for ward"))
    }

    /// Waits (up to 60 s) for it to exit: its status and transcript.
    pub async fn finish(mut self) -> (ExitStatus, String) {
        let Some(status) = self.exited(Duration::from_secs(60)).await else {
            let out = self.kill().await;
            panic!("ward auth login did not finish within 60s:\n{out}")
        };
        for r in self.readers.drain(..) {
            let _ = r.await;
        }
        (status, self.transcript())
    }

    /// Kills it: its transcript.
    pub async fn kill(mut self) -> String {
        let _ = self.child.kill().await;
        for r in self.readers.drain(..) {
            let _ = r.await;
        }
        self.transcript()
    }
}

/// Plays the browser over HTTP from the CLI's login URL: Ward, the IdP as
/// `username` in `groups`, Ward's callback, then the CLI's loopback. The
/// loopback's reply, or the step that went wrong.
pub async fn browse(url: &str, idp: &TestIdp, username: &str, groups: &[&str]) -> Result<Reply, String> {
    let r = get(url).await;
    let authorize = r.redirect().ok_or_else(|| format!("/oauth: {r:?}"))?;
    let cookies = r.cookies;
    let callback = idp.try_approve(&authorize, username, groups).await?;
    let r = get_with_cookies(&callback, &cookies).await;
    let loopback = r.redirect().ok_or_else(|| format!("callback: {r:?}"))?;
    Ok(get(&loopback).await)
}
