//! `ward auth login|token|status|logout`, end to end: the binary against a tiny
//! in-process fake issuer (OIDC discovery, STS exchange, `/auth/v1/ok`), and
//! `ward iam` against a real server with a cached token instead of WARD_TOKEN.

mod common;

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use ward_cli::cache::{Cache, Entry};

const IDENTITY: &str = "0123456789abcdef0123456789abcdef01234567/0123456789abcdef";
const OIDC: &str = "upstream-oidc-token";
const OIDC_ROTATED: &str = "upstream-oidc-token-rotated";

// ---------------------------------------------------------------------------
// The fake issuer.

/// What the fake issuer was asked and how it answers.
#[derive(Default)]
struct FakeState {
    base: String,
    /// Lifetime of the tokens it issues, in seconds (may be short to force renewal).
    lifetime: AtomicI64,
    exchanges: AtomicUsize,
    /// Bearer and `aud` of the last exchange.
    last_bearer: Mutex<String>,
    last_aud: Mutex<String>,
    /// When set, the exchange returns this token instead of minting one.
    hand_out: Mutex<Option<String>>,
}

struct Fake {
    state: Arc<FakeState>,
    base: String,
}

impl Fake {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(FakeState {
            base: base.clone(),
            lifetime: AtomicI64::new(3600),
            ..FakeState::default()
        });
        let app = axum::Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/sts/exchange", get(exchange))
            .route("/auth/v1/ok", get(ok))
            .with_state(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { state, base }
    }

    fn exchanges(&self) -> usize {
        self.state.exchanges.load(Ordering::SeqCst)
    }
}

type Reply = (StatusCode, Json<Value>);

