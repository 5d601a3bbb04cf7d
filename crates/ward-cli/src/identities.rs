//! `ward iam identities list|create|describe|update|delete`.

use std::path::PathBuf;

use anyhow::Context as _;
use ward_proto::Timestamp;
use ward_proto::iam::v2::claim_match::{Aud, Iss, Sub};
use ward_proto::iam::v2::identity::Relationship;
use ward_proto::iam::v2::{ClaimMatch, Identity, RelationshipType, StaticKeys};

use crate::resource::{self, Filters, InGroup, NameDescription, Resource};
use crate::{Client, Format};

impl Resource for Identity {
    const KIND: &'static str = "identity";
    const PATH: &'static str = "/iam/v2/identities";
    const ITEMS: &'static str = "identities";
    const HEADER: &'static [&'static str] = &["UID", "NAME", "TYPE", "ISSUER", "SUBJECT", "DESCRIPTION"];

    fn uid(&self) -> &str {
        &self.uid
    }
    /// Patterns show as `~pattern`.
    fn row(&self) -> Vec<String> {
        let pattern = |p: &String| format!("~{p}");
        let (kind, issuer, subject) = match &self.relationship {
            Some(Relationship::ClaimMatch(m)) => (
                "claim-match",
                match &m.iss {
                    Some(Iss::Issuer(s)) => s.clone(),
                    Some(Iss::IssuerPattern(p)) => pattern(p),
                    None => String::new(),
                },
                match &m.sub {
                    Some(Sub::Subject(s)) => s.clone(),
                    Some(Sub::SubjectPattern(p)) => pattern(p),
                    None => String::new(),
                },
            ),
            Some(Relationship::StaticKeys(k)) => ("static", k.issuer.clone(), k.subject.clone()),
            _ => ("", String::new(), String::new()),
        };
        vec![
            self.uid.clone(),
            self.name.clone(),
            kind.into(),
            issuer,
            subject,
            self.description.clone(),
        ]
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Kind {
    ClaimMatch,
    Static,
}

#[derive(Debug, clap::Subcommand)]
pub enum IdentitiesCommand {
    /// List identities (every page).
    List {
        #[command(flatten)]
        filters: Filters,
        /// Only identities with this kind of relationship.
        #[arg(long = "type")]
        kind: Option<Kind>,
    },
    /// Create an identity in a group: claim-match flags or static-key flags.
    Create(Box<CreateArgs>),
    /// Show one identity.
    Describe {
        /// Name or uid.
        identity: String,
    },
    /// Change an identity's name or description (only the flags given).
    Update {
        /// Name or uid.
        identity: String,
        #[command(flatten)]
        fields: NameDescription,
    },
    /// Delete an identity.
    Delete {
        /// Name or uid.
        identity: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[command(flatten)]
    new: InGroup,
    #[command(flatten)]
    claims: ClaimMatchArgs,
    #[command(flatten)]
    keys: StaticKeysArgs,
}

/// Tokens from an OIDC issuer, matched by their claims. Patterns are regular
/// expressions matched against the whole claim value.
#[derive(Debug, clap::Args)]
#[group(id = "claim_match", multiple = true)]
#[command(next_help_heading = "Claim match")]
struct ClaimMatchArgs {
    /// The token's issuer (iss), exactly.
    #[arg(long, conflicts_with = "issuer_pattern")]
    issuer: Option<String>,
    /// A regular expression the whole issuer must match.
    #[arg(long, value_name = "REGEX")]
    issuer_pattern: Option<String>,
    /// The token's subject (sub), exactly.
    #[arg(long, conflicts_with = "subject_pattern")]
    subject: Option<String>,
    /// A regular expression the whole subject must match.
    #[arg(long, value_name = "REGEX")]
    subject_pattern: Option<String>,
    /// An audience (aud) the token must carry, exactly.
    #[arg(long, conflicts_with = "audience_pattern")]
    audience: Option<String>,
    /// A regular expression an audience must match.
    #[arg(long, value_name = "REGEX")]
    audience_pattern: Option<String>,
    /// A claim that must have exactly this value (repeatable).
    #[arg(long = "claim", value_name = "NAME=VALUE", value_parser = key_value)]
    claims: Vec<(String, String)>,
    /// A claim whose whole value must match this pattern (repeatable).
    #[arg(long = "claim-pattern", value_name = "NAME=REGEX", value_parser = key_value)]
    claim_patterns: Vec<(String, String)>,
}

/// Tokens verified with a stored JWKS, without contacting the issuer.
#[derive(Debug, clap::Args)]
#[group(id = "static_keys", multiple = true, conflicts_with = "claim_match")]
#[command(next_help_heading = "Static keys")]
struct StaticKeysArgs {
    /// The issuer (iss) of accepted tokens.
    #[arg(long, value_name = "ISSUER", requires_all = ["static_subject", "static_keys_file"])]
    static_issuer: Option<String>,
    /// The subject (sub) of accepted tokens.
    #[arg(long, value_name = "SUBJECT", requires_all = ["static_issuer", "static_keys_file"])]
    static_subject: Option<String>,
    /// The issuer's public keys: a JWKS JSON document.
    #[arg(long, value_name = "FILE", requires_all = ["static_issuer", "static_subject"])]
    static_keys_file: Option<PathBuf>,
    /// When the identity stops being accepted (at most 365 days away).
    #[arg(long, value_name = "RFC3339", value_parser = rfc3339, requires = "static_keys_file")]
    expiration: Option<Timestamp>,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))
}

