//! `ward server` configuration: one typed struct, every flag also a `WARD_*`
//! environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, clap::Args)]
pub struct ServerConfig {
    /// Address to listen on (REST and gRPC share it). Port 0 picks a free port.
    #[arg(long, env = "WARD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Serve Prometheus metrics at `/metrics` on this address (off unless
    /// given; never on the public listener). Port 0 picks a free port.
    #[arg(long, env = "WARD_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Directory for the embedded database and the admin token.
    #[arg(long, env = "WARD_DATA_DIR", default_value = "./ward-data")]
    pub data_dir: PathBuf,

    /// Database: a `postgres://…` URL selects PostgreSQL; otherwise a SQLite file
    /// path. Default: `<data-dir>/ward.db`.
    #[arg(long, env = "WARD_DATABASE", hide_env_values = true)]
    pub database: Option<String>,

    /// This server's OIDC issuer URL (`iss` of the tokens it mints). Default:
    /// `http://<listen>`.
    #[arg(long, env = "WARD_ISSUER_URL")]
    pub issuer_url: Option<String>,

    /// The API's public URL (`aud` of API tokens). Default: `http://<listen>`.
    #[arg(long, env = "WARD_API_URL")]
    pub api_url: Option<String>,

    /// The registry's public URL (`aud` of registry tokens, and the host in
    /// its challenges). Default: the API URL.
    #[arg(long, env = "WARD_REGISTRY_URL")]
    pub registry_url: Option<String>,

    /// Where registry blobs live: `s3://bucket?endpoint=…&region=…` (an
    /// S3-compatible bucket several replicas share; credentials from the
    /// `AWS_*` environment). Default: `<data-dir>/registry` on local disk.
    #[arg(long, env = "WARD_BLOB_STORE")]
    pub blob_store: Option<String>,

    /// Largest blob one registry upload may create, in bytes.
    #[arg(long, env = "WARD_MAX_BLOB_BYTES", default_value_t = crate::ward::DEFAULT_MAX_BLOB_BYTES)]
    pub max_blob_bytes: u64,

    /// Most bytes one image layer may decompress to when Ward reads an
    /// image's packages (a larger layer gives the image an inventory error).
    #[arg(long, env = "WARD_MAX_LAYER_BYTES", default_value_t = crate::services::vulns::DEFAULT_MAX_LAYER_BYTES)]
    pub max_layer_bytes: u64,

    /// Most bytes of OSV documents one `/osv/all.json` or `/osv/all.zip`
    /// holds; a larger export is refused (the paged feed serves it).
    #[arg(long, env = "WARD_MAX_EXPORT_BYTES", default_value_t = crate::services::advisories::osv::DEFAULT_MAX_EXPORT_BYTES)]
    pub max_export_bytes: usize,

    /// How many days the event log (the audit trail) keeps an event; older
    /// ones are pruned in the background.
    #[arg(long, env = "WARD_EVENT_RETENTION_DAYS", default_value_t = crate::services::events::DEFAULT_RETENTION_DAYS)]
    pub event_retention_days: u32,

    /// A group whose advisories anyone may read, without a token: OSV
    /// documents and the advisory feed (repeatable; comma-separated in the
    /// environment).
    #[arg(long = "public-advisories", env = "WARD_PUBLIC_ADVISORIES", value_delimiter = ',')]
    pub public_advisories: Vec<String>,

    /// The OSV ecosystem exported advisories name (e.g. Chainguard, Wolfi).
    #[arg(long, env = "WARD_OSV_ECOSYSTEM", default_value = crate::ward::DEFAULT_OSV_ECOSYSTEM)]
    pub osv_ecosystem: String,

    /// The server's secret key (32 bytes, base64): seals identity providers'
    /// client secrets and signs invite codes. Replicas sharing a database
    /// need the same key. Default: `<data-dir>/secret.key`, created on first
    /// start.
    #[arg(long, env = "WARD_SECRET_KEY", hide_env_values = true)]
    pub secret_key: Option<String>,

    /// Development mode: print ready-to-paste `export` lines for the admin token.
    #[arg(long, env = "WARD_DEV")]
    pub dev: bool,

    /// Let identities other than the server admin create organizations (each
    /// creator becomes the new organization's owner).
    #[arg(long, env = "WARD_ALLOW_ORG_CREATION")]
    pub allow_org_creation: bool,

