//! `ward iam identity-providers list|create|describe|update|delete`.

use std::path::PathBuf;

use anyhow::bail;
use reqwest::Method;
use serde_json::{Map, Value, json};
use ward_proto::iam::v2::identity_provider::{Configuration, Oidc};
use ward_proto::iam::v2::{IdentityProvider, Role};

use super::{read_secret, role_label, yes_no};
use crate::resource::{self, Filters, InGroup, NameDescription, Resource, resolve_opt};
use crate::{Client, Format};

impl Resource for IdentityProvider {
    const KIND: &'static str = "identity provider";
    const PATH: &'static str = "/iam/v2/identityProviders";
    const ITEMS: &'static str = "identityProviders";
    const HEADER: &'static [&'static str] = &["UID", "NAME", "ISSUER", "CLIENT ID", "DEFAULT ROLE", "PKCE"];

    fn uid(&self) -> &str {
        &self.uid
    }
    /// Built-in default roles by name.
    fn row(&self) -> Vec<String> {
        let none = Oidc::default();
        let oidc = match &self.configuration {
            Some(Configuration::Oidc(o)) => o,
            None => &none,
        };
        vec![
            self.uid.clone(),
            self.name.clone(),
            oidc.issuer.clone(),
            oidc.client_id.clone(),
            role_label(&self.default_role),
            yes_no(oidc.pkce_enabled),
        ]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum IdentityProvidersCommand {
    /// List identity providers (every page).
    List {
        #[command(flatten)]
        filters: Filters,
    },
    /// Register an organization's OIDC provider, through which its people log in.
    Create(Box<CreateArgs>),
    /// Show one identity provider (its client secret is never shown).
    Describe {
        /// Name or uid.
        idp: String,
    },
    /// Change an identity provider (only the flags given).
    Update(Box<UpdateArgs>),
    /// Delete an identity provider.
    Delete {
        /// Name or uid.
        idp: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[command(flatten)]
    new: InGroup,
    /// The role bound at the organization on a person's first login (name or uid).
    #[arg(long, value_name = "ROLE")]
    default_role: Option<String>,
    #[command(flatten)]
    oidc: OidcArgs,
}

/// The client Ward is registered as at the provider.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "OIDC")]
struct OidcArgs {
    /// The provider's issuer URL.
    #[arg(long)]
    issuer: String,
    /// The client id Ward is registered under at the provider.
    #[arg(long)]
    client_id: String,
    /// File holding the client secret, or `-` to read it from stdin [default: none, a public client].
    #[arg(long, value_name = "FILE")]
    client_secret_file: Option<PathBuf>,
    /// A scope to request besides `openid` (repeatable or comma-separated).
    #[arg(long = "scope", value_name = "SCOPE", value_delimiter = ',')]
    scopes: Vec<String>,
    /// The ID token claim listing the person's groups at the provider.
    #[arg(long, value_name = "CLAIM")]
    groups_claim: Option<String>,
    /// Use PKCE in the authorization code flow.
    #[arg(long)]
    pkce: bool,
}

impl OidcArgs {
    /// The `oidc` object of a create, the secret read from its file.
    fn json(self) -> anyhow::Result<Value> {
        let secret = self
            .client_secret_file
            .map(|f| read_secret("client secret", &f))
            .transpose()?;
        Ok(json!({
            "issuer": self.issuer,
            "clientId": self.client_id,
            "clientSecret": secret.unwrap_or_default(),
            "additionalScopes": scope_list(self.scopes),
            "groupsClaim": self.groups_claim.unwrap_or_default(),
            "pkceEnabled": self.pkce,
        }))
    }
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// Name or uid.
    idp: String,
    #[command(flatten)]
    fields: NameDescription,
    /// The new default role (name or uid).
    #[arg(long, value_name = "ROLE")]
    default_role: Option<String>,
    #[command(flatten)]
    oidc: OidcUpdate,
}

/// The OIDC client fields an update changes.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "OIDC")]
struct OidcUpdate {
    /// The new issuer URL.
    #[arg(long)]
    issuer: Option<String>,
    /// The new client id.
    #[arg(long)]
    client_id: Option<String>,
    /// File holding the new client secret, or `-` to read it from stdin.
    #[arg(long, value_name = "FILE", conflicts_with = "clear_client_secret")]
    client_secret_file: Option<PathBuf>,
    /// Remove the stored client secret (a public client).
    #[arg(long)]
    clear_client_secret: bool,
    /// The whole list of additional scopes (repeatable or comma-separated;
    /// `--scope ''` clears it).
    #[arg(long = "scope", value_name = "SCOPE", value_delimiter = ',')]
    scopes: Option<Vec<String>>,
    /// The new groups claim (`''` clears it).
    #[arg(long, value_name = "CLAIM")]
    groups_claim: Option<String>,
    /// Use PKCE (`--pkce`, `--pkce=true`) or stop (`--pkce=false`).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pkce: Option<bool>,
}

impl OidcUpdate {
    /// Adds an `oidc` object to `body`, and `oidc.<field>` to `mask`, for each
    /// flag given.
    fn patch(self, body: &mut Map<String, Value>, mask: &mut Vec<String>) -> anyhow::Result<()> {
        let secret = match self.client_secret_file {
            Some(f) => Some(read_secret("client secret", &f)?),
            None => self.clear_client_secret.then(String::new),
        };
        let fields = [
            ("issuer", "issuer", self.issuer.map(Value::from)),
            ("client_id", "clientId", self.client_id.map(Value::from)),
            ("client_secret", "clientSecret", secret.map(Value::from)),
            ("additional_scopes", "additionalScopes", self.scopes.map(scope_list)),
            ("groups_claim", "groupsClaim", self.groups_claim.map(Value::from)),
            ("pkce_enabled", "pkceEnabled", self.pkce.map(Value::from)),
        ];
        let mut oidc = Map::new();
        for (path, key, value) in fields {
            if let Some(v) = value {
                oidc.insert(key.into(), v);
                mask.push(format!("oidc.{path}"));
            }
        }
        if !oidc.is_empty() {
            body.insert("oidc".into(), oidc.into());
        }
        Ok(())
    }
}

/// Scopes as a JSON array, without empty ones.
fn scope_list(scopes: Vec<String>) -> Value {
    scopes.into_iter().filter(|s| !s.is_empty()).collect()
}

pub async fn run(client: &Client, format: Format, cmd: IdentityProvidersCommand) -> anyhow::Result<()> {
    match cmd {
        IdentityProvidersCommand::List { filters } => {
            let q = filters.query(client).await?;
            resource::show(format, &resource::list::<IdentityProvider>(client, &q).await?)
        }
        IdentityProvidersCommand::Create(args) => create(client, format, *args).await,
        IdentityProvidersCommand::Describe { idp } => {
            resource::describe::<IdentityProvider>(client, format, &idp).await
        }
        IdentityProvidersCommand::Update(args) => update(client, format, *args).await,
        IdentityProvidersCommand::Delete { idp } => resource::delete::<IdentityProvider>(client, format, &idp).await,
    }
}

async fn create(client: &Client, format: Format, args: CreateArgs) -> anyhow::Result<()> {
    let CreateArgs {
        new,
        default_role,
        oidc,
    } = args;
    let oidc = oidc.json()?;
    let parent = new.parent_uid(client).await?;
    let default_role = resolve_opt::<Role>(client, "--default-role", default_role).await?;
    let body = json!({
        "name": new.name,
        "description": new.description,
        "defaultRole": default_role.unwrap_or_default(),
        "oidc": oidc,
    });
    resource::create::<IdentityProvider>(client, format, Some(&parent), &body).await
}

/// PATCHes the fields whose flags are given, naming them in `update_mask`
/// (nested OIDC fields as `oidc.<field>`), and prints the result.
async fn update(client: &Client, format: Format, args: UpdateArgs) -> anyhow::Result<()> {
    let UpdateArgs {
        idp,
        fields,
        default_role,
        oidc,
    } = args;
    let mut body = fields.body();
    let mut mask: Vec<String> = body.keys().cloned().collect();
    if let Some(role) = resolve_opt::<Role>(client, "--default-role", default_role).await? {
        body.insert("defaultRole".into(), role.into());
        mask.push("default_role".into());
    }
    oidc.patch(&mut body, &mut mask)?;
    if mask.is_empty() {
        bail!("nothing to update: pass a flag for each field to change (see --help)");
    }
    let uid = resource::resolve::<IdentityProvider>(client, &idp).await?;
    let path = format!("{}/{uid}", IdentityProvider::PATH);
    let r: IdentityProvider = client
        .call(Method::PATCH, &path, &[("update_mask", mask.join(","))], Some(&body))
        .await?;
    resource::show_one(format, &r)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: IdentityProvidersCommand,
    }

    fn update_args(args: &[&str]) -> UpdateArgs {
        let argv: Vec<&str> = ["ward", "update", "corp"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        match Cli::try_parse_from(argv).unwrap().cmd {
            IdentityProvidersCommand::Update(u) => *u,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn update_masks_only_the_flags_given() {
        let u = update_args(&["--issuer", "https://idp", "--scope", "email,profile", "--pkce=false"]);
        let (mut body, mut mask) = (Map::new(), Vec::new());
        u.oidc.patch(&mut body, &mut mask).unwrap();
        assert_eq!(mask, ["oidc.issuer", "oidc.additional_scopes", "oidc.pkce_enabled"]);
        assert_eq!(
            Value::from(body),
            json!({"oidc": {"issuer": "https://idp", "additionalScopes": ["email", "profile"], "pkceEnabled": false}})
        );
    }

    #[test]
    fn clearing_the_secret_sends_it_empty() {
        let u = update_args(&["--clear-client-secret", "--pkce"]);
        let (mut body, mut mask) = (Map::new(), Vec::new());
        u.oidc.patch(&mut body, &mut mask).unwrap();
        assert_eq!(mask, ["oidc.client_secret", "oidc.pkce_enabled"]);
        assert_eq!(
            Value::from(body),
            json!({"oidc": {"clientSecret": "", "pkceEnabled": true}})
        );
    }

    #[test]
    fn no_flags_no_oidc() {
        let u = update_args(&[]);
        let (mut body, mut mask) = (Map::new(), Vec::new());
        u.oidc.patch(&mut body, &mut mask).unwrap();
        assert!(mask.is_empty() && body.is_empty());
    }

    #[test]
    fn secret_file_and_clear_conflict() {
        let argv = [
            "ward",
            "update",
            "corp",
            "--client-secret-file",
            "-",
            "--clear-client-secret",
        ];
        assert!(Cli::try_parse_from(argv).is_err());
    }
}
