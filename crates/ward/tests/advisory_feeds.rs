//! Advisory feeds end to end, through the `ward` CLI and the API, on SQLite
//! and PostgreSQL: public corpora import whole (what Ward cannot use is kept
//! and flagged, not refused), `--reviewed-upstream` makes imported decisions
//! take effect, and OSV feeds of any ecosystem (a zip of JSON, a directory of
//! YAML) import as published, re-import idempotently, update and withdraw.

mod common;

use std::io::Write as _;

use common::{CliRun, TestServer, ward_run};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The summary line an import ends with on stderr.
fn summary(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("created "))
        .unwrap_or_else(|| panic!("no summary line in:\n{stderr}"))
}

async fn ward(s: &TestServer, args: &[&str]) -> CliRun {
    ward_run(s, &s.token, args).await
}

/// A Wolfi-style advisory-schema document: `opa-envoy`'s fix at a version
/// that is not an apk version (as the real corpus has it), a scan whose
/// component location lists 169 paths (17 KiB, over the old 4 KiB bound),
/// one over even the raised bound, and a plain fixed one.
fn corpus(dir: &std::path::Path) {
    let paths: Vec<String> = (0..169)
        .map(|i| format!("/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.{i}/System.Private.Xml.dll"))
        .collect();
    let long = paths.join(", ");
    assert!(long.len() > 4096 && long.len() < 64 * 1024);
    let huge = "/x".repeat(40 * 1024); // 80 KiB
    std::fs::write(
        dir.join("opa-envoy.advisories.yaml"),
        "schema-version: 2.0.2\npackage:\n  name: opa-envoy\nadvisories:\n  - id: CGA-f73f-594w-h296\n    aliases:\n      - CVE-2025-22866\n      - GHSA-3whm-j4xm-rv8x\n    events:\n      - timestamp: 2025-02-08T19:26:38Z\n        type: fixed\n        data:\n          fixed-version: 1.1.0-r1-r0\n",
    )
    .unwrap();
    let scan = |id: &str, alias: &str, location: &str| {
        format!(
            "  - id: {id}\n    aliases:\n      - {alias}\n    events:\n      - timestamp: 2025-03-01T00:00:00Z\n        type: detection\n        data:\n          type: scan/v1\n          data:\n            subpackageName: dotnet-bootstrap-8\n            componentID: 0123456789abcdef\n            componentName: System.Private.Xml\n            componentVersion: 8.0.0\n            componentType: dotnet\n            componentLocation: \"{location}\"\n            scanner: grype\n      - timestamp: 2025-03-02T00:00:00Z\n        type: fixed\n        data:\n          fixed-version: 8.0.11-r0\n"
        )
    };
    let doc = format!(
        "schema-version: 2.0.2\npackage:\n  name: dotnet-bootstrap-8\nadvisories:\n{}{}",
        scan("CGA-3qp7-9r3m-m8hg", "CVE-2025-21176", &long),
        scan("CGA-h993-4mfw-37w2", "CVE-2025-21172", &huge),
    );
    std::fs::write(dir.join("dotnet-bootstrap-8.advisories.yaml"), doc).unwrap();
}

