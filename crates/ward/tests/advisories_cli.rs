//! `ward advisories …` end to end against an in-process server: importing the
//! fixtures in `tests/fixtures/advisories` (its README says what they hold),
//! listing, describing, adding and reviewing events, exporting OSV, and what
//! an import refuses.

mod common;

use common::TestServer;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/advisories");

/// Every CGA id of the valid fixtures: 12 advisory-schema advisories and 1 OSV, sorted.
const ALL: [&str; 13] = [
    "CGA-254q-7753-5pcr",
    "CGA-3x6r-v6w8-827q",
    "CGA-53m6-fhg2-gmww",
    "CGA-5fg5-qq9c-q75x",
    "CGA-5v4q-653x-xxff",
    "CGA-6hh3-9fjx-xpg2",
    "CGA-7fxf-r488-j998",
    "CGA-96h7-rp48-65v2",
    "CGA-9r9h-mc8m-qjhm",
    "CGA-f9gc-q67g-2rh6",
    "CGA-hcpm-pm7p-fqvv",
    "CGA-rwc5-3vv2-jg8w",
    "CGA-xr5w-xxpm-2gp8",
];
/// tessellate: detection (scan/v1), true-positive, fixed 1.8.2-r1.
const FIXED: &str = "CGA-5v4q-653x-xxff";
/// nimbus-proxy: detection (manual), true-positive; aliases CVE-2025-40112, GO-2025-3702.
const AFFECTED: &str = "CGA-hcpm-pm7p-fqvv";
/// The OSV document: quillmark on x86_64, fixed 2.4.1-r3.
const FROM_OSV: &str = "CGA-f9gc-q67g-2rh6";
/// The pyrite advisories (origin package `pyrite`, one of them in pyrite-cli).
const PYRITE: [&str; 3] = ["CGA-3x6r-v6w8-827q", "CGA-53m6-fhg2-gmww", "CGA-96h7-rp48-65v2"];
/// invalid/bad.advisories.yaml: an alias that is no CVE id, and no events.
const BAD_ALIAS: &str = "CGA-52cj-qp2v-wwfr";
const NO_EVENTS: &str = "CGA-mq3c-hgr2-538f";

use common::{CliRun as Run, ward_run as ward_as};

async fn ward(s: &TestServer, args: &[&str]) -> Run {
    ward_as(s, &s.token, args).await
}

/// The valid fixtures: the advisory-schema files and the OSV directory.
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

/// The summary line an import ends with on stderr.
fn summary(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("created "))
        .unwrap_or_else(|| panic!("no summary line in:\n{stderr}"))
}

/// The sorted CGA ids of a JSON list of advisories.
fn ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("a JSON array: {list}"))
        .iter()
        .map(|a| a["advisoryId"].as_str().expect("advisoryId").to_owned())
        .collect();
    ids.sort();
    ids
}

fn find<'a>(list: &'a Value, id: &str) -> &'a Value {
    list.as_array()
        .into_iter()
        .flatten()
        .find(|a| a["advisoryId"] == id)
        .unwrap_or_else(|| panic!("{id} not in {list}"))
}

/// The event lines of `describe` (those after "Events:").
fn timeline(out: &str) -> Vec<&str> {
    out.lines()
        .skip_while(|l| *l != "Events:")
        .skip(1)
        .filter(|l| l.starts_with("  "))
        .collect()
}

/// `advisories list --group ORG -o json` plus `extra` flags.
async fn list(s: &TestServer, org: &str, extra: &[&str]) -> Value {
    let mut args = vec!["advisories", "list", "--group", org, "-o", "json"];
    args.extend_from_slice(extra);
    ward(s, &args).await.json(&args.join(" "))
}

/// An identity in `org` whose custom role there may list and approve
/// advisories, and a token for it.
async fn reviewer(s: &TestServer, org: &str) -> (String, String) {
    common::identity_with(s, org, "reviewer", &["CAP_ADVISORIES_LIST", "CAP_ADVISORIES_APPROVE"]).await
}

