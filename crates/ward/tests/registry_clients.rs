//! Real registry clients against Ward's OCI registry (`/v2/`, same port as the
//! API), on every backend: skopeo copies a two-layer OCI-layout image in and
//! out byte for byte (admin token, pull token, credential helper), and oras-py
//! pushes an artifact plus a referrer (`subject`) that the referrers API lists.
//!
//! Needs `skopeo` on PATH and a Python venv with `oras` at `$WARD_TEST_VENV`
//! (default `target/ward-venv`):
//!   apt-get install skopeo && python3 -m venv target/ward-venv && target/ward-venv/bin/pip install oras
//! Without them each test prints a note and passes, unless
//! `WARD_TEST_REQUIRE_CLIENTS=1` (CI), where it fails.
//! Every client runs with HOME, XDG_RUNTIME_DIR, DOCKER_CONFIG and
//! REGISTRY_AUTH_FILE in a temporary directory: the real home is never read.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::TestServer;
use common::clients::{Sandbox, Tools, host, run};
use reqwest::StatusCode;
use serde_json::{Value, json};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// The referrer's config media type, so its `artifactType` in listings.
const SIG_TYPE: &str = "application/vnd.ward.test.signature.v1+json";

/// `mklayout.py DIR TAG`: an OCI image layout with a config and two gzip'ed tar
/// layers, deterministic bytes; prints the manifest digest.
const MKLAYOUT_PY: &str = r##"
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
layers = [layer([("hello.txt", b"hello from layer one\n")]), layer([("data/two.bin", bytes(range(256)) * 64)])]
config = {"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/bin/true"]},
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

/// `oras_check.py HOST REPO USER PASSWORD WORKDIR`: with oras-py, push a file
/// artifact to REPO:v1, a referrer to it (`subject`) as REPO:v1-sig, pull v1
/// back; prints a JSON summary on its last line. USER "-": no credentials
/// given, oras-py finds them in ~/.docker/config.json (credHelpers).
const ORAS_PY: &str = r##"
import hashlib, json, os, sys
import oras.client, oras.oci, requests
host, repo, user, password, work = sys.argv[1:6]
os.chdir(work)
# oras-py's basic backend (credentials given, or from the Docker config and
# its credential helper): Ward takes Basic credentials at /v2/ as they are.
# (oras-py's token backend keeps the token of its first request and, when a
# push after its pull check is re-challenged with 401 insufficient_scope,
# sends that token again instead of asking for a wider one, as it would
# against distribution.)
backend = "basic"
client = oras.client.OrasClient(hostname=host, insecure=True, auth_backend=backend)
if user != "-":
    client.auth.set_basic_auth(user, password)
content = b"ward artifact \x00\x01\x02 " * 100
open("artifact.bin", "wb").write(content)
client.push(target=f"{host}/{repo}:v1", files=["artifact.bin:application/vnd.ward.test.file"], quiet=True)
accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
man = client.do_request(f"http://{host}/v2/{repo}/manifests/v1", "GET", headers=dict(accept))
assert man.status_code == 200, (man.status_code, man.text)
digest = "sha256:" + hashlib.sha256(man.content).hexdigest()
assert man.headers.get("Docker-Content-Digest", digest) == digest, dict(man.headers)
open("sig.json", "w").write('{"signed":"v1"}')
subject = oras.oci.Subject(mediaType=man.json()["mediaType"], digest=digest, size=len(man.content))
put = client.push(target=f"{host}/{repo}:v1-sig", files=["sig.json:application/vnd.ward.test.sig"],
                  manifest_config="sig.json:application/vnd.ward.test.signature.v1+json",
                  manifest_annotations={"dev.ward.test.kind": "signature"}, subject=subject, quiet=True)
ref = client.do_request(f"http://{host}/v2/{repo}/manifests/v1-sig", "GET", headers=dict(accept))
assert ref.status_code == 200 and ref.json()["subject"]["digest"] == digest, ref.text
os.mkdir("out")
files = client.pull(target=f"{host}/{repo}:v1", outdir="out")
assert [os.path.basename(f) for f in files] == ["artifact.bin"], files
assert open(files[0], "rb").read() == content, "pulled content differs"
tags = client.get_tags(f"{host}/{repo}")
assert sorted(tags) == ["v1", "v1-sig"], tags
print(json.dumps({"subject": digest, "referrer": "sha256:" + hashlib.sha256(ref.content).hexdigest(),
                  "ociSubject": put.headers.get("OCI-Subject"), "backend": backend}))
