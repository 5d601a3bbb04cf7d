//! `ward advisories import`: advisory-schema YAML, OSV records (JSON, or
//! YAML as the PyPA advisory database keeps them) and OSV archives (a zip of
//! OSV JSON, as vulnerability databases publish one per ecosystem).
//!
//! OSV records of the Chainguard or Wolfi ecosystem become advisories, like
//! advisory-schema documents: parsed here and sent in batches to
//! `POST /vulnerabilities/v1/advisories:import`. Records of every other
//! ecosystem are feed records, sent as they are (byte for byte for JSON) to
//! `POST /vulnerabilities/v1/osv:import`.
//!
//! Files and archive entries are read one at a time (each at most 16 MiB)
//! and sent as soon as a batch is full, so a corpus of thousands of files or
//! an archive of 100,000 records takes bounded memory. A file or record that
//! cannot be read is rejected here with its reason; the server reports on
//! the rest, one by one. Imports are idempotent: running one again reports
//! everything unchanged. The exit status is non-zero only when something was
//! refused outright; what was kept but flagged is listed as warnings.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::{Value, json};
use ward_proto::iam::v2::Group;
use ward_proto::vulnerabilities::v1::ImportDocument;

use super::{V1, osv, yaml};
use crate::resource;
use crate::{Client, Format, output, sanitize};

/// The largest file (or archive entry) read.
const MAX_FILE: u64 = 16 << 20;
/// Documents per request, at most.
const BATCH_DOCS: usize = 100;
/// Feed records per request, at most.
const BATCH_RECORDS: usize = 1000;
/// JSON bytes per request, about (a larger document goes alone).
const BATCH_BYTES: usize = 4 << 20;
/// The feed-record import endpoint.
const OSV_IMPORT: &str = "/vulnerabilities/v1/osv:import";
/// The largest feed record the server takes.
const MAX_RECORD: usize = 1 << 20;
/// Aliases and packages per request, at most (the server's bound).
const BATCH_ROWS: usize = 20_000;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The group the advisories belong to (name or uid).
    #[arg(short = 'g', long)]
    group: String,
    /// Files or directories (searched recursively, hidden ones skipped):
    /// `*.yaml`/`*.yml` (advisory-schema, or an OSV record), `*.json` (OSV)
    /// and `*.zip` (OSV archives).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Check and count, but write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Record the advisories' events as approved as imported: the documents
    /// were reviewed where they were written (needs advisories.approve).
    #[arg(long)]
    reviewed_upstream: bool,
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

fn is_zip(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("zip"))
}

fn importable(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")
}

fn wanted(path: &Path) -> bool {
    is_zip(path) || path.file_name().is_some_and(|n| importable(&n.to_string_lossy()))
}

/// The files to import: files given as they are, directories walked, in
/// name order, each file once.
fn collect(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
        if meta.is_dir() {
            walk(p, &mut out)?;
        } else if wanted(p) {
            out.push(p.clone());
        } else {
            bail!("{}: not a .yaml, .yml, .json or .zip file", p.display());
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
        } else if wanted(&path) && (ty.is_file() || (ty.is_symlink() && path.is_file())) {
            out.push(path);
        }
    }
    Ok(())
}

/// At most [`MAX_FILE`] bytes of UTF-8 from `r`.
fn read_text(r: impl std::io::Read) -> Result<String, Rejection> {
    let mut bytes = Vec::new();
    r.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Rejection::file(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(Rejection::file("larger than 16 MiB".into()));
    }
    String::from_utf8(bytes).map_err(|_| Rejection::file("not UTF-8 text".into()))
}

/// What one file (or archive entry) becomes.
enum Parsed {
    /// An `ImportDocument` (proto JSON) of advisories, and the advisories in
    /// it that could not be read.
    Document(Value, Vec<Rejection>),
    /// An OSV feed record, as JSON text, and how many aliases and packages
    /// it lists (the server bounds them per request).
    Record(String, usize),
}

/// Whether advisory-schema-or-OSV YAML is an OSV record: it has a top-level
/// `id:` and no top-level `advisories:`.
fn is_osv_yaml(text: &str) -> bool {
    let top = |key: &str| text.lines().any(|l| l.starts_with(key));
    top("id:") && !top("advisories:")
}

/// A record's id, as far as it has one (for a refusal's report).
fn osv_id(v: &Value) -> String {
    v.get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(128)
        .collect()
}

