//! Publishing advisories, over REST on every backend: the OSV documents
//! (`/osv/<CGA id>.json`, `/osv/all.json`, `/osv/all.zip`) and the advisory
//! feed (`/advisory/v2/documents`, `/advisory/v2/metadata`).
//!
//! The fixtures in `tests/fixtures/advisories` (see its README) are imported
//! with the `ward` CLI, every event approved by a second identity, and each
//! exported document checked against the official OSV JSON Schema
//! (`tests/fixtures/osv-schema/schema.json`) and against what the fixtures
//! say. Only approved events are published; deleted advisories are not
//! published at all; who may read what is decided by `--public-advisories`
//! and the caller's `advisories.list`.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{TestServer, assert_error, cga, enc, field_violations, person, uid, v1_id as id};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/advisories");
const OSV_SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/osv-schema/schema.json");

const V1: &str = "/vulnerabilities/v1/advisories";
const V2: &str = "/vulnerabilities/v2/advisories";
const EVENTS: &str = "/vulnerabilities/v1/advisory_events";

/// The events of all valid fixtures: 26 in the advisory-schema files, 2 in
/// the OSV document.
const FIXTURE_EVENTS: usize = 28;

// ---------------------------------------------------------------------------
// What the fixtures hold (tests/fixtures/advisories/README.md and the files)
// ---------------------------------------------------------------------------

/// One fixture advisory as its published OSV document must show it.
struct Expect {
    id: &'static str,
    aliases: &'static [&'static str],
    /// `affected[0].package.name`.
    artifact: &'static str,
    /// The purl's `arch` qualifier ("" for none).
    arch: &'static str,
    /// Component (name, type, location); empty when no scan named one.
    component: [&'static str; 3],
    /// `ecosystem_specific.status`.
    status: &'static str,
    /// `components[0].latest_event_status`: the latest event's type.
    latest: &'static str,
    /// `components[0].latest_event_timestamp`: the latest event's time.
    at: &'static str,
    /// Whether the document has `ranges` (not for not-affected and
    /// analysis-not-planned).
    ranges: bool,
    /// The `fixed` event of the range, for fixed advisories.
    fixed: Option<&'static str>,
}

const NONE: [&str; 3] = ["", "", ""];

/// Every valid fixture advisory, by CGA id.
const EXPECTED: [Expect; 13] = [
    Expect {
        id: "CGA-254q-7753-5pcr",
        aliases: &["CVE-2025-31550"],
        artifact: "libquartz-static",
        arch: "",
        component: ["zlib", "binary", "/usr/lib/libquartz.a"],
        status: "not_affected",
        latest: "false_positive_determination",
        at: "2025-04-15T17:20:33Z",
        ranges: false,
        fixed: None,
    },
    Expect {
        id: "CGA-3x6r-v6w8-827q",
        aliases: &["CVE-2024-40236"],
        artifact: "pyrite",
        arch: "",
        component: NONE,
        status: "fix_not_planned",
        latest: "fix_not_planned",
        at: "2024-08-22T07:59:14Z",
        ranges: true,
        fixed: None,
    },
    Expect {
        id: "CGA-53m6-fhg2-gmww",
        aliases: &["CVE-2025-10427"],
        artifact: "pyrite-cli",
        arch: "",
        component: [
            "jinja2",
            "python",
            "/usr/share/pyrite-cli/lib/python3.12/site-packages/Jinja2-3.1.3.dist-info/METADATA",
        ],
        status: "fixed",
        latest: "fixed",
        at: "2025-03-12T20:06:58Z",
        ranges: true,
        fixed: Some("3.11.4-r2"),
    },
    Expect {
        id: "CGA-5fg5-qq9c-q75x",
        aliases: &["GHSA-pccr-xprf-hq95"],
        artifact: "tessellate",
        arch: "",
        component: ["github.com/tessellate-dev/yamlkit", "go-module", "/usr/bin/tessellate"],
        status: "not_affected",
        latest: "false_positive_determination",
        at: "2024-11-04T09:48:10Z",
        ranges: false,
        fixed: None,
    },
    Expect {
        id: "CGA-5v4q-653x-xxff",
        aliases: &["CVE-2024-45871", "GHSA-292c-qr74-p9v7"],
        artifact: "tessellate-agent",
        arch: "",
        component: ["stdlib", "go-module", "/usr/bin/tessellate-agent"],
        status: "fixed",
        latest: "fixed",
        at: "2024-09-20T16:30:00Z",
        ranges: true,
        fixed: Some("1.8.2-r1"),
    },
    Expect {
        id: "CGA-6hh3-9fjx-xpg2",
        aliases: &["CVE-2025-21307", "GO-2025-3418"],
        artifact: "tessellate",
        arch: "",
        component: NONE,
        status: "pending_upstream_fix",
        latest: "pending_upstream_fix",
        at: "2025-01-16T08:22:19Z",
        ranges: true,
        fixed: None,
    },
    Expect {
        id: "CGA-7fxf-r488-j998",
        aliases: &["CVE-2024-48803"],
        artifact: "libquartz",
        arch: "",
        component: NONE,
        status: "analysis_not_planned",
        latest: "analysis_not_planned",
        at: "2024-10-25T15:12:40Z",
        ranges: false,
        fixed: None,
    },
    Expect {
        id: "CGA-96h7-rp48-65v2",
        aliases: &["CVE-2024-39112", "GHSA-jg7v-xgqr-6h88"],
        artifact: "pyrite",
        arch: "",
        component: [
            "urllib3",
            "python",
            "/usr/lib/python3.12/site-packages/urllib3-2.0.7.dist-info/METADATA",
        ],
        status: "not_affected",
        latest: "false_positive_determination",
        at: "2024-07-10T11:37:52Z",
        ranges: false,
        fixed: None,
    },
    Expect {
        id: "CGA-9r9h-mc8m-qjhm",
        aliases: &["CVE-2024-52290", "GHSA-fqwj-xq7v-3gp3"],
        artifact: "nimbus-proxy",
        arch: "",
        component: ["golang.org/x/net", "go-module", "/usr/bin/nimbus-proxy"],
        status: "fixed",
        latest: "fixed",
        at: "2024-12-11T19:03:26Z",
        ranges: true,
        fixed: Some("0.9.14-r0"),
    },
    Expect {
        id: "CGA-f9gc-q67g-2rh6",
        aliases: &["CVE-2025-27761", "GHSA-qvw3-2c8h-mwv3"],
        artifact: "quillmark",
        arch: "x86_64",
        component: ["github.com/quillmark-dev/mdparse", "go-module", "/usr/bin/quillmark"],
        status: "fixed",
        latest: "fixed",
        at: "2025-08-07T09:41:36Z",
        ranges: true,
        fixed: Some("2.4.1-r3"),
    },
    Expect {
        id: "CGA-hcpm-pm7p-fqvv",
        aliases: &["CVE-2025-40112", "GO-2025-3702"],
        artifact: "nimbus-proxy",
        arch: "",
        component: NONE,
        status: "affected",
        latest: "true_positive_determination",
        at: "2025-07-01T09:30:00Z",
        ranges: true,
        fixed: None,
    },
    Expect {
        id: "CGA-rwc5-3vv2-jg8w",
        aliases: &["CVE-2025-0917"],
        artifact: "libquartz",
        arch: "",
        component: NONE,
        status: "not_affected",
        latest: "false_positive_determination",
        at: "2025-02-10T10:10:10Z",
        ranges: false,
        fixed: None,
    },
    Expect {
        id: "CGA-xr5w-xxpm-2gp8",
        aliases: &["GHSA-r5qx-c5j6-xjq4"],
        artifact: "nimbus-proxy",
        arch: "",
        component: ["github.com/nimbus-io/ratelimit", "go-module", "/usr/bin/nimbus-proxy"],
        status: "not_affected",
        latest: "false_positive_determination",
        at: "2025-05-21T08:40:52Z",
        ranges: false,
        fixed: None,
    },
];