"##;

impl Sandbox {
    /// The sandbox's test image, pushed by skopeo to `reference` (host/repo:tag).
    async fn push_image(&self, tools: &Tools, reference: &str, token: &str) {
        self.image(tools, "image").await;
        let creds = format!("_token:{token}");
        let dest = format!("docker://{reference}");
        let args = [
            "copy",
            "--dest-tls-verify=false",
            "--dest-creds",
            &creds,
            &self.oci("image"),
            &dest,
        ];
        run(self.skopeo(tools, &args), None, "push").await.ok("push");
    }

    /// Writes the test image layout at `rel` (tag `v1`); returns its manifest digest.
    async fn image(&self, tools: &Tools, rel: &str) -> String {
        let script = self.path("mklayout.py");
        std::fs::write(&script, MKLAYOUT_PY).expect("write mklayout.py");
        let mut cmd = self.command(&tools.python);
        cmd.arg(&script).arg(self.path(rel)).arg("v1");
        let digest = run(cmd, None, "mklayout.py").await.ok("mklayout.py").trim().to_owned();
        assert!(digest.starts_with("sha256:"), "mklayout.py printed {digest}");
        digest
    }

    /// `oci:<sandbox>/<rel>:v1`.
    fn oci(&self, rel: &str) -> String {
        format!("oci:{}:v1", self.path(rel).display())
    }

