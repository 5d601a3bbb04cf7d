//! `ward server`: REST/JSON and gRPC on one port over one service layer.
//!
//! ```text
//!  request ──► transport ──► service ──► store
//!             (rest/, grpc/)  (services/, authz)  (ward-store)
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use ward_core::clock::{Clock, SystemClock};

pub mod authz;
pub mod backup;
pub mod config;
mod grpc;
mod oci;
pub mod ratelimit;
pub mod replicas;
pub mod rest;
pub mod serve;
pub mod services;
pub mod status;
pub mod telemetry;
pub mod traces;
pub mod ward;

pub use config::ServerConfig;
pub use ward::Ward;

/// The path part of the issuer URL ("" when it has none), where discovery lives.
fn issuer_path(issuer: &str) -> String {
    let after_scheme = issuer.split_once("://").map_or(issuer, |(_, rest)| rest);
    after_scheme
        .find('/')
        .map(|i| after_scheme[i..].trim_end_matches('/').to_owned())
        .unwrap_or_default()
}

/// The OpenAPI document (pretty JSON) of a server whose issuer URL is `issuer`.
pub fn openapi_json(issuer: &str) -> String {
    let doc = rest::openapi::document(&rest::endpoints(&issuer_path(issuer)));
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// The whole HTTP surface: REST routes, gRPC services, request tracing, and
/// the HTTP/1 body handling that keeps connections reusable.
pub fn router(ward: Arc<Ward>) -> axum::Router {
    let issuer_path = issuer_path(ward.tokens.issuer());
    let rest = rest::router(ward.clone(), &issuer_path);
    let methods = Arc::new(rest::table::Methods::new(&rest::endpoints(&issuer_path)));
    let routes = grpc::add_services(rest, ward.clone());
    // Wrapped around the router once: `Router::layer` would wrap every route,
    // and a per-route middleware clones that route's handlers per request.
    let outer = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn(telemetry::observe))
        .layer(axum::middleware::from_fn_with_state(ward, ratelimit::limit))
        .layer(
            // Failures worth an ERROR are logged where they happen
            // (`status::log_internal`); a 501 for an unknown verb is not one.
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(traces::request_span)
                .on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .layer(axum::middleware::from_fn(status::log_failures))
        .layer(axum::middleware::from_fn(rest::drain_unread_bodies))
        // A method the document does not list at a path it has is 405
        // first; what is left of the public API Ward lacks is then 501.
        .layer(axum::middleware::from_fn_with_state(
            methods.clone(),
            rest::table::documented_methods,
        ))
        .layer(axum::middleware::from_fn(rest::unserved::unimplemented))
        .layer(axum::middleware::from_fn(traces::service_span))
        .service(routes);
    axum::Router::new().fallback_service(outer)
}

/// Settings under which a server records the URLs it mints tokens for, so
/// `ward admin token` can mint for the running server.
const SETTING_ISSUER_URL: &str = "issuer_url";
const SETTING_API_URL: &str = "api_url";

/// Opens the store and bootstraps the service state for `config`, given the
/// address the server is bound to (for the default URLs).
pub async fn open(config: &ServerConfig, bound: SocketAddr, clock: Arc<dyn Clock>) -> anyhow::Result<Arc<Ward>> {
    let store = ward_store::open(&config.database_url())
        .await
        .context("opening the database")?;
    let (issuer, api) = config.urls(bound);
    let secret = server_secret(config)?;
    let mut ward = Ward::bootstrap(store, clock, issuer, api, blob_store(config)?, secret)
        .await
        .context("bootstrapping")?;
    if let Some(url) = &config.registry_url {
        ward.tokens.set_registry_audience(url.trim_end_matches('/').to_owned());
    }
    ward.max_blob_bytes = config.max_blob_bytes;
    ward.vulns.limits.max_layer_bytes = config.max_layer_bytes;
    ward.max_export_bytes = config.max_export_bytes;
    ward.event_retention_days = config.event_retention_days.max(1);
    ward.max_pending_logins_per_client = config.max_pending_logins_per_client.max(1);
    ward.public_advisories = config
        .public_advisories
        .iter()
        .map(|g| ward_core::uidp::Uidp::parse("--public-advisories", g.trim()))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{}", e.message()))?;
    ward.osv_ecosystem = config.osv_ecosystem.clone();
    ward.rate_limits = config.rate_limits()?;
    ward.allow_org_creation = config.allow_org_creation;
    let policy = ward_auth::upstream::FetchPolicy {
        allow_loopback_http: config.dev,
        allow_insecure: config.allow_insecure_issuers,
    };
    ward.upstream = ward_auth::upstream::Upstream::new(policy, ward.clock.clone());
    ward.sink_policy = ward_auth::upstream::FetchPolicy {
        allow_loopback_http: config.dev,
        allow_insecure: config.allow_insecure_sinks,
    };
    Ok(Arc::new(ward))
}

/// The server's secret key: `--secret-key`, else `<data-dir>/secret.key`
/// (created on first use).
fn server_secret(config: &ServerConfig) -> anyhow::Result<ward_auth::secret::ServerSecret> {
    Ok(match &config.secret_key {
        Some(text) => ward_auth::secret::ServerSecret::from_base64(text)
            .map_err(|e| anyhow::anyhow!("--secret-key: {}", e.message()))?,
        None => {
            std::fs::create_dir_all(&config.data_dir)
                .with_context(|| format!("creating {}", config.data_dir.display()))?;
            let path = config.data_dir.join("secret.key");
            ward_auth::secret::ServerSecret::load_or_create(&path)
                .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?
        }
    })
}

/// The registry's blob store: `--blob-store s3://…`, else the data directory.
pub(crate) fn blob_store(config: &ServerConfig) -> anyhow::Result<Arc<dyn ward_blob::BlobStore>> {
    match config.blob_store.as_deref() {
        Some(url) if url.starts_with("s3://") => Ok(Arc::new(telemetry::MeteredBlobs(Arc::new(
            ward_blob::S3Blobs::open(url)?,
        )))),
        Some(other) => anyhow::bail!("--blob-store {other}: expected s3://bucket?endpoint=…"),
        None => {
            let dir = config.data_dir.join("registry");
            let blobs = ward_blob::LocalBlobs::open(&dir)
                .with_context(|| format!("opening the blob store at {}", dir.display()))?;
            Ok(Arc::new(telemetry::MeteredBlobs(Arc::new(blobs))))
        }
    }
}

/// Writes the admin token file (mode 0600) and returns its path.
fn write_admin_token(config: &ServerConfig, token: &str) -> anyhow::Result<std::path::PathBuf> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::create_dir_all(&config.data_dir).with_context(|| format!("creating {}", config.data_dir.display()))?;
    let path = config.data_dir.join("admin.token");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    Ok(path)
}

