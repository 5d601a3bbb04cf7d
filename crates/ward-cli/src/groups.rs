//! `ward iam groups list|create|describe|update|delete`.

use ward_proto::iam::v2::Group;

use crate::resource::{self, Filters, NameDescription, Resource};
use crate::{Client, Format, output};

impl Resource for Group {
    const KIND: &'static str = "group";
    const PATH: &'static str = "/iam/v2/groups";
    const ITEMS: &'static str = "groups";
    const HEADER: &'static [&'static str] = &["UID", "NAME", "DESCRIPTION", "CREATED"];

    fn uid(&self) -> &str {
        &self.uid
    }
    fn row(&self) -> Vec<String> {
        vec![
            self.uid.clone(),
            self.name.clone(),
            self.description.clone(),
            output::time(self.create_time.as_ref()),
        ]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum GroupsCommand {
    /// List groups (every page), as a table, a tree or JSON.
    List {
        #[command(flatten)]
        filters: Filters,
        /// Show the hierarchy as a tree.
        #[arg(long)]
        tree: bool,
    },
    /// Create an organization, or a group under --parent (name or uid).
    Create {
        name: String,
        #[arg(long)]
        parent: Option<String>,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Show one group.
    Describe {
        /// Name or uid.
        group: String,
    },
    /// Change a group's name or description (only the flags given).
    Update {
        /// Name or uid.
        group: String,
        #[command(flatten)]
        fields: NameDescription,
    },
    /// Delete a group (it must have no children).
    Delete {
        /// Name or uid.
        group: String,
    },
}

/// Renders groups as a tree by UIDP: each group under its nearest listed
/// ancestor; names and uids [`output::sanitize`]d.
fn tree(groups: &[Group]) -> String {
    let mut sorted: Vec<&Group> = groups.iter().collect();
    sorted.sort_by(|a, b| a.uid.cmp(&b.uid));
    let mut out = String::new();
    let mut stack: Vec<&str> = Vec::new();
    for g in sorted {
        while let Some(top) = stack.last() {
            if g.uid.starts_with(&format!("{top}/")) {
                break;
            }
            stack.pop();
        }
        let indent = "  ".repeat(stack.len());
        let marker = if stack.is_empty() { "" } else { "└ " };
        let (name, uid) = (output::sanitize(&g.name), output::sanitize(&g.uid));
        out.push_str(&format!("{indent}{marker}{name} ({uid})\n"));
        stack.push(&g.uid);
    }
    out
}

pub async fn run(client: &Client, format: Format, cmd: GroupsCommand) -> anyhow::Result<()> {
    match cmd {
        GroupsCommand::List { filters, tree: as_tree } => {
            let all: Vec<Group> = resource::list(client, &filters.query(client).await?).await?;
            if as_tree && format == Format::Table {
                print!("{}", tree(&all));
                Ok(())
            } else {
                resource::show(format, &all)
            }
        }
        GroupsCommand::Create {
            name,
            parent,
            description,
        } => {
            let parent = resource::resolve_opt::<Group>(client, "--parent", parent).await?;
            let body = serde_json::json!({ "name": name, "description": description });
            resource::create::<Group>(client, format, parent.as_deref(), &body).await
        }
        GroupsCommand::Describe { group } => resource::describe::<Group>(client, format, &group).await,
        GroupsCommand::Update { group, fields } => {
            resource::update::<Group>(client, format, &group, fields.body()).await
        }
        GroupsCommand::Delete { group } => resource::delete::<Group>(client, format, &group).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_nests_by_uidp() {
        let g = |uid: &str, name: &str| Group {
            uid: uid.into(),
            name: name.into(),
            ..Default::default()
        };
        let r = "a".repeat(40);
        let c = format!("{r}/{}", "b".repeat(16));
        let d = format!("{c}/{}", "c".repeat(16));
        let out = tree(&[g(&d, "leaf"), g(&r, "org"), g(&c, "team")]);
        assert_eq!(out, format!("org ({r})\n  └ team ({c})\n    └ leaf ({d})\n"));
    }

    #[test]
    fn tree_escapes_control_characters_in_names() {
        let r = "a".repeat(40);
        let g = Group {
            uid: r.clone(),
            name: "evil\x1b[2J\u{202e}".into(),
            ..Default::default()
        };
        assert_eq!(tree(&[g]), format!("evil\\u{{1b}}[2J\\u{{202e}} ({r})\n"));
    }
}
