//! `ward auth login --idp …`: a person logs in with their browser at their
//! organization's identity provider, the way `gh auth login` works.
//!
//! The CLI listens on a loopback port, sends the browser to Ward's `/oauth`
//! with that port as the redirect, a random `state` and a PKCE challenge, and
//! waits. When the browser comes back with a one-time code, the CLI checks
//! the state and redeems the code at `/oauth/token` with its PKCE verifier,
//! so nothing else that sees the redirect can use the code.

use std::time::Duration;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::auth::{default_audience, discover_issuer};
use crate::cache::{Cache, Entry};
use crate::{Client, Connection, output};

/// How long the CLI waits for the person to finish in the browser.
const WAIT: Duration = Duration::from_secs(10 * 60);
/// Largest request the loopback listener reads.
const MAX_REQUEST: usize = 16 * 1024;

fn random_text(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut b);
    URL_SAFE_NO_PAD.encode(b)
}

/// `/oauth/token`'s answer.
#[derive(Deserialize)]
struct Token {
    token: String,
    #[serde(default)]
    expiry: String,
    identity: String,
}

#[derive(Deserialize)]
struct OAuthError {
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

/// Logs in through `idp` and caches the token for the API.
pub async fn browser_login(conn: &Connection, idp: &str, no_browser: bool, invite: Option<&str>) -> anyhow::Result<()> {
    let issuer = match &conn.issuer {
        Some(i) => i.trim_end_matches('/').to_owned(),
        None => discover_issuer(&conn.api).await?,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("listening on a loopback port for the login to return")?;
    let redirect = format!("http://{}/callback", listener.local_addr()?);
    let verifier = random_text(32);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let state = random_text(16);
    let url = reqwest::Url::parse_with_params(
        &format!("{issuer}/oauth"),
        &[
            ("idp_id", idp),
            ("redirect", redirect.as_str()),
            ("state", state.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ],
    )
    .with_context(|| format!("{issuer} is not a URL"))?;
    let opened = !no_browser && open::that_detached(url.as_str()).is_ok();
    if opened {
        eprintln!("Opening your browser to log in. If it does not open, visit:\n\n  {url}\n");
    } else {
        eprintln!("Open this URL in a browser on this machine to log in:\n\n  {url}\n");
    }
    let code = tokio::time::timeout(WAIT, wait_for_code(&listener, &state))
        .await
        .context("timed out waiting for the browser login")??;
    let token = redeem(
        &issuer,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", &verifier),
        ],
    )
    .await?
    .map_err(|e| anyhow::anyhow!("the login could not be finished: {} ({})", e.error_description, e.error))?;
    finish(conn, issuer, token, invite).await
}

/// Caches the token, says who is logged in, and accepts an invite if given.
async fn finish(conn: &Connection, issuer: String, token: Token, invite: Option<&str>) -> anyhow::Result<()> {
    let audience = default_audience(conn);
    Cache::from_env()?.store(&Entry {
        audience: audience.clone(),
        token: token.token.clone(),
        identity: token.identity.clone(),
        issuer,
        identity_token_file: None,
        browser_login: true,
    })?;
    output::line(&format!("Logged in as {} until {}", token.identity, token.expiry));
    if let Some(code) = invite {
        let code = if code == "-" {
            std::io::read_to_string(std::io::stdin())
                .context("reading the invite code from stdin")?
                .trim()
                .to_owned()
        } else {
            code.to_owned()
        };
        let code = code.as_str();
        let client = Client::new(&conn.api, token.token)?;
        let joined = crate::people::accept_invite(&client, code).await?;
        output::line(&format!(
            "Joined group {} with the invite",
            joined["group"].as_str().unwrap_or("?")
        ));
    }
    Ok(())
}

/// Serves the loopback port until the browser arrives at `/callback` with
/// this login's state; returns the code. Other requests (a favicon, a stray
/// visit) get 404 and are otherwise ignored.
async fn wait_for_code(listener: &tokio::net::TcpListener, state: &str) -> anyhow::Result<String> {
    loop {
        let (mut conn, _) = listener.accept().await?;
        let Ok(Ok(target)) = tokio::time::timeout(Duration::from_secs(10), read_target(&mut conn)).await else {
            continue;
        };
        let Some(query) = target.strip_prefix("/callback?") else {
            respond(&mut conn, "404 Not Found", "Not found.").await;
            continue;
        };
        let mut code = None;
        let mut error = None;
        let mut got_state = None;
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "code" => code = Some(v.into_owned()),
                "error" => error = Some(v.into_owned()),
                "state" => got_state = Some(v.into_owned()),
                _ => {}
            }
        }
        if got_state.as_deref() != Some(state) {
            respond(
                &mut conn,
                "400 Bad Request",
                "This is not the login this terminal started.",
            )
            .await;
            continue;
        }
        if let Some(e) = error {
            respond(&mut conn, "400 Bad Request", "The login failed. See your terminal.").await;
            bail!("the identity provider refused the login: {e}");
        }
        let Some(code) = code else {
            respond(&mut conn, "400 Bad Request", "The login returned no code.").await;
            bail!("the login returned no code");
        };
        respond(
            &mut conn,
            "200 OK",
            "You are logged in. You can close this window and return to your terminal.",
        )
        .await;
        return Ok(code);
    }
}

