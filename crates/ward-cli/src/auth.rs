//! `ward auth login|token|status|logout`: Ward API tokens for workloads.
//!
//! A workload (say, a CI job) holds an OIDC identity token from its platform.
//! `ward auth login` exchanges it at the issuer's STS
//! (`GET {issuer}/sts/exchange?aud=…&identity=…`, the identity token as bearer)
//! for a Ward API token, and caches that per audience (see [`crate::cache`])
//! together with where the identity token came from. Later commands use the
//! cached token, and exchange again from the same identity-token file once it
//! has a minute or less left, so a CI job whose platform refreshes the file
//! keeps working as long as the file does.
//!
//! The issuer is `--issuer`/`WARD_ISSUER` when given, else the one the token
//! was first obtained from, else discovered from the API's
//! `/.well-known/openid-configuration`.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use crate::cache::{self, Cache, Entry};
use crate::{Client, Connection, Format, output};

#[derive(Debug, clap::Subcommand)]
pub enum AuthCommand {
    /// Log in and cache a Ward API token for later commands: a person with
    /// their browser at their organization's identity provider (--idp), or a
    /// workload by exchanging its OIDC identity token (--identity,
    /// --identity-token).
    Login {
        /// The Ward identity (uid) to act as (with --identity-token).
        #[arg(long, requires = "identity_token")]
        identity: Option<String>,
        /// File holding the identity token, or `-` to read it from stdin. A
        /// file is read again whenever the cached token needs renewing.
        #[arg(long, value_name = "FILE", requires = "identity", conflicts_with_all = ["idp", "no_browser", "headless", "invite_code"])]
        identity_token: Option<PathBuf>,
        /// Audience of the Ward token [default: the API URL].
        #[arg(long)]
        audience: Option<String>,
        /// Browser login: the identity provider (uid), or the name of a
        /// verified organization that has one.
        #[arg(long, env = "WARD_IDP")]
        idp: Option<String>,
        /// Browser login: print the URL to open instead of opening a browser
        /// (the browser must run on this machine: it returns to a port here).
        #[arg(long)]
        no_browser: bool,
        /// Browser login from a machine without a browser (an SSH session):
        /// open the printed URL on any device and type the printed code.
        #[arg(long, conflicts_with = "no_browser")]
        headless: bool,
        /// After logging in, accept this group invite (`-`: read it from stdin).
        #[arg(long, value_name = "CODE")]
        invite_code: Option<String>,
    },
    /// Print a valid Ward API token from the cache, renewing it if needed.
    Token {
        /// Audience of the token [default: the API URL].
        #[arg(long)]
        audience: Option<String>,
    },
    /// Show who the current token is for and what it may do, per group.
    Status,
    /// Forget every cached token.
    Logout,
    /// Make docker, podman, skopeo and oras get registry credentials from
    /// `ward` (credHelpers in their config files, merged).
    ConfigureDocker {
        /// The registry host [default: the API URL's host].
        #[arg(long)]
        registry: Option<String>,
    },
}

/// Runs an `ward auth` command. Its error is [`output::sanitize_error`]ed.
pub async fn run(conn: &Connection, cmd: AuthCommand) -> anyhow::Result<()> {
    auth(conn, cmd).await.map_err(output::sanitize_error)
}

async fn auth(conn: &Connection, cmd: AuthCommand) -> anyhow::Result<()> {
    match cmd {
        AuthCommand::Login {
            identity: Some(identity),
            identity_token: Some(identity_token),
            audience,
            ..
        } => login(conn, identity, &identity_token, audience).await,
        AuthCommand::Login {
            idp: Some(idp),
            headless: true,
            invite_code,
            audience: None,
            ..
        } => crate::login::headless_login(conn, &idp, invite_code.as_deref()).await,
        AuthCommand::Login {
            idp: Some(idp),
            no_browser,
            invite_code,
            audience: None,
            ..
        } => crate::login::browser_login(conn, &idp, no_browser, invite_code.as_deref()).await,
        AuthCommand::Login { audience: Some(_), .. } => {
            bail!("--audience goes with --identity-token; a browser login's token is for the API")
        }
        AuthCommand::Login { .. } => bail!(
            "say how to log in: --idp IDP (a person, with a browser) or --identity UID --identity-token FILE (a workload)"
        ),
        AuthCommand::Token { audience } => {
            let audience = audience.unwrap_or_else(|| default_audience(conn));
            match cached_token(conn, &audience).await? {
                Some(token) => {
                    output::line(&token);
                    Ok(())
                }
                None => bail!("not logged in for {audience}: {}", login_hint(conn, &audience)),
            }
        }
        AuthCommand::Status => status(conn).await,
        AuthCommand::ConfigureDocker { registry } => crate::registry::configure_docker(conn, registry),
        AuthCommand::Logout => {
            let cache = Cache::from_env()?;
            let n = cache.clear()?;
            output::line(&format!(
                "Logged out: removed {n} cached token(s) from {}",
                cache.dir().display()
            ));
            Ok(())
        }
    }
}

/// The audience tokens are for unless `--audience` says otherwise: the API URL.
pub fn default_audience(conn: &Connection) -> String {
    conn.api.trim_end_matches('/').to_owned()
}