    /// Runs oras_check.py in a fresh work directory `rel`; returns its summary.
    async fn oras(&self, tools: &Tools, host: &str, repo: &str, user: &str, password: &str, rel: &str) -> Value {
        self.oras_with(tools, host, repo, user, password, rel, |_| {}).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn oras_with(
        &self,
        tools: &Tools,
        host: &str,
        repo: &str,
        user: &str,
        password: &str,
        rel: &str,
        env: impl FnOnce(&mut tokio::process::Command),
    ) -> Value {
        let script = self.path("oras_check.py");
        std::fs::write(&script, ORAS_PY).expect("write oras_check.py");
        let work = self.path(rel);
        std::fs::create_dir(&work).expect("oras work dir");
        let mut cmd = self.command(&tools.python);
        cmd.arg(&script).args([host, repo, user, password]).arg(&work);
        env(&mut cmd);
        let result = run(cmd, None, "oras_check.py").await;
        let out = result.ok("oras_check.py");
        let last = out.lines().last().unwrap_or_default();
        serde_json::from_str(last).unwrap_or_else(|e| panic!("oras_check.py printed non-JSON ({e}): {out}"))
    }
}

/// A fresh root organization named `acme`; returns its uid.
async fn org(s: &TestServer) -> String {
    let (status, body) = s.post("/iam/v2/groups", json!({ "name": "acme" })).await;
    assert_eq!(status, StatusCode::OK, "[{}] create acme: {body}", s.backend);
    let uid = common::uid(&body);
    assert!(common::is_hex(&uid, 40), "[{}] org uid {uid}", s.backend);
    uid
}

/// The blobs of an OCI layout, by file name (the digest's hex).
fn blobs(layout: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(layout.join("blobs/sha256"))
        .unwrap_or_else(|e| panic!("{}: {e}", layout.display()))
        .map(|entry| {
            let entry = entry.expect("dir entry");
            let bytes = std::fs::read(entry.path()).expect("blob read");
            (entry.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

/// Asserts the layout `got` holds exactly the blobs of `want`, byte for byte,
/// with `manifest` as its one image.
fn assert_same_image(backend: &str, want: &Path, got: &Path, manifest: &str) {
    let (want_blobs, got_blobs) = (blobs(want), blobs(got));
    assert_eq!(
        want_blobs.keys().collect::<Vec<_>>(),
        got_blobs.keys().collect::<Vec<_>>(),
        "[{backend}] blob sets of {} and {}",
        want.display(),
        got.display()
    );
    for (name, bytes) in &want_blobs {
        assert!(got_blobs[name] == *bytes, "[{backend}] blob {name} differs");
    }
    let index: Value = serde_json::from_slice(&std::fs::read(got.join("index.json")).expect("index.json"))
        .expect("index.json is JSON");
    assert_eq!(index["manifests"][0]["digest"], manifest, "[{backend}] {index}");
}

/// GET `path` on the server with `token` as Bearer; status, headers, body bytes.
async fn get_raw(s: &TestServer, path: &str, accept: &str) -> (StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let resp = s
        .http
        .get(format!("{}{path}", s.base))
        .bearer_auth(&s.token)
        .header("Accept", accept)
        .send()
        .await
        .expect("request sent");
    let (status, headers) = (resp.status(), resp.headers().clone());
    (status, headers, resp.bytes().await.expect("body").to_vec())
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn skopeo_copies_an_image_in_and_out_byte_for_byte() {
    let Some(tools) = Tools::find() else { return };
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let org = org(&s).await;
        let host = host(&s);
        let manifest = sb.image(&tools, "image").await;
        let image = sb.oci("image");
        let creds = format!("_token:{}", s.token);
        let creds = creds.as_str();

        // Pushing creates the repository. The second push finds the layers
        // through skopeo's blob cache and tries cross-repository mounts first.
        for repo in ["app", "app-copy"] {
            let dest = format!("docker://{host}/{org}/{repo}:v1");
            let args = [
                "copy",
                "--preserve-digests",
                "--dest-tls-verify=false",
                "--dest-creds",
                creds,
                &image,
                &dest,
            ];
            let what = format!("push {repo}");
            run(sb.skopeo(&tools, &args), None, &what).await.ok(&what);
        }

        // Back out of both repositories, and by the organization's name.
        for (src, out) in [
            (format!("{org}/app"), "out-app"),
            (format!("{org}/app-copy"), "out-copy"),
            ("acme/app".to_owned(), "out-by-name"),
        ] {
            let from = format!("docker://{host}/{src}:v1");
            let to = sb.oci(out);
            let args = [
                "copy",
                "--preserve-digests",
                "--src-tls-verify=false",
                "--src-creds",
                creds,
                &from,
                &to,
            ];
            let what = format!("pull {src}");
            run(sb.skopeo(&tools, &args), None, &what).await.ok(&what);
            assert_same_image(b, &sb.path("image"), &sb.path(out), &manifest);
        }

        // The registry serves the manifest's own bytes, with its digest and type.
        let (status, headers, body) = get_raw(&s, &format!("/v2/{org}/app/manifests/v1"), OCI_MANIFEST).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {}", String::from_utf8_lossy(&body));
        let hex = manifest.strip_prefix("sha256:").expect("sha256");
        assert!(body == blobs(&sb.path("image"))[hex], "[{b}] manifest bytes differ");
        assert_eq!(header(&headers, "docker-content-digest"), manifest, "[{b}] {headers:?}");
        assert_eq!(header(&headers, "content-type"), OCI_MANIFEST, "[{b}] {headers:?}");

        // Each skopeo push and pull is in the organization's event log, with
        // skopeo as the client (pulls are written in batches: poll).
        for (t, at_least) in [("push", 2), ("pull", 3)] {
            let mut by_skopeo = Vec::new();
            for _ in 0..50 {
                let (_, page) = s
                    .get(&format!(
                        "/events/v1/events?group={org}&types=dev.chainguard.registry.{t}.v1&pageSize=200"
                    ))
                    .await;
                by_skopeo = page["events"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| serde_json::from_str::<serde_json::Value>(e["body"].as_str().unwrap()).unwrap())
                    .filter(|body| body["user_agent"].as_str().is_some_and(|u| u.contains("skopeo")))
                    .collect();
                if by_skopeo.len() >= at_least {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            assert!(by_skopeo.len() >= at_least, "[{b}] skopeo's {t} events: {by_skopeo:?}");
            for body in &by_skopeo {
                assert_eq!(body["type"], "manifest", "[{b}] {body}");
                assert_eq!(body["remote_address"], "127.0.0.1", "[{b}] {body}");
            }
        }

        let repo = format!("docker://{host}/{org}/app");
        let args = ["list-tags", "--tls-verify=false", "--creds", creds, &repo];
        let tags = run(sb.skopeo(&tools, &args), None, "list-tags").await.json("list-tags");
        assert_eq!(tags["Tags"], json!(["v1"]), "[{b}] {tags}");

        // Without credentials nothing comes out.
        let from = format!("docker://{host}/{org}/app:v1");
        let to = sb.oci("out-anon");
        let args = ["copy", "--src-tls-verify=false", &from, &to];
        run(sb.skopeo(&tools, &args), None, "anonymous pull")
            .await
            .failed("anonymous pull");
    }
}

/// `skopeo delete` of a tag and of a digest (skopeo asks for
/// `repository:<name>:*`), and one skopeo process reusing its token across
/// pull, push and a mount within the registry (re-challenged for what its
/// first token lacks).
#[tokio::test(flavor = "multi_thread")]
async fn skopeo_deletes_tags_and_digests_and_copies_within_the_registry() {
    let Some(tools) = Tools::find() else { return };
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let org = org(&s).await;
        let host = host(&s);
        let manifest = sb.image(&tools, "image").await;
        let image = sb.oci("image");
        let creds = format!("_token:{}", s.token);
        let creds = creds.as_str();
        let push = |repo: &str| format!("docker://{host}/{org}/{repo}");
        let args = [
            "copy",
            "--dest-tls-verify=false",
            "--dest-creds",
            creds,
            &image,
            &format!("{}:v1", push("app")),
        ];
        run(sb.skopeo(&tools, &args), None, "push").await.ok("push");

        // One token, fetched once, reused by skopeo to pull, push and delete.
        let (status, token) = {
            let resp = reqwest::Client::new()
                .get(format!("{}/token", s.base))
                .query(&[
                    ("service", host.as_str()),
                    ("scope", &format!("repository:{org}/app:pull")),
                    ("scope", &format!("repository:{org}/app-one:pull,push,delete")),
                ])
                .basic_auth("_token", Some(&s.token))
                .send()
                .await
                .expect("token request");
            (resp.status(), resp.json::<Value>().await.unwrap_or_default())
        };
        assert_eq!(status, StatusCode::OK, "[{b}] {token}");
        let token = token["token"].as_str().expect("a token").to_owned();
        let one = format!("{}:v1", push("app-one"));
        let args = [
            "copy",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            "--src-registry-token",
            &token,
            "--dest-registry-token",
            &token,
            &format!("{}:v1", push("app")),
            &one,
        ];
        run(sb.skopeo(&tools, &args), None, "copy with one token")
            .await
            .ok("copy with one token");
        let args = ["delete", "--tls-verify=false", "--registry-token", &token, &one];
        run(sb.skopeo(&tools, &args), None, "delete with the same token")
            .await
            .ok("delete with the same token");
        let (status, _, _) = get_raw(&s, &format!("/v2/{org}/app-one/manifests/v1"), OCI_MANIFEST).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] deleted with the one token");

        // One process: pull from app, push to app-copy (mounting the blobs).
        let (from, to) = (format!("{}:v1", push("app")), format!("{}:v2", push("app-copy")));
        let args = [
            "copy",
            "--preserve-digests",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            "--src-creds",
            creds,
            "--dest-creds",
            creds,
            &from,
            &to,
        ];
        run(sb.skopeo(&tools, &args), None, "copy within")
            .await
            .ok("copy within");
        let (status, headers, _) = get_raw(&s, &format!("/v2/{org}/app-copy/manifests/v2"), OCI_MANIFEST).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(header(&headers, "docker-content-digest"), manifest, "[{b}]");

        // Delete by tag: the manifest goes, with every tag on it.
        let args = ["delete", "--tls-verify=false", "--creds", creds, &to];
        run(sb.skopeo(&tools, &args), None, "delete by tag")
            .await
            .ok("delete by tag");
        let (status, _, _) = get_raw(&s, &format!("/v2/{org}/app-copy/manifests/{manifest}"), OCI_MANIFEST).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] deleted by tag");

        // Delete by digest.
        let by_digest = format!("{}@{manifest}", push("app"));
        let args = ["delete", "--tls-verify=false", "--creds", creds, &by_digest];
        run(sb.skopeo(&tools, &args), None, "delete by digest")
            .await
            .ok("delete by digest");
        let (status, _, _) = get_raw(&s, &format!("/v2/{org}/app/manifests/v1"), OCI_MANIFEST).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "[{b}] deleted by digest");
    }
}

/// `program` (podman, buildah) on PATH, or None (a note) unless
/// WARD_TEST_REQUIRE_CLIENTS=1.
fn on_path(program: &str) -> Option<PathBuf> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var("WARD_TEST_REQUIRE_CLIENTS").as_deref() == Ok("1") {
            panic!("WARD_TEST_REQUIRE_CLIENTS=1 but {program} is not on PATH (apt-get install {program})");
        }
        eprintln!("note: {program} test skipped: {program} is not on PATH");
    }
    found
}

/// buildah (vfs storage in the sandbox) builds on an image pulled from Ward
/// and pushes the result back: `from` pulls through the token flow, `commit`
/// makes a new image with a label, `push` uploads its new layer and
/// manifest, which then reads back with the label.
#[tokio::test(flavor = "multi_thread")]
async fn buildah_builds_on_an_image_from_ward_and_pushes_the_result() {
    let Some(tools) = Tools::find() else { return };
    let Some(buildah) = on_path("buildah") else { return };
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let host = host(&s);
        let acme = org(&s).await;
        sb.push_image(&tools, &format!("{host}/{acme}/base:v1"), &s.token).await;
        let auth = sb.auth_file("auth.json", &host, &s.token);
        let buildah_cmd = |args: &[&str]| {
            let mut cmd = sb.containers(&buildah);
            cmd.args(args);
            cmd
        };
        let base = format!("{host}/{acme}/base:v1");
        let auth_arg = auth.display().to_string();
        let from = [
            "from",
            "--tls-verify=false",
            "--authfile",
            &auth_arg,
            "--name",
            "work",
            &base,
        ];
        run(buildah_cmd(&from), None, "buildah from").await.ok("buildah from");
        let label = ["config", "--label", "built-by=ward-test", "work"];
        run(buildah_cmd(&label), None, "buildah config")
            .await
            .ok("buildah config");
        let built = format!("{host}/{acme}/built:v1");
        run(buildah_cmd(&["commit", "work", &built]), None, "buildah commit")
            .await
            .ok("buildah commit");
        let push = ["push", "--tls-verify=false", "--authfile", &auth_arg, &built];
        run(buildah_cmd(&push), None, "buildah push").await.ok("buildah push");
        let (status, _, body) = get_raw(
            &s,
            &format!("/v2/{acme}/built/manifests/v1"),
            &format!("{OCI_MANIFEST}, application/vnd.docker.distribution.manifest.v2+json"),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "[{b}] pushed by buildah");
        let manifest: Value = serde_json::from_slice(&body).expect("manifest JSON");
        let config = manifest["config"]["digest"].as_str().expect("config digest");
        let (status, _, config) = get_raw(&s, &format!("/v2/{acme}/built/blobs/{config}"), "*/*").await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        let config: Value = serde_json::from_slice(&config).expect("config JSON");
        assert_eq!(config["config"]["Labels"]["built-by"], "ward-test", "[{b}] {config}");
    }
}