/// A server running in this process (tests, and `ward server` itself).
pub struct Running {
    pub addr: SocketAddr,
    /// Where `/metrics` is served (`--metrics-listen`).
    pub metrics_addr: Option<SocketAddr>,
    pub ward: Arc<Ward>,
    shutdown: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Graceful shutdown: stop accepting, let in-flight requests finish.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(());
        self.task.await??;
        Ok(())
    }

    /// Waits until the server stops by itself (after `shutdown` resolves).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await??;
        Ok(())
    }
}

/// Binds, bootstraps and starts serving; returns once the server accepts requests.
/// The server shuts down gracefully when `shutdown` resolves or on [`Running::stop`].
pub async fn start(
    config: &ServerConfig,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Running> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    // The metrics address, bound before anything records.
    let metrics_listener = match config.metrics_listen {
        Some(at) => {
            telemetry::install();
            let l = tokio::net::TcpListener::bind(at)
                .await
                .with_context(|| format!("binding --metrics-listen {at}"))?;
            Some(l)
        }
        None => None,
    };
    let metrics_addr = metrics_listener.as_ref().map(|l| l.local_addr()).transpose()?;
    let ward = open(config, addr, clock).await?;
    ward.store
        .set_setting(SETTING_ISSUER_URL, ward.tokens.issuer().as_bytes().to_vec())
        .await?;
    ward.store
        .set_setting(SETTING_API_URL, ward.tokens.audience().as_bytes().to_vec())
        .await?;
    let token = ward.admin_token()?;
    let path = write_admin_token(config, &token)?;
    tracing::info!(path = %path.display(), "wrote the server admin token");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let app = router(ward.clone());
    let limits = config.limits();
    let refresher = {
        let ward = ward.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(ward_auth::KEY_REFRESH_PERIOD);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = ward.tokens.refresh().await {
                    tracing::warn!(error = %e, "could not refresh signing keys");
                }
            }
        })
    };
    // Upload sessions a client abandoned expire on their own.
    let sweeper = {
        let ward = ward.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(services::registry::oci::UPLOAD_SWEEP_EVERY);
            loop {
                tick.tick().await;
                match ward.expire_uploads().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(sessions = n, "expired stale upload sessions"),
                    Err(e) => tracing::warn!(error = %e.message(), "expiring stale upload sessions failed"),
                }
                ward.rate_limits.sweep();
                // Events past the retention go on the same tick.
                match ward.prune_events().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(events = n, "pruned events past their retention"),
                    Err(e) => tracing::warn!(error = %e.message(), "pruning the event log failed"),
                }
            }
        })
    };
    // Background work (inventories, reports, re-evaluation, backfill).
    // The previous run's leases go before any worker claims (on SQLite a
    // lease can only be this server's own, from before a crash).
    if let Err(e) = ward.store.release_orphaned_leases().await {
        tracing::warn!(error = %e.message(), "could not release the previous run's job leases");
    }
    let worker = services::vulns::jobs::spawn(ward.clone());
    // Event deliveries (their own lane of the same queue).
    let deliverer =
        services::events::delivery::spawn(ward.clone(), services::events::delivery::owner(&config.data_dir));
    let pull_writer = services::events::registry::spawn_pull_writer(ward.clone());
    // Other replicas' access changes (PostgreSQL).
    let changes = replicas::spawn(ward.clone())
        .await
        .context("listening for other servers' changes")?;
    let metrics = metrics_listener.map(|l| telemetry::serve(l, ward.clone()));
    let task = tokio::spawn(async move {
        let stop = async move {
            tokio::select! {
                _ = shutdown => {}
                _ = rx => {}
            }
        };
        let served = serve::serve(listener, app, limits, stop).await;
        refresher.abort();
        sweeper.abort();
        worker.abort();
        deliverer.abort();
        // Gone before this returns: its lock on `deliverer.id` with it, for
        // a server started again on the same directory.
        let _ = deliverer.await;
        pull_writer.abort();
        for task in [changes, metrics].into_iter().flatten() {
            task.abort();
        }
        served
    });
    Ok(Running {
        addr,
        metrics_addr,
        ward,
        shutdown: tx,
        task,
    })
}

