//! The `ward` command-line client.
//!
//! Talks REST/JSON to a Ward server and decodes responses into the same proto
//! types the server uses. Output is a table for people or JSON (`-o json`) for
//! scripts; errors print the server's message and exit non-zero. Text from the
//! server is printed through [`sanitize`], so it cannot steer the terminal.
//!
//! The token is, in order: `--token-file`/`WARD_TOKEN_FILE`, `WARD_TOKEN`, or
//! the one `ward auth login` cached for the API URL (see [`auth`]).

pub mod advisories;
pub mod auth;
pub mod cache;
pub mod client;
pub mod events;
pub mod groups;
pub mod identities;
pub mod login;
mod output;
pub mod people;
pub mod registry;
pub mod resource;
pub mod role_bindings;
pub mod roles;
pub mod vulns;

/// A progress bar on stderr when it is a terminal (hidden otherwise):
/// `{bar} {pos}/{len} <what>  {elapsed}  {msg}`.
pub fn progress_bar(len: u64, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {what}  {{elapsed}}  {{msg}}"))
    {
        bar.set_style(style);
    }
    bar
}

pub use client::Client;
pub use output::{sanitize, sanitize_error};

/// Connection options shared by every client command.
#[derive(Clone, Debug, clap::Args)]
pub struct Connection {
    /// The Ward API URL.
    #[arg(long, global = true, env = "WARD_API", default_value = "http://127.0.0.1:8080")]
    pub api: String,

    /// Read the API token from this file instead of WARD_TOKEN.
    #[arg(long, global = true, env = "WARD_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,

    /// The issuer whose STS exchanges identity tokens [default: the one the
    /// cached token came from, else the API's /.well-known/openid-configuration].
    #[arg(long, global = true, env = "WARD_ISSUER")]
    pub issuer: Option<String>,

    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

impl Connection {
    /// A client for the configured API with the configured token: the token
    /// file, else WARD_TOKEN, else the token `ward auth login` cached for the
    /// API URL (renewed when it is about to expire).
    pub async fn client(&self) -> anyhow::Result<Client> {
        Client::new(&self.api, self.token().await?)
    }

    /// The API token this connection uses (see [`Connection::client`]).
    pub async fn token(&self) -> anyhow::Result<String> {
        Ok(match &self.token_file {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("reading token file {}: {e}", path.display()))?
                .trim()
                .to_owned(),
            None => match std::env::var("WARD_TOKEN") {
                Ok(t) if !t.is_empty() => t,
                _ => auth::cached_token(self, &auth::default_audience(self))
                    .await?
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "no token: run `ward auth login --identity UID --identity-token FILE`, \
                             set WARD_TOKEN or pass --token-file (the server writes <data-dir>/admin.token)"
                        )
                    })?,
            },
        })
    }
}

impl Connection {
    /// The connection the environment describes (`WARD_API`, `WARD_TOKEN_FILE`,
    /// `WARD_ISSUER`), for entry points without flags (the credential helper).
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self {
            api: var("WARD_API").unwrap_or_else(|| "http://127.0.0.1:8080".into()),
            token_file: var("WARD_TOKEN_FILE").map(Into::into),
            issuer: var("WARD_ISSUER"),
            output: Format::Json,
        }
    }
}

/// Runs a `ward registry` command. Its error is [`sanitize_error`]ed.
pub async fn run_registry(conn: &Connection, cmd: registry::RegistryCommand) -> anyhow::Result<()> {
    registry::run(conn, cmd).await.map_err(sanitize_error)
}

/// Runs a `ward events` command. Its error is [`sanitize_error`]ed.
pub async fn run_events(conn: &Connection, cmd: events::EventsCommand) -> anyhow::Result<()> {
    let run = async {
        let client = conn.client().await?;
        events::run(&client, conn.output, cmd).await
    };
    run.await.map_err(sanitize_error)
}

/// Runs a `ward advisories` command. Its error is [`sanitize_error`]ed.
pub async fn run_advisories(conn: &Connection, cmd: advisories::AdvisoriesCommand) -> anyhow::Result<()> {
    advisories::run(conn, cmd).await.map_err(sanitize_error)
}

/// `ward iam …`
#[derive(Debug, clap::Subcommand)]
pub enum IamCommand {
    /// Organizations and the groups beneath them.
    #[command(subcommand)]
    Groups(groups::GroupsCommand),
    /// Workloads that act in the platform, and how their tokens are recognized.
    #[command(subcommand)]
    Identities(identities::IdentitiesCommand),
    /// Named sets of capabilities: the built-in ones and custom ones.
    #[command(subcommand)]
    Roles(roles::RolesCommand),
    /// Who holds which role where: an identity, a role and a group.
    #[command(subcommand)]
    RoleBindings(role_bindings::RoleBindingsCommand),
    /// An organization's own OIDC providers, through which its people log in.
    #[command(subcommand)]
    IdentityProviders(people::IdentityProvidersCommand),
    /// Roles at the organization for the members of an identity provider's groups.
    #[command(subcommand)]
    ExternalGroupMappings(people::ExternalGroupMappingsCommand),
    /// Invite codes that add whoever accepts them to a group with a role.
    #[command(subcommand)]
    Invites(people::InvitesCommand),
}

/// Runs an `ward iam` command. Its error is [`sanitize_error`]ed.
pub async fn run_iam(conn: &Connection, cmd: IamCommand) -> anyhow::Result<()> {
    iam(conn, cmd).await.map_err(sanitize_error)
}

async fn iam(conn: &Connection, cmd: IamCommand) -> anyhow::Result<()> {
    let client = conn.client().await?;
    match cmd {
        IamCommand::Groups(c) => groups::run(&client, conn.output, c).await,
        IamCommand::Identities(c) => identities::run(&client, conn.output, c).await,
        IamCommand::Roles(c) => roles::run(&client, conn.output, c).await,
        IamCommand::RoleBindings(c) => role_bindings::run(&client, conn.output, c).await,
        IamCommand::IdentityProviders(c) => people::run_identity_providers(&client, conn.output, c).await,
        IamCommand::ExternalGroupMappings(c) => people::run_external_group_mappings(&client, conn.output, c).await,
        IamCommand::Invites(c) => people::run_invites(&client, conn.output, c).await,
    }
}
