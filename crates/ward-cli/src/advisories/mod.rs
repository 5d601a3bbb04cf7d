//! `ward advisories list|describe|create|update|delete|events|review|import|export`.
//!
//! Reads go to the v2 API (`/vulnerabilities/v2/advisories`), writes to the
//! v1 API (`/vulnerabilities/v1/advisories…`), the OSV feed to `/osv/…`.
//! Bodies are built and replies read as proto JSON ([`view`]), so the CLI
//! speaks both API versions' shapes without depending on their Rust names.
//! An advisory is named by its uid or its CGA id.

mod export;
mod ids;
mod import;
mod kinds;
mod osv;
mod view;
mod write;
mod yaml;

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::Value;
use ward_core::uidp::Uidp;
use ward_proto::iam::v2::Group;

use crate::resource::{self, Query};
use crate::{Client, Connection, Format};
use kinds::{EventKind, ReviewFilter};

/// The v2 (read) collection.
const V2: &str = "/vulnerabilities/v2/advisories";
/// The v1 (write) collection.
const V1: &str = "/vulnerabilities/v1/advisories";
/// Advisories per list request.
const PAGE_SIZE: usize = 200;

#[derive(Debug, clap::Subcommand)]
pub enum AdvisoriesCommand {
    /// List advisories (every page, or up to --limit) with their status.
    List(ListArgs),
    /// Show one advisory and the timeline of its events.
    Describe {
        /// Uid or CGA id.
        advisory: String,
        /// Also say whether the advisory is resolved at this apk version
        /// (e.g. 1.2.3-r4): exits 0 when it is, non-zero when it is not.
        #[arg(long, value_name = "VERSION")]
        resolved_at: Option<String>,
    },
    /// Create an advisory with its first event.
    Create(write::CreateArgs),
    /// Change an advisory's package, component or aliases (only the flags given).
    Update(write::UpdateArgs),
    /// Delete an advisory (kept, marked deleted: see `list --show-deleted`).
    Delete {
        /// Uid or CGA id.
        advisory: String,
    },
    /// Add or list the events of an advisory.
    #[command(subcommand)]
    Events(write::EventsCommand),
    /// Review an event: approve it, reject it or request changes.
    Review(write::ReviewArgs),
    /// Import advisory-schema YAML, OSV records (JSON or YAML) and OSV archives
    /// (zip), or directories of them.
    Import(import::ImportArgs),
    /// Export the advisories the feed publishes, as OSV documents.
    Export(export::ExportArgs),
    /// An OpenVEX document of the team's decisions about each vulnerability
    /// in an image, or in every image of a group, for Trivy and Grype
    /// (`--vex`).
    Vex {
        /// `[registry/][org/]repo:tag` or `…@sha256:…`.
        #[arg(long, required_unless_present = "group", conflicts_with = "group")]
        image: Option<String>,
        /// A group (name or uid) or a repo uid: every image with a report in
        /// its repos and below.
        #[arg(long)]
        group: Option<String>,
    },
}

/// The filters of `list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only advisories in this group or below it (name or uid).
    #[arg(short = 'g', long)]
    group: Option<String>,
    /// Only advisories of this origin package (and its subpackages).
    #[arg(long)]
    package: Option<String>,
    /// Only advisories of this component (repeatable).
    #[arg(long)]
    component: Vec<String>,
    /// Only advisories with this alias, e.g. CVE-2024-12345 (repeatable).
    #[arg(long)]
    alias: Vec<String>,
    /// Text in the package name, the component name or an alias (any case).
    #[arg(short = 'q', long)]
    query: Option<String>,
    /// Only advisories whose latest approved event is of this type.
    #[arg(long, value_enum)]
    status: Option<EventKind>,
    /// Only advisories with an event in this review state.
    #[arg(long, value_enum)]
    review_state: Option<ReviewFilter>,
    /// Include deleted advisories.
    #[arg(long)]
    show_deleted: bool,
    /// At most this many advisories.
    #[arg(long)]
    limit: Option<usize>,
}

impl ListArgs {
    async fn query(self, client: &Client) -> anyhow::Result<Query> {
        let mut q = Query::new();
        let group = resource::resolve_opt::<Group>(client, "--group", self.group).await?;
        resource::push(&mut q, "uidp.descendantsOf", group);
        resource::push(&mut q, "origin", self.package);
        q.extend(self.component.into_iter().map(|c| ("componentNames", c)));
        q.extend(self.alias.into_iter().map(|a| ("aliases", a)));
        resource::push(&mut q, "query", self.query);
        resource::push(&mut q, "latestEventType", self.status.map(EventKind::filter_name));
        resource::push(
            &mut q,
            "eventReviewStates",
            self.review_state.map(|r| r.v2_name().to_owned()),
        );
        resource::push(&mut q, "showDeleted", self.show_deleted.then(|| "true".to_owned()));
        Ok(q)
    }
}

