//! `ward iam external-group-mappings list|create|describe|delete`.

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::{Value, json};
use ward_proto::iam::v2::{ExternalGroupRoleMapping, IdentityProvider, Role};

use super::role_label;
use crate::resource::{self, Paging, Resource, resolve_flag, resolve_opt};
use crate::{Client, Format, output};

impl Resource for ExternalGroupRoleMapping {
    const KIND: &'static str = "external group mapping";
    const PATH: &'static str = "/iam/v2/externalGroupRoleMappings";
    const ITEMS: &'static str = "externalGroupRoleMappings";
    const NAMED: bool = false;
    const HEADER: &'static [&'static str] = &["UID", "IDP", "EXTERNAL GROUP", "ROLE", "SCOPE"];

    fn uid(&self) -> &str {
        &self.uid
    }
    /// Built-in roles by name.
    fn row(&self) -> Vec<String> {
        vec![
            self.uid.clone(),
            self.identity_provider_uid.clone(),
            self.external_group_id.clone(),
            role_label(&self.role_uid),
            self.scope.clone(),
        ]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum ExternalGroupMappingsCommand {
    /// List mappings (every page).
    List {
        /// Only the mappings of this identity provider (name or uid).
        #[arg(long)]
        idp: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Give the members of a group at the identity provider a role at its
    /// organization (computed at each login, never stored as a role binding).
    Create {
        /// The identity provider (name or uid).
        #[arg(long)]
        idp: String,
        /// The group's exact, case-sensitive value in the provider's groups claim.
        #[arg(long, value_name = "EXTERNAL_GROUP")]
        group: String,
        /// The role its members get (name or uid).
        #[arg(long)]
        role: String,
    },
    /// Show one mapping.
    Describe { uid: String },
    /// Delete mappings; several at once must belong to one identity provider.
    Delete {
        #[arg(required = true, value_name = "UID")]
        uids: Vec<String>,
    },
}

pub async fn run(client: &Client, format: Format, cmd: ExternalGroupMappingsCommand) -> anyhow::Result<()> {
    match cmd {
        ExternalGroupMappingsCommand::List { idp, paging } => {
            let mut q = paging.query();
            let idp = resolve_opt::<IdentityProvider>(client, "--idp", idp).await?;
            resource::push(&mut q, "identity_provider_uid", idp);
            resource::show(format, &resource::list::<ExternalGroupRoleMapping>(client, &q).await?)
        }
        ExternalGroupMappingsCommand::Create { idp, group, role } => {
            let idp = resolve_flag::<IdentityProvider>(client, "--idp", &idp).await?;
            let body = json!({
                "externalGroupId": group,
                "roleUid": resolve_flag::<Role>(client, "--role", &role).await?,
            });
            resource::create::<ExternalGroupRoleMapping>(client, format, Some(&idp), &body).await
        }
        ExternalGroupMappingsCommand::Describe { uid } => {
            resource::describe::<ExternalGroupRoleMapping>(client, format, &uid).await
        }
        ExternalGroupMappingsCommand::Delete { uids } => {
            if let [uid] = uids.as_slice() {
                return resource::delete::<ExternalGroupRoleMapping>(client, format, uid).await;
            }
            batch_delete(client, format, &uids).await
        }
    }
}

/// Deletes `uids` in one request under the identity provider they share.
async fn batch_delete(client: &Client, format: Format, uids: &[String]) -> anyhow::Result<()> {
    let parent = shared_parent(uids)?;
    let path = format!("{}:batchDelete", ExternalGroupRoleMapping::PATH);
    let body = json!({ "parent": parent, "names": uids });
    let reply: Value = client.call(Method::POST, &path, &[], Some(&body)).await?;
    match format {
        Format::Json => output::json(&reply),
        Format::Table => {
            for name in reply["names"].as_array().into_iter().flatten() {
                output::line(&format!("deleted {}", name.as_str().unwrap_or_default()));
            }
            Ok(())
        }
    }
}

/// The identity provider of a mapping: its uid less the last segment.
fn parent_of(uid: &str) -> anyhow::Result<&str> {
    uid.rsplit_once('/')
        .map(|(parent, _)| parent)
        .with_context(|| format!("{uid} is not an external group mapping uid"))
}

/// The identity provider every one of `uids` belongs to.
fn shared_parent(uids: &[String]) -> anyhow::Result<&str> {
    let first = uids.first().context("no mapping uid given")?;
    let parent = parent_of(first)?;
    for uid in uids {
        let other = parent_of(uid)?;
        if other != parent {
            bail!(
                "{first} and {uid} belong to different identity providers ({parent} and {other}); \
                 delete each provider's mappings with its own command"
            );
        }
    }
    Ok(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_deletes_share_one_parent() {
        let uids = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(shared_parent(&uids(&["org/idp/a", "org/idp/b"])).unwrap(), "org/idp");
        let e = shared_parent(&uids(&["org/idp/a", "org/other/b"])).unwrap_err();
        assert!(e.to_string().contains("different identity providers"), "{e}");
        let e = shared_parent(&uids(&["org/idp/a", "nonsense"])).unwrap_err();
        assert!(e.to_string().contains("not an external group mapping uid"), "{e}");
    }
}