/// Reads one file's (or entry's) text by its name.
fn parse(name: &str, text: String) -> Result<Parsed, Rejection> {
    let record = |v: Value, text: Option<String>| -> Result<Parsed, Rejection> {
        if osv::is_advisory(&v) {
            let doc = osv::document_of(name, &v)?;
            check(&doc)?;
            return Ok(Parsed::Document(doc, Vec::new()));
        }
        // JSON goes as written; YAML as its JSON.
        let json = match text {
            Some(t) => t,
            None => serde_json::to_string(&v).map_err(|e| Rejection::file(format!("not JSON: {e}")))?,
        };
        if json.len() > MAX_RECORD {
            return Err(Rejection {
                advisory_id: osv_id(&v),
                reason: "larger than 1 MiB, the most a feed record may be".into(),
            });
        }
        let count = |key: &str| v.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        Ok(Parsed::Record(json, count("aliases") + count("affected")))
    };
    if name.to_ascii_lowercase().ends_with(".json") {
        let v: Value = serde_json::from_str(&text).map_err(|e| Rejection::file(format!("not JSON: {e}")))?;
        if !v.is_object() {
            return Err(Rejection::file("not an OSV record (a JSON object)".into()));
        }
        return record(v, Some(text));
    }
    if is_osv_yaml(&text) {
        return record(osv::yaml_record(&text)?, None);
    }
    let (doc, rejected) = yaml::document(name, &text)?;
    check(&doc)?;
    Ok(Parsed::Document(doc, rejected))
}

/// Checks a document against the server's own type.
fn check(doc: &Value) -> Result<(), Rejection> {
    serde_json::from_value::<ImportDocument>(doc.clone())
        .map(|_| ())
        .map_err(|e| Rejection::file(format!("not a valid import document: {e}")))
}

/// What the server and the parser said, added up over the batches.
#[derive(Default)]
struct Report {
    created: u64,
    updated: u64,
    unchanged: u64,
    rejected: u64,
    withdrawn: u64,
    flagged: u64,
    /// Advisories a dry run checked and found acceptable (outcome unspecified).
    checked: u64,
    results: Vec<Value>,
    /// (source, advisory id, reason)
    rejections: Vec<(String, String, String)>,
    /// (source, advisory id, what was kept but flagged)
    warnings: Vec<(String, String, String)>,
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
        self.withdrawn += count(&response, "withdrawn");
        self.flagged += count(&response, "flagged");
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
                let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                if outcome == "REJECTED" {
                    self.rejections
                        .push((field("source"), field("advisoryId"), field("reason")));
                }
                for w in r.get("warnings").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(w) = w.as_str() {
                        self.warnings.push((field("source"), field("advisoryId"), w.to_owned()));
                    }
                }
                // Unchanged feed records are most of a re-import: counted,
                // not listed.
                if outcome != "UNCHANGED"
                    || r.get("warnings")
                        .is_some_and(|w| w.as_array().is_some_and(|a| !a.is_empty()))
                {
                    self.results.push(r);
                }
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
                "withdrawn": self.withdrawn,
                "flagged": self.flagged,
                "checked": self.checked,
                "dryRun": dry_run,
            }))?;
        }
        let mut extra = String::new();
        if self.withdrawn > 0 {
            extra.push_str(&format!(", withdrawn {}", self.withdrawn));
        }
        if self.flagged > 0 {
            extra.push_str(&format!(", flagged {}", self.flagged));
        }
        if dry_run {
            extra.push_str(&format!(" (dry run: {} checked, nothing written)", self.checked));
        }
        eprintln!(
            "created {}, updated {}, unchanged {}, rejected {}{extra}",
            self.created, self.updated, self.unchanged, self.rejected
        );
        let line = |source: &str, id: &str, text: &str| {
            let line = if id.is_empty() {
                format!("  {source}: {text}")
            } else {
                format!("  {source} {id}: {text}")
            };
            eprintln!("{}", sanitize(&line));
        };
        for (source, id, reason) in &self.rejections {
            line(source, id, reason);
        }
        if !self.warnings.is_empty() {
            eprintln!("kept, with warnings (see `ward advisories describe`):");
            for (source, id, warning) in &self.warnings {
                line(source, id, warning);
            }
        }
        Ok(())
    }
}

/// A bar on stderr when it is a terminal; nothing otherwise.
fn progress(items: u64) -> indicatif::ProgressBar {
    crate::progress_bar(items, "files and records")
}

/// A request on its way: what it carries (for errors), how many files or
/// records, and its answer to come.
type InFlight = (String, u64, tokio::task::JoinHandle<anyhow::Result<Value>>);