fn rfc3339(s: &str) -> Result<Timestamp, String> {
    serde_json::from_value(s.into()).map_err(|e| format!("not an RFC 3339 time: {e}"))
}

/// The relationship the flags describe: static keys when a keys file is given.
fn relationship(c: ClaimMatchArgs, k: StaticKeysArgs) -> anyhow::Result<Relationship> {
    if let Some(file) = k.static_keys_file {
        let issuer_keys = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        return Ok(Relationship::StaticKeys(StaticKeys {
            issuer: k.static_issuer.unwrap_or_default(),
            subject: k.static_subject.unwrap_or_default(),
            issuer_keys,
            expiration_time: k.expiration,
            audiences: Vec::new(),
        }));
    }
    Ok(Relationship::ClaimMatch(ClaimMatch {
        iss: c.issuer.map(Iss::Issuer).or(c.issuer_pattern.map(Iss::IssuerPattern)),
        sub: c
            .subject
            .map(Sub::Subject)
            .or(c.subject_pattern.map(Sub::SubjectPattern)),
        aud: c
            .audience
            .map(Aud::Audience)
            .or(c.audience_pattern.map(Aud::AudiencePattern)),
        claims: c.claims.into_iter().collect(),
        claim_patterns: c.claim_patterns.into_iter().collect(),
    }))
}

pub async fn run(client: &Client, format: Format, cmd: IdentitiesCommand) -> anyhow::Result<()> {
    match cmd {
        IdentitiesCommand::List { filters, kind } => {
            let mut q = filters.query(client).await?;
            let kind = kind.map(|k| match k {
                Kind::ClaimMatch => RelationshipType::ClaimMatch,
                Kind::Static => RelationshipType::Static,
            });
            resource::push(&mut q, "relationship_type", kind.map(|k| k.as_str_name().into()));
            resource::show(format, &resource::list::<Identity>(client, &q).await?)
        }
        IdentitiesCommand::Create(args) => {
            let CreateArgs { new, claims, keys } = *args;
            let parent = new.parent_uid(client).await?;
            let identity = Identity {
                name: new.name,
                description: new.description,
                relationship: Some(relationship(claims, keys)?),
                ..Default::default()
            };
            resource::create::<Identity>(client, format, Some(&parent), &identity).await
        }
        IdentitiesCommand::Describe { identity } => resource::describe::<Identity>(client, format, &identity).await,
        IdentitiesCommand::Update { identity, fields } => {
            resource::update::<Identity>(client, format, &identity, fields.body()).await
        }
        IdentitiesCommand::Delete { identity } => resource::delete::<Identity>(client, format, &identity).await,
    }
}
