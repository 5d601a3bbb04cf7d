//! `ward registry repos|tags|pull-token …`, `ward auth configure-docker` and
//! the `docker-credential-ward` helper protocol.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use reqwest::Method;
use serde_json::{Value, json};
use ward_proto::iam::v2::{Group, Identity};
use ward_proto::registry::v2::{Repo, Tag};

use crate::resource::{self, Filters, Paging, Resource};
use crate::{Client, Connection, Format, output};

impl Resource for Repo {
    const KIND: &'static str = "repo";
    const PATH: &'static str = "/registry/v2/repos";
    const ITEMS: &'static str = "repos";
    const HEADER: &'static [&'static str] = &["UID", "NAME", "DESCRIPTION", "UPDATED"];

    fn uid(&self) -> &str {
        &self.uid
    }
    fn row(&self) -> Vec<String> {
        vec![
            self.uid.clone(),
            self.name.clone(),
            self.description.clone(),
            output::time(self.update_time.as_ref()),
        ]
    }
}

impl Resource for Tag {
    const KIND: &'static str = "tag";
    const PATH: &'static str = "/registry/v2/tags";
    const ITEMS: &'static str = "tags";
    const HEADER: &'static [&'static str] = &["UID", "NAME", "DIGEST", "UPDATED"];

    fn uid(&self) -> &str {
        &self.uid
    }
    fn row(&self) -> Vec<String> {
        vec![
            self.uid.clone(),
            self.name.clone(),
            self.digest.clone(),
            output::time(self.update_time.as_ref()),
        ]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum RegistryCommand {
    /// Image repositories.
    #[command(subcommand)]
    Repos(ReposCommand),
    /// Tags of repositories.
    #[command(subcommand)]
    Tags(TagsCommand),
    /// Pull tokens: credentials that may only pull from one group's repos.
    #[command(subcommand)]
    PullToken(PullTokenCommand),
    /// An image's vulnerability report (by severity), or `affected ID`: every
    /// image a vulnerability or alias affects.
    Vulns(crate::vulns::VulnsArgs),
    /// An image's packages (from its SBOM, or read from its layers).
    Sbom {
        /// `[registry/][org/]repo:tag` or `…@sha256:…`.
        image: String,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum ReposCommand {
    /// List repos (every page).
    List {
        #[command(flatten)]
        filters: Filters,
    },
    /// Create a repo in a group.
    Create {
        /// OCI repository name (may contain '/').
        name: String,
        /// The group it belongs to (name or uid).
        #[arg(long)]
        parent: String,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Show one repo.
    Describe {
        /// Name or uid.
        repo: String,
    },
    /// Change a repo's name or description (only the flags given).
    Update {
        /// Name or uid.
        repo: String,
        #[command(flatten)]
        fields: resource::NameDescription,
    },
    /// Delete a repo with its tags and manifests.
    Delete {
        /// Name or uid.
        repo: String,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum TagsCommand {
    /// List tags (every page); `sha256-*`, dated and epoch tags only with --all.
    List {
        /// Only tags of this repo (name or uid).
        #[arg(long)]
        repo: Option<String>,
        /// Only tags with exactly this name.
        #[arg(long)]
        name: Option<String>,
        /// Only tags pointing at this digest.
        #[arg(long)]
        digest: Option<String>,
        /// Include referrer (`sha256-*`), dated (`*-20yymmdd`) and epoch (`*-rN`) tags.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        paging: Paging,
    },
    /// Show one tag (by uid).
    Describe { tag: String },
    /// Delete a tag (by uid); the manifest stays.
    Delete { tag: String },
}

#[derive(Debug, clap::Subcommand)]
pub enum PullTokenCommand {
    /// Create a pull token: an identity with its own key, bound to
    /// `registry.pull` in the group, and a token signed with that key.
    Create {
        /// The group whose repos it may pull (name or uid).
        #[arg(long)]
        group: String,
        /// How long it is valid, e.g. 720h, 30d (at most 1 year).
        #[arg(long, default_value = "720h")]
        ttl: String,
    },
    /// List pull tokens of a group.
    List {
        /// Name or uid.
        #[arg(long)]
        group: String,
    },
    /// Revoke a pull token (deletes its identity).
    Delete {
        /// The pull token's identity uid (its username).
        identity: String,
    },
}

/// Name prefix of pull-token identities.
const PULL_TOKEN_PREFIX: &str = "pull-token-";
/// Longest pull-token lifetime.
const MAX_TTL_SECS: u64 = 366 * 24 * 3600;

pub async fn run(conn: &Connection, cmd: RegistryCommand) -> anyhow::Result<()> {
    let client = conn.client().await?;
    let format = conn.output;
    match cmd {
        RegistryCommand::Repos(c) => repos(&client, format, c).await,
        RegistryCommand::Tags(c) => tags(&client, format, c).await,
        RegistryCommand::PullToken(c) => pull_token(conn, &client, format, c).await,
        RegistryCommand::Vulns(args) => crate::vulns::run(&client, format, args).await,
        RegistryCommand::Sbom { image } => crate::vulns::sbom(&client, format, &image).await,
    }
}

async fn repos(client: &Client, format: Format, cmd: ReposCommand) -> anyhow::Result<()> {
    match cmd {
        ReposCommand::List { filters } => {
            let q = filters.query(client).await?;
            resource::show(format, &resource::list::<Repo>(client, &q).await?)
        }
        ReposCommand::Create {
            name,
            parent,
            description,
        } => {
            let parent = resource::resolve_flag::<Group>(client, "--parent", &parent).await?;
            let body = json!({"name": name, "description": description});
            resource::create::<Repo>(client, format, Some(&parent), &body).await
        }
        ReposCommand::Describe { repo } => resource::describe::<Repo>(client, format, &repo).await,
        ReposCommand::Update { repo, fields } => resource::update::<Repo>(client, format, &repo, fields.body()).await,
        ReposCommand::Delete { repo } => resource::delete::<Repo>(client, format, &repo).await,
    }
}

async fn tags(client: &Client, format: Format, cmd: TagsCommand) -> anyhow::Result<()> {
    match cmd {
        TagsCommand::List {
            repo,
            name,
            digest,
            all,
            paging,
        } => {
            let mut q = paging.query();
            let repo = resource::resolve_opt::<Repo>(client, "--repo", repo).await?;
            resource::push(&mut q, "uidp.children_of", repo);
            resource::push(&mut q, "name", name);
            resource::push(&mut q, "digest", digest);
            if all {
                for k in ["include_referrers", "include_dates", "include_epochs"] {
                    q.push((k, "true".into()));
                }
            }
            resource::show(format, &resource::list::<Tag>(client, &q).await?)
        }
        TagsCommand::Describe { tag } => resource::describe::<Tag>(client, format, &tag).await,
        TagsCommand::Delete { tag } => resource::delete::<Tag>(client, format, &tag).await,
    }
}

/// A duration as `720h`, `30d`, `90m`, `3600s` or plain seconds (also the
/// `--grace` of `ward admin gc`).
pub fn parse_duration(raw: &str) -> Result<std::time::Duration, String> {
    let raw = raw.trim();
    let (num, unit) = raw.split_at(raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len()));
    let n: u64 = num.parse().map_err(|_| format!("{raw}: expected e.g. 720h or 30d"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("{raw}: use s, m, h or d")),
    };
    Ok(std::time::Duration::from_secs(secs))
}

/// `--ttl` of a pull token: 1 s to 366 days.
fn parse_ttl(raw: &str) -> anyhow::Result<u64> {
    let secs = parse_duration(raw).map_err(|e| anyhow::anyhow!("--ttl {e}"))?.as_secs();
    if secs == 0 || secs > MAX_TTL_SECS {
        bail!("--ttl must be between 1s and 366d");
    }
    Ok(secs)
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// The issuer URL the server's token exchange expects as audience.
async fn issuer(conn: &Connection) -> anyhow::Result<String> {
    if let Some(i) = &conn.issuer {
        return Ok(i.trim_end_matches('/').to_owned());
    }
    let anon = Client::new(&conn.api, String::new())?;
    let doc: Value = anon
        .call::<(), _>(Method::GET, "/.well-known/openid-configuration", &[], None)
        .await?;
    doc["issuer"]
        .as_str()
        .map(|s| s.trim_end_matches('/').to_owned())
        .context("the server's discovery document names no issuer")
}

async fn pull_token(conn: &Connection, client: &Client, format: Format, cmd: PullTokenCommand) -> anyhow::Result<()> {
    match cmd {
        PullTokenCommand::Create { group, ttl } => {
            use p256::elliptic_curve::sec1::ToEncodedPoint as _;
            use p256::pkcs8::EncodePrivateKey as _;
            let secs = parse_ttl(&ttl)?;
            let group = resource::resolve_flag::<Group>(client, "--group", &group).await?;
            let audience = issuer(conn).await?;
            let secret = p256::SecretKey::random(&mut rand::rngs::OsRng);
            let der = secret.to_pkcs8_der().context("encoding the key")?;
            let point = secret.public_key().to_encoded_point(false);
            let (Some(x), Some(y)) = (point.x(), point.y()) else {
                bail!("the generated key has no coordinates");
            };
            let tag = {
                use rand::RngCore as _;
                let mut b = [0u8; 4];
                rand::thread_rng().fill_bytes(&mut b);
                hex::encode(b)
            };
            let kid = format!("pull-{tag}");
            let jwks = json!({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig",
                                         "kid": kid, "x": b64(x), "y": b64(y)}]});
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .context("the clock is before 1970")?
                .as_secs();
            let exp = now + secs;
            let expire_time: ward_proto::Timestamp =
                ward_proto::Timestamp::from_millis(i64::try_from(exp)?.saturating_mul(1000));
            let iss = format!("https://pull-token.ward.invalid/{tag}");
            let identity: Identity = client
                .call(
                    Method::POST,
                    &format!("/iam/v2/identities/{group}"),
                    &[],
                    Some(&json!({
                        "name": format!("{PULL_TOKEN_PREFIX}{tag}"),
                        "description": "registry pull token",
                        "staticKeys": {
                            "issuer": iss,
                            "subject": "pull-token",
                            "issuerKeys": jwks.to_string(),
                            "expirationTime": expire_time,
                        },
                    })),
                )
                .await?;
            let role = resource::resolve::<ward_proto::iam::v2::Role>(client, "registry.pull").await?;
            let bound: anyhow::Result<Value> = client
                .call(
                    Method::POST,
                    &format!("/iam/v2/roleBindings/{group}"),
                    &[],
                    Some(&json!({"identityUid": identity.uid, "roleUid": role})),
                )
                .await;
            if let Err(e) = bound {
                // Leave nothing half-made behind.
                let _ = client
                    .call::<(), Value>(
                        Method::DELETE,
                        &format!("/iam/v2/identities/{}", identity.uid),
                        &[],
                        None,
                    )
                    .await;
                return Err(e);
            }
            let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
            header.kid = Some(kid);
            let claims = json!({"iss": iss, "sub": "pull-token", "aud": audience, "iat": now, "exp": exp});
            let password = jsonwebtoken::encode(
                &header,
                &claims,
                &jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes()),
            )
            .context("signing the pull token")?;
            let host = registry_host(&conn.api);
            match format {
                Format::Json => output::json(&json!({
                    "username": identity.uid,
                    "password": password,
                    "expireTime": expire_time,
                })),
                Format::Table => {
                    output::line(&format!(
                        "Pull token {} for group {group}, valid until {}.",
                        identity.uid,
                        output::time(Some(&expire_time))
                    ));
                    output::line("Log in with one of:");
                    output::line(&format!(
                        "  docker login {host} --username \"{}\" --password \"{password}\"",
                        identity.uid
                    ));
                    output::line(&format!(
                        "  skopeo login {host} --username \"{}\" --password \"{password}\"",
                        identity.uid
                    ));
                    Ok(())
                }
            }
        }
        PullTokenCommand::List { group } => {
            let group = resource::resolve_flag::<Group>(client, "--group", &group).await?;
            let all: Vec<Identity> =
                resource::list(client, &vec![("uidp.children_of", group), ("page_size", "200".into())]).await?;
            let tokens: Vec<Identity> = all
                .into_iter()
                .filter(|i| i.name.starts_with(PULL_TOKEN_PREFIX))
                .collect();
            resource::show(format, &tokens)
        }
        PullTokenCommand::Delete { identity } => {
            let bindings: Value = client
                .call::<(), _>(
                    Method::GET,
                    "/iam/v2/roleBindings",
                    &[("identity", identity.clone()), ("page_size", "200".into())],
                    None,
                )
                .await?;
            for b in bindings["roleBindings"].as_array().into_iter().flatten() {
                if let Some(uid) = b["uid"].as_str() {
                    let _: Value = client
                        .call::<(), _>(Method::DELETE, &format!("/iam/v2/roleBindings/{uid}"), &[], None)
                        .await?;
                }
            }
            resource::delete::<Identity>(client, format, &identity).await
        }
    }
}

/// `host[:port]` of a URL.
pub fn registry_host(url: &str) -> String {
    let after = url.split_once("://").map_or(url, |(_, r)| r);
    after.split('/').next().unwrap_or(after).to_owned()
}

/// The Docker config file (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`).
fn docker_config() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("config.json"));
    }
    Ok(home()?.join(".docker").join("config.json"))
}

