//! Real client programs for integration tests: finding them, running them in
//! a sandboxed home, and reading what they printed.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::TestServer;

/// The client programs, or `None` (after a note, or a panic when CI requires
/// them) when one is missing.
pub struct Tools {
    pub skopeo: PathBuf,
    pub python: PathBuf,
}

impl Tools {
    pub fn find() -> Option<Tools> {
        let venv = std::env::var_os("WARD_TEST_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ward-venv"));
        let python = venv.join("bin/python");
        let skopeo = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("skopeo"))
            .find(|p| p.is_file());
        let has_oras = std::process::Command::new(&python)
            .args(["-c", "import oras.client"])
            .output()
            .is_ok_and(|o| o.status.success());
        let mut missing = Vec::new();
        if skopeo.is_none() {
            missing.push("skopeo on PATH (apt-get install skopeo)".to_owned());
        }
        if !has_oras {
            let v = venv.display();
            missing.push(format!(
                "oras-py in {v} (python3 -m venv {v} && {v}/bin/pip install oras)"
            ));
        }
        match skopeo {
            Some(skopeo) if has_oras => Some(Tools { skopeo, python }),
            _ if std::env::var("WARD_TEST_REQUIRE_CLIENTS").as_deref() == Ok("1") => {
                panic!("WARD_TEST_REQUIRE_CLIENTS=1 but missing: {}", missing.join("; "))
            }
            _ => {
                eprintln!("note: registry client test skipped, missing: {}", missing.join("; "));
                None
            }
        }
    }
}

/// A temporary home for the clients: `home/` (HOME), `xdg/` (XDG_RUNTIME_DIR),
/// `bin/` (first on PATH).
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["home", "xdg", "bin"] {
            std::fs::create_dir(dir.path().join(sub)).expect("sandbox dir");
        }
        Sandbox { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `program` with the sandbox's environment and none of Ward's settings.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let mut path = vec![self.path("bin")];
        path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        let mut cmd = tokio::process::Command::new(program);
        cmd.env("PATH", std::env::join_paths(path).expect("PATH"))
            .env("HOME", self.path("home"))
            .env("XDG_RUNTIME_DIR", self.path("xdg"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("WARD_API")
            .env_remove("WARD_TOKEN")
            .env_remove("WARD_TOKEN_FILE")
            .env_remove("WARD_DATABASE")
            .env_remove("WARD_DATA_DIR")
            .env_remove("WARD_LISTEN")
            .kill_on_drop(true);
        cmd
    }

    /// A containers tool (podman, buildah) on vfs storage inside the sandbox.
    pub fn containers(&self, program: &Path) -> tokio::process::Command {
        let mut cmd = self.command(program);
        cmd.args(["--storage-driver", "vfs", "--root"])
            .arg(self.path("storage"))
            .arg("--runroot")
            .arg(self.path("run"));
        cmd
    }

    /// A containers auth file for `host` holding `_token:<token>`.
    pub fn auth_file(&self, name: &str, host: &str, token: &str) -> PathBuf {
        use base64::Engine as _;
        let path = self.path(name);
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("_token:{token}"));
        std::fs::write(&path, json!({ "auths": { host: { "auth": basic } } }).to_string()).expect("auth file");
        path
    }

    /// `skopeo --insecure-policy --debug <args>` (the debug log shows every
    /// request when a command fails).
    pub fn skopeo(&self, tools: &Tools, args: &[&str]) -> tokio::process::Command {
        let mut cmd = self.command(&tools.skopeo);
        cmd.args(["--insecure-policy", "--debug"]).args(args);
        cmd
    }

    /// The `ward` binary.
    pub fn ward(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = self.command(env!("CARGO_BIN_EXE_ward"));
        cmd.args(args).env_remove("COLUMNS");
        cmd
    }
}

/// What one run of a program did.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics unless the command succeeded; returns stdout.
    pub fn ok(&self, what: &str) -> &str {
        assert!(
            self.status.success(),
            "`{what}` failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        &self.stdout
    }

    /// Panics unless the command succeeded; returns stdout as JSON.
    pub fn json(&self, what: &str) -> Value {
        let out = self.ok(what);
        serde_json::from_str(out).unwrap_or_else(|e| panic!("`{what}` printed non-JSON ({e}): {out}"))
    }

    /// Panics unless the command failed.
    pub fn failed(&self, what: &str) {
        assert!(
            !self.status.success(),
            "`{what}` should have failed; stdout:\n{}",
            self.stdout
        );
    }
}

/// Runs `cmd` (async: the in-process server keeps serving meanwhile), with
/// `stdin` written to its standard input.
pub async fn run(mut cmd: tokio::process::Command, stdin: Option<&str>, what: &str) -> Run {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("`{what}` starts: {e}"));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        pipe.write_all(input.as_bytes()).await.expect("stdin written");
    }
    let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("`{what}` finished within 180s"))
        .unwrap_or_else(|e| panic!("`{what}` ran: {e}"));
    Run {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `127.0.0.1:<port>`: the registry host in image names.
pub fn host(s: &TestServer) -> String {
    s.base.strip_prefix("http://").expect("http base").to_owned()
}