    /// Let the token exchange fetch keys from plain-http issuers and from
    /// private, loopback or link-local addresses. `--dev` allows loopback only.
    #[arg(long, env = "WARD_ALLOW_INSECURE_ISSUERS")]
    pub allow_insecure_issuers: bool,

    /// Let event subscriptions deliver to plain-http sinks and to private,
    /// loopback or link-local addresses. `--dev` allows loopback only.
    #[arg(long, env = "WARD_ALLOW_INSECURE_SINKS")]
    pub allow_insecure_sinks: bool,

    /// Most connections served at once; more wait to be accepted.
    #[arg(long, env = "WARD_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,

    /// Most connections served at once from one client address; more are
    /// closed at once. Behind a proxy every client shares its address: raise
    /// this to --max-connections there.
    #[arg(
        long,
        env = "WARD_MAX_CONNECTIONS_PER_CLIENT",
        default_value_t = crate::serve::DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    )]
    pub max_connections_per_client: usize,

    /// Most headless logins pending at once that one client address (an
    /// IPv6 /64) started. Behind a proxy every client shares its address:
    /// raise it there.
    #[arg(long, env = "WARD_MAX_PENDING_LOGINS_PER_CLIENT", default_value_t = ward_store::people::MAX_DEVICE_LOGINS_PER_CLIENT)]
    pub max_pending_logins_per_client: i64,

    /// Requests per second one identity (a valid Ward token's subject) may
    /// make, per replica; 0: no limit.
    #[arg(long, env = "WARD_RATE_LIMIT_IDENTITY", default_value_t = 0)]
    pub rate_limit_identity: u32,

    /// Requests one identity may make at once above its rate (the bucket's
    /// size); 0: the rate.
    #[arg(long, env = "WARD_RATE_LIMIT_IDENTITY_BURST", default_value_t = 0)]
    pub rate_limit_identity_burst: u32,

    /// Requests per second one client address (an IPv6 /64) may make without
    /// a valid Ward token (token exchange, registry /token, login pages), per
    /// replica; 0: no limit.
    #[arg(long, env = "WARD_RATE_LIMIT_CLIENT", default_value_t = 0)]
    pub rate_limit_client: u32,

    /// The client-address bucket's size; 0: the rate.
    #[arg(long, env = "WARD_RATE_LIMIT_CLIENT_BURST", default_value_t = 0)]
    pub rate_limit_client_burst: u32,

    /// The header a trusted proxy in front of Ward sets to the client's
    /// address (e.g. X-Forwarded-For; its right-most address counts). Only
    /// with a proxy that sets it: otherwise clients could choose their own.
    #[arg(long, env = "WARD_CLIENT_ADDRESS_HEADER")]
    pub client_address_header: Option<String>,

    /// Seconds a client has to send a request's headers (HTTP/1), and to
    /// start its first request on a new connection (HTTP/1 and HTTP/2).
    #[arg(long = "header-read-timeout", env = "WARD_HEADER_READ_TIMEOUT", default_value_t = 10)]
    pub header_read_timeout_secs: u64,

    /// Seconds a connection may stay open with no bytes moving.
    #[arg(long = "idle-timeout", env = "WARD_IDLE_TIMEOUT", default_value_t = 60)]
    pub idle_timeout_secs: u64,

    /// Seconds a client has to send a request's body once its headers arrived.
    #[arg(long = "body-read-timeout", env = "WARD_BODY_READ_TIMEOUT", default_value_t = 30)]
    pub body_read_timeout_secs: u64,
}

impl ServerConfig {
    /// A config for `listen` with every other setting at its default.
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> Self {
        Self {
            listen,
            metrics_listen: None,
            data_dir,
            database: None,
            issuer_url: None,
            api_url: None,
            registry_url: None,
            blob_store: None,
            max_blob_bytes: crate::ward::DEFAULT_MAX_BLOB_BYTES,
            max_layer_bytes: crate::services::vulns::DEFAULT_MAX_LAYER_BYTES,
            max_export_bytes: crate::services::advisories::osv::DEFAULT_MAX_EXPORT_BYTES,
            event_retention_days: crate::services::events::DEFAULT_RETENTION_DAYS,
            public_advisories: Vec::new(),
            osv_ecosystem: crate::ward::DEFAULT_OSV_ECOSYSTEM.into(),
            secret_key: None,
            dev: false,
            allow_org_creation: false,
            allow_insecure_issuers: false,
            allow_insecure_sinks: false,
            max_connections: 1024,
            max_connections_per_client: crate::serve::DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            max_pending_logins_per_client: ward_store::people::MAX_DEVICE_LOGINS_PER_CLIENT,
            header_read_timeout_secs: 10,
            idle_timeout_secs: 60,
            body_read_timeout_secs: 30,
            rate_limit_identity: 0,
            rate_limit_identity_burst: 0,
            rate_limit_client: 0,
            rate_limit_client_burst: 0,
            client_address_header: None,
        }
    }