/// The v2 advisory with this CGA id in `org`, with its v1 flags.
async fn advisory(s: &TestServer, org: &str, id: &str) -> (Value, Vec<Value>) {
    let (status, list) = s
        .get(&format!(
            "/vulnerabilities/v2/advisories?uidp.descendantsOf={org}&advisoryIds={id}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let a = list["advisories"][0].clone();
    let uid = a["uid"].as_str().unwrap_or_else(|| panic!("{id}: {list}"));
    let (status, flags) = s.get(&format!("/vulnerabilities/v1/advisories/{uid}/flags")).await;
    assert_eq!(status, StatusCode::OK, "{flags}");
    assert_eq!(flags["advisoryId"], id);
    (a, flags["flags"].as_array().cloned().unwrap_or_default())
}

fn codes(flags: &[Value]) -> Vec<(String, String)> {
    flags
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap_or("").to_owned(),
                f["field"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn public_corpora_import_whole_with_what_ward_cannot_use_flagged() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let path = dir.path().display().to_string();
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let run = ward(&s, &["advisories", "import", "-g", &org, &path]).await;
        run.ok("import");
        assert_eq!(
            summary(&run.stderr),
            "created 3, updated 0, unchanged 0, rejected 0, flagged 2",
            "[{b}]\n{}",
            run.stderr
        );
        assert!(
            run.stderr.contains(
                "CGA-f73f-594w-h296: UNORDERABLE_VERSION events[2025-02-08T19:26:38Z fixed].fixed.fixed_version"
            ),
            "[{b}] the warning is in the summary:\n{}",
            run.stderr
        );

        // Kept as written, flagged, deciding nothing.
        let (opa, flags) = advisory(&s, &org, "CGA-f73f-594w-h296").await;
        assert_eq!(opa["events"][0]["fixed"]["fixedVersion"], "1.1.0-r1-r0", "[{b}]");
        assert_eq!(
            codes(&flags),
            [(
                "UNORDERABLE_VERSION".into(),
                "events[2025-02-08T19:26:38Z fixed].fixed.fixed_version".into()
            )],
            "[{b}]"
        );
        // The 17 KiB location is within the raised bound: kept whole, no flag.
        let (dotnet, flags) = advisory(&s, &org, "CGA-3qp7-9r3m-m8hg").await;
        let location = dotnet["events"][0]["detection"]["scanv1"]["componentLocation"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(location.matches(", ").count(), 168, "[{b}] every path kept");
        assert_eq!(dotnet["componentLocation"], location, "[{b}]");
        assert!(flags.is_empty(), "[{b}] {flags:?}");
        // Over even the raised bound: shortened, flagged.
        let (huge, flags) = advisory(&s, &org, "CGA-h993-4mfw-37w2").await;
        assert_eq!(
            huge["componentLocation"].as_str().map(str::len),
            Some(64 * 1024),
            "[{b}]"
        );
        assert_eq!(
            codes(&flags),
            [
                ("TRUNCATED".into(), "component_location".into()),
                (
                    "TRUNCATED".into(),
                    "events[2025-03-01T00:00:00Z detection].detection.scanv1.component_location".into()
                ),
            ],
            "[{b}]"
        );
        assert!(
            flags[0]["detail"].as_str().unwrap_or("").contains("81920 bytes"),
            "[{b}] {flags:?}"
        );

        // The CLI shows the flags.
        let out = ward(&s, &["advisories", "describe", "CGA-f73f-594w-h296"]).await;
        let out = out.ok("describe");
        assert!(
            out.contains(
                "Flags:\n  UNORDERABLE_VERSION events[2025-02-08T19:26:38Z fixed].fixed.fixed_version: \"1.1.0-r1-r0\" is not an apk version"
            ),
            "[{b}]\n{out}"
        );
        // Re-import: unchanged, the same flags, still exit 0.
        let again = ward(&s, &["advisories", "import", "-g", &org, &path]).await;
        again.ok("re-import");
        assert!(
            summary(&again.stderr).starts_with("created 0, updated 0, unchanged 3, rejected 0"),
            "[{b}] {}",
            again.stderr
        );
        assert_eq!(advisory(&s, &org, "CGA-f73f-594w-h296").await.1.len(), 1, "[{b}]");
    }
}

/// The CGA ids of `org`'s advisories whose latest approved event is a fix.
async fn fixed(s: &TestServer, org: &str) -> Vec<String> {
    let (status, list) = s
        .get(&format!(
            "/vulnerabilities/v2/advisories?uidp.descendantsOf={org}&latestEventType=EVENT_TYPE_FILTER_FIXED"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let mut ids: Vec<String> = list["advisories"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a["advisoryId"].as_str().unwrap_or("").to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn reviewed_upstream_makes_imported_decisions_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let path = dir.path().display().to_string();
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let (importer_uid, importer) = common::identity_with(
            &s,
            &org,
            "importer",
            &["CAP_ADVISORIES_LIST", "CAP_ADVISORIES_CREATE", "CAP_ADVISORIES_UPDATE"],
        )
        .await;
        let (approver_uid, approver) = common::identity_with(
            &s,
            &org,
            "approver",
            &[
                "CAP_ADVISORIES_LIST",
                "CAP_ADVISORIES_CREATE",
                "CAP_ADVISORIES_UPDATE",
                "CAP_ADVISORIES_APPROVE",
            ],
        )
        .await;
        // Without advisories.approve: refused, nothing written.
        let run = ward_run(
            &s,
            &importer,
            &["advisories", "import", "-g", &org, "--reviewed-upstream", &path],
        )
        .await;
        let err = run.failed("import --reviewed-upstream without approve");
        assert!(err.contains("advisories.approve"), "[{b}] {err}");
        assert!(fixed(&s, &org).await.is_empty(), "[{b}]");

        // Imported plainly: pending, so nothing is fixed yet.
        ward_run(&s, &importer, &["advisories", "import", "-g", &org, &path])
            .await
            .ok("plain import");
        assert!(fixed(&s, &org).await.is_empty(), "[{b}] pending events decide nothing");

        // Reviewed upstream: the same events approved as imported.
        let run = ward_run(
            &s,
            &approver,
            &["advisories", "import", "-g", &org, "--reviewed-upstream", &path],
        )
        .await;
        run.ok("import --reviewed-upstream");
        assert!(
            summary(&run.stderr).starts_with("created 0, updated 3, unchanged 0, rejected 0"),
            "[{b}] {}",
            run.stderr
        );
        assert_eq!(
            fixed(&s, &org).await,
            ["CGA-3qp7-9r3m-m8hg", "CGA-f73f-594w-h296", "CGA-h993-4mfw-37w2"],
            "[{b}] latest_event_type=fixed finds the imported fixes"
        );
        // --resolved-at works on them; the unorderable fix decides nothing.
        let at = ["advisories", "describe", "CGA-3qp7-9r3m-m8hg", "--resolved-at"];
        ward(&s, &[&at[..], &["8.0.11-r0"]].concat())
            .await
            .ok("resolved at the fix");
        ward(&s, &[&at[..], &["8.0.10-r5"]].concat())
            .await
            .failed("not resolved before it");
        let opa = [
            "advisories",
            "describe",
            "CGA-f73f-594w-h296",
            "--resolved-at",
            "9.9.9-r9",
        ];
        ward(&s, &opa).await.failed("an unorderable fix resolves nothing");

        // Each event records who approved it, and that it was as imported.
        let (a, flags) = advisory(&s, &org, "CGA-3qp7-9r3m-m8hg").await;
        let events = a["events"].as_array().cloned().unwrap_or_default();
        assert_eq!(events.len(), 2, "[{b}]");
        for e in &events {
            assert_eq!(e["reviewState"], "REVIEW_STATE_APPROVED", "[{b}] {e}");
            assert_eq!(e["author"], importer_uid.as_str(), "[{b}] written by the first import");
            assert_eq!(
                e["reviewer"],
                approver_uid.as_str(),
                "[{b}] approved by the reviewed-upstream import"
            );
            let approval = flags
                .iter()
                .find(|f| f["code"] == "APPROVED_AS_IMPORTED" && f["field"] == e["uid"])
                .unwrap_or_else(|| panic!("[{b}] no approval flag for {e}: {flags:?}"));
            assert!(
                approval["detail"]
                    .as_str()
                    .unwrap_or("")
                    .contains("reviewed upstream, not in Ward"),
                "[{b}] {approval}"
            );
        }

        // New advisories arrive approved too.
        let org2 = common::uid(&s.create_group(None, "beta").await);
        let fresh = tempfile::tempdir().unwrap();
        std::fs::write(
            fresh.path().join("zlib.advisories.yaml"),
            "schema-version: 2.0.2\npackage:\n  name: zlib\nadvisories:\n  - id: CGA-2345-6789-cfgh\n    aliases: [CVE-2022-37434]\n    events:\n      - timestamp: 2022-08-05T00:00:00Z\n        type: detection\n        data:\n          type: manual\n      - timestamp: 2022-08-09T00:00:00Z\n        type: fixed\n        data:\n          fixed-version: 1.2.12-r3\n",
        )
        .unwrap();
        let fresh = fresh.path().display().to_string();
        let run = ward(
            &s,
            &["advisories", "import", "-g", &org2, "--reviewed-upstream", &fresh],
        )
        .await;
        run.ok("import into a new org");
        let (status, list) = s
            .get(&format!(
                "/vulnerabilities/v2/advisories?uidp.descendantsOf={org2}&latestEventType=EVENT_TYPE_FILTER_FIXED"
            ))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["advisories"].as_array().map(Vec::len), Some(1), "[{b}] {list}");
        for a in list["advisories"].as_array().into_iter().flatten() {
            for e in a["events"].as_array().into_iter().flatten() {
                assert_eq!(e["reviewer"], e["author"], "[{b}] one import wrote and approved it");
            }
        }
    }
}

/// An OSV record of the PyPI ecosystem, as the PyPA database publishes them.
fn pysec(id: &str, modified: &str, fixed: &str) -> Value {
    json!({
        "id": id,
        "modified": modified,
        "published": "2021-03-01T12:00:00Z",
        "aliases": [format!("CVE-2021-{}", &id[11..])],
        "details": "A crafted image makes the decoder read out of bounds.",
        "affected": [{
            "package": {"name": "pillow", "ecosystem": "PyPI", "purl": "pkg:pypi/pillow"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": fixed}]}],
            "versions": ["7.0.0", "7.1.0", "8.0.0"],
        }],
        "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:U/C:N/I:N/A:H"}],
        "references": [{"type": "ADVISORY", "url": "https://example.org/advisory"}],
    })
}

/// A zip of `<id>.json` entries, each record pretty-printed (so "as
/// published" is more than compact JSON).
fn zip_of(path: &std::path::Path, records: &[Value]) -> Vec<(String, String)> {
    zip_rendered(path, records, |r| serde_json::to_string_pretty(r).unwrap())
}

fn zip_rendered(path: &std::path::Path, records: &[Value], render: impl Fn(&Value) -> String) -> Vec<(String, String)> {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let mut out = Vec::new();
    for r in records {
        let name = format!("{}.json", r["id"].as_str().unwrap());
        let text = render(r);
        w.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(text.as_bytes()).unwrap();
        out.push((r["id"].as_str().unwrap().to_owned(), text));
    }
    w.finish().unwrap();
    out
}

/// `GET /osv/<id>.json` as `token` ("" for none): status and raw body.
async fn osv_raw(s: &TestServer, token: &str, id: &str) -> (StatusCode, String) {
    let mut req = reqwest::Client::new().get(format!("{}/osv/{id}.json", s.base));
    if !token.is_empty() {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.expect("osv request");
    let status = resp.status();
    (status, resp.text().await.unwrap_or_default())
}

#[tokio::test]
async fn osv_feeds_import_as_published_and_follow_their_updates() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Value> = (10..40)
        .map(|i| pysec(&format!("PYSEC-2021-{i}"), "2021-03-02T00:00:00Z", "8.1.1"))
        .collect();
    let first = dir.path().join("PyPI-all.zip");
    let texts = zip_of(&first, &records);
    // The same feed rendered compactly: the same records.
    let compact = dir.path().join("compact.zip");
    zip_rendered(&compact, &records, |r| r.to_string());
    // The updated feed: one record changed, one withdrawn, the rest as they were.
    let mut next = records.clone();
    next[3] = pysec("PYSEC-2021-13", "2021-05-01T00:00:00Z", "8.2.0");
    next[7]["modified"] = json!("2021-05-01T00:00:00Z");
    next[7]["withdrawn"] = json!("2021-05-01T00:00:00Z");
    let second = dir.path().join("updated").join("PyPI-all.zip");
    std::fs::create_dir_all(second.parent().unwrap()).unwrap();
    let next_texts = zip_of(&second, &next);
    // A directory of YAML, as the PyPA advisory database keeps it.
    let yaml_dir = dir.path().join("vulns").join("requests");
    std::fs::create_dir_all(&yaml_dir).unwrap();
    std::fs::write(
        yaml_dir.join("PYSEC-2023-74.yaml"),
        "id: PYSEC-2023-74\ndetails: Requests forwards proxy credentials to the destination server.\n\
         affected:\n- package:\n    name: requests\n    ecosystem: PyPI\n    purl: pkg:pypi/requests\n  ranges:\n  \
         - type: ECOSYSTEM\n    events:\n    - introduced: 2.3.0\n    - fixed: 2.31.0\n  versions:\n  - 2.3.0\n  - 2.30.0\n\
         aliases:\n- CVE-2023-32681\n- GHSA-j8r2-6x86-q33q\nmodified: 2023-06-05T16:25:53.09385Z\npublished: 2023-05-26T18:15:00Z\n",
    )
    .unwrap();

    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let other = common::uid(&s.create_group(None, "other").await);
        let (_, outsider) = common::identity_with(&s, &other, "outsider", &["CAP_ADVISORIES_LIST"]).await;

        let run = ward(&s, &["advisories", "import", "-g", &org, &first.display().to_string()]).await;
        run.ok("import the zip");
        assert_eq!(
            summary(&run.stderr),
            "created 30, updated 0, unchanged 0, rejected 0",
            "[{b}]"
        );
        // Each record is served exactly as it was in the archive.
        for (id, text) in [&texts[0], &texts[13], &texts[29]] {
            let (status, body) = osv_raw(&s, &s.token, id).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {id}: {body}");
            assert_eq!(&body, text, "[{b}] {id} byte for byte");
        }
        // Another organization's member, and anonymous callers, see nothing.
        assert_eq!(
            osv_raw(&s, &outsider, "PYSEC-2021-10").await.0,
            StatusCode::NOT_FOUND,
            "[{b}]"
        );
        assert_eq!(osv_raw(&s, "", "PYSEC-2021-10").await.0, StatusCode::NOT_FOUND, "[{b}]");

        // Re-import: idempotent.
        let run = ward(&s, &["advisories", "import", "-g", &org, &first.display().to_string()]).await;
        run.ok("re-import");
        assert_eq!(
            summary(&run.stderr),
            "created 0, updated 0, unchanged 30, rejected 0",
            "[{b}]"
        );

        // The updated feed: one update, one withdrawal.
        let run = ward(
            &s,
            &[
                "advisories",
                "import",
                "-g",
                &org,
                &second.display().to_string(),
                "-o",
                "json",
            ],
        )
        .await;
        let report = run.json("import the update");
        assert_eq!(
            summary(&run.stderr),
            "created 0, updated 1, unchanged 28, rejected 0, withdrawn 1",
            "[{b}]"
        );
        let outcome = |id: &str| {
            report["results"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["advisoryId"] == id)
                .map(|r| r["outcome"].clone())
        };
        assert_eq!(outcome("PYSEC-2021-13"), Some(json!("UPDATED")), "[{b}] {report}");
        assert_eq!(outcome("PYSEC-2021-17"), Some(json!("WITHDRAWN")), "[{b}] {report}");
        let (_, body) = osv_raw(&s, &s.token, "PYSEC-2021-13").await;
        assert_eq!(body, next_texts[3].1, "[{b}] the newer version replaced it");
        let (_, body) = osv_raw(&s, &s.token, "PYSEC-2021-17").await;
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["withdrawn"], "2021-05-01T00:00:00Z", "[{b}]");
        // The older feed again changes nothing: the stored versions are newer.
        let run = ward(&s, &["advisories", "import", "-g", &org, &first.display().to_string()]).await;
        run.ok("the older feed");
        assert_eq!(
            summary(&run.stderr),
            "created 0, updated 0, unchanged 30, rejected 0",
            "[{b}]"
        );
        let (_, body) = osv_raw(&s, &s.token, "PYSEC-2021-13").await;
        assert_eq!(body, next_texts[3].1, "[{b}] not rolled back");

        // A directory of YAML records.
        let run = ward(
            &s,
            &[
                "advisories",
                "import",
                "-g",
                &org,
                &dir.path().join("vulns").display().to_string(),
            ],
        )
        .await;
        run.ok("import YAML");
        assert_eq!(
            summary(&run.stderr),
            "created 1, updated 0, unchanged 0, rejected 0",
            "[{b}]"
        );
        let (status, body) = osv_raw(&s, &s.token, "PYSEC-2023-74").await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["modified"], "2023-06-05T16:25:53.09385Z", "[{b}] the time as written");
        assert_eq!(v["aliases"], json!(["CVE-2023-32681", "GHSA-j8r2-6x86-q33q"]), "[{b}]");
        assert_eq!(
            v["affected"][0]["ranges"][0]["events"],
            json!([{"introduced": "2.3.0"}, {"fixed": "2.31.0"}]),
            "[{b}]"
        );
        assert_eq!(v["affected"][0]["versions"], json!(["2.3.0", "2.30.0"]), "[{b}]");

        // Over the API: refused records are named; a caller without the
        // capability is refused before anything is read.
        let (status, resp) = s
            .post(
                "/vulnerabilities/v1/osv:import",
                json!({"parentId": org, "records": ["{\"id\": \"A-1\"}", "[]", pysec("PYSEC-2021-99", "2021-01-01T00:00:00Z", "1").to_string()]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {resp}");
        assert_eq!(
            (resp["created"].as_i64(), resp["rejected"].as_i64()),
            (Some(1), Some(2)),
            "[{b}] {resp}"
        );
        assert!(
            resp["results"][0]["reason"].as_str().unwrap_or("").contains("modified"),
            "[{b}] {resp}"
        );
        // The import is in the audit trail: what changed, by whom.
        let (status, log) = s
            .get(&format!(
                "/events/v1/events?group={org}&types=dev.chainguard.api.vulnerabilities.osv.imported.v1"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {log}");
        // Newest first: this request's; the earlier imports above have theirs.
        let events = log["events"].as_array().cloned().unwrap_or_default();
        assert_eq!(events.len(), 6, "[{b}] one per import request above {log}");
        assert_eq!(events[0]["audience"], "customer", "[{b}]");
        let body: Value = serde_json::from_str(events[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"counts": {"CREATED": 1}, "results": [{"recordId": "PYSEC-2021-99", "outcome": "CREATED"}]}),
            "[{b}]"
        );
        let (status, resp) = s
            .call_as(
                &outsider,
                reqwest::Method::POST,
                "/vulnerabilities/v1/osv:import",
                Some(json!({"parentId": org, "records": []})),
            )
            .await;
        assert!(
            status == StatusCode::NOT_FOUND || status == StatusCode::FORBIDDEN,
            "[{b}] {status} {resp}"
        );
    }
}

/// The same over gRPC, as an SDK-generated client calls it: an import
/// reviewed upstream, its flags, and OSV records.
#[tokio::test(flavor = "multi_thread")]
async fn imports_and_flags_over_grpc() {
    use ward_proto::vulnerabilities::v1;
    use ward_proto::vulnerabilities::v1::advisories_client::AdvisoriesClient;
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let ch = tonic::transport::Channel::from_shared(format!("http://{}", s.addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = AdvisoriesClient::with_interceptor(ch, common::Bearer(s.token.clone()));
        let event = v1::AdvisoryEvent {
            timestamp: Some(ward_proto::Timestamp::from_millis(1_738_000_000_000)),
            r#type: Some(v1::advisory_event::Type::Fixed(v1::Fixed {
                fixed_version: "1.1.0-r1-r0".into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        let resp = client
            .import(v1::ImportRequest {
                parent_id: org.clone(),
                documents: vec![v1::ImportDocument {
                    source: "opa-envoy.advisories.yaml".into(),
                    package: "opa-envoy".into(),
                    advisories: vec![v1::Advisory {
                        advisory_id: "CGA-f73f-594w-h296".into(),
                        artifact_name: "opa-envoy".into(),
                        artifact_type: "apk".into(),
                        aliases: vec!["CVE-2025-22866".into()],
                        events: vec![event],
                        ..Default::default()
                    }],
                }],
                dry_run: false,
                reviewed_upstream: true,
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] import: {e:?}"))
            .into_inner();
        assert_eq!((resp.created, resp.flagged, resp.rejected), (1, 1, 0), "[{b}] {resp:?}");
        assert!(
            resp.results[0].warnings[0].starts_with("UNORDERABLE_VERSION"),
            "[{b}] {resp:?}"
        );
        let (_, list) = s
            .get(&format!("/vulnerabilities/v2/advisories?uidp.descendantsOf={org}"))
            .await;
        let uid = list["advisories"][0]["uid"].as_str().unwrap_or_default().to_owned();
        let flags = client
            .get_advisory_flags(v1::GetAdvisoryFlagsRequest { id: uid.clone() })
            .await
            .unwrap_or_else(|e| panic!("[{b}] flags: {e:?}"))
            .into_inner();
        let codes: Vec<&str> = flags.flags.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(
            codes,
            ["APPROVED_AS_IMPORTED", "UNORDERABLE_VERSION"],
            "[{b}] {flags:?}"
        );
        // Another caller's uid, or a malformed one: NOT_FOUND / INVALID_ARGUMENT.
        let missing = format!("{org}/0123456789abcdef");
        let err = client
            .get_advisory_flags(v1::GetAdvisoryFlagsRequest { id: missing })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::NotFound, "[{b}] {err:?}");

        let record = pysec("PYSEC-2021-77", "2021-03-02T00:00:00Z", "8.1.1").to_string();
        let resp = client
            .import_osv(v1::ImportOsvRequest {
                parent_id: org.clone(),
                records: vec![record.clone(), record.clone()],
                source: "grpc".into(),
                dry_run: false,
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] import_osv: {e:?}"))
            .into_inner();
        assert_eq!(
            (resp.created, resp.rejected),
            (1, 1),
            "[{b}] the second is a repeat: {resp:?}"
        );
        assert_eq!(osv_raw(&s, &s.token, "PYSEC-2021-77").await.1, record, "[{b}]");
    }
}

/// Records with unsafe text are refused one by one (the rest of the request
/// goes on, on PostgreSQL too), and when several organizations hold an id,
/// a caller reads its own organization's record before a public one.
#[tokio::test]
async fn feed_records_refuse_unsafe_text_and_prefer_the_callers_own() {
    for mut s in common::servers().await {
        let b = s.backend;
        let acme = common::uid(&s.create_group(None, "acme").await);
        let evil = common::uid(&s.create_group(None, "evil").await);
        let nul = json!({"id": "NUL-1", "modified": "2021-01-01T00:00:00Z", "aliases": ["CVE-\u{0}"]});
        let ok = json!({"id": "OK-1", "modified": "2021-01-01T00:00:00Z"});
        let (status, resp) = s
            .post(
                "/vulnerabilities/v1/osv:import",
                json!({"parentId": acme, "records": [ok.to_string(), nul.to_string()]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {resp}");
        assert_eq!(
            (resp["created"].as_i64(), resp["rejected"].as_i64()),
            (Some(1), Some(1)),
            "[{b}] {resp}"
        );

        let mine = |org: &str| {
            json!({"id": "PYSEC-1", "modified": "2021-01-01T00:00:00Z", "details": format!("as {org} keeps it")})
                .to_string()
        };
        for org in [&acme, &evil] {
            let (status, resp) = s
                .post(
                    "/vulnerabilities/v1/osv:import",
                    json!({"parentId": org, "records": [mine(org)]}),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "[{b}] {resp}");
        }
        s.config.public_advisories = vec![acme.clone()];
        s.restart().await;
        let (_, evil_member) = common::identity_with(&s, &evil, "member", &["CAP_ADVISORIES_LIST"]).await;
        assert_eq!(
            osv_raw(&s, &evil_member, "PYSEC-1").await.1,
            mine(&evil),
            "[{b}] its own first"
        );
        assert_eq!(
            osv_raw(&s, "", "PYSEC-1").await.1,
            mine(&acme),
            "[{b}] anonymous: the public one"
        );
        let (_, nobody) = common::identity_with(&s, &evil, "nobody", &["CAP_IAM_GROUPS_LIST"]).await;
        assert_eq!(
            osv_raw(&s, &nobody, "PYSEC-1").await.1,
            mine(&acme),
            "[{b}] no rights: the public one"
        );
        assert_eq!(osv_raw(&s, &nobody, "OK-1").await.0, StatusCode::OK, "[{b}] public");
    }
}