/// The containers auth file (`$REGISTRY_AUTH_FILE`, else
/// `$XDG_RUNTIME_DIR/containers/auth.json`, else `~/.config/containers/auth.json`).
fn containers_auth() -> anyhow::Result<PathBuf> {
    if let Some(f) = std::env::var_os("REGISTRY_AUTH_FILE").filter(|f| !f.is_empty()) {
        return Ok(PathBuf::from(f));
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("containers").join("auth.json"));
    }
    Ok(home()?.join(".config").join("containers").join("auth.json"))
}

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")
}

/// Sets `credHelpers[host] = "ward"` in a JSON config file, keeping
/// everything else in it; writes atomically, mode 0600.
fn add_cred_helper(path: &Path, host: &str) -> anyhow::Result<()> {
    let mut doc: Value = match std::fs::read(path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => json!({}),
        Ok(b) => {
            serde_json::from_slice(&b).with_context(|| format!("{} is not JSON; fix or move it", path.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let Some(obj) = doc.as_object_mut() else {
        bail!("{} does not hold a JSON object; fix or move it", path.display());
    };
    let helpers = obj.entry("credHelpers").or_insert_with(|| json!({}));
    let Some(helpers) = helpers.as_object_mut() else {
        bail!("credHelpers in {} is not an object", path.display());
    };
    helpers.insert(host.to_owned(), json!("ward"));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("json.ward-tmp");
    {
        use std::io::Write as _;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(serde_json::to_string_pretty(&doc)?.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

/// `ward auth configure-docker`: registers `docker-credential-ward` for the
/// registry host in Docker's and the containers tools' config.
pub fn configure_docker(conn: &Connection, registry: Option<String>) -> anyhow::Result<()> {
    let host = registry.unwrap_or_else(|| registry_host(&conn.api));
    for path in [docker_config()?, containers_auth()?] {
        add_cred_helper(&path, &host)?;
        output::line(&format!("{}: credHelpers[\"{host}\"] = \"ward\"", path.display()));
    }
    output::line("docker, podman, skopeo and oras now ask `docker-credential-ward` (this binary) for credentials.");
    Ok(())
}

/// What the credential-helper protocol prints (on stdout) for a server it
/// has no credentials for; clients then go on without any.
pub const NO_CREDENTIALS: &str = "credentials not found in native keychain";

/// The hosts `configure-docker` registered this helper for (`credHelpers`
/// entries naming `ward` in Docker's and the containers tools' config), and
/// the registry of the API the CLI is configured for.
fn registered_hosts(conn: &Connection) -> Vec<String> {
    let mut hosts = vec![registry_host(&conn.api)];
    for path in [docker_config(), containers_auth()].into_iter().flatten() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if let Some(helpers) = doc.get("credHelpers").and_then(|h| h.as_object()) {
            hosts.extend(
                helpers
                    .iter()
                    .filter(|(_, v)| v.as_str() == Some("ward"))
                    .map(|(k, _)| k.clone()),
            );
        }
    }
    hosts
}

/// The Docker credential-helper protocol: `get` reads a server URL on stdin
/// and prints `{ServerURL, Username, Secret}` — only for a registry this
/// helper was registered for, so a Ward token never goes to another host
/// that asks; for any other it prints [`NO_CREDENTIALS`] and fails, as the
/// protocol says. `store`, `erase` and `list` have nothing to keep (tokens
/// come from `ward auth`).
pub async fn credential_helper(conn: &Connection, action: &str) -> anyhow::Result<()> {
    match action {
        "get" => {
            let mut server = String::new();
            std::io::stdin().take(8192).read_to_string(&mut server)?;
            let server = server.trim().to_owned();
            let host = registry_host(&server);
            if host.is_empty() || !registered_hosts(conn).iter().any(|h| h.eq_ignore_ascii_case(&host)) {
                println!("{NO_CREDENTIALS}");
                bail!(
                    "{NO_CREDENTIALS}: ward is not the credential helper of {host:?} (see `ward auth configure-docker`)"
                );
            }
            let token = conn.token().await?;
            output::json(&json!({"ServerURL": server, "Username": "_token", "Secret": token}))
        }
        "store" | "erase" => {
            let mut sink = String::new();
            std::io::stdin().read_to_string(&mut sink)?;
            Ok(())
        }
        "list" => output::json(&json!({})),
        other => bail!("unknown credential helper action \"{other}\" (use get, store, erase or list)"),
    }
}