/// The cached token for `audience`, renewed from the remembered identity-token
/// file when it has a minute or less left; `None` when there is no cached token.
pub async fn cached_token(conn: &Connection, audience: &str) -> anyhow::Result<Option<String>> {
    let cache = Cache::from_env()?;
    let Some(entry) = cache.load(audience)? else {
        return Ok(None);
    };
    if entry.is_fresh(SystemTime::now()) {
        return Ok(Some(entry.token));
    }
    let again = login_hint(conn, audience);
    if entry.browser_login {
        bail!("your login for {audience} has expired: run `ward auth login --idp IDP` again");
    }
    let Some(file) = entry.identity_token_file.as_deref() else {
        bail!(
            "the cached token for {audience} has expired and cannot be renewed \
             (its identity token came from stdin): {again}"
        );
    };
    let renew = || format!("renewing the token for {audience} ({again})");
    let identity_token = read_identity_token(file).with_context(renew)?;
    let issuer = conn.issuer.clone().unwrap_or(entry.issuer.clone());
    let exchanged = exchange(&issuer, &identity_token, audience, &entry.identity)
        .await
        .with_context(renew)?;
    let token = exchanged.token.clone();
    cache.store(&Entry {
        token: exchanged.token,
        issuer,
        ..entry
    })?;
    Ok(Some(token))
}

/// What to run to (re)log in for `audience`.
fn login_hint(conn: &Connection, audience: &str) -> String {
    let flag = if audience == default_audience(conn) {
        String::new()
    } else {
        format!(" --audience {audience}")
    };
    format!("run `ward auth login --identity UID --identity-token FILE{flag}`")
}

async fn login(
    conn: &Connection,
    identity: String,
    identity_token: &Path,
    audience: Option<String>,
) -> anyhow::Result<()> {
    let audience = audience.unwrap_or_else(|| default_audience(conn));
    let from_stdin = identity_token == Path::new("-");
    let token = read_identity_token(identity_token)?;
    let issuer = match &conn.issuer {
        Some(i) => i.clone(),
        None => discover_issuer(&conn.api).await?,
    };
    let exchanged = exchange(&issuer, &token, &audience, &identity).await?;
    let identity_token_file = if from_stdin {
        None
    } else {
        // Absolute, so renewing works from any working directory.
        Some(std::path::absolute(identity_token).context("resolving --identity-token")?)
    };
    let subject = cache::jwt_claims(&exchanged.token)
        .and_then(|c| c["sub"].as_str().map(str::to_owned))
        .unwrap_or_else(|| identity.clone());
    Cache::from_env()?.store(&Entry {
        audience: audience.clone(),
        token: exchanged.token,
        identity,
        issuer,
        identity_token_file,
        browser_login: false,
    })?;
    output::line(&format!(
        "Logged in to {audience} as {subject} until {}",
        exchanged.expiry
    ));
    Ok(())
}

/// The identity token in `path` (`-`: stdin), without surrounding whitespace.
fn read_identity_token(path: &Path) -> anyhow::Result<String> {
    let token = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading the identity token from stdin")?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading the identity token file {}", path.display()))?
    };
    let token = token.trim();
    if token.is_empty() {
        bail!("the identity token in {} is empty", path.display());
    }
    Ok(token.to_owned())
}

/// The issuer named by the API's OIDC discovery document.
pub(crate) async fn discover_issuer(api: &str) -> anyhow::Result<String> {
    #[derive(Deserialize)]
    struct Discovery {
        issuer: String,
    }
    let d: Discovery = Client::new(api, String::new())?
        .call::<(), _>(Method::GET, "/.well-known/openid-configuration", &[], None)
        .await
        .with_context(|| format!("finding the issuer of {api} (or pass --issuer)"))?;
    Ok(d.issuer)
}

/// The STS's reply.
#[derive(Deserialize)]
struct Exchanged {
    token: String,
    /// RFC 3339.
    #[serde(default)]
    expiry: String,
}

/// Exchanges `identity_token` at `issuer`'s STS for a Ward token for
/// `audience`, acting as `identity`.
async fn exchange(issuer: &str, identity_token: &str, audience: &str, identity: &str) -> anyhow::Result<Exchanged> {
    let query = [("aud", audience.to_owned()), ("identity", identity.to_owned())];
    Client::new(issuer, identity_token.to_owned())?
        .call::<(), _>(Method::GET, "/sts/exchange", &query, None)
        .await
        .with_context(|| format!("exchanging the identity token at {issuer}"))
}

/// The reply of `/auth/v1/ok`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WhoAmI {
    #[serde(default)]
    issuer: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    audience: Vec<String>,
    #[serde(default)]
    expiry: String,
    #[serde(default)]
    capabilities: Vec<GroupCapabilities>,
}

#[derive(Deserialize)]
struct GroupCapabilities {
    /// The group (a v1 `Group`: `id`, `name`, …).
    #[serde(default)]
    group: Option<Value>,
    #[serde(default)]
    capabilities: Vec<String>,
}

impl GroupCapabilities {
    /// `name (uid)`, or the uid alone.
    fn group_label(&self) -> String {
        let field = |k: &str| {
            self.group
                .as_ref()
                .and_then(|g| g.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match (field("name"), field("id")) {
            (name, id) if name.is_empty() => id,
            (name, id) => format!("{name} ({id})"),
        }
    }
}

async fn status(conn: &Connection) -> anyhow::Result<()> {
    let reply: Value = conn
        .client()
        .await?
        .call::<(), _>(Method::GET, "/auth/v1/ok", &[], None)
        .await?;
    if conn.output == Format::Json {
        return output::json(&reply);
    }
    let who: WhoAmI = serde_json::from_value(reply).context("decoding the reply to /auth/v1/ok")?;
    output::line(&format!("Subject:  {}", who.subject));
    output::line(&format!("Issuer:   {}", who.issuer));
    output::line(&format!("Audience: {}", who.audience.join(", ")));
    output::line(&format!("Expiry:   {}", who.expiry));
    output::table(
        &["GROUP", "CAPABILITIES"],
        who.capabilities
            .into_iter()
            .map(|g| vec![g.group_label(), g.capabilities.join(", ")])
            .collect(),
    );
    Ok(())
}