#[tokio::test]
async fn import_list_describe_review_and_export() {
    let paths = valid_paths();
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let mut import = vec!["advisories", "import", "--group", org.as_str()];
        import.extend(paths.iter().map(String::as_str));

        // A dry run counts and writes nothing.
        let mut dry = import.clone();
        dry.push("--dry-run");
        let run = ward(&s, &dry).await;
        run.ok("import --dry-run");
        assert_eq!(
            summary(&run.stderr),
            "created 0, updated 0, unchanged 0, rejected 0 (dry run: 13 checked, nothing written)",
            "[{b}]"
        );
        assert_eq!(list(&s, &org, &[]).await, json!([]), "[{b}] dry run wrote nothing");

        let run = ward(&s, &import).await;
        run.ok("import");
        assert_eq!(
            summary(&run.stderr),
            "created 13, updated 0, unchanged 0, rejected 0",
            "[{b}]"
        );
        assert_eq!(
            run.stderr.lines().count(),
            1,
            "[{b}] nothing but the summary:\n{}",
            run.stderr
        );

        // Idempotent.
        let run = ward(&s, &import).await;
        run.ok("import again");
        assert_eq!(
            summary(&run.stderr),
            "created 0, updated 0, unchanged 13, rejected 0",
            "[{b}]"
        );

        let all = list(&s, &org, &[]).await;
        assert_eq!(ids(&all), ALL, "[{b}]");
        let fixed = find(&all, FIXED);
        assert_eq!(
            fixed["artifactName"], "tessellate-agent",
            "[{b}] the scan's subpackage: {fixed}"
        );
        assert_eq!(fixed["artifactType"], "apk");
        assert_eq!(fixed["componentName"], "stdlib");
        assert_eq!(fixed["componentType"], "go-module");
        assert_eq!(fixed["componentLocation"], "/usr/bin/tessellate-agent");
        assert_eq!(fixed["aliases"], json!(["CVE-2024-45871", "GHSA-292c-qr74-p9v7"]));
        assert_eq!(fixed["events"].as_array().map(Vec::len), Some(3), "[{b}] {fixed}");
        let osv = find(&all, FROM_OSV);
        assert_eq!(osv["artifactName"], "quillmark", "[{b}] {osv}");
        assert_eq!(osv["artifactArchitecture"], "x86_64");
        assert_eq!(osv["componentName"], "github.com/quillmark-dev/mdparse");
        assert_eq!(osv["aliases"], json!(["CVE-2025-27761", "GHSA-qvw3-2c8h-mwv3"]));
        assert_eq!(osv["events"].as_array().map(Vec::len), Some(2), "[{b}] {osv}");

        // Filters.
        assert_eq!(ids(&list(&s, &org, &["--package", "pyrite"]).await), PYRITE, "[{b}]");
        assert_eq!(
            ids(&list(&s, &org, &["--alias", "GO-2025-3702"]).await),
            [AFFECTED],
            "[{b}]"
        );
        assert_eq!(ids(&list(&s, &org, &["-q", "quillmark"]).await), [FROM_OSV], "[{b}]");
        assert_eq!(
            list(&s, &org, &["--limit", "5"]).await.as_array().map(Vec::len),
            Some(5),
            "[{b}]"
        );

        // The table names every advisory.
        let run = ward(&s, &["advisories", "list", "--group", &org]).await;
        let table = run.ok("list");
        for want in ["ID", "PACKAGE", "COMPONENT", "ALIASES", "STATUS"]
            .iter()
            .chain(ALL.iter())
        {
            assert!(table.contains(want), "[{b}] table lacks {want}:\n{table}");
        }
        // Imported events await review: no advisory has a status yet.
        for id in ALL {
            let row = table
                .lines()
                .find(|l| l.contains(id))
                .unwrap_or_else(|| panic!("[{b}] no row for {id}:\n{table}"));
            assert!(row.contains("unreviewed"), "[{b}] {row}");
        }

        // describe: the fields, then one line per event, oldest first.
        let run = ward(&s, &["advisories", "describe", FIXED]).await;
        let out = run.ok("describe");
        for want in [FIXED, "tessellate-agent", "CVE-2024-45871, GHSA-292c-qr74-p9v7"] {
            assert!(out.contains(want), "[{b}] describe lacks {want}:\n{out}");
        }
        let lines = timeline(out);
        assert_eq!(lines.len(), 3, "[{b}]\n{out}");
        let expected = [
            ("2024-09-12T07:41:09.000Z", "detection"),
            ("2024-09-13T10:02:55.000Z", "true-positive-determination"),
            ("2024-09-20T16:30:00.000Z", "fixed"),
        ];
        for (line, (time, kind)) in lines.iter().zip(expected) {
            assert!(line.starts_with(&format!("  {time}  {kind}")), "[{b}] {line:?}\n{out}");
        }
        assert!(
            lines[0].contains(
                "scan/v1 grype: stdlib go1.22.6 (go-module) at /usr/bin/tessellate-agent in tessellate-agent"
            ),
            "[{b}] {}",
            lines[0]
        );
        assert!(lines[2].contains("1.8.2-r1"), "[{b}] {}", lines[2]);
        // By uid, the same advisory.
        let uid = fixed["uid"].as_str().expect("uid");
        let by_uid = ward(&s, &["advisories", "describe", uid, "-o", "json"])
            .await
            .json("describe by uid");
        assert_eq!(by_uid["advisoryId"], FIXED, "[{b}]");

        // An event added by the admin, approved by a reviewer.
        let (reviewer_uid, reviewer_token) = reviewer(&s, &org).await;
        let added = ward(
            &s,
            &[
                "advisories",
                "events",
                "add",
                AFFECTED,
                "--type",
                "fixed",
                "--fixed-version",
                "0.9.20-r1",
                "--note",
                "Rebuilt against the patched ratelimit module.",
                "--timestamp",
                "2025-10-01T00:00:00Z",
                "-o",
                "json",
            ],
        )
        .await
        .json("events add");
        assert_eq!(added["fixed"]["fixedVersion"], "0.9.20-r1", "[{b}] {added}");
        assert_eq!(added["timestamp"], "2025-10-01T00:00:00.000Z");
        assert_eq!(added["status"], "PENDING", "[{b}] new events await review: {added}");
        let event_uid = added["id"].as_str().expect("event id").to_owned();
        let affected_uid = find(&all, AFFECTED)["uid"].as_str().expect("uid").to_owned();
        assert!(event_uid.starts_with(&format!("{affected_uid}/")), "[{b}] {event_uid}");
        assert_eq!(ids(&list(&s, &org, &["--review-state", "pending"]).await), ALL, "[{b}]");
        assert_eq!(
            list(&s, &org, &["--status", "fixed"]).await,
            json!([]),
            "[{b}] nothing approved yet"
        );

        let reviewed = ward_as(
            &s,
            &reviewer_token,
            &["advisories", "review", &event_uid, "--approve", "-o", "json"],
        )
        .await
        .json("review --approve");
        assert_eq!(reviewed["status"], "APPROVED", "[{b}] {reviewed}");
        assert_eq!(reviewed["reviewer"], reviewer_uid.as_str(), "[{b}] {reviewed}");

        // Its status is now the approved fix.
        assert_eq!(ids(&list(&s, &org, &["--status", "fixed"]).await), [AFFECTED], "[{b}]");
        let run = ward(&s, &["advisories", "list", "--group", &org, "--alias", "GO-2025-3702"]).await;
        let table = run.ok("list --alias");
        let row = table
            .lines()
            .find(|l| l.contains(AFFECTED))
            .unwrap_or_else(|| panic!("[{b}] no row:\n{table}"));
        assert!(row.contains("fixed 0.9.20-r1"), "[{b}] {row}");
        let run = ward(&s, &["advisories", "describe", AFFECTED]).await;
        let out = run.ok("describe after review");
        let lines = timeline(out);
        let last = lines.last().unwrap_or_else(|| panic!("[{b}] no events:\n{out}"));
        assert!(last.starts_with("  2025-10-01T00:00:00.000Z  fixed"), "[{b}] {last}");
        assert!(
            last.contains("0.9.20-r1; Rebuilt against the patched ratelimit module."),
            "[{b}] {last}"
        );
        assert!(last.contains(&format!("approved by {reviewer_uid}")), "[{b}] {last}");
        assert!(last.ends_with(&format!("[{event_uid}]")), "[{b}] {last}");
        // Resolved at a version by apk ordering: at and above the fix, not below.
        for (version, resolved) in [
            ("0.9.20-r1", true),
            ("0.9.100-r0", true),
            ("0.9.20-r0", false),
            ("0.9.3", false),
        ] {
            let run = ward(&s, &["advisories", "describe", AFFECTED, "--resolved-at", version]).await;
            assert_eq!(run.status.success(), resolved, "[{b}] {version}: {}", run.stderr);
        }
        let run = ward(
            &s,
            &["advisories", "describe", AFFECTED, "--resolved-at", "not a version"],
        )
        .await;
        assert!(
            !run.status.success() && run.stderr.contains("version"),
            "[{b}] {}",
            run.stderr
        );

        // OSV: one file per advisory with an approved event (imported events
        // are pending, so only the one reviewed above).
        let all = list(&s, &org, &[]).await;
        let mut approved: Vec<String> = all
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| {
                a["events"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| e["reviewState"] == "REVIEW_STATE_APPROVED")
            })
            .map(|a| a["advisoryId"].as_str().expect("advisoryId").to_owned())
            .collect();
        approved.sort();
        assert_eq!(approved, [AFFECTED], "[{b}]");
        let dir = tempfile::tempdir().expect("temp dir");
        let out_dir = dir.path().join("osv");
        let out_arg = out_dir.display().to_string();
        let run = ward(
            &s,
            &[
                "advisories",
                "export",
                "--format",
                "osv",
                "--group",
                &org,
                "--out",
                &out_arg,
            ],
        )
        .await;
        assert_eq!(
            run.ok("export --out"),
            format!("wrote {} OSV document(s) to {out_arg}\n", approved.len()),
            "[{b}]"
        );
        let mut files: Vec<String> = std::fs::read_dir(&out_dir)
            .expect("export dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let want: Vec<String> = approved.iter().map(|id| format!("{id}.json")).collect();
        assert_eq!(files, want, "[{b}]");
        for f in &files {
            let text = std::fs::read_to_string(out_dir.join(f)).expect("read OSV file");
            let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("[{b}] {f}: {e}"));
            assert_eq!(format!("{}.json", doc["id"].as_str().unwrap_or("")), *f, "[{b}] {doc}");
            assert!(doc["modified"].is_string(), "[{b}] {f}: {doc}");
            let name = doc["affected"][0]["package"]["name"].as_str().unwrap_or("");
            assert!(!name.is_empty(), "[{b}] {f}: {doc}");
            if f.starts_with(AFFECTED) {
                assert!(text.contains("0.9.20-r1"), "[{b}] the approved fix is exported: {text}");
            }
        }
        // The same documents as one JSON array.
        let printed = ward(
            &s,
            &["advisories", "export", "--format", "osv", "-g", &org, "-o", "json"],
        )
        .await
        .json("export -o json");
        let mut printed_ids: Vec<String> = printed
            .as_array()
            .expect("an array")
            .iter()
            .map(|d| d["id"].as_str().expect("id").to_owned())
            .collect();
        printed_ids.sort();
        assert_eq!(printed_ids, approved, "[{b}]");
    }
}

