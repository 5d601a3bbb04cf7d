//! Keeping replicas' caches in step. A change that makes cached access stale
//! (a role, a binding, a deleted identity, a signing key) is broadcast
//! through the database (PostgreSQL `NOTIFY`); every server sharing it drops
//! what it cached before the changing request answers, so the change holds
//! on the next request wherever it lands. The caches' own lifetimes
//! (`authz::GRANTS_TTL`, a minute for registry logins) remain the fallback
//! for a notification that is lost.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::ward::Ward;

/// Grants, session roles, identities' existence and registry logins.
pub const ACCESS: &str = "access";
/// Token signing keys.
pub const KEYS: &str = "keys";

impl Ward {
    /// Forgets cached access after a role, binding or identity change, here
    /// and on every replica.
    pub(crate) async fn grants_changed(&self) {
        self.forget_access();
        if let Err(e) = self.store.broadcast(ACCESS).await {
            tracing::warn!(error = %e.message(), "could not tell other servers about an access change");
        }
    }

    /// Drops every cached grant and login. The epoch moves first, so a load
    /// that began before the change is not cached after it.
    fn forget_access(&self) {
        self.access_epoch.fetch_add(1, Ordering::SeqCst);
        self.grants_cache.invalidate_all();
        self.session_role_caps.invalidate_all();
        self.registry_logins.invalidate_all();
    }

    /// The access epoch: read before loading something to cache, and compare
    /// with [`Ward::still_epoch`] before caching it.
    pub(crate) fn access_epoch(&self) -> u64 {
        self.access_epoch.load(Ordering::SeqCst)
    }

    /// Whether nothing changed access since `epoch` was read.
    pub(crate) fn still_epoch(&self, epoch: u64) -> bool {
        self.access_epoch.load(Ordering::SeqCst) == epoch
    }

    /// Applies one broadcast topic.
    async fn apply(&self, topic: &str) {
        let every = topic == ward_store::EVERY_TOPIC;
        if every || topic == ACCESS {
            self.forget_access();
        }
        if (every || topic == KEYS)
            && let Err(e) = self.tokens.refresh().await
        {
            tracing::warn!(error = %e.message(), "could not reload signing keys");
        }
    }
}

/// Listens for other servers' changes (PostgreSQL only; SQLite has one
/// server). Returns None where there is nothing to listen to.
pub async fn spawn(ward: Arc<Ward>) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(mut topics) = ward.store.listen().await? else {
        return Ok(None);
    };
    Ok(Some(tokio::spawn(async move {
        while let Some(topic) = topics.recv().await {
            ward.apply(&topic).await;
        }
    })))
}