    /// The rate limits (see [`crate::ratelimit`]).
    pub fn rate_limits(&self) -> anyhow::Result<crate::ratelimit::RateLimits> {
        use crate::ratelimit::Rate;
        let header = self
            .client_address_header
            .as_deref()
            .map(|h| {
                http::HeaderName::from_bytes(h.trim().to_ascii_lowercase().as_bytes())
                    .map_err(|_| anyhow::anyhow!("--client-address-header {h}: not a header name"))
            })
            .transpose()?;
        Ok(crate::ratelimit::RateLimits::new(
            Rate {
                per_second: self.rate_limit_identity,
                burst: self.rate_limit_identity_burst,
            },
            Rate {
                per_second: self.rate_limit_client,
                burst: self.rate_limit_client_burst,
            },
            header,
        ))
    }

    /// The connection limits.
    pub fn limits(&self) -> crate::serve::Limits {
        crate::serve::Limits {
            max_connections: self.max_connections.max(1),
            max_connections_per_client: self.max_connections_per_client.max(1),
            header_read_timeout: std::time::Duration::from_secs(self.header_read_timeout_secs.max(1)),
            idle_timeout: std::time::Duration::from_secs(self.idle_timeout_secs.max(1)),
            body_read_timeout: std::time::Duration::from_secs(self.body_read_timeout_secs.max(1)),
        }
    }

    /// The database URL or path, defaulting to SQLite in the data directory.
    pub fn database_url(&self) -> String {
        self.database
            .clone()
            .unwrap_or_else(|| self.data_dir.join("ward.db").display().to_string())
    }

    /// Issuer and API URLs, defaulting to `http://<bound address>`.
    pub fn urls(&self, bound: SocketAddr) -> (String, String) {
        let local = format!("http://{bound}");
        let trim = |s: &String| s.trim_end_matches('/').to_owned();
        (
            self.issuer_url.as_ref().map(trim).unwrap_or_else(|| local.clone()),
            self.api_url.as_ref().map(trim).unwrap_or(local),
        )
    }
}

/// Never print the database URL: it may carry a password.
impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field("metrics_listen", &self.metrics_listen)
            .field("data_dir", &self.data_dir)
            .field(
                "database",
                &self.database.as_ref().map(|d| {
                    if d.starts_with("postgres") {
                        "postgres://<redacted>"
                    } else {
                        d
                    }
                }),
            )
            .field("issuer_url", &self.issuer_url)
            .field("api_url", &self.api_url)
            .field("registry_url", &self.registry_url)
            .field("blob_store", &self.blob_store)
            .field("max_blob_bytes", &self.max_blob_bytes)
            .field("max_layer_bytes", &self.max_layer_bytes)
            .field("max_export_bytes", &self.max_export_bytes)
            .field("secret_key", &self.secret_key.as_ref().map(|_| "<redacted>"))
            .field("dev", &self.dev)
            .field("allow_org_creation", &self.allow_org_creation)
            .field("allow_insecure_issuers", &self.allow_insecure_issuers)
            .field("allow_insecure_sinks", &self.allow_insecure_sinks)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_client", &self.max_connections_per_client)
            .field("max_pending_logins_per_client", &self.max_pending_logins_per_client)
            .field("header_read_timeout_secs", &self.header_read_timeout_secs)
            .field("idle_timeout_secs", &self.idle_timeout_secs)
            .field("body_read_timeout_secs", &self.body_read_timeout_secs)
            .field("rate_limit_identity", &self.rate_limit_identity)
            .field("rate_limit_identity_burst", &self.rate_limit_identity_burst)
            .field("rate_limit_client", &self.rate_limit_client)
            .field("rate_limit_client_burst", &self.rate_limit_client_burst)
            .field("client_address_header", &self.client_address_header)
            .finish()
    }
}
