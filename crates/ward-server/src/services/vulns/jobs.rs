//! The durable job queue's workers. Every kind of background work runs
//! here: a worker claims due jobs (leased, so a crashed worker's jobs come
//! back when the lease expires), runs each, and finishes it (done, or retry
//! with backoff). Work enqueued on this server wakes the workers at once;
//! other replicas' work is found by polling.

use std::sync::Arc;
use std::time::Duration;

use ward_core::Result;
use ward_store::vulns::{JobEnd, JobRecord, Lane};

use super::{BACKFILL, INVENTORY, REEVAL, REPORT, TIDY, split_key};
use crate::ward::Ward;

/// How long a claim holds a job: longer than any one job may take.
pub const LEASE_MS: i64 = 5 * 60 * 1000;
/// How often an idle worker looks for work other replicas queued.
pub const POLL: Duration = Duration::from_millis(500);
/// Jobs one claim takes; they run concurrently (each well within its
/// lease), so their writes share the store's commits.
const CLAIM: u32 = 8;
/// Attempts before a failing job is dropped (its error logged).
pub const MAX_ATTEMPTS: i64 = 8;
/// Manifests one re-evaluation or backfill step queues at a time.
const PAGE: u32 = 1000;

/// Starts the worker loop; the handle stops it.
pub fn spawn(ward: Arc<Ward>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = ward.start_backfill().await {
            tracing::warn!(error = %e.message(), "could not queue the report backfill");
        }
        loop {
            let now = ward.clock.now_millis();
            let jobs = match ward.store.claim_jobs(Lane::Work, now, LEASE_MS, CLAIM).await {
                Ok(j) => j,
                Err(e) => {
                    tracing::warn!(error = %e.message(), "claiming background jobs failed");
                    Vec::new()
                }
            };
            if jobs.is_empty() {
                let woken = ward.vulns.wake.notified();
                tokio::select! {
                    _ = woken => {}
                    _ = tokio::time::sleep(POLL) => {}
                }
                continue;
            }
            let runs = jobs.into_iter().map(|job| {
                let ward = ward.clone();
                async move {
                let budget = Duration::from_millis((LEASE_MS - 30_000) as u64);
                let outcome = match tokio::time::timeout(budget, run(&ward, &job)).await {
                    Ok(r) => r,
                    Err(_) => Err(ward_core::Error::Unavailable(format!(
                        "gave up after {} s",
                        budget.as_secs()
                    ))),
                };
                let end = match outcome {
                    Ok(()) => JobEnd::Done,
                    Err(e) if job.attempts >= MAX_ATTEMPTS => {
                        tracing::warn!(kind = %job.kind, key = %job.key, error = %e.message(), "background job failed for good");
                        ward.job_failed(&job, &e.message()).await;
                        JobEnd::Done
                    }
                    Err(e) => JobEnd::Retry {
                        at: ward.clock.now_millis() + backoff_ms(job.attempts),
                        error: e.message(),
                    },
                };
                if let Err(e) = ward.store.finish_job(&job, end, ward.clock.now_millis()).await {
                    tracing::warn!(error = %e.message(), "finishing a background job failed");
                }
                }
            });
            futures_util::future::join_all(runs).await;
        }
    })
}

/// 1 s, 2 s, 4 s, … up to about a minute.
fn backoff_ms(attempts: i64) -> i64 {
    1000 << attempts.clamp(0, 6)
}

async fn run(ward: &Arc<Ward>, job: &JobRecord) -> Result<()> {
    match job.kind.as_str() {
        INVENTORY => match split_key(&job.key) {
            Some((repo, digest)) => ward.build_inventory(repo, digest).await,
            None => Ok(()),
        },
        REPORT => match split_key(&job.key) {
            Some((repo, digest)) => ward.build_report(repo, digest).await,
            None => Ok(()),
        },
        REEVAL => match job.key.split_once('|') {
            Some((scope, name)) => reevaluate(ward, (!scope.is_empty()).then_some(scope), name).await,
            None => Ok(()),
        },
        BACKFILL => backfill(ward).await,
        TIDY => ward.store.tidy_feed_index().await,
        other => {
            tracing::warn!(kind = other, "unknown background job kind; dropped");
            Ok(())
        }
    }
}

/// Re-evaluates every manifest holding a package of this name (in any of
/// its spellings), in repos within `scope` (an organization; None: every
/// one, for a change to a public advisory group).
async fn reevaluate(ward: &Arc<Ward>, scope: Option<&str>, name: &str) -> Result<()> {
    let names = super::matching::name_variants(name);
    let mut after = None;
    loop {
        let page = ward
            .store
            .manifests_with_packages(&names, scope, after.as_ref(), PAGE)
            .await?;
        ward.reevaluate_manifests(&names, &page).await?;
        if page.len() < PAGE as usize {
            return Ok(());
        }
        after = page.last().cloned();
    }
}

/// Queues an inventory for every manifest without one.
async fn backfill(ward: &Ward) -> Result<()> {
    let mut after = None;
    let mut queued = 0usize;
    loop {
        let page = ward.store.manifests_without_inventory(after.as_ref(), PAGE).await?;
        queued += page.len();
        let jobs: Vec<(String, String)> = page
            .iter()
            .map(|(r, d)| (INVENTORY.to_owned(), super::key(r, d)))
            .collect();
        ward.enqueue(jobs).await;
        if page.len() < PAGE as usize {
            if queued > 0 {
                tracing::info!(manifests = queued, "queued inventories for the report backfill");
            }
            return Ok(());
        }
        after = page.last().cloned();
    }
}
