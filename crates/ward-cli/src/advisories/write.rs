//! The writes, through the v1 API: `create`, `update`, `delete`,
//! `events add|list` and `review`.

use anyhow::{Context as _, anyhow, bail};
use reqwest::Method;
use serde_json::{Map, Value, json};
use ward_core::uidp::Uidp;
use ward_proto::Timestamp;
use ward_proto::iam::v2::Group;

use super::kinds::{EventKind, FpType};
use super::{V1, advisory_uid, get, view};
use crate::resource;
use crate::{Client, Format, output};

/// The component flags of `create` and `update`.
#[derive(Debug, clap::Args)]
pub struct ComponentArgs {
    /// The vulnerable component inside the package, e.g. stdlib or a Go module.
    #[arg(long)]
    component: Option<String>,
    /// The component's type, e.g. go-module, python, binary.
    #[arg(long)]
    component_type: Option<String>,
    /// Where the component is in the package, e.g. /usr/bin/app.
    #[arg(long)]
    component_location: Option<String>,
}

impl ComponentArgs {
    /// The given ones, by their JSON names.
    fn fields(self) -> Vec<(&'static str, String)> {
        [
            ("componentName", self.component),
            ("componentType", self.component_type),
            ("componentLocation", self.component_location),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

/// An event's payload flags.
#[derive(Debug, clap::Args)]
pub struct EventArgs {
    /// The first version without the vulnerability, e.g. 1.2.3-r4 (fixed events).
    #[arg(long)]
    fixed_version: Option<String>,
    /// A note (every type but detection).
    #[arg(long)]
    note: Option<String>,
    /// Why it is a false positive (false-positive events).
    #[arg(long, value_enum)]
    fp_type: Option<FpType>,
    /// When it happened, RFC 3339 [default: now].
    #[arg(long)]
    timestamp: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The group it belongs to (name or uid).
    #[arg(short = 'g', long)]
    group: String,
    /// The package (artifact) it concerns, e.g. an apk name.
    #[arg(long)]
    package: String,
    /// The artifact type.
    #[arg(long = "type", default_value = "apk")]
    artifact_type: String,
    /// The artifact's architecture, e.g. x86_64 [default: any].
    #[arg(long, default_value = "")]
    arch: String,
    #[command(flatten)]
    component: ComponentArgs,
    /// A CVE, GHSA or GO id (repeatable).
    #[arg(long = "alias")]
    aliases: Vec<String>,
    /// The first event's type.
    #[arg(long, value_enum)]
    event: EventKind,
    #[command(flatten)]
    payload: EventArgs,
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// Uid or CGA id.
    advisory: String,
    /// The package (artifact) it concerns.
    #[arg(long)]
    package: Option<String>,
    /// The artifact type.
    #[arg(long = "type")]
    artifact_type: Option<String>,
    /// The artifact's architecture ("" for any).
    #[arg(long)]
    arch: Option<String>,
    #[command(flatten)]
    component: ComponentArgs,
    /// The aliases: the whole new set (repeatable).
    #[arg(long = "alias")]
    aliases: Vec<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum EventsCommand {
    /// Add an event to an advisory; it awaits review.
    Add {
        /// Uid or CGA id.
        advisory: String,
        /// The event's type.
        #[arg(long = "type", value_enum)]
        kind: EventKind,
        #[command(flatten)]
        payload: EventArgs,
    },
    /// List an advisory's events, oldest first.
    List {
        /// Uid or CGA id.
        advisory: String,
    },
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("verdict").required(true).args(["approve", "reject", "request_changes"])))]
pub struct ReviewArgs {
    /// The event's uid (`ward advisories describe` shows it in brackets).
    event: String,
    /// Approve the event: it may now decide the advisory's status.
    #[arg(long)]
    approve: bool,
    /// Reject the event (final).
    #[arg(long)]
    reject: bool,
    /// Send the event back to its author.
    #[arg(long)]
    request_changes: bool,
    /// An issue to link, e.g. a tracker URL.
    #[arg(long)]
    issue: Option<String>,
}

/// `--timestamp`, or now, as proto JSON.
fn timestamp(arg: Option<String>) -> anyhow::Result<Value> {
    let t = match arg {
        Some(s) => serde_json::from_value::<Timestamp>(Value::String(s.clone()))
            .map_err(|e| anyhow!("--timestamp {s}: expected RFC 3339, e.g. 2025-03-11T19:14:03Z ({e})"))?,
        None => {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .context("the clock is before 1970")?
                .as_millis();
            Timestamp::from_millis(i64::try_from(ms)?)
        }
    };
    Ok(serde_json::to_value(t)?)
}

/// A v1 `AdvisoryEvent` of `kind` from the flags.
fn event(kind: EventKind, args: EventArgs) -> anyhow::Result<Value> {
    if args.fixed_version.is_some() && kind != EventKind::Fixed {
        bail!("--fixed-version goes with fixed events only");
    }
    if args.fp_type.is_some() && kind != EventKind::FalsePositive {
        bail!("--fp-type goes with false-positive events only");
    }
    let note = args.note.unwrap_or_default();
    let payload = match kind {
        EventKind::Detection => {
            if !note.is_empty() {
                bail!("a detection has no note");
            }
            json!({"manual": {}})
        }
        EventKind::Fixed => {
            let version = args.fixed_version.context("a fixed event needs --fixed-version")?;
            json!({"fixedVersion": version, "note": note})
        }
        EventKind::FalsePositive => {
            let fp = args.fp_type.context("a false-positive event needs --fp-type")?;
            json!({"type": fp.v1_name(), "note": note})
        }
        EventKind::Patched => bail!("patched events cannot be written with the CLI"),
        EventKind::TruePositive
        | EventKind::PendingUpstreamFix
        | EventKind::FixNotPlanned
        | EventKind::AnalysisNotPlanned => json!({"note": note}),
    };
    let mut ev = Map::new();
    ev.insert("timestamp".into(), timestamp(args.timestamp)?);
    ev.insert(kind.json_key().into(), payload);
    Ok(Value::Object(ev))
}

pub async fn create(client: &Client, format: Format, args: CreateArgs) -> anyhow::Result<()> {
    let group = resource::resolve_flag::<Group>(client, "--group", &args.group).await?;
    let first = event(args.event, args.payload)?;
    let mut adv = Map::new();
    adv.insert("artifactName".into(), args.package.into());
    adv.insert("artifactType".into(), args.artifact_type.into());
    adv.insert("artifactArchitecture".into(), args.arch.into());
    for (k, v) in args.component.fields() {
        adv.insert(k.into(), v.into());
    }
    adv.insert("aliases".into(), args.aliases.into());
    adv.insert("events".into(), json!([first]));
    let body = json!({"parentId": group, "advisory": adv});
    let created: Value = client.call(Method::POST, V1, &[], Some(&body)).await?;
    view::show_one(format, &created)
}

/// GETs the advisory and PUTs it back with the flags' changes: the v1 update
/// replaces every field of the advisory's own.
pub async fn update(client: &Client, format: Format, args: UpdateArgs) -> anyhow::Result<()> {
    let mut changes: Vec<(&'static str, Value)> = [
        ("artifactName", args.package),
        ("artifactType", args.artifact_type),
        ("artifactArchitecture", args.arch),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, Value::from(v))))
    .collect();
    changes.extend(args.component.fields().into_iter().map(|(k, v)| (k, Value::from(v))));
    if !args.aliases.is_empty() {
        changes.push(("aliases", args.aliases.into()));
    }
    if changes.is_empty() {
        bail!("nothing to update: pass a flag for each field to change (see --help)");
    }
    let current = get(client, &args.advisory).await?;
    let uid = view::text(&current, "uid").to_owned();
    if !Uidp::is_valid(&uid) {
        bail!("the server sent advisory {} without a valid uid", args.advisory);
    }
    let mut body = Map::new();
    body.insert("id".into(), uid.clone().into());
    for (v1, v2) in [
        ("advisoryId", "advisoryId"),
        ("artifactName", "artifactName"),
        ("artifactType", "artifactType"),
        ("artifactArchitecture", "artifactArchitecture"),
        ("componentName", "componentName"),
        ("componentType", "componentType"),
        ("componentLocation", "componentLocation"),
        ("legacyAdvisoryID", "legacyAdvisoryId"),
    ] {
        if let Some(v) = current.get(v2).filter(|v| v.is_string()) {
            body.insert(v1.into(), v.clone());
        }
    }
    body.insert("aliases".into(), view::strings(&current, "aliases").into());
    for (k, v) in changes {
        body.insert(k.into(), v);
    }
    let updated: Value = client
        .call(Method::PUT, &format!("{V1}/{uid}"), &[], Some(&Value::Object(body)))
        .await?;
    view::show_one(format, &updated)
}

