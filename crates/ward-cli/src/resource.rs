//! What every IAM resource shares on the client side: listing every page,
//! resolving names to uids, get/create/update/delete, and table or JSON output.
//! Each resource module names its REST collection and table once in a
//! [`Resource`] impl and keeps only its own flags.

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use ward_core::uidp::Uidp;
use ward_proto::iam::v2::Group;

use crate::{Client, Format, output};

/// Query parameters of a request.
pub type Query = Vec<(&'static str, String)>;

pub trait Resource: Serialize + DeserializeOwned {
    /// The resource in messages: "group", "role".
    const KIND: &'static str;
    /// The REST collection, e.g. `/iam/v2/groups`.
    const PATH: &'static str;
    /// The list reply's field holding the items, e.g. `groups`.
    const ITEMS: &'static str;
    /// Whether the resource has a name it can be found by (the `name` filter).
    const NAMED: bool = true;
    /// Table columns, matching [`Resource::row`].
    const HEADER: &'static [&'static str];

    fn uid(&self) -> &str;
    fn row(&self) -> Vec<String>;
}

/// Adds `key=value` when the value is given.
pub fn push(query: &mut Query, key: &'static str, value: Option<String>) {
    if let Some(v) = value {
        query.push((key, v));
    }
}

/// Paging flags of every `list`.
#[derive(Debug, clap::Args)]
pub struct Paging {
    /// e.g. "name", "create_time desc".
    #[arg(long)]
    pub order_by: Option<String>,
    /// Results per request (the CLI walks every page).
    #[arg(long, default_value_t = 200)]
    pub page_size: u32,
}

impl Paging {
    pub fn query(self) -> Query {
        let mut q = vec![("page_size", self.page_size.to_string())];
        push(&mut q, "order_by", self.order_by);
        q
    }
}

/// Where-and-what flags of a `list` of things that live in groups.
#[derive(Debug, clap::Args)]
pub struct Filters {
    /// Only what is directly in this group (name or uid).
    #[arg(long)]
    pub parent: Option<String>,
    /// Only what is in this group or below it (name or uid).
    #[arg(long)]
    pub descendants_of: Option<String>,
    /// Only those with exactly this name.
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub paging: Paging,
}

impl Filters {
    /// The query, with group names resolved to uids.
    pub async fn query(self, client: &Client) -> anyhow::Result<Query> {
        let mut q = self.paging.query();
        let parent = resolve_opt::<Group>(client, "--parent", self.parent).await?;
        push(&mut q, "uidp.children_of", parent);
        let below = resolve_opt::<Group>(client, "--descendants-of", self.descendants_of).await?;
        push(&mut q, "uidp.descendants_of", below);
        push(&mut q, "name", self.name);
        Ok(q)
    }
}

/// NAME, `--parent` and `--description` of a `create` in a group.
#[derive(Debug, clap::Args)]
pub struct InGroup {
    pub name: String,
    /// The group it belongs to (name or uid).
    #[arg(long)]
    pub parent: String,
    #[arg(long, default_value = "")]
    pub description: String,
}

impl InGroup {
    /// The parent group's uid.
    pub async fn parent_uid(&self, client: &Client) -> anyhow::Result<String> {
        resolve_flag::<Group>(client, "--parent", &self.parent).await
    }
}

/// `--name` and `--description` of an `update`: only the flags given change.
#[derive(Debug, clap::Args)]
pub struct NameDescription {
    /// The new name.
    #[arg(long)]
    pub name: Option<String>,
    /// The new description.
    #[arg(long)]
    pub description: Option<String>,
}

impl NameDescription {
    /// The PATCH body: one key per flag given.
    pub fn body(self) -> Map<String, Value> {
        let mut body = Map::new();
        for (key, value) in [("name", self.name), ("description", self.description)] {
            if let Some(v) = value {
                body.insert(key.into(), v.into());
            }
        }
        body
    }
}

/// Every `R` matching `query`, walking all pages.
pub async fn list<R: Resource>(client: &Client, query: &Query) -> anyhow::Result<Vec<R>> {
    let mut all = Vec::new();
    let mut q = query.clone();
    loop {
        let mut page: Value = client.call::<(), _>(Method::GET, R::PATH, &q, None).await?;
        if let Some(items) = page.get_mut(R::ITEMS) {
            let items: Vec<R> = serde_json::from_value(items.take())
                .with_context(|| format!("decoding the {} of {}", R::ITEMS, R::PATH))?;
            all.extend(items);
        }
        match page["nextPageToken"].as_str() {
            Some(token) if !token.is_empty() => {
                q = query.clone();
                q.push(("page_token", token.to_owned()));
            }
            _ => return Ok(all),
        }
    }
}