/// Batches waiting to be sent, and what was read and sent so far. One
/// request is in flight while the next batch is read, so reading files and
/// the server's work overlap.
struct Importer {
    client: Client,
    inflight: Option<InFlight>,
    group: String,
    dry_run: bool,
    reviewed_upstream: bool,
    docs: Vec<Value>,
    doc_bytes: usize,
    records: Vec<String>,
    record_bytes: usize,
    /// Aliases and packages the waiting records list.
    record_rows: usize,
    /// Where the waiting records came from (the file or archive given).
    record_source: String,
    report: Report,
    bar: indicatif::ProgressBar,
}

impl Importer {
    async fn add(&mut self, source: &str, origin: &str, parsed: Result<Parsed, Rejection>) -> anyhow::Result<()> {
        match parsed {
            Err(r) => {
                self.report.reject(source, r);
                self.bar.inc(1);
            }
            Ok(Parsed::Document(doc, rejected)) => {
                for r in rejected {
                    self.report.reject(source, r);
                }
                let size = serde_json::to_vec(&doc).map_or(0, |b| b.len());
                if self.docs.len() >= BATCH_DOCS || (!self.docs.is_empty() && self.doc_bytes + size > BATCH_BYTES) {
                    self.send_docs().await?;
                }
                self.docs.push(doc);
                self.doc_bytes += size;
            }
            Ok(Parsed::Record(text, rows)) => {
                // Escaped inside a JSON string, a record grows a little.
                let size = text.len() + text.len() / 8;
                if !self.records.is_empty()
                    && (self.records.len() >= BATCH_RECORDS
                        || self.record_bytes + size > BATCH_BYTES
                        || self.record_rows + rows > BATCH_ROWS
                        || self.record_source != origin)
                {
                    self.send_records().await?;
                }
                origin.clone_into(&mut self.record_source);
                self.records.push(text);
                self.record_bytes += size;
                self.record_rows += rows;
            }
        }
        Ok(())
    }

    /// Sends `body` to `path` once the request in flight has been answered.
    async fn dispatch(&mut self, path: String, body: Value, items: u64, what: String) -> anyhow::Result<()> {
        self.settle().await?;
        let client = self.client.clone();
        let task = tokio::spawn(async move { client.call(Method::POST, &path, &[], Some(&body)).await });
        self.inflight = Some((what, items, task));
        Ok(())
    }

    /// Waits for the request in flight and adds its answer to the report.
    async fn settle(&mut self) -> anyhow::Result<()> {
        if let Some((what, items, task)) = self.inflight.take() {
            let response = task.await.context("the import request")?.with_context(|| what)?;
            self.report.add(response);
            self.bar.inc(items);
        }
        Ok(())
    }

    async fn send_docs(&mut self) -> anyhow::Result<()> {
        if self.docs.is_empty() {
            return Ok(());
        }
        let docs = std::mem::take(&mut self.docs);
        let n = docs.len();
        let first = docs
            .first()
            .and_then(|d| d.get("source"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let body = json!({
            "parentId": self.group,
            "documents": docs,
            "dryRun": self.dry_run,
            "reviewedUpstream": self.reviewed_upstream,
        });
        self.doc_bytes = 0;
        let what = format!("importing {n} document(s) from {first} on");
        self.dispatch(format!("{V1}:import"), body, n as u64, what).await
    }

    async fn send_records(&mut self) -> anyhow::Result<()> {
        if self.records.is_empty() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.records);
        let n = records.len();
        let body = json!({
            "parentId": self.group,
            "records": records,
            "source": self.record_source,
            "dryRun": self.dry_run,
        });
        self.record_bytes = 0;
        self.record_rows = 0;
        let what = format!("importing {n} OSV record(s) from {}", self.record_source);
        self.dispatch(OSV_IMPORT.to_owned(), body, n as u64, what).await
    }

    async fn flush(&mut self) -> anyhow::Result<()> {
        self.send_docs().await?;
        self.send_records().await?;
        self.settle().await
    }

    /// Every `.json`/`.yaml` entry of an archive, one at a time.
    async fn archive(&mut self, path: &Path) -> anyhow::Result<()> {
        let source = path.display().to_string();
        let file = std::fs::File::open(path).with_context(|| source.clone())?;
        let mut zip = match zip::ZipArchive::new(std::io::BufReader::new(file)) {
            Ok(z) => z,
            Err(e) => {
                self.report
                    .reject(&source, Rejection::file(format!("not a zip archive: {e}")));
                self.bar.inc(1);
                return Ok(());
            }
        };
        for i in 0..zip.len() {
            let (name, parsed) = match zip.by_index(i) {
                Ok(entry) if entry.is_dir() => continue,
                Ok(entry) => {
                    let name = match entry.name() {
                        Ok(n) => n.into_owned(),
                        Err(_) => entry.name_raw().iter().map(|&b| char::from(b)).collect(),
                    };
                    if !importable(&name) {
                        self.bar.inc(1);
                        continue;
                    }
                    let parsed = read_text(entry).and_then(|t| parse(&name, t));
                    (name, parsed)
                }
                Err(e) => (format!("entry {i}"), Err(Rejection::file(format!("cannot read: {e}")))),
            };
            self.bar.set_message(name.clone());
            self.add(&format!("{source}:{name}"), &source, parsed).await?;
        }
        Ok(())
    }
}

/// Entries of each archive, for the bar (its central directory only).
fn items(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|p| {
            if is_zip(p) {
                std::fs::File::open(p)
                    .ok()
                    .and_then(|f| zip::ZipArchive::new(std::io::BufReader::new(f)).ok())
                    .map_or(1, |z| z.len() as u64)
            } else {
                1
            }
        })
        .sum()
}