/// Reads one request's head and returns its target (path and query).
async fn read_target(conn: &mut tokio::net::TcpStream) -> anyhow::Result<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk).await?;
        if n == 0 || buf.len() + n > MAX_REQUEST {
            bail!("bad request");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Ok(target.to_owned()),
        _ => bail!("bad request"),
    }
}

async fn respond(conn: &mut tokio::net::TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Ward</title></head><body><p>{text}</p></body></html>"
    );
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// Logs in without a browser on this machine (an SSH session): the person
/// opens a URL anywhere and types the code shown here, while the CLI polls.
pub async fn headless_login(conn: &Connection, idp: &str, invite: Option<&str>) -> anyhow::Result<()> {
    #[derive(Deserialize)]
    struct Started {
        device_code: String,
        user_code: String,
        verification_uri: String,
        verification_uri_complete: String,
        expires_in: u64,
        interval: u64,
    }
    let issuer = match &conn.issuer {
        Some(i) => i.trim_end_matches('/').to_owned(),
        None => discover_issuer(&conn.api).await?,
    };
    let verifier = random_text(32);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("idp_id", idp)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .finish();
    let resp = http()?
        .post(format!("{issuer}/oauth/device/code"))
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .with_context(|| format!("starting a headless login at {issuer}"))?;
    let ok = resp.status().is_success();
    let bytes = resp.bytes().await?;
    if !ok {
        let e = oauth_error(&bytes);
        bail!("the login could not start: {} ({})", e.error_description, e.error);
    }
    let started: Started = serde_json::from_slice(&bytes).context("decoding the headless login's codes")?;
    eprintln!(
        "To log in, open {} in a browser on any device and enter the code

  {}

(or open {})
",
        started.verification_uri, started.user_code, started.verification_uri_complete
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(started.expires_in.min(3600));
    let mut interval = Duration::from_secs(started.interval.clamp(1, 60));
    let pairs = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
        ("device_code", started.device_code.as_str()),
        ("code_verifier", verifier.as_str()),
    ];
    loop {
        tokio::time::sleep(interval).await;
        match redeem(&issuer, &pairs).await? {
            Ok(token) => return finish(conn, issuer, token, invite).await,
            Err(e) if e.error == "authorization_pending" => {}
            Err(e) if e.error == "slow_down" => interval += Duration::from_secs(5),
            Err(e) => bail!("the login could not be finished: {} ({})", e.error_description, e.error),
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("the code expired before the login finished; run the command again");
        }
    }
}

fn http() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?)
}

fn oauth_error(bytes: &[u8]) -> OAuthError {
    serde_json::from_slice(bytes).unwrap_or(OAuthError {
        error: "error".into(),
        error_description: String::from_utf8_lossy(bytes).chars().take(200).collect(),
    })
}

/// Posts to `/oauth/token`: the token, or the OAuth error the server gave.
async fn redeem(issuer: &str, pairs: &[(&str, &str)]) -> anyhow::Result<Result<Token, OAuthError>> {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter())
        .finish();
    let resp = http()?
        .post(format!("{issuer}/oauth/token"))
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .with_context(|| format!("finishing the login at {issuer}"))?;
    let ok = resp.status().is_success();
    let bytes = resp.bytes().await?;
    if !ok {
        return Ok(Err(oauth_error(&bytes)));
    }
    serde_json::from_slice(&bytes)
        .context("decoding the login's token")
        .map(Ok)
}