/// `arg` itself when it is a UIDP; otherwise the uid of the one `R` named `arg`.
pub async fn resolve<R: Resource>(client: &Client, arg: &str) -> anyhow::Result<String> {
    if !R::NAMED || Uidp::is_valid(arg) {
        return Ok(arg.to_owned());
    }
    let found: Vec<R> = list(client, &vec![("name", arg.to_owned())]).await?;
    match found.as_slice() {
        [one] => Ok(one.uid().to_owned()),
        [] => bail!("no {} named {arg}", R::KIND),
        many => bail!(
            "{} name {arg} is ambiguous, {} match: {}; pass the uid of the one you mean",
            R::KIND,
            many.len(),
            many.iter().map(R::uid).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// [`resolve`] for a flag's value; errors name the flag.
pub async fn resolve_flag<R: Resource>(client: &Client, flag: &'static str, arg: &str) -> anyhow::Result<String> {
    resolve::<R>(client, arg).await.context(flag)
}

/// [`resolve_flag`] for an optional flag.
pub async fn resolve_opt<R: Resource>(
    client: &Client,
    flag: &'static str,
    arg: Option<String>,
) -> anyhow::Result<Option<String>> {
    match arg {
        None => Ok(None),
        Some(a) => resolve_flag::<R>(client, flag, &a).await.map(Some),
    }
}

/// Prints items as a table or a JSON array.
pub fn show<R: Resource>(format: Format, items: &[R]) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(&items),
        Format::Table => {
            output::table(R::HEADER, items.iter().map(R::row).collect());
            Ok(())
        }
    }
}

/// Prints one item as a one-row table or a JSON object.
pub fn show_one<R: Resource>(format: Format, item: &R) -> anyhow::Result<()> {
    match format {
        Format::Json => output::json(item),
        Format::Table => show(format, std::slice::from_ref(item)),
    }
}

fn item_path<R: Resource>(uid: &str) -> String {
    format!("{}/{uid}", R::PATH)
}

/// Creates an `R` (under `parent` when given) and prints it.
pub async fn create<R: Resource>(
    client: &Client,
    format: Format,
    parent: Option<&str>,
    body: &impl Serialize,
) -> anyhow::Result<()> {
    let path = parent.map_or_else(|| R::PATH.to_owned(), item_path::<R>);
    let r: R = client.call(Method::POST, &path, &[], Some(body)).await?;
    show_one(format, &r)
}

/// Prints the `R` with this name or uid.
pub async fn describe<R: Resource>(client: &Client, format: Format, arg: &str) -> anyhow::Result<()> {
    let uid = resolve::<R>(client, arg).await?;
    let r: R = client
        .call::<(), _>(Method::GET, &item_path::<R>(&uid), &[], None)
        .await?;
    show_one(format, &r)
}

/// PATCHes the fields in `body` (the update mask is its keys) and prints the result.
pub async fn update<R: Resource>(
    client: &Client,
    format: Format,
    arg: &str,
    body: Map<String, Value>,
) -> anyhow::Result<()> {
    if body.is_empty() {
        bail!("nothing to update: pass a flag for each field to change (see --help)");
    }
    let uid = resolve::<R>(client, arg).await?;
    let mask = body.keys().cloned().collect::<Vec<_>>().join(",");
    let r: R = client
        .call(
            Method::PATCH,
            &item_path::<R>(&uid),
            &[("update_mask", mask)],
            Some(&body),
        )
        .await?;
    show_one(format, &r)
}

/// Deletes the `R` with this name or uid.
pub async fn delete<R: Resource>(client: &Client, format: Format, arg: &str) -> anyhow::Result<()> {
    let uid = resolve::<R>(client, arg).await?;
    let _: Value = client
        .call::<(), _>(Method::DELETE, &item_path::<R>(&uid), &[], None)
        .await?;
    match format {
        Format::Json => output::json(&serde_json::json!({})),
        Format::Table => {
            output::line(&format!("deleted {uid}"));
            Ok(())
        }
    }
}