pub async fn run(conn: &Connection, cmd: AdvisoriesCommand) -> anyhow::Result<()> {
    let client = conn.client().await?;
    let format = conn.output;
    match cmd {
        AdvisoriesCommand::List(args) => {
            let limit = args.limit;
            let q = args.query(&client).await?;
            view::show(format, &list(&client, &q, limit).await?)
        }
        AdvisoriesCommand::Describe { advisory, resolved_at } => {
            let mut adv = get(&client, &advisory).await?;
            let resolved = resolved_at.as_deref().map(|v| view::resolved_at(&adv, v)).transpose()?;
            let flags = flags(&client, view::text(&adv, "uid")).await?;
            match format {
                Format::Json => {
                    // Only when there are some: the advisory as the API has it otherwise.
                    if !flags.is_empty()
                        && let Some(o) = adv.as_object_mut()
                    {
                        o.insert("flags".into(), Value::Array(flags));
                    }
                    crate::output::json(&adv)?;
                }
                Format::Table => {
                    view::describe(&adv);
                    view::describe_flags(&flags);
                }
            }
            match (resolved_at, resolved) {
                (Some(v), Some(true)) => {
                    eprintln!("resolved at {v}");
                    Ok(())
                }
                (Some(v), _) => Err(anyhow::anyhow!("not resolved at {v}")),
                _ => Ok(()),
            }
        }
        AdvisoriesCommand::Create(args) => write::create(&client, format, args).await,
        AdvisoriesCommand::Update(args) => write::update(&client, format, args).await,
        AdvisoriesCommand::Delete { advisory } => write::delete(&client, format, &advisory).await,
        AdvisoriesCommand::Events(cmd) => write::events(&client, format, cmd).await,
        AdvisoriesCommand::Review(args) => write::review(&client, format, args).await,
        AdvisoriesCommand::Import(args) => import::run(&client, format, args).await,
        AdvisoriesCommand::Export(args) => export::run(&client, format, args).await,
        AdvisoriesCommand::Vex { image, group } => match (image, group) {
            (Some(image), _) => crate::vulns::vex(&client, &image).await,
            (None, Some(group)) => crate::vulns::group_vex(&client, &group).await,
            (None, None) => anyhow::bail!("name --image or --group"),
        },
    }
}

/// Every advisory (v2 JSON) matching `query`, walking the pages, or the
/// first `limit`.
async fn list(client: &Client, query: &Query, limit: Option<usize>) -> anyhow::Result<Vec<Value>> {
    let mut all: Vec<Value> = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let want = limit.map_or(PAGE_SIZE, |l| l.saturating_sub(all.len()).min(PAGE_SIZE));
        if want == 0 {
            return Ok(all);
        }
        let mut q = query.clone();
        q.push(("pageSize", want.to_string()));
        if let Some(t) = token.take() {
            q.push(("pageToken", t));
        }
        let mut page: Value = client.call::<(), _>(Method::GET, V2, &q, None).await?;
        match page.get_mut("advisories").map(Value::take) {
            Some(Value::Array(items)) => all.extend(items),
            None | Some(Value::Null) => {}
            Some(_) => bail!("the server's advisory list is not a list"),
        }
        match page.get("nextPageToken").and_then(Value::as_str) {
            Some(t) if !t.is_empty() => token = Some(t.to_owned()),
            _ => break,
        }
    }
    if let Some(l) = limit {
        all.truncate(l);
    }
    Ok(all)
}

/// The uid of the advisory `arg` names: a uid as is, a CGA id looked up.
async fn advisory_uid(client: &Client, arg: &str) -> anyhow::Result<String> {
    if !ids::is_cga(arg) {
        if !Uidp::is_valid(arg) {
            bail!("{arg} is neither an advisory uid nor a CGA id (CGA-xxxx-xxxx-xxxx)");
        }
        return Ok(arg.to_owned());
    }
    let found = list(client, &vec![("advisoryIds", arg.to_owned())], Some(2)).await?;
    match found.as_slice() {
        [one] => {
            let uid = view::text(one, "uid");
            if uid.is_empty() {
                bail!("the server sent advisory {arg} without a uid");
            }
            Ok(uid.to_owned())
        }
        [] => bail!("no advisory {arg} (or none you may see)"),
        many => bail!(
            "{arg} names {} advisories; pass the uid of the one you mean",
            many.len()
        ),
    }
}

/// What imports kept on the advisory but flagged (v1 `AdvisoryFlag`s).
async fn flags(client: &Client, uid: &str) -> anyhow::Result<Vec<Value>> {
    let mut v: Value = client
        .call::<(), _>(Method::GET, &format!("{V1}/{uid}/flags"), &[], None)
        .await
        .with_context(|| format!("the flags of advisory {uid}"))?;
    Ok(match v.get_mut("flags").map(Value::take) {
        Some(Value::Array(f)) => f,
        _ => Vec::new(),
    })
}

/// The advisory `arg` names, as v2 JSON.
async fn get(client: &Client, arg: &str) -> anyhow::Result<Value> {
    let uid = advisory_uid(client, arg).await?;
    client
        .call::<(), _>(Method::GET, &format!("{V2}/{uid}"), &[], None)
        .await
        .with_context(|| format!("advisory {arg}"))
}
