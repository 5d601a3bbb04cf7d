//! The on-disk cache of Ward API tokens that `ward auth login` obtains.
//!
//! One JSON file per audience under `<config dir>/tokens/`, holding the token
//! and what is needed to renew it (the identity, the identity-token file and the
//! issuer). The config dir is `$WARD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/ward`,
//! else `~/.config/ward`. Directories are created 0700 and files 0600; files are
//! replaced atomically (write to a temporary file, then rename), so concurrent
//! `ward` runs never see half a file.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, anyhow};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// A cached token is used only while it has more than this much time left.
pub const MIN_REMAINING: Duration = Duration::from_secs(60);

/// One audience's cached token and how to renew it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The audience the token was exchanged for (the cache key).
    pub audience: String,
    /// The Ward API token (a JWT).
    pub token: String,
    /// The identity (uid) the token was exchanged for.
    pub identity: String,
    /// The issuer whose STS issued the token.
    pub issuer: String,
    /// The upstream identity token's file, to re-exchange from; `None` when it
    /// came from stdin and cannot be read again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_token_file: Option<PathBuf>,
    /// The token came from a person's browser login (renewed by logging in
    /// again, not by an exchange).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub browser_login: bool,
}

impl Entry {
    /// Whether the token has more than [`MIN_REMAINING`] left at `now`. A token
    /// whose expiry cannot be read counts as expired.
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        jwt_expiry(&self.token).is_some_and(|exp| exp.duration_since(now).is_ok_and(|left| left > MIN_REMAINING))
    }
}

/// The token cache in one config directory.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache in `dir` (the config directory; tokens go to `dir/tokens`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The cache in the user's config directory (see [`config_dir`]).
    pub fn from_env() -> anyhow::Result<Self> {
        config_dir(|k| std::env::var_os(k))
            .map(Self::new)
            .ok_or_else(|| anyhow!("no config directory: set WARD_CONFIG_DIR, XDG_CONFIG_HOME or HOME"))
    }

    /// The config directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn tokens_dir(&self) -> PathBuf {
        self.dir.join("tokens")
    }

    /// The file holding `audience`'s token.
    pub fn path(&self, audience: &str) -> PathBuf {
        self.tokens_dir().join(format!("{}.json", file_key(audience)))
    }

    /// The cached entry for `audience`, if any.
    pub fn load(&self, audience: &str) -> anyhow::Result<Option<Entry>> {
        let path = self.path(audience);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(anyhow!("reading {}: {e}", path.display())),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("reading {} (remove it with `ward auth logout`)", path.display()))
    }

    /// Stores `entry`, replacing any entry for its audience.
    pub fn store(&self, entry: &Entry) -> anyhow::Result<()> {
        let dir = self.tokens_dir();
        create_private_dir(&dir)?;
        let path = self.path(&entry.audience);
        let tmp = dir.join(format!(".{}.{}.tmp", file_key(&entry.audience), std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = private_file(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(entry)?)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            anyhow!("writing {}: {e}", path.display())
        })
    }

    /// Removes every cached token; returns how many there were. Removing
    /// nothing is not an error.
    pub fn clear(&self) -> anyhow::Result<usize> {
        let dir = self.tokens_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(anyhow!("reading {}: {e}", dir.display())),
        };
        let count = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count();
        std::fs::remove_dir_all(&dir).map_err(|e| anyhow!("removing {}: {e}", dir.display()))?;
        Ok(count)
    }
}

/// Where `ward` keeps its configuration, from the environment `var`:
/// `$WARD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/ward`, else `$HOME/.config/ward`.
/// Empty variables count as unset.
pub fn config_dir(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let var = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("WARD_CONFIG_DIR")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("ward")))
        .or_else(|| var("HOME").map(|h| h.join(".config").join("ward")))
}

/// A file name for `audience`: ASCII letters, digits, `.` and `-` as they are,
/// every other byte as `_XX` (hex), so distinct audiences get distinct files.
fn file_key(audience: &str) -> String {
    audience
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("_{b:02X}"),
        })
        .collect()
}

/// The `exp` claim of a JWT, read without checking the signature (the server
/// checks that; the client only needs to know when to renew).
pub fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let exp = jwt_claims(token)?.get("exp")?.as_f64()?;
    (exp >= 0.0).then(|| UNIX_EPOCH + Duration::from_secs_f64(exp))
}

/// The claims (payload) of a JWT, unverified.
pub fn jwt_claims(token: &str) -> Option<serde_json::Value> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| anyhow!("creating {}: {e}", dir.display()))
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow!("creating {}: {e}", dir.display()))
}

