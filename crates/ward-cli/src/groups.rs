//! `ward iam groups list|create|describe|update|delete`.

use reqwest::Method;
use ward_proto::iam::v2::{Group, ListGroupsResponse};

use crate::output;
use crate::{Client, Format};

const BASE: &str = "/iam/v2/groups";

#[derive(Debug, clap::Subcommand)]
pub enum GroupsCommand {
    /// List groups (every page), as a table, a tree or JSON.
    List {
        /// Only direct children of this group.
        #[arg(long)]
        parent: Option<String>,
        /// Only this group and the groups below it.
        #[arg(long)]
        descendants_of: Option<String>,
        /// Only groups with exactly this name.
        #[arg(long)]
        name: Option<String>,
        /// e.g. "name", "create_time desc".
        #[arg(long)]
        order_by: Option<String>,
        /// Results per request (the CLI walks every page).
        #[arg(long, default_value_t = 200)]
        page_size: u32,
        /// Show the hierarchy as a tree.
        #[arg(long)]
        tree: bool,
    },
    /// Create an organization, or a group under --parent.
    Create {
        name: String,
        #[arg(long)]
        parent: Option<String>,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Show one group.
    Describe { uid: String },
    /// Change a group's name or description (only the flags given).
    Update {
        uid: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
    },
    /// Delete a group (it must have no children).
    Delete { uid: String },
}

fn time(t: &Option<ward_proto::Timestamp>) -> String {
    t.as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn show(format: Format, groups: &[Group]) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(&groups),
        Format::Table => {
            let rows = groups
                .iter()
                .map(|g| {
                    vec![
                        g.uid.clone(),
                        g.name.clone(),
                        g.description.clone(),
                        time(&g.create_time),
                    ]
                })
                .collect();
            output::table(&["UID", "NAME", "DESCRIPTION", "CREATED"], rows);
            Ok(())
        }
    }
}

fn show_one(format: Format, g: &Group) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(g),
        Format::Table => show(format, std::slice::from_ref(g)),
    }
}

/// Renders groups as a tree by UIDP: each group under its nearest listed ancestor.
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
        out.push_str(&format!("{indent}{marker}{} ({})\n", g.name, g.uid));
        stack.push(&g.uid);
    }
    out
}

pub async fn run(client: &Client, format: Format, cmd: GroupsCommand) -> anyhow::Result<()> {
    match cmd {
        GroupsCommand::List {
            parent,
            descendants_of,
            name,
            order_by,
            page_size,
            tree: as_tree,
        } => {
            let mut query: Vec<(&str, String)> = vec![("page_size", page_size.to_string())];
            if let Some(p) = parent {
                query.push(("uidp.children_of", p));
            }
            if let Some(d) = descendants_of {
                query.push(("uidp.descendants_of", d));
            }
            if let Some(n) = name {
                query.push(("name", n));
            }
            if let Some(o) = order_by {
                query.push(("order_by", o));
            }
            let mut all = Vec::new();
            let mut token = String::new();
            loop {
                let mut q = query.clone();
                if !token.is_empty() {
                    q.push(("page_token", token.clone()));
                }
                let page: ListGroupsResponse =
                    client.call::<(), _>(Method::GET, BASE, &q, None).await?;
                all.extend(page.groups);
                if page.next_page_token.is_empty() {
                    break;
                }
                token = page.next_page_token;
            }
            if as_tree && format == Format::Table {
                print!("{}", tree(&all));
                Ok(())
            } else {
                show(format, &all)
            }
        }
        GroupsCommand::Create {
            name,
            parent,
            description,
        } => {
            let path = match parent {
                Some(p) => format!("{BASE}/{p}"),
                None => BASE.to_owned(),
            };
            let body = serde_json::json!({ "name": name, "description": description });
            let g: Group = client.call(Method::POST, &path, &[], Some(&body)).await?;
            show_one(format, &g)
        }
        GroupsCommand::Describe { uid } => {
            let g: Group = client
                .call::<(), _>(Method::GET, &format!("{BASE}/{uid}"), &[], None)
                .await?;
            show_one(format, &g)
        }
        GroupsCommand::Update {
            uid,
            name,
            description,
        } => {
            let mut body = serde_json::Map::new();
            if let Some(n) = name {
                body.insert("name".into(), n.into());
            }
            if let Some(d) = description {
                body.insert("description".into(), d.into());
            }
            if body.is_empty() {
                anyhow::bail!("nothing to update: pass --name and/or --description");
            }
            let mask = body.keys().cloned().collect::<Vec<_>>().join(",");
            let g: Group = client
                .call(
                    Method::PATCH,
                    &format!("{BASE}/{uid}"),
                    &[("update_mask", mask)],
                    Some(&body),
                )
                .await?;
            show_one(format, &g)
        }
        GroupsCommand::Delete { uid } => {
            let _: serde_json::Value = client
                .call::<(), _>(Method::DELETE, &format!("{BASE}/{uid}"), &[], None)
                .await?;
            if format == Format::Json {
                output::json(&serde_json::json!({}))
            } else {
                println!("deleted {uid}");
                Ok(())
            }
        }
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
        assert_eq!(
            out,
            format!("org ({r})\n  └ team ({c})\n    └ leaf ({d})\n")
        );
    }
}
