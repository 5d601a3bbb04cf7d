//! `ward iam invites create|list|describe|delete|accept`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::{Value, json};
use ward_proto::auth::Session;
use ward_proto::iam::v2::{Group, GroupInvite, Role};

use super::{read_secret, role_label, yes_no};
use crate::registry::parse_duration;
use crate::resource::{self, Paging, Resource, resolve_flag, resolve_opt};
use crate::{Client, Format, output};

impl Resource for GroupInvite {
    const KIND: &'static str = "invite";
    const PATH: &'static str = "/iam/v2/groupInvites";
    const ITEMS: &'static str = "groupInvites";
    const NAMED: bool = false;
    const HEADER: &'static [&'static str] = &["UID", "ROLE", "EMAIL", "EXPIRES", "SINGLE USE", "KEY ID"];

    fn uid(&self) -> &str {
        &self.uid
    }
    /// The hydrated role's name (a built-in role's name once it is gone, else its uid).
    fn row(&self) -> Vec<String> {
        vec![
            self.uid.clone(),
            self.role
                .as_ref()
                .map_or_else(|| role_label(&self.role_uid), |r| r.name.clone()),
            self.email.clone(),
            output::time(self.expiration_time.as_ref()),
            yes_no(self.single_use),
            self.key_id.clone(),
        ]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum InvitesCommand {
    /// Create an invite: a code whoever accepts joins the group with the role.
    /// The code is shown once.
    Create(CreateArgs),
    /// List invites (every page); their codes are never shown again.
    List {
        /// Only invites to this group (name or uid).
        #[arg(long)]
        group: Option<String>,
        /// Only the invite whose code carries this key id.
        #[arg(long)]
        key_id: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Show one invite.
    Describe { uid: String },
    /// Delete an invite: its code stops working.
    Delete { uid: String },
    /// Join an invite's group as the logged-in identity.
    Accept {
        /// The invite code, or `-` to read it from stdin.
        code: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The group to join (name or uid).
    #[arg(long)]
    group: String,
    /// The role the invite grants in the group (name or uid).
    #[arg(long)]
    role: String,
    /// Only the person with this email may accept it [default: anyone holding the code].
    #[arg(long)]
    email: Option<String>,
    /// How long the code is valid, e.g. 168h, 7d, 90m.
    #[arg(long, default_value = "168h", value_parser = parse_duration)]
    ttl: Duration,
    /// Delete the invite once it has been accepted.
    #[arg(long)]
    single_use: bool,
}

pub async fn run(client: &Client, format: Format, cmd: InvitesCommand) -> anyhow::Result<()> {
    match cmd {
        InvitesCommand::Create(args) => create(client, format, args).await,
        InvitesCommand::List { group, key_id, paging } => {
            let mut q = paging.query();
            let group = resolve_opt::<Group>(client, "--group", group).await?;
            resource::push(&mut q, "uidp.children_of", group);
            resource::push(&mut q, "key_id", key_id);
            resource::show(format, &resource::list::<GroupInvite>(client, &q).await?)
        }
        InvitesCommand::Describe { uid } => resource::describe::<GroupInvite>(client, format, &uid).await,
        InvitesCommand::Delete { uid } => resource::delete::<GroupInvite>(client, format, &uid).await,
        InvitesCommand::Accept { code } => accept(client, format, code).await,
    }
}

/// A TTL as proto JSON, e.g. `"604800s"`.
fn ttl_json(ttl: Duration) -> anyhow::Result<String> {
    if ttl.as_secs() == 0 {
        bail!("--ttl must be at least 1s");
    }
    Ok(format!("{}s", ttl.as_secs()))
}

/// Creates the invite and prints it; in a table, with its code on a line of
/// its own, since it is never shown again.
async fn create(client: &Client, format: Format, args: CreateArgs) -> anyhow::Result<()> {
    let ttl = ttl_json(args.ttl)?;
    let group = resolve_flag::<Group>(client, "--group", &args.group).await?;
    let body = json!({
        "roleUid": resolve_flag::<Role>(client, "--role", &args.role).await?,
        "email": args.email.unwrap_or_default(),
        "ttl": ttl,
        "singleUse": args.single_use,
    });
    let path = format!("{}/{group}", GroupInvite::PATH);
    let invite: GroupInvite = client.call(Method::POST, &path, &[], Some(&body)).await?;
    if format == Format::Table {
        output::line(&format!("Invite code (shown once): {}", invite.code));
    }
    resource::show_one(format, &invite)
}

/// Joins the group of the invite `code` as the caller; the reply is the
/// session, `{"identity": <uid>, "group": <group uid>}`.
pub async fn accept_invite(client: &Client, code: &str) -> anyhow::Result<Value> {
    let body = json!({ "code": code });
    client.call(Method::POST, "/auth/v1/register", &[], Some(&body)).await
}

async fn accept(client: &Client, format: Format, code: String) -> anyhow::Result<()> {
    let code = if code == "-" {
        read_secret("invite code", Path::new("-"))?
    } else {
        code
    };
    let reply = accept_invite(client, code.trim()).await?;
    match format {
        Format::Json => output::json(&reply),
        Format::Table => {
            let session: Session = serde_json::from_value(reply).context("decoding the registration reply")?;
            output::line(&format!("Joined group {} as {}", session.group, session.identity));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_is_proto_json_seconds() {
        assert_eq!(ttl_json(parse_duration("168h").unwrap()).unwrap(), "604800s");
        assert_eq!(ttl_json(parse_duration("90m").unwrap()).unwrap(), "5400s");
        assert!(ttl_json(Duration::ZERO).is_err());
    }
}
