//! The service layer's root: shared state and first-start bootstrap.
//!
//! Every transport (REST, gRPC, and later OCI) holds an `Arc<Ward>` and calls
//! its per-resource methods (in `services/`), which validate, authorize and talk
//! to the store.

use std::sync::Arc;

use rand::RngCore;
use ward_auth::Tokens;
use ward_core::capability::BUILTIN_ROLES;
use ward_core::clock::Clock;
use ward_core::pagetoken::PageTokens;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_store::Store;

const SETTING_ADMIN: &str = "admin_identity_uid";
const SETTING_PAGE_KEY: &str = "page_token_key";

pub struct Ward {
    pub store: Arc<dyn Store>,
    pub tokens: Tokens,
    pub clock: Arc<dyn Clock>,
    pub page_tokens: PageTokens,
    /// The server-admin identity (break-glass: may do everything).
    pub admin: Uidp,
    /// Whether identities other than the admin may create organizations.
    pub allow_org_creation: bool,
    /// Upstream OIDC issuers' keys, for the token exchange.
    pub upstream: ward_auth::upstream::Upstream,
    /// Where event deliveries may go (the token exchange's rules; loopback
    /// with `--dev`, anything with `--allow-insecure-sinks`).
    pub sink_policy: ward_auth::upstream::FetchPolicy,
    /// Moves whenever cached access is dropped (see `replicas`).
    pub(crate) access_epoch: std::sync::atomic::AtomicU64,
    /// Grants per identity, for at most `authz::GRANTS_TTL`.
    pub(crate) grants_cache: moka::sync::Cache<String, Arc<crate::authz::Grants>>,
    /// Compiled claim patterns by their text, at most [`PATTERN_CACHE_BYTES`]
    /// of compiled automata.
    pub(crate) patterns: moka::sync::Cache<String, Arc<ward_core::pattern::Pattern>>,
    /// CPU-heavy work a request asks for (pattern compiles, readme
    /// sanitizing, export compression): one job per core at a time, on
    /// blocking threads (see [`Ward::cpu`]).
    pub(crate) cpu_permits: tokio::sync::Semaphore,
    /// Registry blob bytes.
    pub blobs: Arc<dyn ward_blob::BlobStore>,
    /// Largest blob one upload may create.
    pub max_blob_bytes: u64,
    /// Most bytes of OSV documents one export holds.
    pub max_export_bytes: usize,
    /// How long the event log keeps an event (days).
    pub event_retention_days: u32,
    /// Most headless logins pending at once per client address.
    pub max_pending_logins_per_client: i64,
    /// Organization names the registry resolved, for a few seconds.
    pub(crate) org_names: moka::sync::Cache<String, Arc<[Uidp]>>,
    /// One append at a time per upload session (on this server).
    pub(crate) upload_locks: moka::sync::Cache<String, Arc<tokio::sync::Mutex<()>>>,
    /// Registry logins with pull-token credentials (identity uid + identity
    /// token), by the SHA-256 of both, until shortly before they expire.
    pub(crate) registry_logins: moka::sync::Cache<[u8; 32], Arc<ward_auth::Claims>>,
    /// Groups whose advisories anyone may read (OSV and the advisory feed).
    pub public_advisories: Vec<Uidp>,
    /// The OSV ecosystem of exported advisories (its lowercase is the purl
    /// namespace and the feed's package namespace).
    pub osv_ecosystem: String,
    /// The API's base URL, for links in exported documents.
    pub api_url: String,
    /// Advisory imports in progress at once.
    pub(crate) import_permits: tokio::sync::Semaphore,
    /// OSV exports in progress at once (an export that finds none free is
    /// RESOURCE_EXHAUSTED).
    pub export_permits: Arc<tokio::sync::Semaphore>,
    /// The server's secret key (never in the database): seals client secrets,
    /// signs invite codes, seals login state.
    pub secret: ward_auth::secret::ServerSecret,
    /// Capabilities of roles held through login sessions, by role uid, and
    /// whether session tokens' identities exist (`identity:<uid>`), for at
    /// most `authz::GRANTS_TTL`.
    pub(crate) session_role_caps: moka::sync::Cache<String, Option<String>>,
    /// When this server last wrote each identity's `lastSeenTime` (its
    /// clock's milliseconds): an exchange writes it at most once a
    /// [`LAST_SEEN_EVERY_MS`] per identity, not once per token.
    pub(crate) last_seen_written: moka::sync::Cache<String, i64>,
    /// Vulnerability reports' background state (job wake-ups, parsed feed
    /// records).
    pub vulns: crate::services::vulns::VulnState,
    /// Registry pull events waiting for their batched write.
    pub pulls: crate::services::events::registry::Pulls,
    /// Event sinks' clients, each bound to its checked address.
    pub(crate) sink_clients: crate::services::events::delivery::Clients,
    /// Request rate limits (off unless configured).
    pub rate_limits: crate::ratelimit::RateLimits,
}

/// How stale an identity's `lastSeenTime` may be: the exchange path writes
/// it at most this often per identity (per server).
pub const LAST_SEEN_EVERY_MS: i64 = 60_000;