#[tokio::test]
async fn importing_the_invalid_fixture_fails_and_names_both_problems() {
    let path = format!("{FIXTURES}/invalid");
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let run = ward(&s, &["advisories", "import", "--group", &org, &path]).await;
        let err = run.failed("import invalid/");
        assert_eq!(
            summary(err),
            "created 0, updated 0, unchanged 0, rejected 2",
            "[{b}]\n{err}"
        );
        let line = |id: &str| {
            err.lines()
                .find(|l| l.starts_with("  ") && l.contains(id))
                .unwrap_or_else(|| panic!("[{b}] no rejection of {id}:\n{err}"))
                .to_owned()
        };
        let alias = line(BAD_ALIAS);
        assert!(alias.contains("bad.advisories.yaml"), "[{b}] {alias}");
        assert!(
            alias.contains("CVE-24-1017") || alias.to_lowercase().contains("alias"),
            "[{b}] {alias}"
        );
        let events = line(NO_EVENTS);
        assert!(events.contains("bad.advisories.yaml"), "[{b}] {events}");
        assert!(events.to_lowercase().contains("event"), "[{b}] {events}");
        assert!(err.contains("error: 2 rejected"), "[{b}]\n{err}");
        assert_eq!(list(&s, &org, &[]).await, json!([]), "[{b}] nothing imported");
    }
}

