//! The CloudEvents receiver fixture (`tests/fixtures/ce_receiver.py`, the
//! Python `cloudevents` package), run as a subprocess: event delivery tests
//! read what it received.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt as _;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The receiver fixture, running: its URL, and the deliveries it printed.
pub struct Receiver {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    pub url: String,
}

impl Receiver {
    /// Starts the receiver answering `script` (statuses, then 200); None
    /// when the venv lacks `cloudevents` (a failure when CI requires it).
    pub async fn start(script: &str) -> Option<Receiver> {
        let python = super::venv_python("cloudevents.core.bindings.http", "'cloudevents==2.2.0'")?;
        let script_path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ce_receiver.py");
        let mut child = tokio::process::Command::new(python)
            .args([script_path, script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the receiver");
        let stdin = child.stdin.take().expect("stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the receiver starts within a minute")
            .expect("read")
            .expect("the receiver's port");
        let port = serde_json::from_str::<Value>(&first).expect("json")["port"]
            .as_u64()
            .expect("port");
        Some(Receiver {
            _child: child,
            stdin,
            lines,
            url: format!("http://127.0.0.1:{port}/hook"),
        })
    }

    /// Ends the hold of a receiver started with "held": later requests
    /// are answered (those held stay unanswered).
    pub async fn release(&mut self) {
        self.stdin.write_all(b"release\n").await.expect("write to the receiver");
        self.stdin.flush().await.expect("flush");
    }

    /// The next delivery within `wait`, if one comes.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        let line = tokio::time::timeout(wait, self.lines.next_line()).await.ok()?;
        line.expect("read")
            .map(|l| serde_json::from_str(&l).expect("the receiver prints JSON"))
    }

    /// The next delivery (waiting up to a minute: retries back off).
    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("a delivery within a minute")
            .expect("read")
            .expect("the receiver is running");
        serde_json::from_str(&line).expect("the receiver prints JSON")
    }

    /// Deliveries until one of each type in `types` arrived (deliveries
    /// run concurrently, so in any order); returns every one read.
    pub async fn until(&mut self, types: &[&str]) -> Vec<Value> {
        let mut seen: Vec<Value> = Vec::new();
        while !types.iter().all(|t| seen.iter().any(|d| d["headers"]["ce-type"] == *t)) {
            seen.push(self.next().await);
        }
        seen
    }
}