/// `ward server`: serve until SIGTERM or SIGINT, then drain and exit.
pub async fn run(config: ServerConfig) -> anyhow::Result<()> {
    let running = start(&config, Arc::new(SystemClock), shutdown_signal()).await?;
    let api = format!("http://{}", running.addr);
    println!("ward listening on {api}");
    if let Some(m) = running.metrics_addr {
        println!("metrics at http://{m}/metrics");
    }
    if config.dev {
        let token = running.ward.admin_token()?;
        println!("# Development mode. To use this server from a shell:");
        println!("export WARD_API={api}");
        println!("export WARD_TOKEN={token}");
    }
    running.wait().await?;
    tracing::info!("stopped");
    Ok(())
}

/// `ward admin rotate-key`: adds a signing key (servers sign with it from
/// their next refresh, within a minute) and retires keys whose tokens have all
/// expired. Returns the new key id.
pub async fn rotate_key(config: &ServerConfig) -> anyhow::Result<String> {
    let store = ward_store::open(&config.database_url())
        .await
        .context("opening the database")?;
    let secret = server_secret(config)?;
    let kid = ward_auth::rotate_key(store.as_ref(), &secret, SystemClock.now_millis()).await?;
    // Running servers load the new key (and drop retired ones) now.
    store.broadcast(replicas::KEYS).await?;
    Ok(kid)
}

/// Marks an organization verified with its email domains (`ward admin
/// verify-org`): people whose login email is at one of them can look it up
/// and ask to join, and its name can stand for its identity provider at login.
pub async fn verify_org(config: &ServerConfig, org: &str, domains: &[String]) -> anyhow::Result<Vec<String>> {
    let uid = ward_core::uidp::Uidp::parse("org", org).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
    anyhow::ensure!(uid.is_root(), "{org} is not an organization (a root group)");
    let mut normalized = Vec::new();
    for d in domains {
        let n = services::people::directory::normalize_domain(d)
            .ok_or_else(|| anyhow::anyhow!("--domain {d}: not a domain name like example.com"))?;
        normalized.push(n);
    }
    let store = ward_store::open(&config.database_url())
        .await
        .context("opening the database")?;
    store
        .verify_org(&uid, &normalized)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.message()))?;
    Ok(normalized)
}