/// `podman search <host>/` and `<host>/<org>/` through the token flow
/// (`registry:catalog:*`): each person sees exactly the repositories they
/// may list, nothing of another organization. Then podman pulls and pushes
/// (vfs storage in the sandbox): a viewer pulls but may not push; an owner
/// pushes.
#[tokio::test(flavor = "multi_thread")]
async fn podman_search_lists_what_the_caller_may_see() {
    let Some(tools) = Tools::find() else { return };
    let Some(podman) = on_path("podman") else { return };
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let host = host(&s);
        let acme = org(&s).await;
        let (status, globex) = s.post("/iam/v2/groups", json!({ "name": "globex" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {globex}");
        let globex = common::uid(&globex);
        for (o, repo) in [(&acme, "app"), (&acme, "web"), (&globex, "secret")] {
            let (status, body) = s
                .post(&format!("/registry/v2/repos/{o}"), json!({ "name": repo }))
                .await;
            assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        }
        let (_, alice) = common::person(&s, "alice", &[(acme.as_str(), "viewer")]).await;
        let auth = sb.auth_file("auth.json", &host, &alice);
        for term in [format!("{host}/"), format!("{host}/{acme}/")] {
            let mut cmd = sb.containers(&podman);
            cmd.args([
                "search",
                "--tls-verify=false",
                "--limit",
                "100",
                "--format",
                "{{.Name}}",
                "--authfile",
            ])
            .arg(&auth)
            .arg(&term);
            let what = format!("podman search {term}");
            let out = run(cmd, None, &what).await;
            let names: BTreeSet<String> = out.ok(&what).lines().map(|l| l.trim().to_owned()).collect();
            let want: BTreeSet<String> = ["app", "web"].iter().map(|r| format!("{host}/{acme}/{r}")).collect();
            assert_eq!(names, want, "[{b}] {what}: only acme's repositories");
        }

        // An image in acme/app, pulled and pushed back with podman.
        sb.push_image(&tools, &format!("{host}/{acme}/app:v1"), &s.token).await;
        let podman_cmd = |auth: &Path, args: &[&str]| {
            let mut cmd = sb.containers(&podman);
            cmd.args(args).arg("--tls-verify=false").arg("--authfile").arg(auth);
            cmd
        };
        let (image, copy) = (format!("{host}/{acme}/app:v1"), format!("{host}/{acme}/copy:v1"));
        run(podman_cmd(&auth, &["pull", &image]), None, "podman pull")
            .await
            .ok("podman pull");
        let mut tag = sb.containers(&podman);
        tag.args(["tag", &image, &copy]);
        run(tag, None, "podman tag").await.ok("podman tag");
        run(podman_cmd(&auth, &["push", &copy]), None, "podman push as a viewer")
            .await
            .failed("podman push as a viewer");
        let owner_auth = sb.auth_file("owner.json", &host, &s.token);
        run(podman_cmd(&owner_auth, &["push", &copy]), None, "podman push")
            .await
            .ok("podman push");
        let (status, _, _) = get_raw(&s, &format!("/v2/{acme}/copy/manifests/v1"), OCI_MANIFEST).await;
        assert_eq!(status, StatusCode::OK, "[{b}] pushed by podman");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_tokens_pull_and_cannot_push() {
    let Some(tools) = Tools::find() else { return };
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let org = org(&s).await;
        let host = host(&s);
        let manifest = sb.image(&tools, "image").await;
        let image = sb.oci("image");
        let admin = format!("_token:{}", s.token);
        let dest = format!("docker://{host}/{org}/app:v1");
        let args = [
            "copy",
            "--preserve-digests",
            "--dest-tls-verify=false",
            "--dest-creds",
            &admin,
            &image,
            &dest,
        ];
        run(sb.skopeo(&tools, &args), None, "admin push").await.ok("admin push");

        let (api, token) = (s.base.as_str(), s.token.as_str());
        let args = [
            "registry",
            "pull-token",
            "create",
            "--api",
            api,
            "--group",
            &org,
            "-o",
            "json",
        ];
        let what = "ward registry pull-token create";
        let mut cmd = sb.ward(&args);
        cmd.env("WARD_TOKEN", token);
        let created = run(cmd, None, what).await.json(what);
        let user = created["username"].as_str().unwrap_or_default();
        let password = created["password"].as_str().unwrap_or_default();
        assert!(!user.is_empty() && !password.is_empty(), "[{b}] {created}");
        assert!(created["expireTime"].is_string(), "[{b}] {created}");
        let creds = format!("{user}:{password}");

        let out = sb.oci("out");
        let args = [
            "copy",
            "--preserve-digests",
            "--src-tls-verify=false",
            "--src-creds",
            &creds,
            &dest,
            &out,
        ];
        run(sb.skopeo(&tools, &args), None, "pull-token pull")
            .await
            .ok("pull-token pull");
        assert_same_image(b, &sb.path("image"), &sb.path("out"), &manifest);

        // Neither a new tag, a new repository, nor re-putting the same tag.
        for target in ["app:v2", "other:v1", "app:v1"] {
            let to = format!("docker://{host}/{org}/{target}");
            let args = [
                "copy",
                "--preserve-digests",
                "--dest-tls-verify=false",
                "--dest-creds",
                &creds,
                &image,
                &to,
            ];
            let what = format!("pull-token push to {target}");
            run(sb.skopeo(&tools, &args), None, &what).await.failed(&what);
        }
        for path in ["app/manifests/v2", "other/manifests/v1"] {
            let (status, _, body) = get_raw(&s, &format!("/v2/{org}/{path}"), OCI_MANIFEST).await;
            assert_eq!(
                status,
                StatusCode::NOT_FOUND,
                "[{b}] {path}: {}",
                String::from_utf8_lossy(&body)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn oras_pushes_an_artifact_and_a_referrer() {
    let Some(tools) = Tools::find() else { return };
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let org = org(&s).await;
        let repo = format!("{org}/artifacts");
        let out = sb.oras(&tools, &host(&s), &repo, "_token", &s.token, "oras").await;
        let subject = out["subject"].as_str().expect("subject");
        let referrer = out["referrer"].as_str().expect("referrer");
        // OCI 1.1: a registry that processed `subject` says so on the PUT.
        assert_eq!(out["ociSubject"], subject, "[{b}] {out}");

        let referrers = |filter: &str| format!("/v2/{repo}/referrers/{subject}{filter}");
        let (status, headers, body) = get_raw(&s, &referrers(""), OCI_INDEX).await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(status, StatusCode::OK, "[{b}] {text}");
        assert!(
            header(&headers, "content-type").starts_with(OCI_INDEX),
            "[{b}] {headers:?}"
        );
        let index: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("[{b}] {e}: {text}"));
        assert_eq!(index["schemaVersion"], 2, "[{b}] {index}");
        assert_eq!(index["mediaType"], OCI_INDEX, "[{b}] {index}");
        let listed = index["manifests"].as_array().expect("manifests");
        assert_eq!(listed.len(), 1, "[{b}] {index}");
        assert_eq!(listed[0]["digest"], referrer, "[{b}] {index}");
        assert_eq!(listed[0]["mediaType"], OCI_MANIFEST, "[{b}] {index}");
        assert_eq!(listed[0]["artifactType"], SIG_TYPE, "[{b}] {index}");
        assert!(listed[0]["size"].as_u64().is_some_and(|n| n > 0), "[{b}] {index}");
        assert_eq!(
            listed[0]["annotations"]["dev.ward.test.kind"], "signature",
            "[{b}] {index}"
        );

        // Filtering by artifactType, where the registry says it filtered.
        let (status, _, body) = get_raw(
            &s,
            &referrers(&format!("?artifactType={}", common::enc(SIG_TYPE))),
            OCI_INDEX,
        )
        .await;
        let index: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(status, StatusCode::OK, "[{b}] {index}");
        assert_eq!(index["manifests"][0]["digest"], referrer, "[{b}] {index}");
        let other = format!("?artifactType={}", common::enc("application/vnd.ward.test.other"));
        let (status, headers, body) = get_raw(&s, &referrers(&other), OCI_INDEX).await;
        let index: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(status, StatusCode::OK, "[{b}] {index}");
        if header(&headers, "oci-filters-applied").contains("artifactType") {
            assert_eq!(index["manifests"], json!([]), "[{b}] {index}");
        }

        // No referrers: an empty index, not an error, known digest or not.
        let nothing = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        for digest in [referrer, nothing] {
            let (status, _, body) = get_raw(&s, &format!("/v2/{repo}/referrers/{digest}"), OCI_INDEX).await;
            let text = String::from_utf8_lossy(&body);
            assert_eq!(status, StatusCode::OK, "[{b}] {digest}: {text}");
            let index: Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("[{b}] {e}: {text}"));
            assert_eq!(index["manifests"], json!([]), "[{b}] {digest}: {index}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn credential_helper_serves_skopeo_and_oras() {
    let Some(tools) = Tools::find() else { return };
    for s in common::servers().await {
        let b = s.backend;
        let sb = Sandbox::new();
        let org = org(&s).await;
        let host = host(&s);
        let manifest = sb.image(&tools, "image").await;
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ward"), sb.path("bin/docker-credential-ward"))
            .expect("helper symlink");
        let with_ward = |mut cmd: tokio::process::Command, token: &str| {
            cmd.env("WARD_API", &s.base).env("WARD_TOKEN", token);
            cmd
        };

        // Explicit locations, each with entries of its own that must survive.
        let docker_config = sb.path("docker/config.json");
        let auth_file = sb.path("auth.json");
        std::fs::create_dir(sb.path("docker")).expect("docker dir");
        let others = json!({ "registry.example:5000": { "auth": "dXNlcjpwYXNz" } });
        let before_docker = json!({ "auths": others, "credHelpers": { "gcr.io": "gcloud" } });
        std::fs::write(&docker_config, before_docker.to_string()).expect("docker config");
        std::fs::write(&auth_file, json!({ "auths": others }).to_string()).expect("auth file");
        let explicit = |mut cmd: tokio::process::Command| {
            cmd.env("DOCKER_CONFIG", sb.path("docker"))
                .env("REGISTRY_AUTH_FILE", &auth_file);
            cmd
        };
        let read = |p: &Path| -> Value {
            serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let configure = ["auth", "configure-docker", "--registry", &host];
        for attempt in ["configure-docker", "configure-docker again"] {
            let cmd = explicit(with_ward(sb.ward(&configure), &s.token));
            run(cmd, None, attempt).await.ok(attempt);
            let docker = read(&docker_config);
            assert_eq!(docker["credHelpers"][&host], "ward", "[{b}] {attempt}: {docker}");
            assert_eq!(docker["credHelpers"]["gcr.io"], "gcloud", "[{b}] {attempt}: {docker}");
            assert_eq!(docker["auths"], others, "[{b}] {attempt}: {docker}");
            let containers = read(&auth_file);
            assert_eq!(
                containers["credHelpers"][&host], "ward",
                "[{b}] {attempt}: {containers}"
            );
            assert_eq!(containers["auths"], others, "[{b}] {attempt}: {containers}");
        }

        // The helper protocol itself: the server on stdin, credentials out.
        let mut helper = with_ward(sb.command(sb.path("bin/docker-credential-ward")), &s.token);
        helper.arg("get");
        let creds = run(helper, Some(&host), "docker-credential-ward get")
            .await
            .json("docker-credential-ward get");
        assert!(
            creds["Username"].as_str().is_some_and(|u| !u.is_empty()),
            "[{b}] {creds}"
        );
        assert!(creds["Secret"].as_str().is_some_and(|p| !p.is_empty()), "[{b}] {creds}");
        // Any other host that asks gets nothing: not the token.
        for other in ["example.org", "https://example.org/v1/", "registry.example:5000"] {
            let mut helper = explicit(with_ward(sb.command(sb.path("bin/docker-credential-ward")), &s.token));
            helper.arg("get");
            let ran = run(helper, Some(other), "docker-credential-ward get, another host").await;
            ran.failed("docker-credential-ward get, another host");
            assert_eq!(
                ran.stdout.trim(),
                "credentials not found in native keychain",
                "[{b}] {other}: the protocol's answer, and no token"
            );
            assert!(!ran.stdout.contains(&s.token), "[{b}] {other}");
        }

        // skopeo with no credentials of its own: the auth file names the helper.
        let (image, dest) = (sb.oci("image"), format!("docker://{host}/{org}/helper:v1"));
        let (out, out_bad, out_default) = (sb.oci("out"), sb.oci("out-bad"), sb.oci("out-default"));
        let push = ["copy", "--preserve-digests", "--dest-tls-verify=false", &image, &dest];
        let cmd = explicit(with_ward(sb.skopeo(&tools, &push), &s.token));
        run(cmd, None, "helper push").await.ok("helper push");
        let pull = ["copy", "--preserve-digests", "--src-tls-verify=false", &dest, &out];
        let cmd = explicit(with_ward(sb.skopeo(&tools, &pull), &s.token));
        run(cmd, None, "helper pull").await.ok("helper pull");
        assert_same_image(b, &sb.path("image"), &sb.path("out"), &manifest);
        // The helper passes on what it has: with a bad token the pull fails.
        let pull = ["copy", "--src-tls-verify=false", &dest, &out_bad];
        let cmd = explicit(with_ward(sb.skopeo(&tools, &pull), "not-a-ward-token"));
        run(cmd, None, "helper pull, bad token")
            .await
            .failed("helper pull, bad token");

        // Default locations: ~/.docker/config.json and
        // $XDG_RUNTIME_DIR/containers/auth.json (both inside the sandbox).
        let cmd = with_ward(sb.ward(&configure), &s.token);
        run(cmd, None, "configure-docker, defaults")
            .await
            .ok("configure-docker, defaults");
        for file in ["home/.docker/config.json", "xdg/containers/auth.json"] {
            let config = read(&sb.path(file));
            assert_eq!(config["credHelpers"][&host], "ward", "[{b}] {file}: {config}");
        }
        let pull = [
            "copy",
            "--preserve-digests",
            "--src-tls-verify=false",
            &dest,
            &out_default,
        ];
        let cmd = with_ward(sb.skopeo(&tools, &pull), &s.token);
        run(cmd, None, "helper pull, defaults")
            .await
            .ok("helper pull, defaults");
        assert_same_image(b, &sb.path("image"), &sb.path("out-default"), &manifest);

        // oras-py reads ~/.docker/config.json and runs the helper too.
        let token = s.token.clone();
        let base = s.base.clone();
        let out = sb
            .oras_with(
                &tools,
                &host,
                &format!("{org}/helper-artifacts"),
                "-",
                "-",
                "oras",
                |cmd| {
                    cmd.env("WARD_API", base).env("WARD_TOKEN", token);
                },
            )
            .await;
        assert!(
            out["subject"].as_str().is_some_and(|d| d.starts_with("sha256:")),
            "[{b}] {out}"
        );
    }
}
