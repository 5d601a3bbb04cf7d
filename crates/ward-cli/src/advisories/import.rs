//! `ward advisories import`: advisory-schema YAML and OSV JSON files, parsed
//! here and sent in batches to `POST /vulnerabilities/v1/advisories:import`.
//!
//! Files are read one at a time (each at most 16 MiB) and sent as soon as a
//! batch is full (100 documents or about 4 MiB of JSON), so a corpus of
//! thousands of files takes a few dozen requests and little memory. A file
//! that cannot be read or parsed is rejected here with its reason; the server
//! reports on the rest, advisory by advisory. The import is idempotent:
//! running it again reports everything unchanged.

use std::collections::HashSet;
use std::io::{IsTerminal as _, Read as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::{Value, json};
use ward_proto::iam::v2::Group;
use ward_proto::vulnerabilities::v1::ImportDocument;

use super::{V1, osv, yaml};
use crate::resource;
use crate::{Client, Format, output, sanitize};

/// The largest file read.
const MAX_FILE: u64 = 16 << 20;
/// Documents per request, at most.
const BATCH_DOCS: usize = 100;
/// JSON bytes per request, about (a larger document goes alone).
const BATCH_BYTES: usize = 4 << 20;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The group the advisories belong to (name or uid).
    #[arg(short = 'g', long)]
    group: String,
    /// Files or directories (searched recursively, hidden ones skipped):
    /// `*.yaml`/`*.yml` in the advisory-schema format, `*.json` in OSV.
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Check and count, but write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Why a file (or one advisory in it) was refused before it was sent.
#[derive(Debug)]
pub struct Rejection {
    /// The advisory at fault; "" when it is the file.
    pub advisory_id: String,
    pub reason: String,
}

impl Rejection {
    pub fn file(reason: String) -> Self {
        Self {
            advisory_id: String::new(),
            reason,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Schema,
    Osv,
}

fn kind(path: &Path) -> Option<FileKind> {
    let name = path.file_name()?.to_string_lossy();
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        Some(FileKind::Schema)
    } else if name.ends_with(".json") {
        Some(FileKind::Osv)
    } else {
        None
    }
}

/// The files to import: files given as they are, directories walked, in
/// name order, each file once.
fn collect(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
        if meta.is_dir() {
            walk(p, &mut out)?;
        } else if kind(p).is_some() {
            out.push(p.clone());
        } else {
            bail!("{}: not a .yaml, .yml or .json file", p.display());
        }
    }
    let mut seen = HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    Ok(out)
}

/// Adds the importable files below `dir`. Hidden entries (`.git`) are
/// skipped, and links to directories are not followed (no cycles).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let ty = entry.file_type().with_context(|| format!("{}", path.display()))?;
        if ty.is_dir() {
            walk(&path, out)?;
        } else if kind(&path).is_some() && (ty.is_file() || (ty.is_symlink() && path.is_file())) {
            out.push(path);
        }
    }
    Ok(())
}

