//! A minimal W3C WebDriver client for the browser-login tests: headless
//! Chromium driven by chromedriver, over plain HTTP/JSON with reqwest.
//! Just what a login needs: navigate, find by CSS, type, click, read the URL.
#![allow(dead_code)] // Each test binary uses a different part of the harness.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key of a web element reference in WebDriver JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process with one browser session; both end when dropped.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session. None when either
    /// is not installed (a failure when `WARD_TEST_REQUIRE_CLIENTS=1`, as in CI).
    pub async fn start() -> Option<Self> {
        let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
            .into_iter()
            .filter(|p| !Path::new(p).exists())
            .collect();
        if !missing.is_empty() {
            assert!(
                std::env::var("WARD_TEST_REQUIRE_CLIENTS").as_deref() != Ok("1"),
                "Chromium and chromedriver are required (WARD_TEST_REQUIRE_CLIENTS=1); missing: {missing:?} \
                 (Debian: apt-get install chromium chromium-driver)"
            );
            eprintln!("note: no {missing:?}; browser tests skipped");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile_dir = tempfile::tempdir().expect("profile dir");
        let profile = format!("--user-data-dir={}", profile_dir.path().display());
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
            http: reqwest::Client::new(),
            _profile: profile_dir,
        };

        // Ready when /status says so.
        let deadline = Instant::now() + Duration::from_secs(30);
        while b.send(Method::GET, "/status", None).await.map(|v| v["ready"] == true) != Ok(true) {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready on port {port}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let caps = json!({ "capabilities": { "alwaysMatch": {
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", profile,
                ],
            },
            "timeouts": { "pageLoad": 30_000, "script": 30_000, "implicit": 0 },
        }}});
        let created = b
            .send(Method::POST, "/session", Some(caps))
            .await
            .unwrap_or_else(|e| panic!("create a Chromium session: {e}"));
        b.session = created["sessionId"].as_str().expect("sessionId").to_owned();
        Some(b)
    }

    /// One WebDriver command; its `value`, or the error it answered.
    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut req = self
            .http
            .request(method, format!("http://127.0.0.1:{}{path}", self.port));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let v: Value = resp.json().await.map_err(|e| e.to_string())?;
        if status.is_success() {
            Ok(v["value"].clone())
        } else {
            Err(format!("{status}: {}", v["value"]))
        }
    }

    /// A command on the session; panics with what failed.
    async fn session(&self, method: Method, rest: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{rest}", self.session);
        self.send(method, &path, body)
            .await
            .unwrap_or_else(|e| panic!("WebDriver {rest}: {e}"))
    }

    /// Navigates to `url` and waits for the page to load.
    pub async fn goto(&self, url: &str) {
        self.session(Method::POST, "/url", Some(json!({ "url": url }))).await;
    }

    /// The element matching `selector`, waiting up to 10 s for it to appear.
    pub async fn find_css(&self, selector: &str) -> String {
        let path = format!("/session/{}/element", self.session);
        let body = json!({ "using": "css selector", "value": selector });
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.send(Method::POST, &path, Some(body.clone())).await {
                Ok(v) => return v[ELEMENT].as_str().expect("element reference").to_owned(),
                Err(e) if Instant::now() >= deadline => {
                    panic!("no element {selector} on {}: {e}", self.current_url().await)
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Types `text` into the element.
    pub async fn send_keys(&self, element: &str, text: &str) {
        let rest = format!("/element/{element}/value");
        self.session(Method::POST, &rest, Some(json!({ "text": text }))).await;
    }

    pub async fn click(&self, element: &str) {
        let rest = format!("/element/{element}/click");
        self.session(Method::POST, &rest, Some(json!({}))).await;
    }

    pub async fn current_url(&self) -> String {
        let v = self.session(Method::GET, "/url", None).await;
        v.as_str().unwrap_or_default().to_owned()
    }

    pub async fn page_source(&self) -> String {
        let v = self.session(Method::GET, "/source", None).await;
        v.as_str().unwrap_or_default().to_owned()
    }

    /// Polls the URL until `done` accepts it: Ok(url), or Err(the last URL)
    /// after `timeout`.
    pub async fn wait_for_url(&self, done: impl Fn(&str) -> bool, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let url = self.current_url().await;
            if done(&url) {
                return Ok(url);
            }
            if Instant::now() >= deadline {
                return Err(url);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Synchronously (no runtime in Drop): end the session, which closes
        // Chromium, then stop chromedriver.
        if !self.session.is_empty() {
            use std::io::{Read as _, Write as _};
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = write!(
                    s,
                    "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    self.session, self.port
                );
                let _ = s.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