/// `ward admin token`: a fresh admin token straight from the database, for
/// the URLs the server on that database last started with (flags override).
pub async fn admin_token(config: &ServerConfig) -> anyhow::Result<String> {
    let mut config = config.clone();
    if config.issuer_url.is_none() || config.api_url.is_none() {
        let store = ward_store::open(&config.database_url())
            .await
            .context("opening the database")?;
        let recorded = |v: Option<Vec<u8>>| v.and_then(|b| String::from_utf8(b).ok());
        if config.issuer_url.is_none() {
            config.issuer_url = recorded(store.setting(SETTING_ISSUER_URL).await?);
        }
        if config.api_url.is_none() {
            config.api_url = recorded(store.setting(SETTING_API_URL).await?);
        }
    }
    let ward = open(&config, config.listen, Arc::new(SystemClock)).await?;
    Ok(ward.admin_token()?)
}

/// `ward admin backfill-reports`: queues the inventory of every manifest
/// that has none (images pushed before reports existed; a server does the
/// work, resumably) and calls `progress(done, total)` as running servers
/// read them, until every manifest has one. Gives up when nothing moves for
/// `stall` (no server is running, or one image takes that long).
pub async fn backfill_reports(
    config: &ServerConfig,
    stall: std::time::Duration,
    mut progress: impl FnMut(u64, u64),
) -> anyhow::Result<(u64, u64)> {
    let store = ward_store::open(&config.database_url())
        .await
        .context("opening the database")?;
    let now = SystemClock.now_millis();
    store
        .enqueue_jobs(&[(services::vulns::BACKFILL.to_owned(), String::new())], now, now)
        .await?;
    let mut last = (i64::MIN, std::time::Instant::now());
    loop {
        let (total, done) = store.inventory_progress().await?;
        let (total, done) = (total.max(0) as u64, done.clamp(0, total.max(0)) as u64);
        progress(done, total);
        if done >= total {
            return Ok((done, total));
        }
        if done as i64 != last.0 {
            last = (done as i64, std::time::Instant::now());
        } else if last.1.elapsed() >= stall {
            anyhow::bail!(
                "{done} of {total} manifests have an inventory and none was read for {} s: is a server \
                 (`ward serve` on this database) running? It does the work, and resumes where this stopped",
                stall.as_secs()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// What `ward admin gc` found (and, unless a dry run, removed).
#[derive(Debug, Default)]
pub struct GcReport {
    pub uploads: usize,
    pub blobs: usize,
}

/// `ward admin gc`: removes upload sessions untouched for `grace` and blobs
/// that no repo links and no manifest names, created more than `grace` ago.
/// Safe beside running servers: a blob is forgotten in the database only if
/// still unreferenced in that statement, and its bytes are kept if they were
/// written within `grace` (a push racing the collection).
pub async fn gc(config: &ServerConfig, grace: std::time::Duration, dry_run: bool) -> anyhow::Result<GcReport> {
    let store = ward_store::open(&config.database_url())
        .await
        .context("opening the database")?;
    let blobs = blob_store(config)?;
    let before = SystemClock.now_millis() - i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let mut report = GcReport::default();
    const BATCH: u32 = 1000;
    loop {
        let stale = store.stale_uploads(before, BATCH).await?;
        if dry_run {
            report.uploads = stale.len();
            break;
        }
        for id in &stale {
            store.delete_upload(id).await?;
            blobs.cancel(id).await?;
        }
        report.uploads += stale.len();
        if stale.len() < BATCH as usize {
            break;
        }
    }
    let mut seen = 0;
    loop {
        let unreferenced = store.unreferenced_blobs(before, BATCH).await?;
        if dry_run {
            report.blobs = unreferenced.len();
            break;
        }
        for d in &unreferenced {
            if store.forget_blob(d).await?
                && let Some(digest) = ward_core::registry::Digest::parse(d)
            {
                blobs.remove(&digest, grace).await?;
                report.blobs += 1;
            }
        }
        seen += unreferenced.len();
        if unreferenced.len() < BATCH as usize || seen > 10_000_000 {
            break;
        }
    }
    Ok(report)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown signal received; draining");
}

#[cfg(test)]
mod tests {
    #[test]
    fn issuer_paths() {
        assert_eq!(super::issuer_path("http://127.0.0.1:8080"), "");
        assert_eq!(super::issuer_path("https://auth.example.com/ward/"), "/ward");
    }
}
