//! `ward iam roles list|create|describe|update|delete`.

use serde_json::Value;
use ward_core::capability::Capability;
use ward_proto::iam::v2::Role;

use crate::resource::{self, Filters, InGroup, NameDescription, Resource};
use crate::{Client, Format};

impl Resource for Role {
    const KIND: &'static str = "role";
    const PATH: &'static str = "/iam/v2/roles";
    const ITEMS: &'static str = "roles";
    const HEADER: &'static [&'static str] = &["UID", "NAME", "DESCRIPTION", "CAPABILITIES"];

    fn uid(&self) -> &str {
        &self.uid
    }
    /// Capabilities by their dotted names.
    fn row(&self) -> Vec<String> {
        let caps: Vec<String> = self
            .capabilities
            .iter()
            .map(|n| Capability::from_number(*n).map_or_else(|| n.to_string(), |c| c.dotted_name().into()))
            .collect();
        vec![
            self.uid.clone(),
            self.name.clone(),
            self.description.clone(),
            caps.join(", "),
        ]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum RolesCommand {
    /// List roles (every page) with their capabilities.
    List {
        #[command(flatten)]
        filters: Filters,
        /// Only the built-in roles.
        #[arg(long)]
        builtin: bool,
    },
    /// Create a custom role in a group.
    Create {
        #[command(flatten)]
        new: InGroup,
        #[command(flatten)]
        caps: Capabilities,
    },
    /// Show one role.
    Describe {
        /// Name or uid.
        role: String,
    },
    /// Change a role's name, description or capabilities (only the flags given).
    Update {
        /// Name or uid.
        role: String,
        #[command(flatten)]
        fields: NameDescription,
        #[command(flatten)]
        caps: Capabilities,
    },
    /// Delete a custom role.
    Delete {
        /// Name or uid.
        role: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct Capabilities {
    /// A capability by dotted name (groups.list) or enum name
    /// (CAP_IAM_GROUPS_LIST); repeatable or comma-separated. On update, the
    /// role's whole set.
    #[arg(long = "capability", value_name = "CAP", value_delimiter = ',', value_parser = capability)]
    capabilities: Vec<Capability>,
}

impl Capabilities {
    /// Enum names, the proto JSON form.
    fn json(&self) -> Value {
        self.capabilities.iter().map(|c| c.enum_name()).collect()
    }
}

fn capability(s: &str) -> Result<Capability, String> {
    Capability::from_name(s).ok_or_else(|| {
        let known: Vec<&str> = Capability::ALL.iter().map(|c| c.dotted_name()).collect();
        format!("unknown capability; known: {}", known.join(", "))
    })
}

pub async fn run(client: &Client, format: Format, cmd: RolesCommand) -> anyhow::Result<()> {
    match cmd {
        RolesCommand::List { filters, builtin } => {
            let mut q = filters.query(client).await?;
            resource::push(&mut q, "uidp.in_root", builtin.then(|| "true".into()));
            resource::show(format, &resource::list::<Role>(client, &q).await?)
        }
        RolesCommand::Create { new, caps } => {
            let parent = new.parent_uid(client).await?;
            let body = serde_json::json!({
                "name": new.name,
                "description": new.description,
                "capabilities": caps.json(),
            });
            resource::create::<Role>(client, format, Some(&parent), &body).await
        }
        RolesCommand::Describe { role } => resource::describe::<Role>(client, format, &role).await,
        RolesCommand::Update { role, fields, caps } => {
            let mut body = fields.body();
            if !caps.capabilities.is_empty() {
                body.insert("capabilities".into(), caps.json());
            }
            resource::update::<Role>(client, format, &role, body).await
        }
        RolesCommand::Delete { role } => resource::delete::<Role>(client, format, &role).await,
    }
}