pub async fn delete(client: &Client, format: Format, arg: &str) -> anyhow::Result<()> {
    let uid = advisory_uid(client, arg).await?;
    let _: Value = client
        .call::<(), _>(Method::DELETE, &format!("{V1}/{uid}"), &[], None)
        .await?;
    match format {
        Format::Json => output::json(&json!({})),
        Format::Table => {
            output::line(&format!("deleted {arg}"));
            Ok(())
        }
    }
}

pub async fn events(client: &Client, format: Format, cmd: EventsCommand) -> anyhow::Result<()> {
    match cmd {
        EventsCommand::Add {
            advisory,
            kind,
            payload,
        } => {
            let ev = event(kind, payload)?;
            let uid = advisory_uid(client, &advisory).await?;
            let body = json!({"advisoryEvent": ev});
            let added: Value = client
                .call(Method::POST, &format!("{V1}/{uid}/events"), &[], Some(&body))
                .await?;
            view::show_event(format, &added)
        }
        EventsCommand::List { advisory } => {
            let uid = advisory_uid(client, &advisory).await?;
            let mut list: Value = client
                .call::<(), _>(Method::GET, &format!("{V1}/{uid}/events"), &[], None)
                .await?;
            let items = match list.get_mut("items").map(Value::take) {
                Some(Value::Array(items)) => items,
                None | Some(Value::Null) => Vec::new(),
                Some(_) => bail!("the server's event list is not a list"),
            };
            view::show_events(format, &items)
        }
    }
}

