//! `ward iam role-bindings list|create|describe|update|delete`.

use ward_proto::iam::v2::{Group, Identity, Role, RoleBinding};

use crate::resource::{self, Paging, Resource, resolve_flag, resolve_opt};
use crate::{Client, Format};

impl Resource for RoleBinding {
    const KIND: &'static str = "role binding";
    const PATH: &'static str = "/iam/v2/roleBindings";
    const ITEMS: &'static str = "roleBindings";
    const NAMED: bool = false;
    const HEADER: &'static [&'static str] = &["UID", "IDENTITY", "ROLE", "GROUP"];

    fn uid(&self) -> &str {
        &self.uid
    }
    /// The hydrated names.
    fn row(&self) -> Vec<String> {
        vec![
            self.uid.clone(),
            self.identity.as_ref().map(|i| i.name.clone()).unwrap_or_default(),
            self.role.as_ref().map(|r| r.name.clone()).unwrap_or_default(),
            self.group.as_ref().map(|g| g.name.clone()).unwrap_or_default(),
        ]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum RoleBindingsCommand {
    /// List role bindings (every page).
    List {
        /// Only bindings at this group (name or uid).
        #[arg(long)]
        group: Option<String>,
        /// Only bindings of this identity (name or uid).
        #[arg(long)]
        identity: Option<String>,
        /// Only bindings of this role (name or uid).
        #[arg(long)]
        role: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Give an identity a role at a group (and everything below it).
    Create {
        /// Name or uid.
        #[arg(long)]
        group: String,
        /// Name or uid.
        #[arg(long)]
        identity: String,
        /// Name or uid.
        #[arg(long)]
        role: String,
    },
    /// Show one role binding.
    Describe { uid: String },
    /// Change the role a binding grants.
    Update {
        uid: String,
        /// The new role (name or uid).
        #[arg(long)]
        role: String,
    },
    /// Delete a role binding.
    Delete { uid: String },
}

pub async fn run(client: &Client, format: Format, cmd: RoleBindingsCommand) -> anyhow::Result<()> {
    match cmd {
        RoleBindingsCommand::List {
            group,
            identity,
            role,
            paging,
        } => {
            let mut q = paging.query();
            resource::push(&mut q, "group", resolve_opt::<Group>(client, "--group", group).await?);
            resource::push(
                &mut q,
                "identity",
                resolve_opt::<Identity>(client, "--identity", identity).await?,
            );
            resource::push(&mut q, "role", resolve_opt::<Role>(client, "--role", role).await?);
            resource::show(format, &resource::list::<RoleBinding>(client, &q).await?)
        }
        RoleBindingsCommand::Create { group, identity, role } => {
            let group = resolve_flag::<Group>(client, "--group", &group).await?;
            let body = serde_json::json!({
                "identityUid": resolve_flag::<Identity>(client, "--identity", &identity).await?,
                "roleUid": resolve_flag::<Role>(client, "--role", &role).await?,
            });
            resource::create::<RoleBinding>(client, format, Some(&group), &body).await
        }
        RoleBindingsCommand::Describe { uid } => resource::describe::<RoleBinding>(client, format, &uid).await,
        RoleBindingsCommand::Update { uid, role } => {
            let mut body = serde_json::Map::new();
            let role = resolve_flag::<Role>(client, "--role", &role).await?;
            body.insert("roleUid".into(), role.into());
            resource::update::<RoleBinding>(client, format, &uid, body).await
        }
        RoleBindingsCommand::Delete { uid } => resource::delete::<RoleBinding>(client, format, &uid).await,
    }
}