#[tokio::test]
async fn files_the_cli_cannot_read_are_rejected_and_the_rest_imported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    std::fs::write(root.join("broken.advisories.yaml"), "package: [unclosed\n").expect("write");
    std::fs::write(
        root.join("odd.advisories.yaml"),
        "schema-version: 2.0.2\npackage:\n  name: odd\nadvisories:\n  - id: CGA-25rv-gjx2-92mj\n    aliases: [CVE-2025-60012]\n    events:\n      - timestamp: 2025-02-01T00:00:00Z\n        type: exploded\n",
    )
    .expect("write");
    let two = json!({
        "id": "CVE-2025-60013",
        "modified": "2025-02-01T00:00:00Z",
        "affected": [
            {"package": {"ecosystem": "Chainguard", "name": "one"}},
            {"package": {"ecosystem": "Chainguard", "name": "two"}},
        ],
    });
    std::fs::write(root.join("two.json"), two.to_string()).expect("write");
    std::fs::write(root.join("notes.txt"), "not imported").expect("write");
    std::fs::copy(
        format!("{FIXTURES}/pyrite.advisories.yaml"),
        root.join("pyrite.advisories.yaml"),
    )
    .expect("copy");
    let root_arg = root.display().to_string();

    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let run = ward(&s, &["advisories", "import", "-g", &org, &root_arg]).await;
        let err = run.failed("import");
        assert_eq!(
            summary(err),
            "created 3, updated 0, unchanged 0, rejected 3",
            "[{b}]\n{err}"
        );
        for want in [
            "broken.advisories.yaml: not an advisory-schema document",
            "odd.advisories.yaml CGA-25rv-gjx2-92mj: unknown event type \"exploded\"",
            "two.json CVE-2025-60013: `affected` names 2 packages (one, two)",
        ] {
            assert!(
                err.lines().any(|l| l.starts_with("  ") && l.contains(want)),
                "[{b}] lacks {want:?}:\n{err}"
            );
        }
        assert!(!err.contains("notes.txt"), "[{b}]\n{err}");
        assert_eq!(ids(&list(&s, &org, &[]).await), PYRITE, "[{b}]");
    }
}