/// The file's text: at most [`MAX_FILE`] bytes of UTF-8.
fn read(path: &Path) -> Result<String, Rejection> {
    let file = std::fs::File::open(path).map_err(|e| Rejection::file(format!("cannot open: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Rejection::file(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(Rejection::file("larger than 16 MiB".into()));
    }
    String::from_utf8(bytes).map_err(|_| Rejection::file("not UTF-8 text".into()))
}

/// The `ImportDocument` (proto JSON) of one file, checked against the
/// server's own type.
fn load(path: &Path, source: &str) -> Result<Value, Rejection> {
    let text = read(path)?;
    let doc = match kind(path) {
        Some(FileKind::Osv) => osv::document(source, &text)?,
        _ => yaml::document(source, &text)?,
    };
    if let Err(e) = serde_json::from_value::<ImportDocument>(doc.clone()) {
        return Err(Rejection::file(format!("not a valid import document: {e}")));
    }
    Ok(doc)
}

/// What the server and the parser said, added up over the batches.
#[derive(Default)]
struct Report {
    created: u64,
    updated: u64,
    unchanged: u64,
    rejected: u64,
    /// Advisories a dry run checked and found acceptable (outcome unspecified).
    checked: u64,
    results: Vec<Value>,
    /// (source, advisory id, reason)
    rejections: Vec<(String, String, String)>,
}

/// A count in an `ImportResponse` (an int32: a number, or a string).
fn count(v: &Value, key: &str) -> u64 {
    match v.get(key) {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

impl Report {
    fn reject(&mut self, source: &str, r: Rejection) {
        self.rejected += 1;
        self.results.push(json!({
            "source": source,
            "advisoryId": r.advisory_id,
            "outcome": "REJECTED",
            "reason": r.reason,
        }));
        self.rejections.push((source.to_owned(), r.advisory_id, r.reason));
    }

    fn add(&mut self, mut response: Value) {
        self.created += count(&response, "created");
        self.updated += count(&response, "updated");
        self.unchanged += count(&response, "unchanged");
        self.rejected += count(&response, "rejected");
        if let Some(Value::Array(results)) = response.get_mut("results").map(Value::take) {
            for r in results {
                let outcome = match r.get("outcome") {
                    Some(Value::String(o)) => o.clone(),
                    Some(Value::Number(n)) => match n.as_i64() {
                        Some(4) => "REJECTED".into(),
                        Some(0) => "OUTCOME_UNSPECIFIED".into(),
                        _ => n.to_string(),
                    },
                    _ => "OUTCOME_UNSPECIFIED".into(),
                };
                if outcome == "OUTCOME_UNSPECIFIED" {
                    self.checked += 1;
                }
                if outcome == "REJECTED" {
                    let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    self.rejections
                        .push((field("source"), field("advisoryId"), field("reason")));
                }
                self.results.push(r);
            }
        }
    }

    /// The summary on stderr (and the results on stdout with `-o json`).
    fn print(self, format: Format, dry_run: bool) -> anyhow::Result<()> {
        if format == Format::Json {
            output::json(&json!({
                "results": self.results,
                "created": self.created,
                "updated": self.updated,
                "unchanged": self.unchanged,
                "rejected": self.rejected,
                "checked": self.checked,
                "dryRun": dry_run,
            }))?;
        }
        let suffix = if dry_run {
            format!(" (dry run: {} checked, nothing written)", self.checked)
        } else {
            String::new()
        };
        eprintln!(
            "created {}, updated {}, unchanged {}, rejected {}{suffix}",
            self.created, self.updated, self.unchanged, self.rejected
        );
        for (source, id, reason) in &self.rejections {
            let line = if id.is_empty() {
                format!("  {source}: {reason}")
            } else {
                format!("  {source} {id}: {reason}")
            };
            eprintln!("{}", sanitize(&line));
        }
        Ok(())
    }
}

/// A bar on stderr when it is a terminal; nothing otherwise.
fn progress(files: usize) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(files as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} files  {elapsed}  {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Sends one batch; adds the server's answer to the report.
async fn send(
    client: &Client,
    group: &str,
    dry_run: bool,
    batch: &mut Vec<Value>,
    report: &mut Report,
) -> anyhow::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let body = json!({"parentId": group, "documents": batch, "dryRun": dry_run});
    let first = batch
        .first()
        .and_then(|d| d.get("source"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let response: Value = client
        .call(Method::POST, &format!("{V1}:import"), &[], Some(&body))
        .await
        .with_context(|| format!("importing {} document(s) from {first} on", batch.len()))?;
    report.add(response);
    batch.clear();
    Ok(())
}

pub async fn run(client: &Client, format: Format, args: ImportArgs) -> anyhow::Result<()> {
    let group = resource::resolve_flag::<Group>(client, "--group", &args.group).await?;
    let files = collect(&args.paths)?;
    if files.is_empty() {
        bail!("no .yaml, .yml or .json files under the paths given");
    }
    let bar = progress(files.len());
    let mut report = Report::default();
    let mut batch: Vec<Value> = Vec::new();
    let mut bytes = 0;
    for path in &files {
        let source = path.display().to_string();
        bar.set_message(source.clone());
        match load(path, &source) {
            Ok(doc) => {
                let size = serde_json::to_vec(&doc).map_or(0, |b| b.len());
                if batch.len() >= BATCH_DOCS || (!batch.is_empty() && bytes + size > BATCH_BYTES) {
                    let sent = batch.len() as u64;
                    if let Err(e) = send(client, &group, args.dry_run, &mut batch, &mut report).await {
                        bar.abandon();
                        // What was done so far, then why it stopped.
                        report.print(format, args.dry_run)?;
                        return Err(e);
                    }
                    bar.inc(sent);
                    bytes = 0;
                }
                batch.push(doc);
                bytes += size;
            }
            Err(r) => {
                report.reject(&source, r);
                bar.inc(1);
            }
        }
    }
    let sent = batch.len() as u64;
    if let Err(e) = send(client, &group, args.dry_run, &mut batch, &mut report).await {
        bar.abandon();
        report.print(format, args.dry_run)?;
        return Err(e);
    }
    bar.inc(sent);
    bar.finish_and_clear();
    let rejected = report.rejected;
    report.print(format, args.dry_run)?;
    if rejected > 0 {
        bail!("{rejected} rejected (see above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_directories_in_order_skipping_others() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b/.git")).unwrap();
        std::fs::create_dir_all(root.join("a")).unwrap();
        for f in [
            "b/z.advisories.yaml",
            "b/y.json",
            "b/.git/config.yaml",
            "a/x.yml",
            "a/README.md",
            ".hidden.yaml",
        ] {
            std::fs::write(root.join(f), "").unwrap();
        }
        let files = collect(&[root.to_path_buf(), root.join("a/x.yml")]).unwrap();
        let rel: Vec<String> = files
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(rel, ["a/x.yml", "b/y.json", "b/z.advisories.yaml"]);
        assert!(collect(&[root.join("a/README.md")]).is_err());
    }

    #[test]
    fn the_server_report_adds_up() {
        let mut r = Report::default();
        r.add(
            json!({"created": 2, "updated": 0, "unchanged": 1, "rejected": 1, "results": [
                {"source": "a.yaml", "advisoryId": "CGA-3g3j-8396-2m48", "outcome": "REJECTED", "reason": "bad alias"},
                {"source": "a.yaml", "advisoryId": "CGA-5v4q-653x-xxff", "outcome": "CREATED", "reason": ""},
            ]}),
        );
        r.add(json!({"created": 0, "results": [
            {"source": "c.yaml", "advisoryId": "CGA-6hh3-9fjx-xpg2", "outcome": "OUTCOME_UNSPECIFIED", "reason": ""},
        ]}));
        r.reject("b.yaml", Rejection::file("not UTF-8 text".into()));
        assert_eq!((r.created, r.unchanged, r.rejected, r.checked), (2, 1, 2, 1));
        assert_eq!(r.rejections.len(), 2);
        assert_eq!(r.results.len(), 4);
    }
}