fn error(status: StatusCode, code: i64, message: &str) -> Reply {
    (status, Json(json!({"code": code, "message": message, "details": []})))
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn rfc3339(secs: i64) -> Value {
    serde_json::to_value(pbjson_types::Timestamp {
        seconds: secs,
        nanos: 0,
    })
    .unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An (unsigned) JWT with these claims.
fn jwt(claims: &Value) -> String {
    format!(
        "{}.{}.fake-signature",
        b64(br#"{"alg":"EdDSA","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes())
    )
}

fn claims(token: &str) -> Option<Value> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned()
}

async fn discovery(State(s): State<Arc<FakeState>>) -> Json<Value> {
    Json(json!({"issuer": s.base}))
}

async fn exchange(
    State(s): State<Arc<FakeState>>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Reply {
    let bearer = bearer(&headers);
    if bearer != OIDC && bearer != OIDC_ROTATED {
        return error(StatusCode::UNAUTHORIZED, 16, "the identity token is not valid");
    }
    if q.get("identity").map(String::as_str) != Some(IDENTITY) {
        return error(StatusCode::FORBIDDEN, 7, "identity does not trust this token");
    }
    let Some(aud) = q.get("aud") else {
        return error(StatusCode::BAD_REQUEST, 3, "aud is required");
    };
    let n = s.exchanges.fetch_add(1, Ordering::SeqCst) + 1;
    *s.last_bearer.lock().unwrap() = bearer;
    *s.last_aud.lock().unwrap() = aud.clone();
    let exp = now_secs() + s.lifetime.load(Ordering::SeqCst);
    let token = s.hand_out.lock().unwrap().clone().unwrap_or_else(|| {
        jwt(&json!({
            "iss": s.base, "sub": IDENTITY, "aud": [aud], "iat": now_secs(), "exp": exp, "n": n,
        }))
    });
    (StatusCode::OK, Json(json!({"token": token, "expiry": rfc3339(exp)})))
}

async fn ok(State(s): State<Arc<FakeState>>, headers: HeaderMap) -> Reply {
    let Some(c) = claims(&bearer(&headers)).filter(|c| c["iss"] == s.base.as_str()) else {
        return error(StatusCode::UNAUTHORIZED, 16, "invalid token");
    };
    (
        StatusCode::OK,
        Json(json!({
            "issuer": c["iss"],
            "subject": c["sub"],
            "audience": c["aud"],
            "expiry": rfc3339(c["exp"].as_i64().unwrap()),
            "issuedAt": rfc3339(c["iat"].as_i64().unwrap()),
            "capabilities": [{
                "group": {"id": "fedcba9876543210fedcba9876543210fedcba98", "name": "acme"},
                "capabilities": ["CAP_IAM_GROUPS_LIST", "CAP_IAM_GROUPS_CREATE"],
            }],
        })),
    )
}

// ---------------------------------------------------------------------------
// Running the binary.

#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(&self, what: &str) -> &str {
        assert!(self.status.success(), "`{what}` failed: {self:#?}");
        &self.stdout
    }

    fn json(&self, what: &str) -> Value {
        let out = self.ok(what);
        serde_json::from_str(out).unwrap_or_else(|e| panic!("`{what}` printed non-JSON ({e}): {out}"))
    }

    fn failed(&self, what: &str) -> &str {
        assert!(!self.status.success(), "`{what}` should have failed: {self:#?}");
        &self.stderr
    }
}

/// A user: a config directory and an identity-token file.
struct User {
    dir: tempfile::TempDir,
}

impl User {
    fn new() -> Self {
        let u = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        u.write_oidc(OIDC);
        u
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    fn cache(&self) -> Cache {
        Cache::new(self.config())
    }

    fn oidc_file(&self) -> PathBuf {
        self.dir.path().join("oidc.jwt")
    }

    fn write_oidc(&self, token: &str) {
        std::fs::write(self.oidc_file(), format!("{token}\n")).unwrap();
    }

    /// `ward <args>` with this user's config dir, `api` as WARD_API and nothing
    /// else from the test's environment.
    fn command(&self, api: &str, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"));
        cmd.args(args)
            .env("WARD_CONFIG_DIR", self.config())
            .env("WARD_API", api)
            .env_remove("WARD_TOKEN")
            .env_remove("WARD_TOKEN_FILE")
            .env_remove("WARD_ISSUER")
            .kill_on_drop(true);
        cmd
    }

    async fn ward(&self, api: &str, args: &[&str]) -> Run {
        self.run(self.command(api, args), None).await
    }

    async fn run(&self, mut cmd: tokio::process::Command, stdin: Option<&str>) -> Run {
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("ward runs");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(input.as_bytes()).await.unwrap();
        }
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("ward finished within 60s")
            .expect("ward ran");
        Run {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `ward auth login` from the identity-token file.
    async fn login(&self, api: &str, extra: &[&str]) -> Run {
        let file = self.oidc_file();
        let mut args = vec![
            "auth",
            "login",
            "--identity",
            IDENTITY,
            "--identity-token",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.ward(api, &args).await
    }

    fn cached(&self, audience: &str) -> Entry {
        self.cache()
            .load(audience)
            .unwrap()
            .unwrap_or_else(|| panic!("a cached token for {audience}"))
    }
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

// ---------------------------------------------------------------------------

#[tokio::test]
async fn login_from_a_file_then_token_and_status() {
    let fake = Fake::start().await;
    let user = User::new();

    let out = user.login(&fake.base, &[]).await;
    let line = out.ok("login");
    assert!(
        line.starts_with(&format!("Logged in to {} as {IDENTITY} until 20", fake.base)),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1, "{line}");
    assert_eq!(fake.exchanges(), 1);
    assert_eq!(*fake.state.last_bearer.lock().unwrap(), OIDC);
    assert_eq!(
        *fake.state.last_aud.lock().unwrap(),
        fake.base,
        "the audience defaults to the API URL"
    );

    // Cached, privately, with what is needed to renew it.
    let entry = user.cached(&fake.base);
    assert_eq!(entry.identity, IDENTITY);
    assert_eq!(entry.issuer, fake.base, "discovered from the API");
    assert_eq!(entry.identity_token_file.as_deref(), Some(user.oidc_file().as_path()));
    #[cfg(unix)]
    {
        assert_eq!(mode(&user.cache().path(&fake.base)), 0o600);
        assert_eq!(mode(&user.config()), 0o700);
    }

    // `auth token` prints the cached token without another exchange.
    let printed = user.ward(&fake.base, &["auth", "token"]).await;
    assert_eq!(printed.ok("token").trim(), entry.token);
    assert_eq!(fake.exchanges(), 1);

    // Status as a table…
    let status = user.ward(&fake.base, &["auth", "status"]).await;
    let out = status.ok("status");
    for want in [
        &format!("Subject:  {IDENTITY}"),
        &format!("Issuer:   {}", fake.base),
        &format!("Audience: {}", fake.base),
        "Expiry:   20",
        "GROUP",
        "CAPABILITIES",
        "fedcba9876543210fedcba9876543210fedcba98",
        "CAP_IAM_GROUPS_LIST",
        "CAP_IAM_GROUPS_CREATE",
    ] {
        assert!(out.contains(want), "status lacks {want:?}:\n{out}");
    }
    // …and as JSON, the server's reply as is.
    let json = user
        .ward(&fake.base, &["auth", "status", "-o", "json"])
        .await
        .json("status -o json");
    assert_eq!(json["subject"], IDENTITY);
    assert_eq!(json["audience"], json!([fake.base]));
    assert_eq!(json["capabilities"][0]["capabilities"][0], "CAP_IAM_GROUPS_LIST");
    assert_eq!(fake.exchanges(), 1);

    // Logging in again is fine and replaces the token.
    user.login(&fake.base, &[]).await.ok("login again");
    assert_eq!(fake.exchanges(), 2);
    assert_ne!(user.cached(&fake.base).token, entry.token);
}

#[tokio::test]
async fn login_from_stdin() {
    let fake = Fake::start().await;
    let user = User::new();
    let cmd = user.command(
        &fake.base,
        &["auth", "login", "--identity", IDENTITY, "--identity-token", "-"],
    );
    let out = user.run(cmd, Some(&format!("  {OIDC_ROTATED}\n"))).await;
    assert!(out.ok("login from stdin").starts_with("Logged in to "), "{out:?}");
    assert_eq!(*fake.state.last_bearer.lock().unwrap(), OIDC_ROTATED, "trimmed");

    let entry = user.cached(&fake.base);
    assert_eq!(entry.identity_token_file, None, "stdin is not remembered");
    let printed = user.ward(&fake.base, &["auth", "token"]).await;
    assert_eq!(printed.ok("token").trim(), entry.token);

    // Once it is stale it cannot be renewed: log in again.
    fake.state.lifetime.store(30, Ordering::SeqCst);
    let cmd = user.command(
        &fake.base,
        &["auth", "login", "--identity", IDENTITY, "--identity-token", "-"],
    );
    user.run(cmd, Some(OIDC)).await.ok("short-lived login");
    let stale = user.ward(&fake.base, &["auth", "token"]).await;
    let err = stale.failed("token from a stale stdin login");
    assert!(
        err.contains("came from stdin") && err.contains("ward auth login"),
        "{err}"
    );
    let iam = user.ward(&fake.base, &["iam", "groups", "list"]).await;
    assert!(iam.failed("iam with a stale stdin login").contains("came from stdin"));

    // An empty identity token is refused locally.
    let cmd = user.command(
        &fake.base,
        &["auth", "login", "--identity", IDENTITY, "--identity-token", "-"],
    );
    let empty = user.run(cmd, Some("\n")).await;
    assert!(empty.failed("empty token").contains("is empty"), "{empty:?}");
}

#[tokio::test]
async fn stale_tokens_are_renewed_from_the_remembered_file() {
    let fake = Fake::start().await;
    let user = User::new();

    // Issued with 30 s left: under the one-minute margin, so stale at once.
    fake.state.lifetime.store(30, Ordering::SeqCst);
    user.login(&fake.base, &[]).await.ok("login");
    let first = user.cached(&fake.base).token;
    assert_eq!(fake.exchanges(), 1);

    // The platform rotated the identity token in the file meanwhile.
    user.write_oidc(OIDC_ROTATED);
    fake.state.lifetime.store(3600, Ordering::SeqCst);
    let renewed = user.ward(&fake.base, &["auth", "token"]).await;
    let token = renewed.ok("token").trim().to_owned();
    assert_ne!(token, first);
    assert_eq!(fake.exchanges(), 2);
    assert_eq!(*fake.state.last_bearer.lock().unwrap(), OIDC_ROTATED, "re-read");
    assert_eq!(user.cached(&fake.base).token, token, "cached again");

    // Fresh now: no further exchange.
    let again = user.ward(&fake.base, &["auth", "token"]).await;
    assert_eq!(again.ok("token again").trim(), token);
    assert_eq!(fake.exchanges(), 2);

    // A token already past its expiry (written directly) renews the same way,
    // also for another audience, and from another working directory.
    let aud = "https://registry.example";
    user.login(&fake.base, &["--audience", aud]).await.ok("login aud");
    let mut entry = user.cached(aud);
    entry.token = jwt(&json!({"sub": IDENTITY, "exp": now_secs() - 10}));
    user.cache().store(&entry).unwrap();
    let mut cmd = user.command(&fake.base, &["auth", "token", "--audience", aud]);
    cmd.current_dir(std::env::temp_dir());
    let renewed = user.run(cmd, None).await;
    let token = renewed.ok("token --audience").trim().to_owned();
    assert_eq!(claims(&token).unwrap()["aud"], json!([aud]));
    assert_eq!(*fake.state.last_aud.lock().unwrap(), aud);

    // The file gone: renewal fails and says how to recover.
    user.cache().store(&entry).unwrap();
    std::fs::remove_file(user.oidc_file()).unwrap();
    let gone = user.ward(&fake.base, &["auth", "token", "--audience", aud]).await;
    let err = gone.failed("renew without the file");
    assert!(
        err.contains("reading the identity token file") && err.contains(&format!("--audience {aud}")),
        "{err}"
    );
}

#[tokio::test]
async fn logout_removes_every_cached_token() {
    let fake = Fake::start().await;
    let user = User::new();
    user.login(&fake.base, &[]).await.ok("login");
    user.login(&fake.base, &["--audience", "other"]).await.ok("login other");
    assert!(user.cache().path(&fake.base).exists());
    assert!(user.cache().path("other").exists());

    let out = user.ward(&fake.base, &["auth", "logout"]).await;
    assert!(out.ok("logout").contains("removed 2 cached token(s)"), "{out:?}");
    assert!(!user.cache().path(&fake.base).exists());
    assert!(!user.cache().path("other").exists());
    assert!(!user.config().join("tokens").exists());

    // Idempotent.
    let again = user.ward(&fake.base, &["auth", "logout"]).await;
    assert!(again.ok("logout again").contains("removed 0"), "{again:?}");

    // Nothing to use any more.
    let token = user.ward(&fake.base, &["auth", "token"]).await;
    assert!(
        token.failed("token after logout").contains("not logged in for"),
        "{token:?}"
    );
    let iam = user.ward(&fake.base, &["iam", "groups", "list"]).await;
    assert!(
        iam.failed("iam after logout")
            .contains("no token: run `ward auth login"),
        "{iam:?}"
    );
}

#[tokio::test]
async fn failed_exchanges_show_the_servers_message() {
    let fake = Fake::start().await;
    let user = User::new();

    user.write_oidc("someone-elses-token");
    let out = user.login(&fake.base, &[]).await;
    let err = out.failed("login with an untrusted token");
    assert!(
        err.contains("the identity token is not valid") && err.contains("HTTP 401"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(user.cache().load(&fake.base).unwrap().is_none(), "nothing cached");

    user.write_oidc(OIDC);
    let file = user.oidc_file();
    let wrong = user
        .ward(
            &fake.base,
            &[
                "auth",
                "login",
                "--identity",
                "not-my-identity",
                "--identity-token",
                file.to_str().unwrap(),
            ],
        )
        .await;
    let err = wrong.failed("login as another identity");
    assert!(
        err.contains("identity does not trust this token") && err.contains("HTTP 403"),
        "{err}"
    );

    // No issuer to be found at the API.
    let nowhere = "http://127.0.0.1:1";
    let err = user.login(nowhere, &[]).await;
    assert!(
        err.failed("login without an issuer")
            .contains("finding the issuer of http://127.0.0.1:1"),
        "{err:?}"
    );
    // …unless --issuer names it; the audience is still the API URL.
    user.login(nowhere, &["--issuer", &fake.base])
        .await
        .ok("login --issuer");
    assert_eq!(*fake.state.last_aud.lock().unwrap(), nowhere);
    assert_eq!(user.cached(nowhere).issuer, fake.base);

    // A missing identity-token file names the file.
    std::fs::remove_file(user.oidc_file()).unwrap();
    let missing = user.login(&fake.base, &[]).await;
    assert!(
        missing
            .failed("login without the file")
            .contains("reading the identity token file"),
        "{missing:?}"
    );
}

#[tokio::test]
async fn iam_uses_the_cached_token() {
    let fake = Fake::start().await;
    for s in common::servers().await {
        let b = s.backend;
        let user = User::new();
        let org = s.create_group(None, "cached-org").await;
        // The fake issuer serves every backend: count this iteration's exchanges.
        let start = fake.exchanges();

        // No token anywhere yet.
        let none = user.ward(&s.base, &["iam", "groups", "list"]).await;
        assert!(none.failed("no token").contains("no token"), "[{b}] {none:?}");

        // The admin token cached for the server's API URL stands in for WARD_TOKEN.
        user.cache()
            .store(&Entry {
                audience: s.base.clone(),
                token: s.token.clone(),
                identity: IDENTITY.into(),
                issuer: fake.base.clone(),
                identity_token_file: Some(user.oidc_file()),
                browser_login: false,
            })
            .unwrap();
        let all = user
            .ward(&s.base, &["iam", "groups", "list", "-o", "json"])
            .await
            .json("list with the cached token");
        assert_eq!(all[0]["uid"], org["uid"], "[{b}] {all}");
        // A trailing slash on the API URL finds the same token.
        let slash = format!("{}/", s.base);
        let all = user
            .ward(&slash, &["iam", "groups", "list", "-o", "json"])
            .await
            .json("list with a trailing slash");
        assert_eq!(all[0]["uid"], org["uid"], "[{b}] {all}");
        assert_eq!(fake.exchanges(), start, "[{b}] fresh: no exchange");

        // WARD_TOKEN still wins over the cache.
        let mut cmd = user.command(&s.base, &["iam", "groups", "list"]);
        cmd.env("WARD_TOKEN", "not-a-token");
        let r = user.run(cmd, None).await;
        assert!(r.failed("bad WARD_TOKEN").contains("HTTP 401"), "[{b}] {r:?}");

        // An expired cached token is renewed at the remembered issuer first
        // (the fake STS hands out the real admin token).
        user.cache()
            .store(&Entry {
                audience: s.base.clone(),
                token: jwt(&json!({"sub": IDENTITY, "exp": now_secs() - 1})),
                identity: IDENTITY.into(),
                issuer: fake.base.clone(),
                identity_token_file: Some(user.oidc_file()),
                browser_login: false,
            })
            .unwrap();
        *fake.state.hand_out.lock().unwrap() = Some(s.token.clone());
        let before = fake.exchanges();
        let out = user.ward(&s.base, &["iam", "groups", "list"]).await;
        assert!(out.ok("list after renewal").contains("cached-org"), "[{b}]");
        assert_eq!(fake.exchanges(), before + 1, "[{b}]");
        assert_eq!(*fake.state.last_aud.lock().unwrap(), s.base, "[{b}]");
        assert_eq!(user.cached(&s.base).token, s.token, "[{b}]");
        *fake.state.hand_out.lock().unwrap() = None;
    }
}
