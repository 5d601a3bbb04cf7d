//! Every log line the in-process servers of a test binary write (Ward's
//! crates at DEBUG, everything else at WARN, as JSON) is checked as it is
//! written, so that the whole suite shows no credential is ever logged: no
//! JWT (every Ward token, the admin's included, is one) and no server
//! admin token. A line that holds one fails the test whose server is
//! dropped next, quoting the line.

use std::sync::{Mutex, Once};

static INSTALL: Once = Once::new();
/// Lines that held a credential (at most a few kept).
static FOUND: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The admin tokens of the servers started so far.
static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn jwt() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+").unwrap())
}

struct Scan;

/// Whether a log line holds a credential.
pub fn holds_credential(line: &str) -> bool {
    jwt().is_match(line)
        || SECRETS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|s| line.contains(s.as_str()))
}

impl std::io::Write for Scan {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        if holds_credential(&line) {
            let mut found = FOUND.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if found.len() < 5 {
                found.push(line.into_owned());
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the scanning subscriber (once per test binary) and registers a
/// server's admin token.
pub fn watch(admin_token: &str) {
    if std::env::var_os("WARD_TEST_NO_LOG_SCAN").is_some() {
        return;
    }
    INSTALL.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::new(
            "warn,ward=debug,ward_server=debug,ward_store=debug,ward_auth=debug,ward_core=debug,ward_blob=debug",
        );
        // Another subscriber already installed (none is, today) would keep
        // its place.
        let _ = tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(|| Scan)
            .try_init();
    });
    let token = admin_token.trim();
    if !token.is_empty() {
        SECRETS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(token.to_owned());
    }
}

/// Fails if any line written so far held a credential.
pub fn check() {
    let found = std::mem::take(&mut *FOUND.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    assert!(
        found.is_empty(),
        "a credential appeared in the server's log:\n{}",
        found.join("\n")
    );
}
