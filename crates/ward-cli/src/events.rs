//! `ward events subscriptions create|list|describe|delete`, `ward events
//! list` (the audit trail) and `ward events deliveries` (a subscription's
//! deliveries, and retrying those that gave up).

use reqwest::Method;
use ward_proto::events::v2::Subscription;
use ward_proto::events::{DeliveryStatus, EventList};
use ward_proto::iam::v2::Group;

use crate::resource::{self, Paging, Resource};
use crate::{Client, Format, output};

impl Resource for Subscription {
    const KIND: &'static str = "subscription";
    const PATH: &'static str = "/events/v2/subscriptions";
    const ITEMS: &'static str = "subscriptions";
    const NAMED: bool = false;
    const HEADER: &'static [&'static str] = &["UID", "SINK"];

    fn uid(&self) -> &str {
        &self.uid
    }
    fn row(&self) -> Vec<String> {
        vec![self.uid.clone(), self.sink.clone()]
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum EventsCommand {
    /// Where a group's events are delivered (CloudEvents over https).
    #[command(subcommand)]
    Subscriptions(SubscriptionsCommand),
    /// The audit trail: a group's events and those of the groups below it,
    /// newest first.
    List {
        /// The group (name or uid).
        #[arg(long)]
        group: String,
        /// Only events of this type (repeatable or comma-separated), e.g.
        /// dev.chainguard.api.iam.rolebindings.created.v1.
        #[arg(long = "type", value_delimiter = ',')]
        types: Vec<String>,
        /// Only events this identity (uid) caused.
        #[arg(long)]
        actor: Option<String>,
        /// Only events at or after this time (RFC 3339, e.g. 2026-12-01T00:00:00Z).
        #[arg(long)]
        since: Option<String>,
        /// Only events at or before this time (RFC 3339).
        #[arg(long)]
        until: Option<String>,
        /// At most this many events (newest first).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// A subscription's deliveries: the last success and failure, how many
    /// wait, and those that gave up.
    Deliveries {
        /// The subscription's uid.
        subscription: String,
        /// Queue the failed deliveries again (one event's with --event).
        #[arg(long)]
        retry: bool,
        /// With --retry: only this event's delivery (its id).
        #[arg(long, requires = "retry")]
        event: Option<String>,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum SubscriptionsCommand {
    /// Deliver the events of a group (and every group below it) to a sink.
    Create {
        /// The group (name or uid).
        #[arg(long)]
        parent: String,
        /// The https URL events are POSTed to.
        sink: String,
    },
    /// List subscriptions (every page).
    List {
        /// Only those of this group (name or uid).
        #[arg(long)]
        parent: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Show one subscription.
    Describe { uid: String },
    /// Delete a subscription (its queued and failed deliveries go with it).
    Delete { uid: String },
}

pub async fn run(client: &Client, format: Format, cmd: EventsCommand) -> anyhow::Result<()> {
    match cmd {
        EventsCommand::Subscriptions(c) => subscriptions(client, format, c).await,
        EventsCommand::List {
            group,
            types,
            actor,
            since,
            until,
            limit,
        } => {
            let group = resource::resolve_flag::<Group>(client, "--group", &group).await?;
            let mut q: resource::Query = vec![("group", group)];
            for t in types {
                q.push(("types", t));
            }
            resource::push(&mut q, "actor", actor);
            resource::push(&mut q, "since", since);
            resource::push(&mut q, "until", until);
            list_events(client, format, q, limit).await
        }
        EventsCommand::Deliveries {
            subscription,
            retry,
            event,
        } => {
            let status: DeliveryStatus = if retry {
                let body = serde_json::json!({"subscription": subscription, "eventId": event.unwrap_or_default()});
                client
                    .call(Method::POST, "/events/v1/deliveries/retry", &[], Some(&body))
                    .await?
            } else {
                client
                    .call::<(), _>(Method::GET, &format!("/events/v1/deliveries/{subscription}"), &[], None)
                    .await?
            };
            show_status(format, &status)
        }
    }
}

async fn subscriptions(client: &Client, format: Format, cmd: SubscriptionsCommand) -> anyhow::Result<()> {
    match cmd {
        SubscriptionsCommand::Create { parent, sink } => {
            let parent = resource::resolve_flag::<Group>(client, "--parent", &parent).await?;
            let body = serde_json::json!({ "sink": sink });
            resource::create::<Subscription>(client, format, Some(&parent), &body).await
        }
        SubscriptionsCommand::List { parent, paging } => {
            let mut q = paging.query();
            let parent = resource::resolve_opt::<Group>(client, "--parent", parent).await?;
            resource::push(&mut q, "uidp.children_of", parent);
            resource::show(format, &resource::list::<Subscription>(client, &q).await?)
        }
        SubscriptionsCommand::Describe { uid } => resource::describe::<Subscription>(client, format, &uid).await,
        SubscriptionsCommand::Delete { uid } => resource::delete::<Subscription>(client, format, &uid).await,
    }
}

/// Pages of the audit trail until `limit` events.
async fn list_events(client: &Client, format: Format, query: resource::Query, limit: usize) -> anyhow::Result<()> {
    let mut events = Vec::new();
    let mut token = String::new();
    loop {
        let mut q = query.clone();
        q.push((
            "page_size",
            limit.saturating_sub(events.len()).clamp(1, 200).to_string(),
        ));
        if !token.is_empty() {
            q.push(("page_token", token.clone()));
        }
        let page: EventList = client.call::<(), _>(Method::GET, "/events/v1/events", &q, None).await?;
        events.extend(page.events);
        if page.next_page_token.is_empty() || events.len() >= limit {
            break;
        }
        token = page.next_page_token;
    }
    events.truncate(limit);
    if format == Format::Json {
        return output::json(&events);
    }
    let rows = events
        .iter()
        .map(|e| {
            vec![
                output::time(e.time.as_ref()),
                e.r#type.clone(),
                e.subject.clone(),
                e.actor.as_ref().map(|a| a.subject.clone()).unwrap_or_default(),
            ]
        })
        .collect();
    output::table(&["TIME", "TYPE", "SUBJECT", "ACTOR"], rows);
    Ok(())
}

/// A sink's error, after its HTTP status when it answered (0: no answer,
/// e.g. a connection or name lookup failure).
fn with_status(status: i32, error: &str) -> String {
    if status == 0 {
        error.to_owned()
    } else {
        format!("HTTP {status}: {error}")
    }
}

fn show_status(format: Format, s: &DeliveryStatus) -> anyhow::Result<()> {
    if format == Format::Json {
        return output::json(s);
    }
    let error = if s.last_failure_error.is_empty() {
        String::new()
    } else {
        with_status(s.last_failure_status, &s.last_failure_error)
    };
    output::table(
        &[
            "DELIVERED",
            "PENDING",
            "FAILED",
            "LAST SUCCESS",
            "LAST FAILURE",
            "ERROR",
        ],
        vec![vec![
            s.delivered.to_string(),
            s.pending.to_string(),
            s.failed.len().to_string(),
            output::time(s.last_success_time.as_ref()),
            output::time(s.last_failure_time.as_ref()),
            error,
        ]],
    );
    if !s.failed.is_empty() {
        output::table(
            &["EVENT", "TYPE", "ATTEMPTS", "STATUS", "ERROR", "FAILED"],
            s.failed
                .iter()
                .map(|f| {
                    vec![
                        f.event_id.clone(),
                        f.event_type.clone(),
                        f.attempts.to_string(),
                        if f.status == 0 {
                            String::new()
                        } else {
                            f.status.to_string()
                        },
                        f.error.clone(),
                        output::time(f.failed_time.as_ref()),
                    ]
                })
                .collect(),
        );
    }
    Ok(())
}