pub async fn review(client: &Client, format: Format, args: ReviewArgs) -> anyhow::Result<()> {
    let status = match (args.approve, args.reject, args.request_changes) {
        (true, false, false) => "APPROVED",
        (false, true, false) => "REJECTED",
        (false, false, true) => "REQUEST_CHANGES",
        _ => bail!("pass one of --approve, --reject and --request-changes"),
    };
    if !Uidp::is_valid(&args.event) {
        bail!("{} is not an event uid", args.event);
    }
    let mut body = json!({"status": status});
    if let (Some(issue), Some(b)) = (args.issue, body.as_object_mut()) {
        b.insert("issue".into(), issue.into());
    }
    let reviewed: Value = client
        .call(
            Method::PUT,
            &format!("/vulnerabilities/v1/advisory_events/{}", args.event),
            &[],
            Some(&body),
        )
        .await?;
    view::show_event(format, &reviewed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(fixed: Option<&str>, note: Option<&str>, fp: Option<FpType>) -> EventArgs {
        EventArgs {
            fixed_version: fixed.map(str::to_owned),
            note: note.map(str::to_owned),
            fp_type: fp,
            timestamp: Some("2025-03-11T19:14:03Z".into()),
        }
    }

    #[test]
    fn events_from_flags() {
        let ev = event(EventKind::Fixed, args(Some("1.2.3-r4"), None, None)).unwrap();
        assert_eq!(
            ev,
            json!({"timestamp": "2025-03-11T19:14:03.000Z", "fixed": {"fixedVersion": "1.2.3-r4", "note": ""}})
        );
        let fp = event(
            EventKind::FalsePositive,
            args(
                None,
                Some("only in tests"),
                Some(FpType::VulnerableCodeNotInExecutionPath),
            ),
        )
        .unwrap();
        assert_eq!(
            fp["falsePositiveDetermination"]["type"],
            "VULNERABLE_CODE_NOT_IN_EXECUTION_PATH"
        );
        assert_eq!(
            event(EventKind::Detection, args(None, None, None)).unwrap()["detection"],
            json!({"manual": {}})
        );
        // Each typed value the server would accept.
        for ev in [ev, fp] {
            serde_json::from_value::<ward_proto::vulnerabilities::v1::AdvisoryEvent>(ev).unwrap();
        }
    }

    #[test]
    fn flags_that_do_not_fit_are_refused() {
        assert!(event(EventKind::Fixed, args(None, None, None)).is_err());
        assert!(event(EventKind::Detection, args(Some("1.0-r0"), None, None)).is_err());
        assert!(
            event(
                EventKind::TruePositive,
                args(None, None, Some(FpType::InlineMitigationsExist))
            )
            .is_err()
        );
        assert!(event(EventKind::FalsePositive, args(None, None, None)).is_err());
        let mut bad = args(None, None, None);
        bad.timestamp = Some("yesterday".into());
        assert!(event(EventKind::Detection, bad).is_err());
    }
}
