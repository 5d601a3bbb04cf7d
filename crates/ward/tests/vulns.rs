//! Vulnerability reports through the real server with real clients, on
//! every backend: skopeo pushes an image whose layers hold an apk database,
//! a dpkg status file, Python metadata and an npm package; cyclonedx-py
//! makes an SBOM of the same Python packages, which oras-py pushes as a
//! referrer; OSV records are imported over the API. Each report is held to
//! an independent computation in this file (not Ward's code); then the
//! team's reviewed decisions (a false positive, a fix) change the report
//! without a new push, and the affected-images query finds the image by
//! CVE and by alias.
//!
//! Needs skopeo, and oras-py and cyclonedx-bom in `$WARD_TEST_VENV`; without
//! them the tests print a note and pass unless `WARD_TEST_REQUIRE_CLIENTS=1`.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::TestServer;
use common::clients::{Sandbox, Tools, host, run};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use ward_core::clock::Clock as _;

/// `mkimage.py DIR TAG`: an OCI layout whose two layers hold a Wolfi apk
/// database, a dpkg status file, Python dist-info / egg-info metadata and
/// an npm package; prints the manifest digest.
const MKIMAGE_PY: &str = r##"
import gzip, hashlib, io, json, os, sys, tarfile
d, tag = sys.argv[1], sys.argv[2]
os.makedirs(f"{d}/blobs/sha256", exist_ok=True)
def blob(b):
    h = hashlib.sha256(b).hexdigest()
    open(f"{d}/blobs/sha256/{h}", "wb").write(b)
    return {"digest": f"sha256:{h}", "size": len(b)}
def layer(files):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in files:
            i = tarfile.TarInfo(name); i.size = len(data); i.mtime = 0; i.mode = 0o644
            t.addfile(i, io.BytesIO(data))
    return raw.getvalue(), gzip.compress(raw.getvalue(), mtime=0)
apk = b"""C:Q1abc=
P:openssl
V:3.0.7-r0
A:x86_64
L:Apache-2.0
o:openssl

C:Q1def=
P:busybox
V:1.36.0-r1
A:x86_64
L:GPL-2.0-only
o:busybox

"""
dpkg = b"""Package: zlib1g
Status: install ok installed
Architecture: amd64
Version: 1:1.2.13.dfsg-1
Source: zlib

"""
site = "usr/lib/python3.12/site-packages"
meta = lambda n, v: f"Metadata-Version: 2.1\nName: {n}\nVersion: {v}\nLicense: Apache 2.0\n\nlong description\n".encode()
layers = [
    layer([("etc/os-release", b"ID=wolfi\nNAME=\"Wolfi\"\n"), ("lib/apk/db/installed", apk), ("var/lib/dpkg/status", dpkg)]),
    layer([
        (f"{site}/requests-2.19.0.dist-info/METADATA", meta("requests", "2.19.0")),
        (f"{site}/urllib3-1.24.1.dist-info/METADATA", meta("urllib3", "1.24.1")),
        (f"{site}/Jinja2-2.10.egg-info/PKG-INFO", meta("Jinja2", "2.10")),
        ("usr/lib/node_modules/lodash/package.json", json.dumps({"name": "lodash", "version": "4.17.15", "license": "MIT"}).encode()),
        ("usr/lib/node_modules/lodash/fp/package.json", json.dumps({"main": "../fp.js"}).encode()),
    ]),
]
config = {"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/bin/sh"], "User": "65532", "Env": ["PATH=/usr/bin"]},
          "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(r).hexdigest() for r, _ in layers]}}
cfg = dict(blob(json.dumps(config, sort_keys=True).encode()), mediaType="application/vnd.oci.image.config.v1+json")
ls = [dict(blob(gz), mediaType="application/vnd.oci.image.layer.v1.tar+gzip") for _, gz in layers]
man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": cfg, "layers": ls}
m = dict(blob(json.dumps(man, sort_keys=True).encode()), mediaType="application/vnd.oci.image.manifest.v1+json",
         annotations={"org.opencontainers.image.ref.name": tag})
