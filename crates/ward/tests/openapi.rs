//! `/openapi.json`: it covers every route the router has (and nothing it
//! lacks), validates as OpenAPI 3.1, and matches the committed snapshot.
//!
//! The snapshot is `tests/fixtures/openapi.json`; after an intended change,
//! refresh it with `WARD_UPDATE_SNAPSHOT=1 cargo test -p ward --test openapi`.
//! Validation runs `openapi-spec-validator` from the venv at `$WARD_TEST_VENV`
//! (default `target/ward-venv`; `.ci/run` installs it); without it the check
//! is skipped with a note, unless `WARD_TEST_REQUIRE_CLIENTS=1`.

mod common;

use std::path::{Path, PathBuf};

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::Value;

const METHODS: [Method; 5] = [Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE];

async fn server() -> TestServer {
    TestServer::start(ward_store::testing::sqlite()).await
}

async fn document(s: &TestServer) -> Value {
    let (status, doc) = s.call_as("", Method::GET, "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK, "{doc}");
    doc
}

/// An OpenAPI path template as a regex over concrete paths; a variable may
/// span segments (UIDPs contain `/`).
fn template_regex(template: &str) -> regex::Regex {
    let mut re = String::from("^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        re.push_str(&regex::escape(&rest[..open]));
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        re.push_str(".+");
        rest = &rest[close.min(rest.len())..];
    }
    re.push_str(&regex::escape(rest));
    re.push('$');
    regex::Regex::new(&re).expect("regex")
}

/// A concrete path for a template: each variable becomes one segment.
fn sample(template: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in template.chars() {
        match c {
            '{' => {
                depth += 1;
                out.push_str("sample");
            }
            '}' => depth -= 1,
            _ if depth > 0 => {}
            _ => out.push(c),
        }
    }
    out
}

/// Whether the router serves `method` at `path`: anything but 405 and the
/// "no such endpoint" 404s. Asked as the server admin, so that a refusal to
/// authenticate does not hide a missing route.
async fn served(s: &TestServer, method: Method, path: &str) -> bool {
    let (status, body) = s.call(method, path, Some(serde_json::json!({}))).await;
    // 405, and 501 for the public API's RPCs Ward does not serve.
    if status == StatusCode::METHOD_NOT_ALLOWED || status == StatusCode::NOT_IMPLEMENTED {
        return false;
    }
    let no_route = status == StatusCode::NOT_FOUND
        && (body["details"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x["resourceType"] == "endpoint"))
            || body["errors"][0]["message"] == "no such registry endpoint");
    !no_route
}

fn operations(doc: &Value) -> Vec<(Method, String)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for m in item.as_object().expect("path item").keys() {
            let method = Method::from_bytes(m.to_ascii_uppercase().as_bytes()).expect("method");
            ops.push((method, path.clone()));
        }
    }
    ops
}

#[tokio::test]
async fn the_document_covers_every_route_and_only_real_ones() {
    let s = server().await;
    let doc = document(&s).await;
    let ops = operations(&doc);
    assert!(ops.len() > 200, "only {} operations", ops.len());
    let documented =
        |method: &Method, path: &str| ops.iter().any(|(m, t)| m == method && template_regex(t).is_match(path));

    // Every documented operation is served.
    let mut missing = Vec::new();
    for (method, path) in &ops {
        if !served(&s, method.clone(), &sample(path)).await {
            missing.push(format!("{method} {path}"));
        }
    }
    assert!(missing.is_empty(), "documented but not served: {missing:#?}");

    // Every path in the router's table is documented…
    let table = ward_server::rest::route_paths("");
    assert!(table.len() > 50, "{table:?}");
    let mut undocumented = Vec::new();
    for route in &table {
        // axum syntax: `{x}` one segment, `{*x}` the rest.
        let re = template_regex(&route.replace("{*", "{"));
        if !ops.iter().any(|(_, t)| re.is_match(&sample(t))) {
            undocumented.push(route.clone());
        }
    }
    assert!(
        undocumented.is_empty(),
        "routes missing from the document: {undocumented:#?}"
    );

    // …and so is every method the router answers at a documented path.
    let mut extra = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (_, path) in &ops {
        let concrete = sample(path);
        if !seen.insert(concrete.clone()) {
            continue;
        }
        for method in METHODS {
            if !documented(&method, &concrete) && served(&s, method.clone(), &concrete).await {
                extra.push(format!("{method} {concrete}"));
            }
        }
    }
    assert!(extra.is_empty(), "served but not documented: {extra:#?}");
}

#[tokio::test]
async fn every_operation_is_complete() {
    let s = server().await;
    let doc = document(&s).await;
    let mut ids = std::collections::BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let id = op["operationId"].as_str().unwrap_or_default();
            assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {path}"
            );
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            if path.starts_with("/iam/") || path.starts_with("/registry/") {
                assert!(secured, "{method} {path} must declare the bearer scheme");
            }
            // Path parameters are exactly the template's variables.
            let vars: Vec<&str> = path
                .split('{')
                .skip(1)
                .filter_map(|x| x.split_once('}').map(|(v, _)| v))
                .collect();
            let params: Vec<&str> = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["in"] == "path")
                        .filter_map(|p| p["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(vars, params, "{method} {path}");
        }
    }
    // Every $ref resolves.
    let text = doc.to_string();
    for r in regex::Regex::new(r##""\$ref":"#/components/schemas/([^"]+)""##)
        .expect("regex")
        .captures_iter(&text)
    {
        assert!(
            doc["components"]["schemas"][&r[1]].is_object(),
            "unresolved $ref {}",
            &r[1]
        );
    }
    // The CLI prints the same document.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ward"))
        .arg("openapi")
        .output()
        .expect("ward openapi runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed, doc);
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openapi.json")
}

#[tokio::test]
async fn the_document_matches_its_snapshot() {
    let s = server().await;
    let doc = document(&s).await;
    let pretty = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
    if std::env::var("WARD_UPDATE_SNAPSHOT").as_deref() == Ok("1") {
        std::fs::write(fixture(), &pretty).expect("snapshot written");
        return;
    }
    let committed = std::fs::read_to_string(fixture()).unwrap_or_default();
    if committed != pretty {
        let old: Vec<&str> = committed.lines().collect();
        let new: Vec<&str> = pretty.lines().collect();
        let first = old
            .iter()
            .zip(&new)
            .position(|(a, b)| a != b)
            .unwrap_or(old.len().min(new.len()));
        panic!(
            "/openapi.json changed (first difference at line {}: {:?} → {:?}); if intended, run \
             WARD_UPDATE_SNAPSHOT=1 cargo test -p ward --test openapi and commit tests/fixtures/openapi.json",
            first + 1,
            old.get(first),
            new.get(first)
        );
    }
}

#[tokio::test]
async fn the_document_validates_as_openapi_3_1() {
    let venv = std::env::var_os("WARD_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ward-venv"));
    let validator = venv.join("bin/openapi-spec-validator");
    if !validator.is_file() {
        assert_ne!(
            std::env::var("WARD_TEST_REQUIRE_CLIENTS").as_deref(),
            Ok("1"),
            "WARD_TEST_REQUIRE_CLIENTS=1 but {} is missing",
            validator.display()
        );
        eprintln!("note: OpenAPI validation skipped, {} is missing", validator.display());
        return;
    }
    let s = server().await;
    let doc = document(&s).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, doc.to_string()).expect("written");
    let out = std::process::Command::new(&validator)
        .arg(&file)
        .output()
        .expect("validator runs");
    assert!(
        out.status.success(),
        "openapi-spec-validator: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
