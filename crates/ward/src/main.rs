//! The `ward` binary: the server and the client in one. Only wiring lives here.

use clap::{Parser, Subcommand};

/// mimalloc: request handling allocates many small, short-lived objects (rows,
/// JSON), where it measurably beats the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ward",
    version,
    about = "Ward: organization access, registry data and vulnerability advisories"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (REST and gRPC on one port).
    Server(ward_server::ServerConfig),
    /// Server administration, run next to the server's data.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Log in (a person with a browser, or a workload with its identity token); print, inspect or forget Ward tokens.
    Auth {
        #[command(flatten)]
        conn: ward_cli::Connection,
        #[command(subcommand)]
        command: ward_cli::auth::AuthCommand,
    },
    /// Event subscriptions, deliveries and the audit trail.
    Events {
        #[command(flatten)]
        conn: ward_cli::Connection,
        #[command(subcommand)]
        command: ward_cli::events::EventsCommand,
    },
    /// Identity and access management.
    Iam {
        #[command(flatten)]
        conn: ward_cli::Connection,
        #[command(subcommand)]
        command: ward_cli::IamCommand,
    },
    /// Registry repos, tags and pull tokens.
    Registry {
        #[command(flatten)]
        conn: ward_cli::Connection,
        #[command(subcommand)]
        command: ward_cli::registry::RegistryCommand,
    },
    /// Vulnerability advisories: list, review, import and export.
    Advisories {
        #[command(flatten)]
        conn: ward_cli::Connection,
        #[command(subcommand)]
        command: ward_cli::advisories::AdvisoriesCommand,
    },
    /// Print the OpenAPI 3.1 document of every REST endpoint (the server's `/openapi.json`).
    Openapi {
        /// The issuer URL the server runs with (its path prefixes the login and token routes).
        #[arg(long = "issuer-url", env = "WARD_ISSUER_URL", default_value = "")]
        issuer: String,
    },
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Print a fresh server-admin API token (valid for one hour).
    Token(ward_server::ServerConfig),
    /// Add a new token signing key; retire keys whose tokens have all expired.
    RotateKey(ward_server::ServerConfig),
    /// Delete registry blobs nothing references and stale upload sessions.
    Gc {
        #[command(flatten)]
        config: ward_server::ServerConfig,
        /// Only what has been unreferenced (or untouched) this long, e.g. 24h, 30m.
        #[arg(long, default_value = "24h", value_parser = ward_cli::registry::parse_duration)]
        grace: std::time::Duration,
        /// Count what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Back up a running server's SQLite database (a consistent online
    /// snapshot) and local blob store into a directory.
    Backup {
        #[command(flatten)]
        config: ward_server::ServerConfig,
        /// The backup directory (created; a later backup into it copies only new blobs).
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Restore a backup into the data directory (stop the server first).
    Restore {
        #[command(flatten)]
        config: ward_server::ServerConfig,
        /// The backup directory.
        #[arg(long)]
        from: std::path::PathBuf,
        /// Replace an existing database.
        #[arg(long)]
        force: bool,
    },
    /// Check the database's integrity and the blob store against it
    /// (missing, corrupt and unreferenced blobs). Exits 1 on a problem.
    Check {
        #[command(flatten)]
        config: ward_server::ServerConfig,
    },
    /// Read the packages of every image pushed before vulnerability reports
    /// existed (a running server does the work; this shows its progress).
    BackfillReports {
        #[command(flatten)]
        config: ward_server::ServerConfig,
        /// Give up when no image was read for this long, e.g. 10m.
        #[arg(long, default_value = "10m", value_parser = ward_cli::registry::parse_duration)]
        stall: std::time::Duration,
    },
    /// Mark an organization verified, with the email domains it owns: people
    /// logging in with a verified email there can find it and ask to join,
    /// and `ward auth login --idp <its name>` finds its identity provider.
    VerifyOrg {
        #[command(flatten)]
        config: ward_server::ServerConfig,
        /// The organization's uid.
        #[arg(long)]
        org: String,
        /// An email domain it owns (repeatable).
        #[arg(long = "domain", value_name = "DOMAIN")]
        domains: Vec<String>,
    },
}

/// Prints a check's findings; an error if there are any.
fn report_check(c: &ward_server::backup::Check) -> anyhow::Result<()> {
    let list = |what: &str, items: &[String]| {
        for i in items.iter().take(100) {
            println!("  {what}: {i}");
        }
        if items.len() > 100 {
            println!("  … and {} more", items.len() - 100);
        }
    };
    println!("database: {}", if c.database.is_empty() { "ok" } else { "DAMAGED" });
    list("database", &c.database);
    println!(
        "blobs: {} known, {} missing, {} corrupt, {} unreferenced",
        c.blobs_known,
        c.missing.len(),
        c.corrupt.len(),
        c.unreferenced.len()
    );
    list("missing", &c.missing);
    list("corrupt", &c.corrupt);
    list("unreferenced", &c.unreferenced);
    anyhow::ensure!(c.clean(), "the check found problems");
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Invoked as `docker-credential-ward` (a link to this binary): the
    // Docker credential-helper protocol.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if std::path::Path::new(&argv0)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("docker-credential-ward"))
    {
        let action = std::env::args().nth(1).unwrap_or_default();
        let conn = ward_cli::Connection::from_env();
        return match ward_cli::registry::credential_helper(&conn, &action).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Server(config) => match ward_server::traces::init() {
            // Kept until the server stops: dropping it flushes the spans.
            Ok(_traces) => ward_server::run(config).await,
            Err(e) => Err(e),
        },
        Command::Openapi { issuer } => {
            println!("{}", ward_server::openapi_json(&issuer));
            Ok(())
        }
        Command::Admin(AdminCommand::Token(config)) => ward_server::admin_token(&config).await.map(|t| println!("{t}")),
        Command::Admin(AdminCommand::RotateKey(config)) => ward_server::rotate_key(&config)
            .await
            .map(|kid| println!("added signing key {kid}")),
        Command::Admin(AdminCommand::VerifyOrg { config, org, domains }) => {
            ward_server::verify_org(&config, &org, &domains).await.map(|d| {
                println!("verified {org} with domains [{}]", d.join(", "));
            })
        }
        Command::Admin(AdminCommand::Gc { config, grace, dry_run }) => {
            ward_server::gc(&config, grace, dry_run).await.map(|r| {
                let verb = if dry_run { "would delete" } else { "deleted" };
                println!("{verb} {} blob(s) and {} stale upload(s)", r.blobs, r.uploads);
            })
        }
        Command::Admin(AdminCommand::BackfillReports { config, stall }) => {
            let bar = ward_cli::progress_bar(0, "manifests inventoried");
            let r = ward_server::backfill_reports(&config, stall, |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            })
            .await;
            bar.finish_and_clear();
            r.map(|(done, total)| println!("{done} of {total} manifests have an inventory"))
        }
        Command::Admin(AdminCommand::Backup { config, out }) => {
            ward_server::backup::backup(&config, &out).await.map(|b| {
                println!(
                    "backed up the database ({} bytes) and {} blob(s) ({} copied now, {} bytes) to {}",
                    b.database_bytes,
                    b.blobs,
                    b.blobs_copied,
                    b.blob_bytes,
                    out.display()
                )
            })
        }
        Command::Admin(AdminCommand::Restore { config, from, force }) => {
            match ward_server::backup::restore(&config, &from, force).await {
                Ok(check) => {
                    println!("restored {} into {}", from.display(), config.data_dir.display());
                    report_check(&check)
                }
                Err(e) => Err(e),
            }
        }
        Command::Admin(AdminCommand::Check { config }) => match ward_server::backup::check(&config).await {
            Ok(check) => report_check(&check),
            Err(e) => Err(e),
        },
        Command::Auth { conn, command } => ward_cli::auth::run(&conn, command).await,
        Command::Iam { conn, command } => ward_cli::run_iam(&conn, command).await,
        Command::Events { conn, command } => ward_cli::run_events(&conn, command).await,
        Command::Registry { conn, command } => ward_cli::run_registry(&conn, command).await,
        Command::Advisories { conn, command } => ward_cli::run_advisories(&conn, command).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