/// The keys of every published document (no `severity`: imports carry none;
/// no `withdrawn`: deleted advisories are not published).
const DOC_KEYS: [&str; 7] = [
    "affected",
    "aliases",
    "database_specific",
    "id",
    "modified",
    "published",
    "schema_version",
];

/// The `affected[0]` an OSV document must hold for `e`.
fn expected_affected(e: &Expect) -> Value {
    let purl = if e.arch.is_empty() {
        format!("pkg:apk/chainguard/{}", e.artifact)
    } else {
        format!("pkg:apk/chainguard/{}?arch={}", e.artifact, e.arch)
    };
    affected(
        e.artifact,
        &purl,
        e.status,
        e.component,
        e.latest,
        e.at,
        e.ranges,
        e.fixed,
    )
}

/// An `affected[0]` entry as Ward writes it.
#[allow(clippy::too_many_arguments)]
fn affected(
    name: &str,
    purl: &str,
    status: &str,
    component: [&str; 3],
    latest: &str,
    at: &str,
    ranges: bool,
    fixed: Option<&str>,
) -> Value {
    let mut a = json!({
        "package": {"ecosystem": "Chainguard", "name": name, "purl": purl},
        "ecosystem_specific": {
            "status": status,
            "components": [{
                "component_name": component[0],
                "component_type": component[1],
                "component_location": component[2],
                "latest_event_status": latest,
                "latest_event_timestamp": at,
            }],
        },
    });
    if ranges {
        let mut events = vec![json!({"introduced": "0"})];
        if let Some(v) = fixed {
            events.push(json!({"fixed": v}));
        }
        a["ranges"] = json!([{"type": "ECOSYSTEM", "events": events}]);
    }
    a
}

// ---------------------------------------------------------------------------
// Helpers: the CLI, the review, the published documents
// ---------------------------------------------------------------------------