/// Default for [`Ward::osv_ecosystem`].
pub const DEFAULT_OSV_ECOSYSTEM: &str = "Chainguard";

/// Default for [`Ward::max_blob_bytes`].
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 64 * 1024 * 1024 * 1024;

/// Memory the compiled-pattern cache may hold.
const PATTERN_CACHE_BYTES: u64 = 64 * 1024 * 1024;

impl Ward {
    /// Loads (on first start: creates) the signing key, the page-token key and
    /// the server-admin identity. Safe when several replicas start at once.
    pub async fn bootstrap(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        issuer: String,
        audience: String,
        blobs: Arc<dyn ward_blob::BlobStore>,
        secret: ward_auth::secret::ServerSecret,
    ) -> Result<Self> {
        let admin_raw = store
            .setting_or_init(SETTING_ADMIN, Uidp::new_root().as_str().as_bytes().to_vec())
            .await?;
        let admin = std::str::from_utf8(&admin_raw)
            .ok()
            .filter(|s| Uidp::is_valid(s))
            .map(|s| Uidp::parse("admin", s))
            .transpose()?
            .ok_or_else(|| Error::internal("stored admin identity uid is corrupt"))?;
        let mut key = vec![0u8; 32];
        rand::thread_rng().fill_bytes(&mut key);
        let page_key = store.setting_or_init(SETTING_PAGE_KEY, key).await?;
        let audience_url = audience.clone();
        let tokens = Tokens::load(store.clone(), clock.clone(), issuer, audience, secret.clone()).await?;
        let now = clock.now_millis();
        let builtins: Vec<ward_store::RoleRecord> = BUILTIN_ROLES
            .iter()
            .map(|r| ward_store::RoleRecord {
                uid: r.uid(),
                parent_uid: None,
                name: r.name.into(),
                description: r.description.into(),
                capabilities: r.caps().to_storage(),
                create_time: now,
                update_time: now,
            })
            .collect();
        store.upsert_builtin_roles(&builtins).await?;
        let grants_cache = moka::sync::Cache::builder()
            .max_capacity(100_000)
            .time_to_live(crate::authz::GRANTS_TTL)
            .build();
        Ok(Self {
            store,
            tokens,
            clock: clock.clone(),
            page_tokens: PageTokens::new(page_key),
            admin,
            allow_org_creation: false,
            upstream: ward_auth::upstream::Upstream::new(Default::default(), clock.clone()),
            sink_policy: Default::default(),
            access_epoch: Default::default(),
            grants_cache,
            patterns: moka::sync::Cache::builder()
                .weigher(|k: &String, v: &Arc<ward_core::pattern::Pattern>| {
                    u32::try_from(k.len() + v.memory_usage()).unwrap_or(u32::MAX)
                })
                .max_capacity(PATTERN_CACHE_BYTES)
                .build(),
            cpu_permits: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            ),
            blobs,
            max_blob_bytes: DEFAULT_MAX_BLOB_BYTES,
            max_export_bytes: crate::services::advisories::osv::DEFAULT_MAX_EXPORT_BYTES,
            event_retention_days: crate::services::events::DEFAULT_RETENTION_DAYS,
            max_pending_logins_per_client: ward_store::people::MAX_DEVICE_LOGINS_PER_CLIENT,
            org_names: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(std::time::Duration::from_secs(5))
                .build(),
            upload_locks: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_idle(std::time::Duration::from_secs(3600))
                .build(),
            registry_logins: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(std::time::Duration::from_secs(60))
                .build(),
            public_advisories: Vec::new(),
            osv_ecosystem: DEFAULT_OSV_ECOSYSTEM.into(),
            api_url: audience_url,
            import_permits: tokio::sync::Semaphore::new(crate::rest::advisories::IMPORTS_AT_ONCE),
            export_permits: Arc::new(tokio::sync::Semaphore::new(
                crate::services::advisories::osv::EXPORTS_AT_ONCE,
            )),
            secret,
            session_role_caps: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(crate::authz::GRANTS_TTL)
                .build(),
            last_seen_written: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(std::time::Duration::from_millis(LAST_SEEN_EVERY_MS as u64))
                .build(),
            vulns: crate::services::vulns::VulnState::default(),
            pulls: Default::default(),
            sink_clients: Default::default(),
            rate_limits: Default::default(),
        })
    }

    /// Runs CPU-heavy work off the async workers: on a blocking thread, at
    /// most one job per core at once (a burst of expensive requests queues
    /// here instead of stalling every other request). Callers authorize and
    /// bound the input first.
    pub(crate) async fn cpu<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        let _permit = self
            .cpu_permits
            .acquire()
            .await
            .map_err(|_| Error::Unavailable("the server is stopping".into()))?;
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| Error::internal(format_args!("a CPU job failed: {e}")))
    }

    /// A fresh API token for the server admin.
    pub fn admin_token(&self) -> Result<String> {
        self.tokens.mint(self.admin.as_str())
    }
}