#[tokio::test]
async fn create_update_and_delete_through_the_cli() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);

        // Flags that do not fit the event fail before anything is sent.
        let run = ward(
            &s,
            &[
                "advisories",
                "create",
                "-g",
                &org,
                "--package",
                "zephyr",
                "--event",
                "fixed",
            ],
        )
        .await;
        assert!(
            run.failed("create without --fixed-version").contains("--fixed-version"),
            "[{b}] {run:#?}"
        );

        let created = ward(
            &s,
            &[
                "advisories",
                "create",
                "-g",
                &org,
                "--package",
                "zephyr",
                "--component",
                "openssl",
                "--component-type",
                "binary",
                "--component-location",
                "/usr/lib/libssl.so.3",
                "--alias",
                "CVE-2025-55501",
                "--event",
                "detection",
                "-o",
                "json",
            ],
        )
        .await
        .json("create");
        let cga = created["advisoryId"].as_str().expect("a CGA id").to_owned();
        assert!(cga.starts_with("CGA-") && cga.len() == 18, "[{b}] {created}");
        assert_eq!(created["artifactName"], "zephyr");
        assert_eq!(created["artifactType"], "apk");
        assert_eq!(created["componentName"], "openssl");
        assert_eq!(created["aliases"], json!(["CVE-2025-55501"]));

        let updated = ward(
            &s,
            &[
                "advisories",
                "update",
                &cga,
                "--alias",
                "CVE-2025-55501",
                "--alias",
                "GHSA-292c-qr74-p9v7",
                "-o",
                "json",
            ],
        )
        .await
        .json("update");
        assert_eq!(
            updated["aliases"],
            json!(["CVE-2025-55501", "GHSA-292c-qr74-p9v7"]),
            "[{b}] {updated}"
        );
        assert_eq!(updated["componentName"], "openssl", "[{b}] kept: {updated}");
        assert_eq!(updated["artifactName"], "zephyr", "[{b}] kept: {updated}");
        let run = ward(&s, &["advisories", "update", &cga]).await;
        assert!(
            run.failed("update with no flags").contains("nothing to update"),
            "[{b}]"
        );

        let run = ward(&s, &["advisories", "delete", &cga]).await;
        assert_eq!(run.ok("delete"), format!("deleted {cga}\n"), "[{b}]");
        assert_eq!(list(&s, &org, &[]).await, json!([]), "[{b}] gone from listings");
        let kept = list(&s, &org, &["--show-deleted"]).await;
        assert_eq!(ids(&kept), std::slice::from_ref(&cga), "[{b}]");
        let run = ward(&s, &["advisories", "list", "-g", &org, "--show-deleted"]).await;
        assert!(run.ok("list --show-deleted").contains("(deleted)"), "[{b}]");
    }
}