/// `ward <args>` against `s` as `token` (WARD_API / WARD_TOKEN only); its
/// exit status, stdout and stderr.
async fn ward_as(s: &TestServer, token: &str, args: &[&str]) -> (std::process::ExitStatus, String, String) {
    let out = common::ward_cli(s, token, args).await;
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The valid fixtures: the four advisory-schema files and the OSV directory
/// (never `invalid/`).
fn valid_paths() -> Vec<String> {
    let mut paths: Vec<String> = std::fs::read_dir(FIXTURES)
        .expect("fixtures directory")
        .map(|e| e.expect("fixture entry").path().display().to_string())
        .filter(|p| p.ends_with(".advisories.yaml"))
        .collect();
    paths.sort();
    assert_eq!(paths.len(), 4, "{paths:?}");
    paths.push(format!("{FIXTURES}/osv"));
    paths
}

/// Imports every valid fixture into `org` with `ward advisories import`, as
/// the server admin.
async fn import_fixtures(s: &TestServer, org: &str) {
    let b = s.backend;
    let paths = valid_paths();
    let mut args = vec!["advisories", "import", "--group", org];
    args.extend(paths.iter().map(String::as_str));
    let (status, stdout, stderr) = ward_as(s, &s.token, &args).await;
    assert!(status.success(), "[{b}] import failed:\n{stdout}\n{stderr}");
    let summary = stderr
        .lines()
        .find(|l| l.starts_with("created "))
        .unwrap_or_else(|| panic!("[{b}] no summary line in:\n{stderr}"));
    assert_eq!(summary, "created 13, updated 0, unchanged 0, rejected 0", "[{b}]");
}

/// The uids of the events still PENDING under `org`, walking every page of
/// `eventReviewStates=REVIEW_STATE_PENDING` (five advisories a page) as
/// `token`. Nothing is changed while walking.
async fn pending_events(s: &TestServer, token: &str, org: &str) -> Vec<String> {
    let b = s.backend;
    let mut out = Vec::new();
    let mut page_token = String::new();
    let mut pages = 0;
    loop {
        let mut path = format!(
            "{V2}?uidp.descendantsOf={}&eventReviewStates=REVIEW_STATE_PENDING&pageSize=5",
            enc(org)
        );
        if !page_token.is_empty() {
            path.push_str(&format!("&pageToken={}", enc(&page_token)));
        }
        let (status, page) = s.call_as(token, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] list pending: {page}");
        for a in page["advisories"].as_array().into_iter().flatten() {
            for e in a["events"].as_array().into_iter().flatten() {
                if e["reviewState"] == "REVIEW_STATE_PENDING" {
                    out.push(e["uid"].as_str().expect("event uid").to_owned());
                }
            }
        }
        page_token = page["nextPageToken"].as_str().unwrap_or_default().to_owned();
        pages += 1;
        if page_token.is_empty() {
            break;
        }
        assert!(pages < 100, "[{b}] runaway paging");
    }
    out
}

/// Reviews an event (`APPROVED`, `REJECTED`, `REQUEST_CHANGES`) as `token`;
/// the v1 event.
async fn review(s: &TestServer, token: &str, event: &str, status: &str) -> Value {
    let (st, body) = s
        .call_as(
            token,
            Method::PUT,
            &format!("{EVENTS}/{event}"),
            Some(json!({ "status": status })),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "[{}] review {event} {status}: {body}", s.backend);
    assert_eq!(body["status"], status, "[{}] {body}", s.backend);
    body
}

/// Approves, as `token`, every pending event under `org`; how many.
async fn approve_all(s: &TestServer, token: &str, org: &str) -> usize {
    let events = pending_events(s, token, org).await;
    for e in &events {
        review(s, token, e, "APPROVED").await;
    }
    assert_eq!(
        pending_events(s, token, org).await,
        Vec::<String>::new(),
        "[{}] nothing left to review",
        s.backend
    );
    events.len()
}

/// A v1 advisory body: `artifact` with an openssl component, `aliases`, and
/// `events` (v1 events, e.g. from [`detection`]).
fn advisory(artifact: &str, aliases: &[&str], events: Vec<Value>) -> Value {
    json!({
        "artifactName": artifact,
        "artifactType": "apk",
        "componentName": "openssl",
        "componentType": "binary",
        "componentLocation": "/usr/lib/libssl.so.3",
        "aliases": aliases,
        "events": events,
    })
}

fn detection(at: &str) -> Value {
    json!({"timestamp": at, "detection": {"manual": {}}})
}

fn fixed(at: &str, version: &str) -> Value {
    json!({"timestamp": at, "fixed": {"fixedVersion": version}})
}

fn false_positive(at: &str) -> Value {
    json!({
        "timestamp": at,
        "falsePositiveDetermination": {"type": "VULNERABLE_CODE_NOT_IN_EXECUTION_PATH", "note": "never called"},
    })
}

/// Creates an advisory under `org` as the server admin; the v1 advisory.
async fn create(s: &TestServer, org: &str, body: Value) -> Value {
    let (status, a) = s.post(V1, json!({ "parentId": org, "advisory": body })).await;
    assert_eq!(status, StatusCode::OK, "[{}] create advisory: {a}", s.backend);
    a
}

/// Adds an event to the advisory `advisory_uid` as the server admin; the v1
/// event (PENDING).
async fn add_event(s: &TestServer, advisory_uid: &str, event: Value) -> Value {
    let (status, e) = s
        .post(
            &format!("{V1}/{advisory_uid}/events"),
            json!({ "advisoryEvent": event }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] add event: {e}", s.backend);
    assert_eq!(e["status"], "PENDING", "[{}] {e}", s.backend);
    e
}

/// The uid of the advisory with CGA id `cga`, as the server admin.
async fn advisory_uid(s: &TestServer, cga: &str) -> String {
    let (status, page) = s.get(&format!("{V2}?advisoryIds={cga}")).await;
    assert_eq!(status, StatusCode::OK, "[{}] {page}", s.backend);
    page["advisories"][0]["uid"]
        .as_str()
        .unwrap_or_else(|| panic!("[{}] no {cga}: {page}", s.backend))
        .to_owned()
}

/// `GET /osv/all.json` as `token` ("" for none): the documents.
async fn osv_all(s: &TestServer, token: &str) -> Vec<Value> {
    let (status, body) = s.call_as(token, Method::GET, "/osv/all.json", None).await;
    assert_eq!(status, StatusCode::OK, "[{}] all.json: {body}", s.backend);
    body.as_array()
        .unwrap_or_else(|| panic!("[{}] all.json is no array: {body}", s.backend))
        .clone()
}

/// `GET /osv/<id>.json` as `token`.
async fn osv_one(s: &TestServer, token: &str, id: &str) -> (StatusCode, Value) {
    s.call_as(token, Method::GET, &format!("/osv/{id}.json"), None).await
}

/// `GET /osv/<id>.json` as `token`, which must be 200.
async fn osv_ok(s: &TestServer, token: &str, id: &str) -> Value {
    let (status, doc) = osv_one(s, token, id).await;
    assert_eq!(status, StatusCode::OK, "[{}] /osv/{id}.json: {doc}", s.backend);
    doc
}

/// Asserts `/osv/<id>.json` is a 404 NOT_FOUND for `token`.
async fn osv_absent(s: &TestServer, token: &str, id: &str, ctx: &str) {
    let (status, body) = osv_one(s, token, id).await;
    assert_error(&format!("{} {ctx}", s.backend), status, &body, 404, 5, "NOT_FOUND");
}

/// The sorted `id`s of OSV documents.
fn doc_ids(docs: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = docs
        .iter()
        .map(|d| d["id"].as_str().unwrap_or_else(|| panic!("no id in {d}")).to_owned())
        .collect();
    ids.sort();
    ids
}

/// OSV documents by id (each id once).
fn by_id(docs: &[Value]) -> BTreeMap<String, Value> {
    let map: BTreeMap<String, Value> = docs
        .iter()
        .map(|d| (d["id"].as_str().expect("id").to_owned(), d.clone()))
        .collect();
    assert_eq!(map.len(), docs.len(), "one document per id: {docs:?}");
    map
}

/// A document without `modified` (which follows the advisory's update time,
/// moved by any write, pending events included).
fn without_modified(doc: &Value) -> Value {
    let mut d = doc.clone();
    d.as_object_mut().expect("a document object").remove("modified");
    d
}

/// An RFC 3339 time in Ward's JSON form (`…:ssZ` or `…:ss.mmmZ`) to whole
/// seconds, as OSV documents write times.
fn to_seconds(t: &str) -> String {
    assert!(t.len() >= 20 && t.ends_with('Z'), "not a UTC time: {t:?}");
    format!("{}Z", &t[..19])
}

/// The official OSV JSON Schema, compiled.
fn osv_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(OSV_SCHEMA).expect("read the OSV schema");
    let schema: Value = serde_json::from_str(&text).expect("the OSV schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the OSV schema compiles");
    // It does reject: no `modified`, an unknown id prefix.
    assert!(!validator.is_valid(&json!({"id": "CGA-2222-3333-4444"})));
    assert!(!validator.is_valid(&json!({"id": "NOPE-1", "modified": "2025-01-01T00:00:00Z"})));
    validator
}

/// Asserts every document is valid against the OSV schema, listing every
/// error of every document otherwise.
fn assert_osv_valid(validator: &jsonschema::Validator, docs: &[Value], ctx: &str) {
    let mut errors = Vec::new();
    for d in docs {
        for e in validator.iter_errors(d) {
            errors.push(format!("  {} at {:?}: {e}", d["id"], e.instance_path().to_string()));
        }
    }
    assert!(
        errors.is_empty(),
        "{ctx}: {} OSV schema error(s):\n{}\ndocuments: {}",
        errors.len(),
        errors.join("\n"),
        serde_json::to_string_pretty(docs).unwrap_or_default()
    );
}

/// A GET as `token` ("" for none) returning the raw body: (status,
/// content type, bytes).
async fn get_raw(s: &TestServer, token: &str, path: &str) -> (StatusCode, String, Vec<u8>) {
    let mut req = s.http.get(format!("{}{path}", s.base));
    if !token.is_empty() {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = resp.bytes().await.expect("body read").to_vec();
    (status, content_type, bytes)
}

/// CRC-32 (IEEE), as zip entries carry it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// One entry of a zip's central directory.
#[derive(Debug)]
struct ZipEntry {
    name: String,
    crc32: u32,
    size: u32,
}

/// The entries of a zip archive, read from its central directory (the
/// ward crate has no zip dependency); checks the local header each points at.
fn zip_entries(bytes: &[u8]) -> Vec<ZipEntry> {
    let le16 = |at: usize| usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
    let le32 = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    assert!(bytes.len() >= 22, "too short for a zip: {} bytes", bytes.len());
    let eocd = (0..=bytes.len() - 22)
        .rev()
        .find(|&i| bytes[i..i + 4] == *b"PK\x05\x06")
        .expect("an end-of-central-directory record");
    let total = le16(eocd + 10);
    let mut at = le32(eocd + 16) as usize;
    let mut out = Vec::with_capacity(total);
    for _ in 0..total {
        assert_eq!(&bytes[at..at + 4], b"PK\x01\x02", "a central directory header at {at}");
        let name_len = le16(at + 28);
        let extra_len = le16(at + 30);
        let comment_len = le16(at + 32);
        let local = le32(at + 42) as usize;
        assert_eq!(
            &bytes[local..local + 4],
            b"PK\x03\x04",
            "a local file header at {local}"
        );
        out.push(ZipEntry {
            name: String::from_utf8(bytes[at + 46..at + 46 + name_len].to_vec()).expect("UTF-8 entry name"),
            crc32: le32(at + 16),
            size: le32(at + 24),
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    out
}

/// Asserts `/osv/all.zip` as `token` holds exactly `docs`, one `<id>.json`
/// each (content checked by size and CRC-32 of its pretty JSON, as written).
async fn assert_zip_matches(s: &TestServer, token: &str, docs: &[Value], ctx: &str) {
    let (status, content_type, bytes) = get_raw(s, token, "/osv/all.zip").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{ctx}: all.zip: {}",
        String::from_utf8_lossy(&bytes)
    );
    assert_eq!(content_type, "application/zip", "{ctx}");
    if !docs.is_empty() {
        assert!(
            bytes.starts_with(b"PK\x03\x04"),
            "{ctx}: zip magic: {:?}",
            &bytes[..4.min(bytes.len())]
        );
    }
    let entries = zip_entries(&bytes);
    let mut names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    let want: Vec<String> = doc_ids(docs).iter().map(|id| format!("{id}.json")).collect();
    assert_eq!(names, want, "{ctx}: zip entries");
    let docs = by_id(docs);
    for e in &entries {
        let id = e.name.strip_suffix(".json").expect(".json");
        let text = serde_json::to_vec_pretty(&docs[id]).expect("pretty JSON");
        assert_eq!(e.size as usize, text.len(), "{ctx}: size of {}", e.name);
        assert_eq!(e.crc32, crc32(&text), "{ctx}: CRC-32 of {} (its content)", e.name);
    }
}

/// `GET /advisory/v2/documents?<query>` as `token`, which must be 200, with
/// each document's advisories sorted by id (the server orders them by uid).
async fn documents(s: &TestServer, token: &str, query: &str) -> Value {
    let (status, mut body) = s
        .call_as(token, Method::GET, &format!("/advisory/v2/documents?{query}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] documents?{query}: {body}", s.backend);
    for d in body["documents"].as_array_mut().into_iter().flatten() {
        if let Some(list) = d["advisories"].as_array_mut() {
            list.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        }
    }
    body
}

/// `GET /advisory/v2/metadata?<query>` as `token`, which must be 200, with
/// each entry's references sorted by url.
async fn metadata(s: &TestServer, token: &str, query: &str) -> Value {
    let (status, mut body) = s
        .call_as(token, Method::GET, &format!("/advisory/v2/metadata?{query}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] metadata?{query}: {body}", s.backend);
    for m in body["vulnerabilityMetadata"].as_array_mut().into_iter().flatten() {
        if let Some(list) = m["references"].as_array_mut() {
            list.sort_by(|a, b| a["url"].as_str().cmp(&b["url"].as_str()));
        }
    }
    body
}

/// A metadata entry as Ward writes it (no summaries, no severities here).
fn meta_entry(s: &TestServer, id: &str, advisories: &[&str]) -> Value {
    let mut urls: Vec<String> = advisories.iter().map(|a| format!("{}/osv/{a}.json", s.base)).collect();
    urls.sort();
    json!({
        "id": id,
        "summary": "",
        "details": "",
        "references": urls.iter().map(|u| json!({"type": "TYPE_ADVISORY", "url": u})).collect::<Vec<_>>(),
        "severities": [],
    })
}

/// The feed's form of an advisory: `events` are feed events.
/// A feed advisory as the SDK's message has it: every field emitted, so the
/// scanner provenance of a scan or fix the feed does not keep is `""`.
fn feed_advisory(id: &str, aliases: &[&str], mut events: Value) -> Value {
    for e in events.as_array_mut().into_iter().flatten() {
        let empty = |o: &mut Value, keys: &[&str]| {
            for k in keys {
                o.as_object_mut().map(|m| m.entry(*k).or_insert(json!("")));
            }
        };
        if let Some(f) = e.get_mut("fixed") {
            empty(f, &["scannerVersion", "grypeDbBuilt", "grypeDbChecksum"]);
        }
        if let Some(s) = e.pointer_mut("/detection/scanv1") {
            empty(
                s,
                &["artifactVersion", "scannerVersion", "grypeDbBuilt", "grypeDbChecksum"],
            );
        }
    }
    json!({"id": id, "events": events, "aliases": aliases, "packageNamespace": "chainguard"})
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[tokio::test]
async fn import_review_export_round_trip() {
    let validator = osv_validator();
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        import_fixtures(&s, &org).await;

        // Imported events are pending: nothing is published yet.
        let (_, approver) = person(&s, "approver", &[(&org, "advisories.approver")]).await;
        assert_eq!(
            osv_all(&s, &approver).await,
            Vec::<Value>::new(),
            "[{b}] nothing approved yet"
        );

        // A second identity approves every event (the importer cannot).
        assert_eq!(approve_all(&s, &approver, &org).await, FIXTURE_EVENTS, "[{b}]");

        let docs = osv_all(&s, &approver).await;
        let want_ids: Vec<&str> = EXPECTED.iter().map(|e| e.id).collect();
        assert_eq!(doc_ids(&docs), want_ids, "[{b}] one document per fixture advisory");
        assert_eq!(osv_all(&s, &s.token).await, docs, "[{b}] the admin reads the same");
        assert_osv_valid(&validator, &docs, &format!("[{b}] all.json"));

        let docs_by_id = by_id(&docs);
        for e in &EXPECTED {
            let ctx = format!("[{b}] {}", e.id);
            let doc = &docs_by_id[e.id];
            let keys: BTreeSet<&str> = doc.as_object().expect("object").keys().map(String::as_str).collect();
            assert_eq!(keys, BTreeSet::from(DOC_KEYS), "{ctx}: {doc}");
            assert_eq!(doc["schema_version"], "1.7.0", "{ctx}");
            assert_eq!(doc["id"], e.id, "{ctx}");
            assert_eq!(doc["aliases"], json!(e.aliases), "{ctx}");
            assert_eq!(
                doc["database_specific"],
                json!({"source": format!("{}/osv/{}.json", s.base, e.id)}),
                "{ctx}"
            );
            let affected = doc["affected"].as_array().expect("affected");
            assert_eq!(affected.len(), 1, "{ctx}: {doc}");
            let a = &affected[0];
            assert_eq!(a["package"]["name"], e.artifact, "{ctx}");
            let purl = a["package"]["purl"].as_str().expect("purl");
            assert!(purl.starts_with("pkg:apk/chainguard/"), "{ctx}: {purl}");
            match (e.ranges, e.fixed) {
                (true, Some(v)) => assert_eq!(
                    a["ranges"][0]["events"],
                    json!([{"introduced": "0"}, {"fixed": v}]),
                    "{ctx}: fixed"
                ),
                (true, None) => assert_eq!(
                    a["ranges"][0]["events"],
                    json!([{"introduced": "0"}]),
                    "{ctx}: affected, no fix"
                ),
                (false, _) => assert!(a.get("ranges").is_none(), "{ctx}: no ranges: {a}"),
            }
            assert_eq!(a["ecosystem_specific"]["status"], e.status, "{ctx}");
            assert_eq!(
                a["ecosystem_specific"]["components"][0]["latest_event_status"], e.latest,
                "{ctx}"
            );
            // And the whole entry, exactly.
            assert_eq!(*a, expected_affected(e), "{ctx}");
        }

        // One by one: the same documents.
        for e in &EXPECTED {
            assert_eq!(
                osv_ok(&s, &approver, e.id).await,
                docs_by_id[e.id],
                "[{b}] /osv/{}.json",
                e.id
            );
        }
        osv_absent(&s, &approver, "CGA-2222-3333-4444", "an unknown CGA id").await;
        osv_absent(&s, &approver, "CVE-2024-45871", "not a CGA id").await;

        // The zip: one `<id>.json` per document, the same content.
        assert_zip_matches(&s, &approver, &docs, &format!("[{b}]")).await;

        // Published times are the advisory's.
        let fixed_uid = advisory_uid(&s, "CGA-5v4q-653x-xxff").await;
        let (status, v2) = s.get(&format!("{V2}/{fixed_uid}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {v2}");
        let doc = &docs_by_id["CGA-5v4q-653x-xxff"];
        assert_eq!(
            doc["published"],
            to_seconds(v2["createTime"].as_str().expect("createTime")),
            "[{b}]"
        );
        assert_eq!(
            doc["modified"],
            to_seconds(v2["updateTime"].as_str().expect("updateTime")),
            "[{b}]"
        );
    }
}

#[tokio::test]
async fn only_approved_events_are_published() {
    let validator = osv_validator();
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let (_, approver) = person(&s, "approver", &[(&org, "advisories.approver")]).await;
        let admin = s.token.clone();

        // Only a pending detection: not published, even to the admin.
        let created = create(
            &s,
            &org,
            advisory("zephyr", &["CVE-2025-0001"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        let (a_uid, a_id) = (id(&created), cga(&created));
        let detected = id(&created["events"][0]);
        assert_eq!(created["events"][0]["status"], "PENDING", "[{b}] {created}");
        assert_eq!(osv_all(&s, &admin).await, Vec::<Value>::new(), "[{b}] pending only");
        osv_absent(&s, &admin, &a_id, "pending only").await;
        assert_zip_matches(&s, &admin, &[], &format!("[{b}] pending only")).await;

        // Its detection approved: published, affected from version 0 on.
        review(&s, &approver, &detected, "APPROVED").await;
        let doc = osv_ok(&s, &admin, &a_id).await;
        assert_osv_valid(&validator, std::slice::from_ref(&doc), &format!("[{b}] detected"));
        let component = ["openssl", "binary", "/usr/lib/libssl.so.3"];
        assert_eq!(doc["id"], a_id.as_str(), "[{b}]");
        assert_eq!(doc["aliases"], json!(["CVE-2025-0001"]), "[{b}]");
        assert_eq!(
            doc["affected"],
            json!([affected(
                "zephyr",
                "pkg:apk/chainguard/zephyr",
                "under_investigation",
                component,
                "detection",
                "2025-01-01T00:00:00Z",
                true,
                None,
            )]),
            "[{b}] {doc}"
        );
        assert_eq!(
            doc["affected"][0]["ranges"][0]["events"],
            json!([{"introduced": "0"}]),
            "[{b}]"
        );
        let (status, v2) = s.get(&format!("{V2}/{a_uid}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {v2}");
        assert_eq!(
            doc["published"],
            to_seconds(v2["createTime"].as_str().expect("createTime")),
            "[{b}]"
        );
        assert_eq!(
            doc["modified"],
            to_seconds(v2["updateTime"].as_str().expect("updateTime")),
            "[{b}]"
        );
        assert_eq!(osv_all(&s, &admin).await, vec![doc.clone()], "[{b}]");

        // A newer fix, still pending: the document says what it said.
        let fix = add_event(&s, &a_uid, fixed("2025-02-01T00:00:00Z", "1.2.3-r1")).await;
        let pending_fix = osv_ok(&s, &admin, &a_id).await;
        assert_eq!(
            without_modified(&pending_fix),
            without_modified(&doc),
            "[{b}] a pending fix is not published"
        );
        assert!(!pending_fix.to_string().contains("1.2.3-r1"), "[{b}] {pending_fix}");
        assert_eq!(osv_all(&s, &admin).await, vec![pending_fix], "[{b}]");

        // The fix approved: fixed in 1.2.3-r1.
        review(&s, &approver, &id(&fix), "APPROVED").await;
        let doc = osv_ok(&s, &admin, &a_id).await;
        assert_osv_valid(&validator, std::slice::from_ref(&doc), &format!("[{b}] fixed"));
        let fixed_affected = json!([affected(
            "zephyr",
            "pkg:apk/chainguard/zephyr",
            "fixed",
            component,
            "fixed",
            "2025-02-01T00:00:00Z",
            true,
            Some("1.2.3-r1"),
        )]);
        assert_eq!(doc["affected"], fixed_affected, "[{b}] {doc}");
        assert_eq!(
            doc["affected"][0]["ranges"][0]["events"],
            json!([{"introduced": "0"}, {"fixed": "1.2.3-r1"}]),
            "[{b}]"
        );

        // Rejected events never show, however new: a false positive and a
        // later fix, both rejected.
        let fp = add_event(&s, &a_uid, false_positive("2025-03-01T00:00:00Z")).await;
        review(&s, &approver, &id(&fp), "REJECTED").await;
        let later = add_event(&s, &a_uid, fixed("2025-04-01T00:00:00Z", "2.0.0-r0")).await;
        review(&s, &approver, &id(&later), "REJECTED").await;
        let after = osv_ok(&s, &admin, &a_id).await;
        assert_eq!(
            without_modified(&after),
            without_modified(&doc),
            "[{b}] rejected events are not published"
        );
        assert_eq!(after["affected"], fixed_affected, "[{b}]");
        assert!(!after.to_string().contains("2.0.0-r0"), "[{b}] {after}");

        // An advisory whose only event was rejected, and one whose event
        // awaits changes: neither is published.
        let rejected = create(
            &s,
            &org,
            advisory("zephyr", &["CVE-2025-0002"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        review(&s, &approver, &id(&rejected["events"][0]), "REJECTED").await;
        let changes = create(
            &s,
            &org,
            advisory("zephyr", &["CVE-2025-0003"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        review(&s, &approver, &id(&changes["events"][0]), "REQUEST_CHANGES").await;
        osv_absent(&s, &admin, &cga(&rejected), "only a rejected event").await;
        osv_absent(&s, &admin, &cga(&changes), "only an event awaiting changes").await;
        let all = osv_all(&s, &admin).await;
        assert_eq!(doc_ids(&all), std::slice::from_ref(&a_id), "[{b}]");
        assert_eq!(without_modified(&all[0]), without_modified(&doc), "[{b}]");
        assert_zip_matches(&s, &admin, &all, &format!("[{b}]")).await;

        // The feed agrees: only the two approved events.
        let feed = documents(&s, &admin, "id=zephyr").await;
        assert_eq!(
            feed,
            json!({"documents": [{
                "id": "zephyr",
                "advisories": [feed_advisory(&a_id, &["CVE-2025-0001"], json!([
                    {"timestamp": "2025-01-01T00:00:00.000Z", "detection": {"manual": {}}},
                    {"timestamp": "2025-02-01T00:00:00.000Z", "fixed": {"fixedVersion": "1.2.3-r1"}},
                ]))],
            }]}),
            "[{b}]"
        );
    }
}

#[tokio::test]
async fn public_groups_are_readable_without_a_token() {
    for mut s in common::servers().await {
        let b = s.backend;
        let g1 = uid(&s.create_group(None, "public-org").await);
        let g2 = uid(&s.create_group(None, "private-org").await);
        let (_, approver) = person(
            &s,
            "approver",
            &[(&g1, "advisories.approver"), (&g2, "advisories.approver")],
        )
        .await;
        let a1 = create(
            &s,
            &g1,
            advisory("zephyr", &["CVE-2025-1001"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        let a1_pending = create(
            &s,
            &g1,
            advisory("zephyr", &["CVE-2025-1002"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        let a2 = create(
            &s,
            &g2,
            advisory(
                "yonder",
                &["CVE-2025-1003"],
                vec![fixed("2025-01-01T00:00:00Z", "1.0.0-r0")],
            ),
        )
        .await;
        review(&s, &approver, &id(&a1["events"][0]), "APPROVED").await;
        review(&s, &approver, &id(&a2["events"][0]), "APPROVED").await;
        let (a1, a1_pending, a2) = (cga(&a1), cga(&a1_pending), cga(&a2));

        // No public groups (the default): an anonymous caller sees nothing,
        // and a bad token is refused, not read as anonymous.
        assert!(s.config.public_advisories.is_empty(), "[{b}] the default");
        assert_eq!(
            osv_all(&s, "").await,
            Vec::<Value>::new(),
            "[{b}] anonymous, nothing public"
        );
        assert_zip_matches(&s, "", &[], &format!("[{b}] anonymous, nothing public")).await;
        osv_absent(&s, "", &a1, "anonymous, nothing public").await;
        assert_eq!(documents(&s, "", "id=zephyr").await, json!({"documents": []}), "[{b}]");
        for path in [
            "/osv/all.json".to_owned(),
            format!("/osv/{a1}.json"),
            "/advisory/v2/documents?id=zephyr".to_owned(),
            "/advisory/v2/metadata?ids=CVE-2025-1001".to_owned(),
        ] {
            let (status, body) = s.call_as("not-a-token", Method::GET, &path, None).await;
            assert_error(
                &format!("{b} garbage token {path}"),
                status,
                &body,
                401,
                16,
                "UNAUTHENTICATED",
            );
        }
        // The admin sees both groups.
        assert_eq!(doc_ids(&osv_all(&s, &s.token).await), {
            let mut v = vec![a1.clone(), a2.clone()];
            v.sort();
            v
        });

        // G1 public.
        s.config.public_advisories = vec![g1.clone()];
        s.restart().await;
        // Tokens are for the API URL, which moved with the port.
        let (_, g2_viewer) = person(&s, "g2-viewer", &[(&g2, "advisories.viewer")]).await;
        let (_, nobody) = person(&s, "nobody", &[]).await;

        let anon = osv_all(&s, "").await;
        assert_eq!(
            doc_ids(&anon),
            std::slice::from_ref(&a1),
            "[{b}] anonymous: G1's published advisories only"
        );
        assert_eq!(anon[0]["affected"][0]["package"]["name"], "zephyr", "[{b}]");
        assert_eq!(osv_ok(&s, "", &a1).await, anon[0], "[{b}] anonymous, by id");
        assert_zip_matches(&s, "", &anon, &format!("[{b}] anonymous")).await;
        osv_absent(&s, "", &a1_pending, "anonymous, G1 unpublished").await;
        osv_absent(&s, "", &a2, "anonymous, G2").await;
        assert_eq!(
            documents(&s, "", "id=zephyr").await["documents"][0]["advisories"]
                .as_array()
                .map(|l| l.iter().map(|a| a["id"].clone()).collect::<Vec<_>>()),
            Some(vec![json!(a1)]),
            "[{b}] anonymous feed"
        );
        assert_eq!(
            documents(&s, "", "id=yonder").await,
            json!({"documents": []}),
            "[{b}] G2's origin"
        );
        assert_eq!(
            metadata(&s, "", "ids=CVE-2025-1003").await["vulnerabilityMetadata"],
            json!([]),
            "[{b}] G2's alias"
        );
        assert_eq!(
            metadata(&s, "", "ids=CVE-2025-1001").await["vulnerabilityMetadata"],
            json!([meta_entry(&s, "CVE-2025-1001", &[a1.as_str()])]),
            "[{b}] G1's alias"
        );

        // A token without advisories.list on G2: still only G1.
        assert_eq!(
            doc_ids(&osv_all(&s, &nobody).await),
            std::slice::from_ref(&a1),
            "[{b}] nobody"
        );
        osv_absent(&s, &nobody, &a2, "no advisories.list on G2").await;

        // advisories.list on G2: G1 (public) and G2.
        let both = osv_all(&s, &g2_viewer).await;
        let mut want = vec![a1.clone(), a2.clone()];
        want.sort();
        assert_eq!(doc_ids(&both), want, "[{b}] G2 viewer");
        let doc = osv_ok(&s, &g2_viewer, &a2).await;
        assert_eq!(doc, by_id(&both)[&a2], "[{b}]");
        assert_eq!(
            doc["affected"][0]["ranges"][0]["events"],
            json!([{"introduced": "0"}, {"fixed": "1.0.0-r0"}]),
            "[{b}] {doc}"
        );
        osv_absent(&s, &g2_viewer, &a1_pending, "G2 viewer, G1 unpublished").await;

        // A bad token is still refused.
        let (status, body) = s.call_as("not-a-token", Method::GET, "/osv/all.json", None).await;
        assert_error(
            &format!("{b} garbage token, public groups"),
            status,
            &body,
            401,
            16,
            "UNAUTHENTICATED",
        );
    }
}

#[tokio::test]
async fn advisory_feed_documents_and_metadata() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        import_fixtures(&s, &org).await;
        let (_, approver) = person(&s, "approver", &[(&org, "advisories.approver")]).await;
        assert_eq!(approve_all(&s, &approver, &org).await, FIXTURE_EVENTS, "[{b}]");
        let admin = s.token.clone();

        // CGA-3x6r gets a pending and a rejected event: neither is in the feed.
        let not_planned = advisory_uid(&s, "CGA-3x6r-v6w8-827q").await;
        add_event(&s, &not_planned, fixed("2024-09-02T00:00:00Z", "0.1.0-r0")).await;
        let rejected = add_event(&s, &not_planned, fixed("2024-09-01T00:00:00Z", "0.0.9-r0")).await;
        review(&s, &approver, &id(&rejected), "REJECTED").await;
        // A pyrite advisory that is only pending, aliasing CVE-2025-99999.
        create(
            &s,
            &org,
            advisory("pyrite", &["CVE-2025-99999"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        // A second published advisory aliasing CVE-2024-45871.
        let quasar = create(
            &s,
            &org,
            advisory("quasar", &["CVE-2024-45871"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        review(&s, &approver, &id(&quasar["events"][0]), "APPROVED").await;
        let quasar = cga(&quasar);

        // By origin package: pyrite's three published advisories (one of them
        // in pyrite-cli), with their approved events in the feed's shape.
        let cga_3x6r = feed_advisory(
            "CGA-3x6r-v6w8-827q",
            &["CVE-2024-40236"],
            json!([
                {"timestamp": "2024-08-19T18:05:33.000Z", "detection": {"manual": {}}},
                {"timestamp": "2024-08-22T07:59:14.000Z", "fixNotPlanned": {
                    "note": "The affected 0.x plugin API is end of life upstream and will be removed.",
                }},
            ]),
        );
        let cga_53m6 = feed_advisory(
            "CGA-53m6-fhg2-gmww",
            &["CVE-2025-10427"],
            json!([
                {"timestamp": "2025-03-03T09:10:11.000Z", "detection": {"scanv1": {
                    "subpackageName": "pyrite-cli",
                    "componentId": "51fd0e8a3b7c9264",
                    "componentName": "jinja2",
                    "componentVersion": "3.1.3",
                    "componentType": "python",
                    "componentLocation": "/usr/share/pyrite-cli/lib/python3.12/site-packages/Jinja2-3.1.3.dist-info/METADATA",
                    "scanner": "grype",
                }}},
                {"timestamp": "2025-03-04T13:45:00.000Z", "truePositiveDetermination": {
                    "note": "Templates are rendered from user-supplied report definitions.",
                }},
                {"timestamp": "2025-03-12T20:06:58.000Z", "fixed": {"fixedVersion": "3.11.4-r2"}},
            ]),
        );
        let cga_96h7 = feed_advisory(
            "CGA-96h7-rp48-65v2",
            &["CVE-2024-39112", "GHSA-jg7v-xgqr-6h88"],
            json!([
                {"timestamp": "2024-07-08T14:20:05.000Z", "detection": {"scanv1": {
                    "subpackageName": "pyrite",
                    "componentId": "e4a70c9b21d85f36",
                    "componentName": "urllib3",
                    "componentVersion": "2.0.7",
                    "componentType": "python",
                    "componentLocation": "/usr/lib/python3.12/site-packages/urllib3-2.0.7.dist-info/METADATA",
                    "scanner": "grype",
                }}},
                {"timestamp": "2024-07-10T11:37:52.000Z", "falsePositiveDetermination": {
                    "type": "TYPE_COMPONENT_VULNERABILITY_MISMATCH",
                    "note": "The record concerns the urllib3 1.x branch; pyrite ships 2.0.7.",
                }},
            ]),
        );
        assert_eq!(
            documents(&s, &admin, "id=pyrite").await,
            json!({"documents": [{
                "id": "pyrite",
                "advisories": [cga_3x6r.clone(), cga_53m6.clone(), cga_96h7.clone()],
            }]}),
            "[{b}] origin pyrite"
        );
        // The approver (advisories.list on the group) reads the same.
        assert_eq!(
            documents(&s, &approver, "id=pyrite").await,
            documents(&s, &admin, "id=pyrite").await,
            "[{b}]"
        );
        // An OSV import's origin is its package; nvdapi detections keep their CPEs.
        assert_eq!(
            documents(&s, &admin, "id=quillmark").await,
            json!({"documents": [{
                "id": "quillmark",
                "advisories": [feed_advisory(
                    "CGA-f9gc-q67g-2rh6",
                    &["CVE-2025-27761", "GHSA-qvw3-2c8h-mwv3"],
                    json!([
                        {"timestamp": "2025-08-04T13:22:51.000Z", "detection": {"manual": {}}},
                        {"timestamp": "2025-08-07T09:41:36.000Z", "fixed": {"fixedVersion": "2.4.1-r3"}},
                    ]),
                )],
            }]}),
            "[{b}] origin quillmark"
        );
        let libquartz = documents(&s, &admin, "id=libquartz").await;
        let ids: Vec<&Value> = libquartz["documents"][0]["advisories"]
            .as_array()
            .expect("advisories")
            .iter()
            .map(|a| &a["id"])
            .collect();
        assert_eq!(
            ids,
            [
                &json!("CGA-254q-7753-5pcr"),
                &json!("CGA-7fxf-r488-j998"),
                &json!("CGA-rwc5-3vv2-jg8w")
            ],
            "[{b}] {libquartz}"
        );
        assert_eq!(
            libquartz["documents"][0]["advisories"][1]["events"],
            json!([
                {"timestamp": "2024-10-21T06:30:00.000Z", "detection": {"nvdapi": {
                    "cpeSearched": "cpe:2.3:a:libquartz_project:libquartz:*:*:*:*:*:*:*:*",
                    "cpeFound": "cpe:2.3:a:libquartz_project:libquartz:0.17.2:*:*:*:*:*:*:*",
                }}},
                {"timestamp": "2024-10-25T15:12:40.000Z", "analysisNotPlanned": {
                    "note": "The record names only the Windows build, which is not packaged.",
                }},
            ]),
            "[{b}]"
        );
        assert_eq!(
            documents(&s, &admin, "id=nothing").await,
            json!({"documents": []}),
            "[{b}]"
        );

        // By alias.
        assert_eq!(
            documents(&s, &admin, "cves=CVE-2025-10427").await,
            json!({"documents": [{"id": "pyrite", "advisories": [cga_53m6.clone()]}]}),
            "[{b}] cves"
        );
        let two = documents(&s, &admin, "cves=CVE-2025-10427&cves=GO-2025-3702").await;
        let origins: Vec<&Value> = two["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .map(|d| &d["id"])
            .collect();
        assert_eq!(origins, [&json!("nimbus-proxy"), &json!("pyrite")], "[{b}] {two}");
        assert_eq!(
            two["documents"][0]["advisories"]
                .as_array()
                .map(|l| l.iter().map(|a| a["id"].clone()).collect::<Vec<_>>()),
            Some(vec![json!("CGA-hcpm-pm7p-fqvv")]),
            "[{b}] {two}"
        );
        assert_eq!(two["documents"][1]["advisories"], json!([cga_53m6]), "[{b}] {two}");
        // id and cves together: both must hold.
        assert_eq!(
            documents(&s, &admin, "id=pyrite&cves=CVE-2024-40236").await,
            json!({"documents": [{"id": "pyrite", "advisories": [cga_3x6r]}]}),
            "[{b}]"
        );
        assert_eq!(
            documents(&s, &admin, "id=nimbus-proxy&cves=CVE-2025-10427").await,
            json!({"documents": []}),
            "[{b}]"
        );
        // An alias only a pending advisory holds.
        assert_eq!(
            documents(&s, &admin, "cves=CVE-2025-99999").await,
            json!({"documents": []}),
            "[{b}]"
        );

        // Neither id nor cves; too many cves.
        let (status, body) = s.get("/advisory/v2/documents").await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        assert_eq!(
            field_violations(&body).into_iter().map(|(f, _)| f).collect::<Vec<_>>(),
            ["id"],
            "[{b}] {body}"
        );
        let many: Vec<String> = (0..1001).map(|i| format!("CVE-2030-{}", 10000 + i)).collect();
        let (status, body) = s.get(&format!("/advisory/v2/documents?cves={}", many.join(","))).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");

        // Metadata: one entry per id a published advisory aliases.
        let tessellate = meta_entry(&s, "CVE-2024-45871", &["CGA-5v4q-653x-xxff", quasar.as_str()]);
        let nimbus = meta_entry(&s, "GO-2025-3702", &["CGA-hcpm-pm7p-fqvv"]);
        assert_eq!(
            metadata(
                &s,
                &admin,
                "ids=GO-2025-3702&ids=CVE-2024-45871&ids=CVE-2099-0001&ids=CVE-2025-99999"
            )
            .await,
            json!({
                "vulnerabilityMetadata": [tessellate.clone(), nimbus.clone()],
                "nextPageToken": "",
                "totalCount": "2",
                "skipped": 0,
            }),
            "[{b}] metadata"
        );
        for (i, m) in [&tessellate, &nimbus].into_iter().enumerate() {
            for r in m["references"].as_array().expect("references") {
                assert_eq!(r["type"], "TYPE_ADVISORY", "[{b}] {i}");
                let url = r["url"].as_str().expect("url");
                assert!(
                    url.starts_with(&format!("{}/osv/CGA-", s.base)) && url.ends_with(".json"),
                    "[{b}] {url}"
                );
            }
        }
        // Every reference resolves to the published document.
        for r in tessellate["references"].as_array().expect("references") {
            let url = r["url"].as_str().expect("url");
            let id = url
                .rsplit('/')
                .next()
                .and_then(|f| f.strip_suffix(".json"))
                .expect("<id>.json");
            osv_ok(&s, &admin, id).await;
        }
        // Comma-separated and `id` work too; paging walks the ids in order.
        assert_eq!(
            metadata(&s, &admin, "ids=GO-2025-3702,CVE-2024-45871").await["vulnerabilityMetadata"],
            json!([tessellate.clone(), nimbus.clone()]),
            "[{b}]"
        );
        assert_eq!(
            metadata(&s, &admin, "id=GO-2025-3702").await["vulnerabilityMetadata"],
            json!([nimbus.clone()]),
            "[{b}]"
        );
        let first = metadata(&s, &admin, "ids=GO-2025-3702&ids=CVE-2024-45871&pageSize=1").await;
        assert_eq!(
            first,
            json!({
                "vulnerabilityMetadata": [tessellate],
                "nextPageToken": "CVE-2024-45871",
                "totalCount": "2",
                "skipped": 0,
            }),
            "[{b}] first page"
        );
        let second = metadata(
            &s,
            &admin,
            "ids=GO-2025-3702&ids=CVE-2024-45871&pageSize=1&pageToken=CVE-2024-45871",
        )
        .await;
        assert_eq!(second["vulnerabilityMetadata"], json!([nimbus]), "[{b}] second page");
        assert_eq!(second["nextPageToken"], "", "[{b}]");
        assert_eq!(second["totalCount"], "2", "[{b}]");

        // At most 1000 ids.
        let mut ids: Vec<String> = (0..998).map(|i| format!("CVE-2030-{}", 10000 + i)).collect();
        ids.push("CVE-2024-45871".into());
        ids.push("GO-2025-3702".into());
        let page = metadata(&s, &admin, &format!("ids={}", ids.join(","))).await;
        assert_eq!(page["totalCount"], "2", "[{b}] 1000 ids");
        ids.push("CVE-2030-99999".into());
        let (status, body) = s.get(&format!("/advisory/v2/metadata?ids={}", ids.join(","))).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");
        assert_eq!(
            field_violations(&body).into_iter().map(|(f, _)| f).collect::<Vec<_>>(),
            ["ids"],
            "[{b}] {body}"
        );
    }
}

#[tokio::test]
async fn deleted_advisories_are_withdrawn_or_absent() {
    // `published()` lists only advisories without a delete time, so a deleted
    // advisory is absent everywhere (never a document with `withdrawn`).
    let validator = osv_validator();
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let (_, approver) = person(&s, "approver", &[(&org, "advisories.approver")]).await;
        let admin = s.token.clone();
        let (_, public_reader) = person(&s, "reader", &[(&org, "advisories.viewer")]).await;

        let doomed = create(
            &s,
            &org,
            advisory(
                "zephyr",
                &["CVE-2025-2001"],
                vec![fixed("2025-01-01T00:00:00Z", "1.0.0-r0")],
            ),
        )
        .await;
        let kept = create(
            &s,
            &org,
            advisory("zephyr", &["CVE-2025-2001"], vec![detection("2025-01-01T00:00:00Z")]),
        )
        .await;
        review(&s, &approver, &id(&doomed["events"][0]), "APPROVED").await;
        review(&s, &approver, &id(&kept["events"][0]), "APPROVED").await;
        let late = add_event(&s, &id(&doomed), fixed("2025-02-01T00:00:00Z", "1.0.1-r0")).await;
        let (doomed_uid, doomed, kept) = (id(&doomed), cga(&doomed), cga(&kept));
        let mut both = vec![doomed.clone(), kept.clone()];
        both.sort();

        // Before: both published.
        let before = osv_all(&s, &admin).await;
        assert_eq!(doc_ids(&before), both, "[{b}]");
        assert_osv_valid(&validator, &before, &format!("[{b}] before delete"));
        osv_ok(&s, &admin, &doomed).await;
        let meta = metadata(&s, &admin, "ids=CVE-2025-2001").await;
        assert_eq!(
            meta["vulnerabilityMetadata"],
            json!([meta_entry(&s, "CVE-2025-2001", &[doomed.as_str(), kept.as_str()])]),
            "[{b}]"
        );

        let (status, body) = s.delete(&format!("{V1}/{doomed_uid}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] delete: {body}");
        // Soft: still listed with showDeleted.
        let (status, page) = s.get(&format!("{V2}?advisoryIds={doomed}&showDeleted=true")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {page}");
        assert!(page["advisories"][0]["deleteTime"].is_string(), "[{b}] {page}");

        // After: absent from every published form, for every reader.
        for (who, token) in [("admin", admin.as_str()), ("viewer", public_reader.as_str())] {
            let ctx = format!("[{b}] {who} after delete");
            let after = osv_all(&s, token).await;
            assert_eq!(doc_ids(&after), std::slice::from_ref(&kept), "{ctx}");
            assert!(
                after.iter().all(|d| d.get("withdrawn").is_none()),
                "{ctx}: nothing withdrawn is listed: {after:?}"
            );
            assert_osv_valid(&validator, &after, &ctx);
            osv_absent(&s, token, &doomed, &ctx).await;
            assert_zip_matches(&s, token, &after, &ctx).await;
            let feed = documents(&s, token, "id=zephyr").await;
            assert_eq!(
                feed["documents"][0]["advisories"]
                    .as_array()
                    .map(|l| l.iter().map(|a| a["id"].clone()).collect::<Vec<_>>()),
                Some(vec![json!(kept)]),
                "{ctx}: {feed}"
            );
            assert_eq!(
                documents(&s, token, "cves=CVE-2025-2001").await,
                feed,
                "{ctx}: by alias"
            );
            assert_eq!(
                metadata(&s, token, "ids=CVE-2025-2001").await["vulnerabilityMetadata"],
                json!([meta_entry(&s, "CVE-2025-2001", &[kept.as_str()])]),
                "{ctx}"
            );
        }

        // Its pending event can no longer be approved into publication.
        let (status, body) = s
            .call_as(
                &approver,
                Method::PUT,
                &format!("{EVENTS}/{}", id(&late)),
                Some(json!({"status": "APPROVED"})),
            )
            .await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        osv_absent(&s, &admin, &doomed, "after a review attempt").await;
    }
}
