//! The registry's own events, in the shapes of the SDK's `events/registry`:
//! `dev.chainguard.registry.push.v1` for each manifest push over `/v2/`
//! (written in the push's transaction; a refused push is recorded with its
//! `error`), and `dev.chainguard.registry.pull.v1` for each manifest pull.
//!
//! A pull changes nothing, so its event is not worth a transaction of its
//! own on the hot path: pulls queue in memory (at most [`PULL_QUEUE`]; past
//! that, pull events are dropped and counted, never the pull) and one
//! background writer appends them in batches.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use ward_store::events::{Emit, EventRecord};
use ward_store::registry::Pushed;

use crate::authz::Caller;
use crate::services::registry::oci::{OciError, Target};
use crate::ward::Ward;

pub const PUSH: &str = "dev.chainguard.registry.push.v1";
pub const PULL: &str = "dev.chainguard.registry.pull.v1";

/// Pull events waiting to be written, at most.
pub const PULL_QUEUE: usize = 10_000;
/// Pull events one write appends, at most.
const PULL_BATCH: usize = 500;
/// How long a pull event waits for others to share its write.
const PULL_LINGER: Duration = Duration::from_millis(100);

/// Who a registry request came from, and how it asked, as its events say.
#[derive(Clone, Debug, Default)]
pub struct Client {
    pub remote_address: String,
    pub user_agent: String,
    /// The request's method (a pull is a GET or a HEAD).
    pub method: String,
}

impl Client {
    /// From a request: the connection's client address (or the configured
    /// proxy's view of it) and its `User-Agent` (at most 256 bytes).
    pub fn of(req: &axum::extract::Request) -> Self {
        let remote_address = req
            .extensions()
            .get::<crate::serve::ClientAddr>()
            .map(|a| a.0.to_string())
            .unwrap_or_default();
        let user_agent: String = req
            .headers()
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .chars()
            .take(256)
            .collect();
        Client {
            remote_address,
            user_agent,
            method: req.method().as_str().to_owned(),
        }
    }
}

/// The pull-event queue: its sending half, and what overflowed.
pub struct Pulls {
    tx: tokio::sync::mpsc::Sender<EventRecord>,
    rx: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<EventRecord>>>,
    pub dropped: AtomicU64,
}

impl Pulls {
    /// Pull events waiting for their write.
    pub fn len(&self) -> usize {
        PULL_QUEUE - self.tx.capacity()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Pulls {
    fn default() -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(PULL_QUEUE);
        Pulls {
            tx,
            rx: std::sync::Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
        }
    }
}

/// `civil.DateTime`: RFC 3339 without the offset (UTC), nanoseconds.
fn civil(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.9f")
        .to_string()
}

/// The fields every registry event body has.
fn base(repository: &str, repo_id: &str, digest: &str, when: i64, client: &Client) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("repository".into(), json!(repository));
    m.insert("repo_id".into(), json!(repo_id));
    m.insert("digest".into(), json!(digest));
    m.insert("type".into(), json!("manifest"));
    m.insert("when".into(), json!(civil(when)));
    m.insert("location".into(), json!(""));
    m.insert("remote_address".into(), json!(client.remote_address));
    m.insert("user_agent".into(), json!(client.user_agent));
    m
}

/// The group of a repo's events: the group holding the repo.
fn repo_group(t: &Target) -> String {
    t.repo
        .as_ref()
        .map(|r| Ward::event_group(&r.uid))
        .unwrap_or_else(|| t.org.as_str().to_owned())
}

impl Ward {
    /// A manifest push's event (`repository` as the request named it),
    /// rendered from what the store wrote (the tag, and where it pointed).
    pub(crate) fn push_event(
        &self,
        caller: &Caller,
        repo_uid: &str,
        repository: &str,
        digest: &str,
        client: &Client,
    ) -> Emit<Pushed> {
        let now = self.clock.now_millis();
        let mut body = base(repository, repo_uid, digest, now, client);
        self.rendered(
            caller,
            PUSH,
            repo_uid,
            &Ward::event_group(repo_uid),
            move |p: &Pushed| {
                if let Some(t) = &p.tag {
                    body.insert("tag".into(), json!(t.name));
                }
                if !p.previous_digest.is_empty() {
                    body.insert("tag_previous_digest".into(), json!(p.previous_digest));
                }
                Value::Object(body)
            },
        )
    }

    /// A push the registry refused after naming its repository: recorded
    /// with the error it answered.
    pub(crate) async fn record_refused_push(
        &self,
        caller: &Caller,
        t: &Target,
        repository: &str,
        reference: &str,
        client: &Client,
        error: &OciError,
    ) {
        let repo_uid = t.repo.as_ref().map(|r| r.uid.clone()).unwrap_or_default();
        let digest = if reference.contains(':') { reference } else { "" };
        let mut body = base(repository, &repo_uid, digest, self.clock.now_millis(), client);
        if !reference.contains(':') {
            body.insert("tag".into(), json!(reference));
        }
        body.insert(
            "error".into(),
            json!({"status": error.status, "code": error.code, "message": error.message}),
        );
        let subject = if repo_uid.is_empty() { t.org.as_str() } else { &repo_uid };
        let e = self.event(caller, PUSH, subject, &repo_group(t), Value::Object(body).to_string());
        if let Err(err) = self.store.append_events(&[e]).await {
            tracing::warn!(error = %err.message(), "recording a refused push failed");
        }
    }

    /// A manifest pull (GET or HEAD), queued for the pull writer.
    pub(crate) fn record_pull(
        &self,
        caller: &Caller,
        t: &Target,
        repository: &str,
        reference: &str,
        digest: &str,
        client: &Client,
    ) {
        let Some(repo) = &t.repo else { return };
        let mut body = base(repository, &repo.uid, digest, self.clock.now_millis(), client);
        if !reference.contains(':') {
            body.insert("tag".into(), json!(reference));
        }
        body.insert("method".into(), json!(client.method));
        let e = self.event(caller, PULL, &repo.uid, &repo_group(t), Value::Object(body).to_string());
        if self.pulls.tx.try_send(e).is_err() {
            self.pulls.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Starts the pull writer: appends queued pull events in batches until the
/// handle is aborted.
pub fn spawn_pull_writer(ward: Arc<Ward>) -> tokio::task::JoinHandle<()> {
    let rx = ward.pulls.rx.lock().ok().and_then(|mut r| r.take());
    tokio::spawn(async move {
        let Some(mut rx) = rx else { return };
        let mut batch = Vec::with_capacity(PULL_BATCH);
        loop {
            let Some(first) = rx.recv().await else { return };
            batch.push(first);
            let deadline = tokio::time::Instant::now() + PULL_LINGER;
            while batch.len() < PULL_BATCH {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(e)) => batch.push(e),
                    _ => break,
                }
            }
            if let Err(e) = ward.store.append_events(&batch).await {
                tracing::warn!(error = %e.message(), events = batch.len(), "recording pull events failed");
            }
            batch.clear();
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn when_is_a_civil_date_time() {
        assert_eq!(super::civil(1_700_000_000_123), "2023-11-14T22:13:20.123000000");
    }
}