/// Creates (truncating) a file only its owner can read and write.
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        opts.mode(0o600);
        let f = opts.open(path)?;
        // A leftover temporary file keeps its old mode; make sure.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(f)
    }
    #[cfg(not(unix))]
    opts.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unsigned JWT with these claims.
    fn jwt(claims: serde_json::Value) -> String {
        let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!(
            "{}.{}.sig",
            b64(br#"{"alg":"none"}"#),
            b64(claims.to_string().as_bytes())
        )
    }

    fn entry(audience: &str, token: String) -> Entry {
        Entry {
            audience: audience.into(),
            token,
            identity: "id".into(),
            issuer: "https://issuer".into(),
            identity_token_file: Some("/tmp/oidc".into()),
            browser_login: false,
        }
    }

    #[test]
    fn config_dir_precedence() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(v))
        };
        const ALL: &[(&str, &str)] = &[("WARD_CONFIG_DIR", "/w"), ("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(config_dir(env(ALL)), Some("/w".into()));
        assert_eq!(config_dir(env(&ALL[1..])), Some("/x/ward".into()));
        assert_eq!(config_dir(env(&ALL[2..])), Some("/h/.config/ward".into()));
        assert_eq!(
            config_dir(env(&[("WARD_CONFIG_DIR", ""), ("HOME", "/h")])),
            Some("/h/.config/ward".into()),
            "empty counts as unset"
        );
        assert_eq!(config_dir(env(&[])), None);
    }

    #[test]
    fn file_keys_are_safe_and_distinct() {
        assert_eq!(file_key("http://127.0.0.1:8080"), "http_3A_2F_2F127.0.0.1_3A8080");
        assert_ne!(file_key("a/b"), file_key("a_2Fb"));
        assert!(!file_key("../../etc/passwd").contains('/'));
    }

    #[test]
    fn store_load_clear() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("ward"));
        assert_eq!(cache.load("aud").unwrap(), None);
        assert_eq!(cache.clear().unwrap(), 0, "clearing nothing is fine");

        let a = entry("https://a", jwt(serde_json::json!({"exp": 1})));
        let mut b = entry("https://b", "t".into());
        b.identity_token_file = None;
        cache.store(&a).unwrap();
        cache.store(&b).unwrap();
        assert_eq!(cache.load("https://a").unwrap(), Some(a.clone()));
        assert_eq!(cache.load("https://b").unwrap(), Some(b));

        // Storing again replaces.
        let a2 = entry("https://a", "newer".into());
        cache.store(&a2).unwrap();
        assert_eq!(cache.load("https://a").unwrap(), Some(a2));

        assert_eq!(cache.clear().unwrap(), 2);
        assert_eq!(cache.load("https://a").unwrap(), None);
        assert_eq!(cache.clear().unwrap(), 0, "idempotent");
    }

    #[cfg(unix)]
    #[test]
    fn files_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cfg"));
        cache.store(&entry("aud", "t".into())).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&cache.path("aud")), 0o600);
        assert_eq!(mode(&cache.dir().join("tokens")), 0o700);
        assert_eq!(mode(cache.dir()), 0o700);
        // A loosened directory is tightened again on the next store.
        std::fs::set_permissions(cache.dir().join("tokens"), std::fs::Permissions::from_mode(0o755)).unwrap();
        cache.store(&entry("aud", "t2".into())).unwrap();
        assert_eq!(mode(&cache.dir().join("tokens")), 0o700);
        assert_eq!(mode(&cache.path("aud")), 0o600);
    }

    #[test]
    fn expiry_from_the_jwt() {
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let with_exp = |exp: u64| entry("a", jwt(serde_json::json!({"sub": "s", "exp": exp})));

        assert_eq!(
            jwt_expiry(&with_exp(secs + 3600).token),
            Some(UNIX_EPOCH + Duration::from_secs(secs + 3600))
        );
        assert!(with_exp(secs + 3600).is_fresh(now));
        assert!(!with_exp(secs + 30).is_fresh(now), "under a minute left is stale");
        assert!(!with_exp(secs.saturating_sub(10)).is_fresh(now), "expired");
        assert!(!entry("a", jwt(serde_json::json!({"sub": "s"}))).is_fresh(now));
        assert!(!entry("a", "not-a-jwt".into()).is_fresh(now));
        assert!(!entry("a", "a.!!!.c".into()).is_fresh(now));
        assert_eq!(jwt_claims(&with_exp(5).token).unwrap()["sub"], "s");
    }
}