open(f"{d}/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
open(f"{d}/index.json", "w").write(json.dumps({"schemaVersion": 2, "manifests": [m]}))
print(m["digest"])
"##;

/// `push_sbom.py HOST REPO TOKEN SUBJECT_DIGEST SBOM`: pushes the SBOM file
/// as a referrer of the image (CycloneDX artifact type) with oras-py.
const PUSH_SBOM_PY: &str = r##"
import json, os, sys
import oras.client, oras.oci
host, repo, token, digest, path = sys.argv[1:6]
client = oras.client.OrasClient(hostname=host, insecure=True, auth_backend="basic")
client.auth.set_basic_auth("_token", token)
accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
man = client.do_request(f"http://{host}/v2/{repo}/manifests/{digest}", "GET", headers=accept)
assert man.status_code == 200, man.text
subject = oras.oci.Subject(mediaType=man.json()["mediaType"], digest=digest, size=len(man.content))
os.chdir(os.path.dirname(path))
name = os.path.basename(path)
client.push(target=f"{host}/{repo}:sbom", files=[f"{name}:application/vnd.cyclonedx+json"],
            manifest_config=f"{name}:application/vnd.cyclonedx+json", subject=subject, quiet=True)
print("pushed")
"##;

/// OSV records (their ids, aliases, packages and ranges as published; one
/// synthetic `WARD-TEST-` record that no installed version falls in).
fn records() -> Vec<Value> {
    let rec = |id: &str, aliases: &[&str], eco: &str, name: &str, events: Value, vector: &str| {
        json!({
            "schema_version": "1.6.0",
            "id": id,
            "modified": "2024-01-01T00:00:00Z",
            "published": "2019-01-01T00:00:00Z",
            "aliases": aliases,
            "summary": format!("{id} in {name}"),
            "affected": [{"package": {"ecosystem": eco, "name": name}, "ranges": [{"type": "ECOSYSTEM", "events": events}]}],
            "severity": [{"type": "CVSS_V3", "score": vector}],
            "references": [{"type": "ADVISORY", "url": format!("https://osv.dev/vulnerability/{id}")}],
        })
    };
    let high = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N";
    let crit = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H";
    let med = "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N";
    vec![
        rec(
            "GHSA-x84v-xcm2-53pg",
            &["CVE-2018-18074"],
            "PyPI",
            "requests",
            json!([{"introduced": "0"}, {"fixed": "2.20.0"}]),
            high,
        ),
        rec(
            "PYSEC-2018-28",
            &["CVE-2018-18074", "GHSA-x84v-xcm2-53pg"],
            "PyPI",
            "requests",
            json!([{"introduced": "0"}, {"fixed": "2.20.0"}]),
            high,
        ),
        rec(
            "GHSA-mh33-7rrq-662w",
            &["CVE-2019-11324"],
            "PyPI",
            "urllib3",
            json!([{"introduced": "0"}, {"fixed": "1.24.2"}]),
            high,
        ),
        rec(
            "GHSA-r64q-w8jr-g9qp",
            &["CVE-2019-11236"],
            "PyPI",
            "urllib3",
            json!([{"introduced": "0"}, {"fixed": "1.24.3"}]),
            med,
        ),
        rec(
            "WARD-TEST-0001",
            &[],
            "PyPI",
            "urllib3",
            json!([{"introduced": "2.0.0"}, {"fixed": "2.0.7"}]),
            med,
        ),
        rec(
            "GHSA-462w-v97r-4m45",
            &["CVE-2019-10906"],
            "PyPI",
            "Jinja2",
            json!([{"introduced": "0"}, {"fixed": "2.10.1"}]),
            high,
        ),
        rec(
            "GHSA-p6mc-m468-83gw",
            &["CVE-2020-8203"],
            "npm",
            "lodash",
            json!([{"introduced": "3.7.0"}, {"fixed": "4.17.19"}]),
            high,
        ),
        rec(
            "CGA-test-openssl",
            &["CVE-2023-0286"],
            "Wolfi",
            "openssl",
            json!([{"introduced": "0"}, {"fixed": "3.0.8-r0"}]),
            crit,
        ),
        rec(
            "CGA-test-busybox",
            &["CVE-2022-48174"],
            "Wolfi",
            "busybox",
            json!([{"introduced": "0"}, {"fixed": "1.36.0-r0"}]),
            crit,
        ),
    ]
}

/// The test's own version order: dotted numbers, `-rN` as one more number.
fn numbers(v: &str) -> Vec<u64> {
    v.replace("-r", ".")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

fn older(a: &str, b: &str) -> bool {
    let (mut x, mut y) = (numbers(a), numbers(b));
    let n = x.len().max(y.len());
    x.resize(n, 0);
    y.resize(n, 0);
    x < y
}

/// `(vulnerability, purl)` pairs the records say `packages` (`(ecosystem,
/// name, version, purl)`) are affected by, by this file's own reading of
/// introduced/fixed; a vulnerability is named by its CVE alias.
fn expected(packages: &[(&str, &str, &str, &str)]) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for r in records() {
        let a = &r["affected"][0];
        let events = a["ranges"][0]["events"].as_array().unwrap();
        let introduced = events[0]["introduced"].as_str().unwrap();
        let fixed = events[1]["fixed"].as_str().unwrap();
        for (eco, name, version, purl) in packages {
            if a["package"]["ecosystem"] != *eco || !a["package"]["name"].as_str().unwrap().eq_ignore_ascii_case(name) {
                continue;
            }
            if (introduced == "0" || !older(version, introduced)) && older(version, fixed) {
                let cve = r["aliases"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find_map(|x| x.as_str().filter(|s| s.starts_with("CVE-")));
                out.insert((cve.unwrap_or(r["id"].as_str().unwrap()).to_owned(), (*purl).to_owned()));
            }
        }
    }
    out
}

const LAYER_PACKAGES: &[(&str, &str, &str, &str)] = &[
    (
        "Wolfi",
        "openssl",
        "3.0.7-r0",
        "pkg:apk/wolfi/openssl@3.0.7-r0?arch=x86_64",
    ),
    (
        "Wolfi",
        "busybox",
        "1.36.0-r1",
        "pkg:apk/wolfi/busybox@1.36.0-r1?arch=x86_64",
    ),
    ("PyPI", "requests", "2.19.0", "pkg:pypi/requests@2.19.0"),
    ("PyPI", "urllib3", "1.24.1", "pkg:pypi/urllib3@1.24.1"),
    ("PyPI", "Jinja2", "2.10", "pkg:pypi/jinja2@2.10"),
    ("npm", "lodash", "4.17.15", "pkg:npm/lodash@4.17.15"),
];

/// The report's `(vulnerability, purl)` pairs.
fn pairs(report: &Value) -> BTreeSet<(String, String)> {
    report["vulnerabilityMatches"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["vulnerability"]["id"].as_str().unwrap_or("").to_owned(),
                m["pkg"]["purl"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Polls `path` until it answers 200 and `done` holds (at most a minute).
async fn until(s: &TestServer, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = std::time::Instant::now();
    loop {
        let (status, body) = s.get(path).await;
        if status == StatusCode::OK && done(&body) {
            return body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "[{}] {what}: still {status} {body}",
            s.backend
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The v1 advisory created under `org` as the admin, with one event;
/// approved by `reviewer_token`. Returns the CGA id.
async fn decide(s: &TestServer, org: &str, reviewer_token: &str, name: &str, alias: &str, event: Value) -> String {
    let t = serde_json::to_value(ward_proto::Timestamp::from_millis(s.clock.now_millis() - 60_000)).unwrap();
    let mut event = event;
    event["timestamp"] = t;
    let advisory = json!({
        "artifactName": name, "artifactType": "pypi", "componentName": name, "componentType": "pypi",
        "aliases": [alias], "events": [event],
    });
    let (status, made) = s
        .post(
            "/vulnerabilities/v1/advisories",
            json!({"parentId": org, "advisory": advisory}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] advisory: {made}", s.backend);
    let uid = common::v1_id(&made);
    let (status, v2) = s.get(&format!("/vulnerabilities/v2/advisories/{uid}")).await;
    assert_eq!(status, StatusCode::OK, "{v2}");
    let ev = v2["events"][0]["uid"].as_str().unwrap().to_owned();
    let (status, reviewed) = s
        .call_as(
            reviewer_token,
            Method::PUT,
            &format!("/vulnerabilities/v1/advisory_events/{ev}"),
            Some(json!({"status": "APPROVED"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] review: {reviewed}", s.backend);
    v2["advisoryId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn reports_follow_layers_sboms_and_the_teams_decisions() {
    let Some(tools) = Tools::find() else { return };
    let cyclonedx = tools.python.with_file_name("cyclonedx-py");
    if !cyclonedx.is_file() {
        assert!(
            std::env::var("WARD_TEST_REQUIRE_CLIENTS").as_deref() != Ok("1"),
            "WARD_TEST_REQUIRE_CLIENTS=1 but cyclonedx-py is missing from the venv (pip install cyclonedx-bom)"
        );
        eprintln!("note: vulnerability report test skipped: no cyclonedx-py");
        return;
    }
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let org = s.create_group(None, "acme").await;
        let org = common::uid(&org);
        let host = host(&s);

        // The advisory data: OSV records imported into the organization.
        let recs: Vec<String> = records().iter().map(Value::to_string).collect();
        let (status, imported) = s
            .post(
                "/vulnerabilities/v1/osv:import",
                json!({"parentId": org, "records": recs}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] import: {imported}");

        // The image, pushed by skopeo: its packages come from its layers.
        let script = sb.path("mkimage.py");
        std::fs::write(&script, MKIMAGE_PY).unwrap();
        let mut cmd = sb.command(&tools.python);
        cmd.arg(&script).arg(sb.path("image")).arg("v1");
        let digest = run(cmd, None, "mkimage.py").await.ok("mkimage.py").trim().to_owned();
        let creds = format!("_token:{}", s.token);
        let dest = format!("docker://{host}/acme/app:v1");
        let src = format!("oci:{}:v1", sb.path("image").display());
        let args = ["copy", "--dest-tls-verify=false", "--dest-creds", &creds, &src, &dest];
        run(sb.skopeo(&tools, &args), None, "skopeo push")
            .await
            .ok("skopeo push");
        let (status, repos) = s
            .get(&format!("/registry/v2/repos?uidp.childrenOf={org}&name=app"))
            .await;
        assert_eq!(status, StatusCode::OK, "{repos}");
        let repo = repos["repos"][0]["uid"].as_str().expect("the pushed repo").to_owned();
        let report_path = format!("/registry/v1/repos/{repo}/digests/{digest}/vulnreport");
        let sbom_path = format!("/registry/v1/repos/{repo}/digests/{digest}/sbom");

        let sbom = until(&s, &sbom_path, "layer inventory", |_| true).await;
        assert_eq!(sbom["source"], "GENERATED", "[{b}] {sbom}");
        let layer_purls: BTreeSet<String> = sbom["graph"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["package"]["purl"].as_str().unwrap().to_owned())
            .collect();
        for (_, _, _, purl) in LAYER_PACKAGES {
            assert!(layer_purls.contains(*purl), "[{b}] {purl} in {layer_purls:?}");
        }
        assert!(
            layer_purls
                .iter()
                .any(|p| p.starts_with("pkg:deb/") && p.contains("zlib1g")),
            "[{b}] the dpkg package: {layer_purls:?}"
        );
        assert!(
            !layer_purls.iter().any(|p| p.contains("fp")),
            "[{b}] a package's own subdirectory is no package"
        );
        let want = expected(LAYER_PACKAGES);
        assert!(want.len() >= 6, "the fixture has vulnerable packages: {want:?}");
        let report = until(&s, &report_path, "layer report", |r| pairs(r) == want).await;
        let m = report["vulnerabilityMatches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["vulnerability"]["id"] == "CVE-2018-18074")
            .expect("requests' CVE");
        assert_eq!(m["vulnerability"]["severity"], "HIGH", "[{b}] {m}");
        assert_eq!(m["fix"]["versions"], json!(["2.20.0"]), "[{b}] {m}");
        assert_eq!(m["fix"]["state"], "FIXED", "[{b}] {m}");
        assert_eq!(report["scanner"]["name"], "ward", "[{b}]");
        let related: BTreeSet<&str> = m["vulnerability"]["relatedVulnerabilities"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["id"].as_str())
            .collect();
        assert_eq!(
            related,
            BTreeSet::from(["GHSA-x84v-xcm2-53pg", "PYSEC-2018-28"]),
            "[{b}] one vulnerability, its aliases"
        );

        // cyclonedx-py's SBOM of the same Python packages, pushed by oras-py
        // as a referrer: it replaces what the layers said.
        std::fs::write(
            sb.path("requirements.txt"),
            "requests==2.19.0\nurllib3==1.24.1\nJinja2==2.10\n",
        )
        .unwrap();
        let mut cmd = sb.command(&cyclonedx);
        cmd.arg("requirements")
            .arg("-o")
            .arg(sb.path("sbom.cdx.json"))
            .arg(sb.path("requirements.txt"));
        run(cmd, None, "cyclonedx-py").await.ok("cyclonedx-py");
        let sbom_bytes = std::fs::read(sb.path("sbom.cdx.json")).unwrap();
        let script = sb.path("push_sbom.py");
        std::fs::write(&script, PUSH_SBOM_PY).unwrap();
        let mut cmd = sb.command(&tools.python);
        cmd.arg(&script)
            .args([host.as_str(), "acme/app", s.token.as_str(), digest.as_str()])
            .arg(sb.path("sbom.cdx.json"));
        run(cmd, None, "push_sbom.py").await.ok("push_sbom.py");
        let sbom = until(&s, &sbom_path, "SBOM inventory", |v| v["source"] == "INGESTED").await;
        assert!(
            sbom["format"].as_str().unwrap_or("").starts_with("cyclonedx"),
            "[{b}] {}",
            sbom["format"]
        );
        let sbom_purls: BTreeSet<String> = sbom["graph"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["package"]["purl"].as_str().unwrap().to_owned())
            .collect();
        let layer_pypi: BTreeSet<String> = layer_purls
            .iter()
            .filter(|p| p.starts_with("pkg:pypi/"))
            .cloned()
            .collect();
        assert_eq!(sbom_purls, layer_pypi, "[{b}] the layers list what the SBOM lists");
        let (status, raw) = s
            .get(&format!("/registry/v1/repos/{repo}/digest/{digest}/rawsbom"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {raw}");
        assert_eq!(
            raw["rawSbom"].as_str().unwrap().as_bytes(),
            &sbom_bytes[..],
            "[{b}] the SBOM byte for byte"
        );
        let sbom_packages: Vec<_> = LAYER_PACKAGES.iter().filter(|p| p.0 == "PyPI").cloned().collect();
        let want = expected(&sbom_packages);
        until(&s, &report_path, "SBOM report", |r| pairs(r) == want).await;

        // A false positive, pending: shown as under investigation, still matched.
        let (_, reviewer) =
            common::identity_with(&s, &org, "reviewer", &["CAP_ADVISORIES_LIST", "CAP_ADVISORIES_APPROVE"]).await;
        let fp = json!({"falsePositiveDetermination": {"type": "VULNERABLE_CODE_NOT_IN_EXECUTION_PATH", "note": "the vulnerable code is never called"}});
        let fp_id = decide(&s, &org, &reviewer, "urllib3", "CVE-2019-11236", fp).await;
        let mut without_fp = want.clone();
        without_fp.remove(&("CVE-2019-11236".to_owned(), "pkg:pypi/urllib3@1.24.1".to_owned()));
        let report = until(&s, &report_path, "the false positive", |r| pairs(r) == without_fp).await;
        assert_eq!(pairs(&report).len(), want.len() - 1, "[{b}] exactly its match removed");

        // A fix at the installed version: the match goes without a new push.
        let fixed = json!({"fixed": {"fixedVersion": "2.10"}});
        let fix_id = decide(&s, &org, &reviewer, "jinja2", "CVE-2019-10906", fixed).await;
        let mut without_fix = without_fp.clone();
        without_fix.remove(&("CVE-2019-10906".to_owned(), "pkg:pypi/jinja2@2.10".to_owned()));
        until(&s, &report_path, "the fix", |r| pairs(r) == without_fix).await;

        // OpenVEX: the decisions, for scanners.
        let (status, raw) = s
            .get(&format!("/registry/v1/vuln_reports/raw?repo_id={repo}&digest={digest}"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {raw}");
        let vex: Value = serde_json::from_str(raw["rawReport"].as_str().unwrap()).unwrap();
        assert_eq!(vex["@context"], "https://openvex.dev/ns/v0.2.0");
        let statement = |id: &str| -> Value {
            vex["statements"]
                .as_array()
                .unwrap()
                .iter()
                .find(|st| st["vulnerability"]["name"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("[{b}] a statement about {id}: {vex}"))
        };
        let st = statement("CVE-2019-11236");
        assert_eq!(st["status"], "not_affected", "[{b}] {st}");
        assert_eq!(st["justification"], "vulnerable_code_not_in_execute_path", "[{b}] {st}");
        assert!(st["impact_statement"].as_str().unwrap().contains(&fp_id), "[{b}] {st}");
        assert_eq!(statement("CVE-2019-10906")["status"], "fixed", "[{b}]");
        assert_eq!(statement("CVE-2018-18074")["status"], "affected", "[{b}]");
        assert!(
            statement("CVE-2018-18074")["products"][0]["@id"]
                .as_str()
                .unwrap()
                .starts_with("pkg:oci/app@sha256%3A"),
            "[{b}]"
        );
        let _ = fix_id;

        // Which images does it affect? By CVE and by either alias.
        for id in ["CVE-2018-18074", "GHSA-x84v-xcm2-53pg", "PYSEC-2018-28"] {
            let (status, page) = s.get(&format!("/registry/v1/vuln_reports/affected?id={id}")).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {page}");
            let items = page["items"].as_array().unwrap();
            assert_eq!(items.len(), 1, "[{b}] {id}: {page}");
            assert_eq!(items[0]["repoId"], repo.as_str(), "[{b}]");
            assert_eq!(items[0]["digest"], digest.as_str(), "[{b}]");
            assert_eq!(items[0]["tags"], json!(["v1"]), "[{b}]");
            assert_eq!(items[0]["purls"], json!(["pkg:pypi/requests@2.19.0"]), "[{b}]");
        }
        let (_, page) = s.get("/registry/v1/vuln_reports/affected?id=CVE-2019-11236").await;
        assert_eq!(page["items"], json!([]), "[{b}] a false positive affects nothing");

        // The CLI.
        let out = common::ward_run(&s, &s.token, &["registry", "vulns", "acme/app:v1", "-o", "json"]).await;
        let got = out.json("ward registry vulns");
        assert_eq!(pairs(&got), without_fix, "[{b}]");
        let out = common::ward_run(&s, &s.token, &["registry", "vulns", "affected", "GHSA-x84v-xcm2-53pg"]).await;
        assert!(out.ok("vulns affected").contains("app"), "[{b}] {}", out.stdout);
        let out = common::ward_run(&s, &s.token, &["registry", "sbom", &format!("app@{digest}")]).await;
        assert!(out.ok("registry sbom").contains("pkg:pypi/urllib3@1.24.1"), "[{b}]");
        let out = common::ward_run(&s, &s.token, &["advisories", "vex", "--image", "acme/app:v1"]).await;
        let vex: Value = serde_json::from_str(out.ok("advisories vex")).expect("the VEX document is JSON");
        assert_eq!(vex["@context"], "https://openvex.dev/ns/v0.2.0");
    }
}
