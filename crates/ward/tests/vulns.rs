//! Vulnerability reports through the real server with real clients, on
//! every backend: skopeo pushes an image whose layers hold an apk database,
//! a dpkg status file, Python metadata and an npm package; cyclonedx-py
//! makes an SBOM of the same Python packages, which oras-py pushes as a
//! referrer; OSV records are imported over the API. Each report is held to
//! an independent computation in this file (not Ward's code); then the
//! team's reviewed decisions (a false positive, a fix) change the report
//! without a new push, and the affected-images query finds the image by
//! CVE and by alias. Python stubs generated from the protos read the same
//! reports over gRPC and REST.
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

/// Asserts `doc` is valid against the OpenVEX 0.2.0 JSON Schema (the spec
/// repository's `openvex_json_schema.json`, kept in fixtures/).
fn assert_openvex(doc: &Value, backend: &str) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/openvex_json_schema_0.2.0.json"
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the OpenVEX schema compiles");
    // It does reject: a statement with an unknown status.
    let mut bad = doc.clone();
    bad["statements"][0]["status"] = json!("maybe");
    assert!(!validator.is_valid(&bad), "the schema rejects an unknown status");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "[{backend}] OpenVEX schema errors: {errors:#?}\n{doc:#}"
    );
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

        // A client that accepts gzip gets the same report compressed; one
        // that does not, plain JSON.
        idle(&s).await;
        let url = format!("{}{report_path}", s.base);
        let plain = s.http.get(&url).bearer_auth(&s.token).send().await.unwrap();
        assert_eq!(plain.status(), StatusCode::OK, "[{b}]");
        assert!(plain.headers().get("content-encoding").is_none(), "[{b}]");
        let plain: Value = plain.json().await.unwrap();
        for accept in ["gzip", "br;q=1.0, gzip;q=0.8, *;q=0.1", "*"] {
            let r = s
                .http
                .get(&url)
                .bearer_auth(&s.token)
                .header("accept-encoding", accept)
                .send()
                .await
                .unwrap();
            assert_eq!(r.headers()["content-encoding"], "gzip", "[{b}] {accept}");
            assert_eq!(r.headers()["vary"], "accept-encoding", "[{b}] {accept}");
            let mut json = Vec::new();
            std::io::Read::read_to_end(
                &mut flate2::read::GzDecoder::new(&r.bytes().await.unwrap()[..]),
                &mut json,
            )
            .expect("gzip");
            let json: Value = serde_json::from_slice(&json).unwrap();
            assert_eq!(
                json["vulnerabilityMatches"], plain["vulnerabilityMatches"],
                "[{b}] {accept}"
            );
            assert_eq!(json["id"], plain["id"], "[{b}] {accept}");
        }
        let r = s
            .http
            .get(&url)
            .bearer_auth(&s.token)
            .header("accept-encoding", "gzip;q=0, identity")
            .send()
            .await
            .unwrap();
        assert!(
            r.headers().get("content-encoding").is_none(),
            "[{b}] gzip;q=0 refuses it"
        );

        // OpenVEX: the decisions, for scanners.
        let (status, raw) = s
            .get(&format!("/registry/v1/vuln_reports/raw?repo_id={repo}&digest={digest}"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {raw}");
        let vex: Value = serde_json::from_str(raw["rawReport"].as_str().unwrap()).unwrap();
        assert_eq!(vex["@context"], "https://openvex.dev/ns/v0.2.0");
        assert_openvex(&vex, b);
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
        for id in [
            "CVE-2018-18074",
            "GHSA-x84v-xcm2-53pg",
            "PYSEC-2018-28",
            "cve-2018-18074",
            "ghsa-X84V-xcm2-53pg",
        ] {
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
        // A page token is signed: one made by hand is refused.
        use base64::Engine as _;
        let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{repo}|sha256:0"));
        let (status, body) = s
            .get(&format!(
                "/registry/v1/vuln_reports/affected?id=CVE-2018-18074&pageToken={forged}"
            ))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "[{b}] {body}");

        // The CLI.
        let out = common::ward_run(&s, &s.token, &["registry", "vulns", "acme/app:v1", "-o", "json"]).await;
        let got = out.json("ward registry vulns");
        assert_eq!(pairs(&got), without_fix, "[{b}]");
        let out = common::ward_run(&s, &s.token, &["registry", "vulns", "affected", "GHSA-x84v-xcm2-53pg"]).await;
        assert!(out.ok("vulns affected").contains("acme/app"), "[{b}] {}", out.stdout);
        let out = common::ward_run(&s, &s.token, &["registry", "vulns", "nope/app:v1"]).await;
        assert!(
            !out.status.success() && out.stderr.contains("no organization named nope"),
            "[{b}] {out:?}"
        );
        let out = common::ward_run(&s, &s.token, &["registry", "vulns", "affected", "CVE-2099-0001"]).await;
        out.ok("vulns affected, none");
        assert!(out.stderr.contains("no image you can see"), "[{b}] {out:?}");
        let out = common::ward_run(&s, &s.token, &["registry", "sbom", &format!("app@{digest}")]).await;
        assert!(out.ok("registry sbom").contains("pkg:pypi/urllib3@1.24.1"), "[{b}]");
        let out = common::ward_run(&s, &s.token, &["advisories", "vex", "--image", "acme/app:v1"]).await;
        let vex: Value = serde_json::from_str(out.ok("advisories vex")).expect("the VEX document is JSON");
        assert_eq!(vex["@context"], "https://openvex.dev/ns/v0.2.0");
        assert_openvex(&vex, b);

        // The organization's document holds each of the image's statements,
        // naming the image among its products.
        let (status, export) = s.get(&format!("/registry/v1/vuln_reports/vex?group={org}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {export}");
        assert!(export["images"].as_i64().unwrap_or(0) >= 1, "[{b}] {export}");
        let org_vex: Value = serde_json::from_str(export["document"].as_str().unwrap()).unwrap();
        assert_openvex(&org_vex, b);
        for st in vex["statements"].as_array().unwrap() {
            let product = &st["products"][0];
            let found = org_vex["statements"].as_array().unwrap().iter().any(|o| {
                o["vulnerability"]["name"] == st["vulnerability"]["name"]
                    && o["status"] == st["status"]
                    && o["products"].as_array().unwrap().iter().any(|p| p == product)
            });
            assert!(found, "[{b}] the organization's document lacks {st}: {org_vex}");
        }
        let out = common::ward_run(&s, &s.token, &["advisories", "vex", "--group", "acme"]).await;
        let by_cli: Value = serde_json::from_str(out.ok("advisories vex --group")).expect("JSON");
        assert_eq!(by_cli["statements"], org_vex["statements"], "[{b}]");
        // The version moves with the reports (the newest one's time), so a
        // consumer keyed on `@id` sees that the statements changed.
        assert!(
            org_vex["version"].as_i64().unwrap() >= vex["version"].as_i64().unwrap(),
            "[{b}]"
        );
        assert!(vex["version"].as_i64().unwrap() > 1, "[{b}] {}", vex["version"]);
        assert_eq!(vex["last_updated"], vex["timestamp"], "[{b}]");
        // Nothing to state is no document (OpenVEX needs a statement).
        let empty = common::uid(&s.create_group(Some(&org), "nothing-here").await);
        let (status, body) = s.get(&format!("/registry/v1/vuln_reports/vex?group={empty}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["document"].as_str().unwrap_or(""), "", "[{b}] no document: {body}");
        let out = common::ward_run(&s, &s.token, &["advisories", "vex", "--group", &empty]).await;
        assert!(
            out.failed("vex of a group with nothing to state")
                .contains("VEX statement"),
            "[{b}]"
        );
    }
}

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A gzip'ed tar of `files`.
fn layer(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, path, *data).unwrap();
    }
    let raw = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    gz.finish().unwrap()
}

fn metadata(name: &str, version: &str) -> Vec<u8> {
    format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n").into_bytes()
}

/// Pushes an image of these gzip'ed tar layers (by API, as any client
/// would) to `repo:tag`; its digest.
async fn push_layers(s: &TestServer, repo: &str, tag: &str, layers: &[Vec<u8>]) -> String {
    let config = serde_json::to_vec(
        &json!({"architecture": "amd64", "os": "linux", "config": {"User": "65532"},
        "rootfs": {"type": "layers", "diff_ids": []}}),
    )
    .unwrap();
    let c = common::push_blob(s, repo, &config).await;
    let mut descriptors = Vec::new();
    for l in layers {
        let d = common::push_blob(s, repo, l).await;
        descriptors
            .push(json!({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": l.len()}));
    }
    let m = json!({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": c, "size": config.len()},
        "layers": descriptors,
        "annotations": {"dev.ward.test.tag": tag},
    });
    common::push_manifest(s, repo, tag, MANIFEST, &m).await
}

/// Pushes `document` as a referrer of `subject` with this artifact type.
async fn push_referrer(s: &TestServer, repo: &str, subject: &str, artifact_type: &str, document: &[u8]) -> String {
    let empty = b"{}";
    let c = common::push_blob(s, repo, empty).await;
    let d = common::push_blob(s, repo, document).await;
    let subject_size = s
        .http
        .get(format!("{}/v2/{repo}/manifests/{subject}", s.base))
        .bearer_auth(&s.token)
        .header("accept", MANIFEST)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    let m = json!({
        "schemaVersion": 2, "mediaType": MANIFEST, "artifactType": artifact_type,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": c, "size": 2},
        "layers": [{"mediaType": artifact_type, "digest": d, "size": document.len()}],
        "subject": {"mediaType": MANIFEST, "digest": subject, "size": subject_size},
    });
    let digest = common::sha256(&serde_json::to_vec(&m).unwrap());
    common::push_manifest(s, repo, &digest, MANIFEST, &m).await
}

/// Waits until the job queue is empty (every queued inventory and report done).
async fn idle(s: &TestServer) {
    let start = std::time::Instant::now();
    loop {
        let counts = s.ward().store.job_counts().await.expect("job counts");
        if counts.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "[{}] jobs still queued: {counts:?}",
            s.backend
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the report of `repo@digest` until it is no longer being computed.
async fn settled(s: &TestServer, token: &str, repo_uid: &str, digest: &str) -> (StatusCode, Value) {
    let start = std::time::Instant::now();
    loop {
        let (status, body) = s
            .call_as(
                token,
                Method::GET,
                &format!("/registry/v1/repos/{repo_uid}/digests/{digest}/vulnreport"),
                None,
            )
            .await;
        if status != StatusCode::SERVICE_UNAVAILABLE {
            return (status, body);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "[{}] {repo_uid}@{digest} still pending",
            s.backend
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn repo_uid(s: &TestServer, org: &str, name: &str) -> String {
    let (status, repos) = s
        .get(&format!("/registry/v2/repos?uidp.childrenOf={org}&name={name}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{repos}");
    repos["repos"][0]["uid"].as_str().expect("the pushed repo").to_owned()
}

/// `org`'s requests record imported and `acme/app:v1` pushed with requests
/// 2.19.0 in its layer, its report computed: the repo's uid and the digest.
async fn requests_image(s: &TestServer, org: &str) -> (String, String) {
    import_requests_record(s, org).await;
    let image = layer(&[(
        "usr/lib/python3/site-packages/requests-2.19.0.dist-info/METADATA",
        &metadata("requests", "2.19.0"),
    )]);
    let digest = push_layers(s, "acme/app", "v1", &[image]).await;
    let repo = repo_uid(s, org, "app").await;
    let (status, report) = settled(s, &s.token, &repo, &digest).await;
    assert_eq!(status, StatusCode::OK, "[{}] {report}", s.backend);
    (repo, digest)
}

async fn import_requests_record(s: &TestServer, org: &str) {
    let r = records().remove(0);
    let (status, body) = s
        .post(
            "/vulnerabilities/v1/osv:import",
            json!({"parentId": org, "records": [r.to_string()]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] {body}", s.backend);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_documents_and_layers_give_a_readable_inventory_error() {
    for db in ward_store::testing::backends().await {
        // A small layer bound, so the bomb below is cheap to detonate.
        let s = TestServer::start_with(db, |c| c.max_layer_bytes = 1024 * 1024).await;
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        import_requests_record(&s, &org).await;
        let good = layer(&[(
            "usr/lib/python3/site-packages/requests-2.19.0.dist-info/METADATA",
            &metadata("requests", "2.19.0"),
        )]);

        // Bad layers: a decompression bomb (8 MiB of zeros, compressed to
        // a few KiB), garbage declared as gzip, a path over 4096 bytes.
        let zeros = vec![0u8; 8 * 1024 * 1024];
        let bomb = layer(&[("big.bin", &zeros)]);
        assert!(bomb.len() < 64 * 1024, "the bomb is small: {}", bomb.len());
        let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let long_path = format!("{}/x", "d".repeat(5000));
        let mut tar = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_ustar();
        h.set_size(1);
        h.set_cksum();
        tar.append_data(&mut h, &long_path, &b"x"[..]).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &tar.into_inner().unwrap()).unwrap();
        let long = gz.finish().unwrap();
        let cases: [(&str, Vec<Vec<u8>>, &str); 3] = [
            ("bomb", vec![good.clone(), bomb], "decompresses past"),
            ("garbage", vec![garbage], "layer"),
            ("longpath", vec![long], "path"),
        ];
        let mut pushed = Vec::new();
        for (tag, layers, _) in &cases {
            pushed.push(push_layers(&s, "acme/bad", tag, layers).await);
        }
        let repo = repo_uid(&s, &org, "bad").await;
        for ((tag, _, words), digest) in cases.iter().zip(&pushed) {
            let (status, body) = settled(&s, &s.token, &repo, digest).await;
            common::assert_error(b, status, &body, 400, 9, "FAILED_PRECONDITION");
            let message = body["message"].as_str().unwrap_or_default();
            assert!(message.contains(words), "[{b}] {tag}: {message}");
            let (status, sbom) = s.get(&format!("/registry/v1/repos/{repo}/digests/{digest}/sbom")).await;
            assert_eq!(status.as_u16(), 400, "[{b}] {tag}: the SBOM read says the same: {sbom}");
        }

        // Bad SBOMs attached to a good image: truncated SPDX, CycloneDX
        // nested 10,000 deep, a DSSE envelope about another image. Each
        // replaces the layers' inventory with an error that names it.
        let deep = format!(
            "{{\"bomFormat\":\"CycloneDX\",\"specVersion\":\"1.5\",\"components\":{}[]{}}}",
            "[{\"type\":\"library\",\"name\":\"x\",\"components\":".repeat(10_000),
            "}]".repeat(10_000)
        );
        let other = "sha256:".to_owned() + &"ab".repeat(32);
        let statement = json!({"_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "x", "digest": {"sha256": &other[7..]}}],
            "predicateType": "https://spdx.dev/Document", "predicate": {"spdxVersion": "SPDX-2.3", "packages": []}});
        use base64::Engine as _;
        let envelope = json!({"payloadType": "application/vnd.in-toto+json",
            "payload": base64::engine::general_purpose::STANDARD.encode(statement.to_string()), "signatures": []});
        let sboms: [(&str, &str, Vec<u8>, &str); 2] = [
            (
                "spdx",
                "application/spdx+json",
                b"{\"spdxVersion\": \"SPDX-2.3\", \"packages\": [".to_vec(),
                "JSON",
            ),
            ("deep", "application/vnd.cyclonedx+json", deep.into_bytes(), "64"),
        ];
        for (tag, artifact_type, document, words) in sboms {
            let digest = push_layers(&s, "acme/bad", &format!("sbom-{tag}"), std::slice::from_ref(&good)).await;
            let (status, _) = settled(&s, &s.token, &repo, &digest).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {tag}: the layers' report first");
            let referrer = push_referrer(&s, "acme/bad", &digest, artifact_type, &document).await;
            let start = std::time::Instant::now();
            loop {
                let (status, body) = settled(&s, &s.token, &repo, &digest).await;
                if status.as_u16() == 400 {
                    let message = body["message"].as_str().unwrap_or_default();
                    assert!(message.contains(words), "[{b}] {tag}: {message}");
                    break;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "[{b}] {tag}: {status} {body}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // The bad SBOM deleted, the layers speak for the image again.
            let r = s
                .http
                .delete(format!("{}/v2/acme/bad/manifests/{referrer}", s.base))
                .bearer_auth(&s.token)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 202, "[{b}] {tag}: deleting the referrer");
            let start = std::time::Instant::now();
            while settled(&s, &s.token, &repo, &digest).await.0 != StatusCode::OK {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "[{b}] {tag}: the layers' report again"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }

        // An attestation about another image says nothing of this one: the
        // layers are read again and still speak for it.
        let digest = push_layers(&s, "acme/bad", "sbom-dsse", std::slice::from_ref(&good)).await;
        assert_eq!(settled(&s, &s.token, &repo, &digest).await.0, StatusCode::OK, "[{b}]");
        let sbom_path = format!("/registry/v1/repos/{repo}/digests/{digest}/sbom");
        let (_, first) = s.get(&sbom_path).await;
        s.clock.advance_millis(1000);
        push_referrer(
            &s,
            "acme/bad",
            &digest,
            "application/vnd.dsse.envelope.v1+json",
            envelope.to_string().as_bytes(),
        )
        .await;
        let again = until(&s, &sbom_path, "the re-read inventory", |v| {
            v["lastSeen"] != first["lastSeen"]
        })
        .await;
        assert_eq!(again["source"], "GENERATED", "[{b}] {again}");
        assert_eq!(settled(&s, &s.token, &repo, &digest).await.0, StatusCode::OK, "[{b}]");

        // A referrer is no image: its report says so.
        let digest = push_layers(&s, "acme/bad", "plain", std::slice::from_ref(&good)).await;
        let sig = push_referrer(
            &s,
            "acme/bad",
            &digest,
            "application/vnd.dev.cosign.simplesigning.v1+json",
            b"{}",
        )
        .await;
        let (status, body) = settled(&s, &s.token, &repo, &sig).await;
        common::assert_error(b, status, &body, 400, 9, "FAILED_PRECONDITION");

        // `ward admin backfill-reports` finds every manifest read.
        idle(&s).await;
        let mut seen = Vec::new();
        let (done, total) = ward_server::backfill_reports(&s.config, Duration::from_secs(30), |d, t| seen.push((d, t)))
            .await
            .expect("backfill");
        assert_eq!(done, total, "[{b}]");
        assert!(total >= 8, "[{b}] every image, referrer and index counts: {total}");
        assert_eq!(seen.last(), Some(&(done, total)), "[{b}]");

        // The queue was never stuck: a good image pushed last has its report.
        let (status, body) = settled(&s, &s.token, &repo, &digest).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(pairs(&body).len(), 1, "[{b}] {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_report_rpc_answers_only_whom_it_should() {
    use ward_proto::registry::registry_client::RegistryClient;
    use ward_proto::registry::vulnerabilities_client::VulnerabilitiesClient;
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let other = common::uid(&s.create_group(None, "other").await);
        let (repo, digest) = requests_image(&s, &org).await;

        let (_, viewer) = common::person(&s, "viewer", &[(&org, "viewer")]).await;
        let (_, puller) = common::person(&s, "puller", &[(&org, "registry.pull")]).await;
        let (_, outsider) = common::person(&s, "outsider", &[(&other, "owner")]).await;
        let (_, repo_only) =
            common::identity_with(&s, &org, "repo-only", &["CAP_REPO_LIST", "CAP_IAM_GROUPS_LIST"]).await;
        let paths = [
            (
                "GetVulnReport",
                format!("/registry/v1/repos/{repo}/digests/{digest}/vulnreport"),
            ),
            ("GetSbom", format!("/registry/v1/repos/{repo}/digests/{digest}/sbom")),
            (
                "GetImageConfig",
                format!("/registry/v1/repos/{repo}/digests/{digest}/imageconfig"),
            ),
            ("ListVulnReports", format!("/registry/v1/vuln_reports?repo_id={repo}")),
            (
                "GetRawVulnReport",
                format!("/registry/v1/vuln_reports/raw?repo_id={repo}&digest={digest}"),
            ),
            ("ExportVex", format!("/registry/v1/vuln_reports/vex?group={org}")),
        ];
        // (caller, token, expected HTTP status per path).
        let matrix: [(&str, &str, [u16; 6]); 6] = [
            ("admin", &s.token, [200, 200, 200, 200, 200, 200]),
            ("viewer", &viewer, [200, 200, 200, 200, 200, 200]),
            // A pull token's caller reads one image's report and SBOM, not the listings.
            ("registry.pull", &puller, [200, 200, 200, 403, 403, 403]),
            ("repo.list only", &repo_only, [403, 403, 403, 403, 403, 403]),
            ("another org's owner", &outsider, [404, 404, 404, 404, 404, 404]),
            ("nobody", "", [401, 401, 401, 401, 401, 401]),
        ];
        for (who, token, want) in matrix {
            for ((rpc, path), want) in paths.iter().zip(want) {
                let (status, body) = s.call_as(token, Method::GET, path, None).await;
                assert_eq!(status.as_u16(), want, "[{b}] {who} {rpc}: {body}");
                if want == 404 {
                    assert!(
                        !body.to_string().contains("requests"),
                        "[{b}] {who} {rpc} learns nothing: {body}"
                    );
                }
            }
            let (status, page) = s
                .call_as(
                    token,
                    Method::GET,
                    "/registry/v1/vuln_reports/affected?id=CVE-2018-18074",
                    None,
                )
                .await;
            match who {
                "nobody" => assert_eq!(status.as_u16(), 401, "[{b}] {page}"),
                "admin" | "viewer" => {
                    assert_eq!(page["items"].as_array().map(Vec::len), Some(1), "[{b}] {who}: {page}")
                }
                _ => assert_eq!(page["items"], json!([]), "[{b}] {who} sees no image: {page}"),
            }
        }

        // The SDK's digest-only forms: every repo the caller may see holding it.
        for (who, token, items) in [
            ("viewer", viewer.as_str(), 1),
            ("another org's owner", outsider.as_str(), 0),
        ] {
            let (status, list) = s
                .call_as(
                    token,
                    Method::GET,
                    &format!("/registry/v1/vuln_reports?digest={digest}"),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::OK, "[{b}] {who}: {list}");
            assert_eq!(
                list["items"].as_array().map(Vec::len),
                Some(items),
                "[{b}] {who}: {list}"
            );
            let (status, raw) = s
                .call_as(
                    token,
                    Method::GET,
                    &format!("/registry/v1/vuln_reports/raw?digest={digest}"),
                    None,
                )
                .await;
            assert_eq!(
                status.as_u16(),
                if items == 1 { 200 } else { 404 },
                "[{b}] {who}: {raw}"
            );
        }

        // Another organization's advisory data never reaches this one's
        // reports: its own record for the same package, and its approved
        // false positive for the same vulnerability.
        let mut theirs = records().remove(0);
        theirs["id"] = json!("GHSA-othr-othr-othr");
        theirs["aliases"] = json!(["CVE-2099-0001"]);
        let (status, body) = s
            .post(
                "/vulnerabilities/v1/osv:import",
                json!({"parentId": other, "records": [theirs.to_string()]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (_, their_reviewer) = common::identity_with(
            &s,
            &other,
            "reviewer",
            &["CAP_ADVISORIES_LIST", "CAP_ADVISORIES_APPROVE"],
        )
        .await;
        let fp = json!({"falsePositiveDetermination": {"type": "VULNERABLE_CODE_NOT_IN_EXECUTION_PATH"}});
        decide(&s, &other, &their_reviewer, "requests", "CVE-2018-18074", fp).await;
        idle(&s).await;
        let (status, report) = settled(&s, &s.token, &repo, &digest).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(
            pairs(&report),
            BTreeSet::from([("CVE-2018-18074".to_owned(), "pkg:pypi/requests@2.19.0".to_owned())]),
            "[{b}] another organization's data changed nothing: {report}"
        );
        let (_, page) = s.get("/registry/v1/vuln_reports/affected?id=CVE-2099-0001").await;
        assert_eq!(page["items"], json!([]), "[{b}] {page}");

        // The same over gRPC with the viewer's and the outsider's tokens.
        let ch = tonic::transport::Channel::from_shared(format!("http://{}", s.addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let req = ward_proto::registry::VulnReportRequest {
            repo_id: repo.clone(),
            digest: digest.clone(),
        };
        let mut client = RegistryClient::with_interceptor(ch.clone(), common::Bearer(viewer.clone()));
        let report = client
            .get_vuln_report(req.clone())
            .await
            .expect("the viewer's report")
            .into_inner();
        assert_eq!(report.vulnerability_matches.len(), 1, "[{b}]");
        assert_eq!(
            report.vulnerability_matches[0].vulnerability.as_ref().unwrap().id,
            "CVE-2018-18074"
        );
        let mut client = RegistryClient::with_interceptor(ch.clone(), common::Bearer(outsider.clone()));
        let err = client.get_vuln_report(req).await.expect_err("hidden");
        assert_eq!(err.code(), tonic::Code::NotFound, "[{b}] {err:?}");
        let export = ward_proto::registry::ExportVexRequest { group: org.clone() };
        let mut hidden = VulnerabilitiesClient::with_interceptor(ch.clone(), common::Bearer(outsider.clone()));
        let err = hidden.export_vex(export.clone()).await.expect_err("hidden");
        assert_eq!(err.code(), tonic::Code::NotFound, "[{b}] {err:?}");
        let mut v = VulnerabilitiesClient::with_interceptor(ch, common::Bearer(viewer.clone()));
        let doc = v.export_vex(export).await.expect("the viewer's export").into_inner();
        assert!(doc.document.contains("CVE-2018-18074"), "[{b}] {}", doc.document);
        let list = v
            .list_vuln_reports(ward_proto::registry::VulnReportFilter {
                repo_id: repo.clone(),
                tag: "v1".into(),
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner();
        assert_eq!(list.items.len(), 1, "[{b}]");
        assert_eq!(
            list.items[0].vulnerabilities[0].aliases,
            vec!["GHSA-x84v-xcm2-53pg".to_owned()],
            "[{b}]"
        );
    }
}

/// An RFC 3339 query value for `ms`.
fn rfc3339(ms: i64) -> String {
    let t = serde_json::to_value(ward_proto::Timestamp::from_millis(ms)).unwrap();
    common::enc(t.as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn counts_by_day_and_resolved_vulnerabilities_follow_the_tag() {
    const DAY: i64 = 24 * 60 * 60 * 1000;
    for mut s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let recs: Vec<String> = records().iter().map(Value::to_string).collect();
        let (status, body) = s
            .post(
                "/vulnerabilities/v1/osv:import",
                json!({"parentId": org, "records": recs}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let site = "usr/lib/python3/site-packages";
        let old = layer(&[
            (
                &format!("{site}/requests-2.19.0.dist-info/METADATA"),
                &metadata("requests", "2.19.0"),
            ),
            (
                &format!("{site}/urllib3-1.24.1.dist-info/METADATA"),
                &metadata("urllib3", "1.24.1"),
            ),
        ]);
        let new = layer(&[
            (
                &format!("{site}/requests-2.20.0.dist-info/METADATA"),
                &metadata("requests", "2.20.0"),
            ),
            (
                &format!("{site}/urllib3-1.24.1.dist-info/METADATA"),
                &metadata("urllib3", "1.24.1"),
            ),
        ]);
        let day0 = s.clock.now_millis().div_euclid(DAY) * DAY;
        let a = push_layers(&s, "acme/app", "v1", &[old]).await;
        let repo = repo_uid(&s, &org, "app").await;
        assert_eq!(settled(&s, &s.token, &repo, &a).await.0, StatusCode::OK, "[{b}]");
        // A day later the tag moves to a rebuilt image without requests' CVE.
        s.clock.advance_millis(DAY);
        s.token = common::mint(&s, &common::admin_uid(&s));
        let bd = push_layers(&s, "acme/app", "v1", &[new]).await;
        assert_eq!(settled(&s, &s.token, &repo, &bd).await.0, StatusCode::OK, "[{b}]");

        let range = format!("from={}&to={}", rfc3339(day0), rfc3339(s.clock.now_millis()));
        let ids = |r: &Value, k: &str| -> Vec<String> {
            r[k].as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        let (status, counts) = s
            .get(&format!("/registry/v1/vuln_reports/counts?repo={repo}&tag=v1&{range}"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {counts}");
        let items = counts["items"].as_array().unwrap();
        assert_eq!(items.len(), 2, "[{b}] two days: {counts}");
        assert_eq!(
            ids(&items[0], "cveIds"),
            ["CVE-2018-18074", "CVE-2019-11236", "CVE-2019-11324"],
            "[{b}]"
        );
        assert_eq!(
            ids(&items[0], "highCveIds"),
            ["CVE-2018-18074", "CVE-2019-11324"],
            "[{b}]"
        );
        assert_eq!(ids(&items[0], "medCveIds"), ["CVE-2019-11236"], "[{b}]");
        assert_eq!(ids(&items[1], "cveIds"), ["CVE-2019-11236", "CVE-2019-11324"], "[{b}]");
        assert_eq!(
            items[1]["vulnCounts"],
            json!([{"severity": "MEDIUM", "count": 1}, {"severity": "HIGH", "count": 1}]),
            "[{b}]"
        );
        assert!(
            items[1]["sizeBytes"].as_str().unwrap().parse::<i64>().unwrap() > 0,
            "[{b}] int64 as a string"
        );
        let (_, cumulative) = s
            .get(&format!(
                "/registry/v1/vuln_reports/counts_cumulative?repo={repo}&tag=v1&{range}"
            ))
            .await;
        assert_eq!(ids(&cumulative["items"][1], "cveIds").len(), 3, "[{b}] {cumulative}");

        // Resolved on the second day: requests' CVE, over v2, v2beta1 and v1.
        let refs = common::enc(&json!({"repo": repo, "tags": ["v1"]}).to_string());
        let times = format!("startTime={}&endTime={}", rfc3339(day0), rfc3339(s.clock.now_millis()));
        for path in [
            format!("/advisory/v2/images/resolvedVulns?imageRefs={refs}&{times}"),
            format!("/advisory/v2beta1/images/resolvedVulns?imageRefs={refs}&{times}"),
        ] {
            let (status, r) = s.get(&path).await;
            assert_eq!(status, StatusCode::OK, "[{b}] {r}");
            let days = r["resolvedVulnsReports"].as_array().unwrap();
            assert_eq!(days.len(), 1, "[{b}] {r}");
            assert_eq!(days[0]["resolvedVulns"][0]["id"], "CVE-2018-18074", "[{b}] {r}");
            assert_eq!(
                days[0]["resolvedVulns"][0]["aliases"],
                json!(["GHSA-x84v-xcm2-53pg", "PYSEC-2018-28"]),
                "[{b}]"
            );
        }
        let (status, r) = s
            .get(&format!("/advisory/v1/images/resolved_vulns?imageRefs={refs}&{range}"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {r}");
        assert_eq!(r["items"][0]["resolvedVulns"][0]["id"], "CVE-2018-18074", "[{b}] {r}");
        // v1's range is optional (the last 30 days), as its SDK has it.
        let (status, r) = s
            .get(&format!("/advisory/v1/images/resolved_vulns?imageRefs={refs}"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {r}");

        // The SDK's `repo` is "the name of the repo": its bare name or its
        // registry path answer as its uid does (each item echoing it).
        for name in ["app", "acme/app", &format!("{org}/app")] {
            let (status, by_name) = s
                .get(&format!(
                    "/registry/v1/vuln_reports/counts?repo={}&tag=v1&{range}",
                    common::enc(name)
                ))
                .await;
            assert_eq!(status, StatusCode::OK, "[{b}] {name}: {by_name}");
            let items = by_name["items"].as_array().unwrap();
            assert_eq!(items.len(), 2, "[{b}] {name}: {by_name}");
            assert_eq!(items[0]["repo"], name, "[{b}]");
            assert_eq!(
                ids(&items[0], "cveIds"),
                ids(&counts["items"][0], "cveIds"),
                "[{b}] {name}"
            );
        }
        let (status, none) = s
            .get(&format!("/registry/v1/vuln_reports/counts?repo=nope&tag=v1&{range}"))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] {none}");
        let by_path = common::enc(&json!({"repo": "acme/app", "tags": ["v1"]}).to_string());
        let (status, r) = s
            .get(&format!(
                "/advisory/v2/images/resolvedVulns?imageRefs={by_path}&{times}"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {r}");
        assert_eq!(
            r["resolvedVulnsReports"][0]["resolvedVulns"][0]["id"], "CVE-2018-18074",
            "[{b}] {r}"
        );
        // The range the SDK marks REQUIRED is required; no tags is `latest`.
        for missing in [
            format!("imageRefs={refs}&startTime={}", rfc3339(day0)),
            format!("imageRefs={refs}&endTime={}", rfc3339(day0)),
        ] {
            let (status, r) = s.get(&format!("/advisory/v2/images/resolvedVulns?{missing}")).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "[{b}] {missing}: {r}");
        }
        let latest = common::enc(&json!({"repo": repo}).to_string());
        let (status, r) = s
            .get(&format!("/advisory/v2/images/resolvedVulns?imageRefs={latest}&{times}"))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] no `latest` tag yet: {r}");
        assert!(r.to_string().contains("latest"), "[{b}] {r}");
        let plain = layer(&[(
            &format!("{site}/urllib3-1.24.1.dist-info/METADATA"),
            &metadata("urllib3", "1.24.1"),
        )]);
        let l = push_layers(&s, "acme/app", "latest", &[plain]).await;
        assert_eq!(settled(&s, &s.token, &repo, &l).await.0, StatusCode::OK, "[{b}]");
        let (status, r) = s
            .get(&format!("/advisory/v2/images/resolvedVulns?imageRefs={latest}&{times}"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] `latest` now: {r}");

        // Another organization's owner sees neither.
        let other = common::uid(&s.create_group(None, "other").await);
        let (_, outsider) = common::person(&s, "outsider", &[(&other, "owner")]).await;
        let (status, _) = s
            .call_as(
                &outsider,
                Method::GET,
                &format!("/registry/v1/vuln_reports/counts?repo={repo}&tag=v1"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}]");
        let (status, _) = s
            .call_as(
                &outsider,
                Method::GET,
                &format!("/advisory/v2/images/resolvedVulns?imageRefs={refs}&{times}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}]");
        // A member of a team of acme cannot see the repo: its name or path
        // is as absent as one naming nothing (no uid in the answer).
        let team = common::uid(&s.create_group(Some(&org), "team").await);
        let (_, member) = common::person(&s, "member", &[(&team, "viewer")]).await;
        for name in ["app", "acme/app"] {
            let (status, body) = s
                .call_as(
                    &member,
                    Method::GET,
                    &format!(
                        "/registry/v1/vuln_reports/counts?repo={}&tag=v1&{range}",
                        common::enc(name)
                    ),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] {name}: {body}");
            assert!(
                !body.to_string().contains(&repo),
                "[{b}] {name} names the repo's uid: {body}"
            );
        }
        // Nor by its name: the outsider's organizations have no `app`.
        let (status, _) = s
            .call_as(
                &outsider,
                Method::GET,
                &format!("/registry/v1/vuln_reports/counts?repo=app&tag=v1&{range}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}]");
        let (status, _) = s
            .call_as(
                "",
                Method::GET,
                &format!("/advisory/v2/images/resolvedVulns?imageRefs={refs}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "[{b}]");
    }
}

/// An SPDX 2.3 document as syft writes one (pretty-printed, with a root
/// package describing the image and file-less packages with purls).
const SPDX: &str = r#"{
 "spdxVersion": "SPDX-2.3",
 "dataLicense": "CC0-1.0",
 "SPDXID": "SPDXRef-DOCUMENT",
 "name": "acme/app",
 "documentNamespace": "https://anchore.com/syft/image/acme-app-0b6b1a0a",
 "creationInfo": {
  "licenseListVersion": "3.25",
  "creators": ["Organization: Anchore, Inc", "Tool: syft-1.18.1"],
  "created": "2025-01-07T10:00:00Z"
 },
 "packages": [
  {
   "name": "acme/app",
   "SPDXID": "SPDXRef-DocumentRoot-Image-acme-app",
   "versionInfo": "sha256:0b6b",
   "downloadLocation": "NOASSERTION",
   "primaryPackagePurpose": "CONTAINER"
  },
  {
   "name": "requests",
   "SPDXID": "SPDXRef-Package-python-requests-1",
   "versionInfo": "2.19.0",
   "downloadLocation": "NOASSERTION",
   "licenseConcluded": "NOASSERTION",
   "licenseDeclared": "Apache-2.0",
   "externalRefs": [
    {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:pypi/requests@2.19.0"}
   ]
  }
 ],
 "relationships": [
  {"spdxElementId": "SPDXRef-DOCUMENT", "relatedSpdxElement": "SPDXRef-DocumentRoot-Image-acme-app", "relationshipType": "DESCRIBES"}
 ]
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_spdx_sbom_is_read_and_returned_byte_for_byte() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        import_requests_record(&s, &org).await;
        // The layers hold nothing; the SBOM says what is inside.
        let empty = layer(&[("etc/hostname", b"app\n")]);
        let digest = push_layers(&s, "acme/app", "v1", &[empty]).await;
        let repo = repo_uid(&s, &org, "app").await;
        let (status, report) = settled(&s, &s.token, &repo, &digest).await;
        assert_eq!((status, pairs(&report).len()), (StatusCode::OK, 0), "[{b}] {report}");
        let sbom_digest = push_referrer(&s, "acme/app", &digest, "application/spdx+json", SPDX.as_bytes()).await;
        let sbom_path = format!("/registry/v1/repos/{repo}/digests/{digest}/sbom");
        let sbom = until(&s, &sbom_path, "the SPDX inventory", |v| v["source"] == "INGESTED").await;
        assert_eq!(sbom["format"], "spdx-2.3", "[{b}] {sbom}");
        assert_eq!(sbom["tool"], "syft-1.18.1", "[{b}] {sbom}");
        let nodes = sbom["graph"]["nodes"].as_array().unwrap();
        assert_eq!(
            nodes.len(),
            1,
            "[{b}] the image's own root package is no package: {sbom}"
        );
        assert_eq!(nodes[0]["package"]["license"], "Apache-2.0", "[{b}]");
        let (status, raw) = s
            .get(&format!("/registry/v1/repos/{repo}/digest/{digest}/rawsbom"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {raw}");
        assert_eq!(raw["rawSbom"].as_str().unwrap(), SPDX, "[{b}] byte for byte");
        until(
            &s,
            &format!("/registry/v1/repos/{repo}/digests/{digest}/vulnreport"),
            "the SBOM's report",
            |r| pairs(r) == BTreeSet::from([("CVE-2018-18074".to_owned(), "pkg:pypi/requests@2.19.0".to_owned())]),
        )
        .await;
        // The config, as clients see it.
        let (status, config) = s
            .get(&format!("/registry/v1/repos/{repo}/digests/{digest}/imageconfig"))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {config}");
        assert_eq!(config["user"], "65532", "[{b}] {config}");
        // `arch` names the platform: this image's, or an error (so does
        // GetSbom's); the SBOM's own manifest is no image.
        let (status, _) = s
            .get(&format!(
                "/registry/v1/repos/{repo}/digests/{digest}/imageconfig?arch=amd64"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        for path in [
            format!("/registry/v1/repos/{repo}/digests/{digest}/imageconfig?arch=arm64"),
            format!("/registry/v1/repos/{repo}/digests/{digest}/sbom?arch=arm64"),
        ] {
            let (status, body) = s.get(&path).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "[{b}] {path}: {body}");
            assert!(body.to_string().contains("arch"), "[{b}] {body}");
        }
        // The scanner and time a report is asked of: Ward's own, current.
        let (status, list) = s
            .get(&format!(
                "/registry/v1/vuln_reports?repo_id={repo}&digest={digest}&scanner.name=GRYPE"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {list}");
        assert_eq!(list["items"], json!([]), "[{b}] no Grype report: {list}");
        let raw = format!("/registry/v1/vuln_reports/raw?repo_id={repo}&digest={digest}");
        let (status, _) = s.get(&format!("{raw}&scanner=TRIVY")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}]");
        let (status, body) = s.get(&format!("{raw}&createdAt=1970-01-01T00:00:01Z")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] {body}");
        let now = rfc3339(s.clock.now_millis() + 1000);
        let (status, body) = s.get(&format!("{raw}&createdAt={now}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let (status, body) = s
            .get(&format!("/registry/v1/repos/{repo}/digests/{sbom_digest}/imageconfig"))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "[{b}] {body}");
        assert!(body.to_string().contains("NOT_AN_IMAGE"), "[{b}] {body}");
        // A config that is no JSON is said so, not shown as an empty one.
        let junk = b"not a config";
        let c = common::push_blob(&s, "acme/app", junk).await;
        let m = json!({
            "schemaVersion": 2, "mediaType": MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": c, "size": junk.len()},
            "layers": [],
        });
        let bad = common::push_manifest(&s, "acme/app", "junk", MANIFEST, &m).await;
        let (status, body) = s
            .get(&format!("/registry/v1/repos/{repo}/digests/{bad}/imageconfig"))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "[{b}] {body}");
        assert!(body.to_string().contains("CONFIG_NOT_JSON"), "[{b}] {body}");
    }
}

/// A client made as SDK users make theirs: Python stubs generated by
/// grpcio-tools from the protos, over gRPC, and the same calls over REST
/// parsed strictly into the same messages (`tests/fixtures/stub_client.py`).
#[tokio::test(flavor = "multi_thread")]
async fn python_grpc_stubs_read_reports_and_manage_subscriptions() {
    let Some((python, stubs)) = common::stubs::generate().await else {
        return;
    };
    for db in ward_store::testing::backends().await {
        // `--dev`: a plain-http sink on loopback is allowed.
        let s = TestServer::start_with(db, |c| c.dev = true).await;
        let b = s.backend;
        let start = s.clock.now_millis();
        let org = common::uid(&s.create_group(None, "acme").await);
        let (repo, digest) = requests_image(&s, &org).await;
        let time = |ms: i64| serde_json::to_value(ward_proto::Timestamp::from_millis(ms)).unwrap();
        let args = json!({
            "grpc": s.addr().to_string(), "rest": s.base, "token": s.token,
            "org": org, "repo": repo, "digest": digest, "tag": "v1",
            "missing": common::sha256(b"no such image"),
            "cve": "CVE-2018-18074", "alias": "GHSA-x84v-xcm2-53pg", "fixed": "2.20.0",
            "from": time(start - 86_400_000), "to": time(s.clock.now_millis() + 1_000),
            "sink": "http://127.0.0.1:9/hook",
        });
        let checks = common::stubs::run_client(&python, &stubs, &args).await;
        eprintln!("[{b}] the stub client made {} checks", checks.len());
        assert!(checks.len() >= 30, "[{b}] every check ran: {checks:?}");
    }
}