pub async fn run(client: &Client, format: Format, args: ImportArgs) -> anyhow::Result<()> {
    let group = resource::resolve_flag::<Group>(client, "--group", &args.group).await?;
    let files = collect(&args.paths)?;
    if files.is_empty() {
        bail!("no .yaml, .yml, .json or .zip files under the paths given");
    }
    let mut im = Importer {
        client: client.clone(),
        inflight: None,
        group,
        dry_run: args.dry_run,
        reviewed_upstream: args.reviewed_upstream,
        docs: Vec::new(),
        doc_bytes: 0,
        records: Vec::new(),
        record_bytes: 0,
        record_rows: 0,
        record_source: String::new(),
        report: Report::default(),
        bar: progress(items(&files)),
    };
    let mut outcome = Ok(());
    for path in &files {
        let source = path.display().to_string();
        im.bar.set_message(source.clone());
        let step = if is_zip(path) {
            im.archive(path).await
        } else {
            let parsed = std::fs::File::open(path)
                .map_err(|e| Rejection::file(format!("cannot open: {e}")))
                .and_then(read_text)
                .and_then(|t| parse(&path.file_name().unwrap_or_default().to_string_lossy(), t));
            // A directory's records go together, named by their directory.
            let origin = path.parent().map_or(source.clone(), |p| p.display().to_string());
            im.add(&source, &origin, parsed).await
        };
        if let Err(e) = step {
            outcome = Err(e);
            break;
        }
    }
    if outcome.is_ok() {
        outcome = im.flush().await;
    }
    let Importer { bar, report, .. } = im;
    match &outcome {
        Ok(()) => bar.finish_and_clear(),
        Err(_) => bar.abandon(),
    }
    let rejected = report.rejected;
    // What was done so far, then why it stopped (if it did).
    report.print(format, args.dry_run)?;
    outcome?;
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
        std::fs::write(root.join("feed.zip"), "").unwrap();
        assert_eq!(collect(&[root.join("feed.zip")]).unwrap().len(), 1);
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

#[cfg(test)]
mod routing {
    use super::*;

    #[test]
    fn records_of_other_ecosystems_are_feed_records_kept_as_written() {
        let json = r#"{"id": "PYSEC-2021-19", "modified": "2021-03-01T12:00:00Z",
            "affected": [{"package": {"ecosystem": "PyPI", "name": "pillow"}}]}"#;
        match parse("PYSEC-2021-19.json", json.to_owned()) {
            Ok(Parsed::Record(t, rows)) => {
                assert_eq!(t, json, "byte for byte");
                assert_eq!(rows, 1);
            }
            _ => panic!("a PyPI record is a feed record"),
        }
        // PyPA keeps OSV as YAML; timestamps stay the text they were.
        let yaml = "id: PYSEC-2023-1\nmodified: 2023-07-12T12:59:56.73368Z\npublished: '2023-01-01T00:00:00Z'\n\
                    affected:\n- package:\n    ecosystem: PyPI\n    name: x\n  versions: ['1.0', '1.1']\n";
        match parse("PYSEC-2023-1.yaml", yaml.to_owned()) {
            Ok(Parsed::Record(t, _)) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                assert_eq!(v["modified"], "2023-07-12T12:59:56.73368Z");
                assert_eq!(v["published"], "2023-01-01T00:00:00Z");
                assert_eq!(v["affected"][0]["versions"], json!(["1.0", "1.1"]));
            }
            _ => panic!("an OSV YAML record is a feed record"),
        }
        let cga = r#"{"id": "CVE-2025-1", "modified": "2025-01-01T00:00:00Z",
            "affected": [{"package": {"ecosystem": "Wolfi", "name": "x"}}]}"#;
        assert!(matches!(parse("x.json", cga.to_owned()), Ok(Parsed::Document(..))));
        assert!(parse("x.json", "[1]".into()).is_err());
    }
}
