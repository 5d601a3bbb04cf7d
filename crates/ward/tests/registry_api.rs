//! The registry API (`/registry/v2/…` over REST and gRPC, and `ward registry`):
//! repos, readmes, tags and images, on every backend, with content pushed
//! through the OCI endpoint so that both views are checked against each other.

mod common;

use common::{Bearer, TestServer, assert_error, field_violations, push_blob, push_manifest, servers, sha256, uid};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tonic::transport::Channel;
use ward_proto::registry::v2::images_service_client::ImagesServiceClient;
use ward_proto::registry::v2::repos_service_client::ReposServiceClient;
use ward_proto::registry::v2::{GetArchitecturesRequest, GetRepoRequest, ListReposRequest};
use ward_proto::registry::v2beta1::tags_service_client::TagsServiceClient as BetaTags;

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// An image of `arch` with a config and one layer; (digest, config+layer size).
async fn push_image(s: &TestServer, name: &str, tag: &str, arch: &str) -> (String, i64) {
    let config = json!({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}});
    let config = serde_json::to_vec(&config).unwrap();
    let layer = format!("layer of {arch} {tag} {}", rand::random::<u64>()).into_bytes();
    let (c, l) = (push_blob(s, name, &config).await, push_blob(s, name, &layer).await);
    let m = json!({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": c, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": l, "size": layer.len()}],
    });
    let d = push_manifest(s, name, tag, MANIFEST, &m).await;
    (d, (config.len() + layer.len()) as i64)
}

/// HEAD of a manifest: status and `Docker-Content-Digest`.
async fn served(s: &TestServer, name: &str, reference: &str) -> (u16, Option<String>) {
    let r = s
        .http
        .head(format!("{}/v2/{name}/manifests/{reference}", s.base))
        .bearer_auth(&s.token)
        .send()
        .await
        .unwrap();
    let d = r
        .headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (r.status().as_u16(), d)
}

async fn repo_by_name(s: &TestServer, org: &str, name: &str) -> Value {
    let (st, body) = s
        .get(&format!(
            "/registry/v2/repos?name={}&uidp.descendantsOf={org}",
            common::enc(name)
        ))
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    body["repos"][0].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn repos_crud_validation_and_uniqueness() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let other = uid(&s.create_group(None, "other").await);

        let (st, repo) = s
            .post(
                &format!("/registry/v2/repos/{team}"),
                json!({"name": "tools/builder", "description": "Builds", "catalogTier": "CATALOG_TIER_BASE",
                       "bundles": ["base", "fips"], "aliases": ["docker.io/library/builder:latest"],
                       "activeTags": ["latest", "1.2"]}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {repo}");
        let ruid = uid(&repo);
        assert!(ruid.starts_with(&format!("{team}/")), "[{b}] {repo}");
        assert_eq!(repo["catalogTier"], "CATALOG_TIER_BASE");
        assert_eq!(repo["bundles"], json!(["base", "fips"]));
        assert!(repo["createTime"].is_string() && repo["updateTime"].is_string());

        // Every violation in one BadRequest.
        let (st, body) = s
            .post(
                &format!("/registry/v2/repos/{org}"),
                json!({"name": "Bad Name", "bundles": ["nope"], "aliases": ["noalias"], "activeTags": ["-x"]}),
            )
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        let fields: Vec<String> = field_violations(&body).into_iter().map(|(f, _)| f).collect();
        for f in ["name", "bundles", "aliases", "active_tags"] {
            assert!(fields.iter().any(|x| x == f), "[{b}] {f} missing in {body}");
        }

        let (st, body) = s
            .post(
                &format!("/registry/v2/repos/{org}"),
                json!({"name": "x", "catalogTier": 99}),
            )
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");

        // Names are unique within the organization, not across them.
        let (st, body) = s
            .post(&format!("/registry/v2/repos/{org}"), json!({"name": "tools/builder"}))
            .await;
        assert_error(b, st, &body, 409, 6, "ALREADY_EXISTS");
        let (st, _) = s
            .post(&format!("/registry/v2/repos/{other}"), json!({"name": "tools/builder"}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}]");

        // Get, list (name, uidp), update with a mask, rename conflict.
        let (st, got) = s.get(&format!("/registry/v2/repos/{ruid}")).await;
        assert_eq!(
            (st, got["name"].clone()),
            (StatusCode::OK, json!("tools/builder")),
            "[{b}]"
        );
        let (_, list) = s.get(&format!("/registry/v2/repos?uidp.descendantsOf={org}")).await;
        assert_eq!(list["repos"].as_array().map(Vec::len), Some(1), "[{b}] {list}");
        assert_eq!(list["totalCount"], "1", "[{b}] {list}");
        let (_, list) = s.get("/registry/v2beta1/repos?name=tools%2Fbuilder").await;
        assert_eq!(list["repos"].as_array().map(Vec::len), Some(2), "[{b}] {list}");
        let (st, up) = s
            .patch(
                &format!("/registry/v2/repos/{ruid}?update_mask=description"),
                json!({"description": "Builds things", "name": "ignored"}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {up}");
        assert_eq!(
            (up["description"].clone(), up["name"].clone()),
            (json!("Builds things"), json!("tools/builder"))
        );
        let (st, _) = s
            .post(&format!("/registry/v2/repos/{org}"), json!({"name": "taken"}))
            .await;
        assert_eq!(st, StatusCode::OK);
        let (st, body) = s
            .patch(&format!("/registry/v2/repos/{ruid}"), json!({"name": "taken"}))
            .await;
        assert_error(b, st, &body, 409, 6, "ALREADY_EXISTS");

        // A group holding repos cannot be deleted (the seed's exact text).
        let (st, body) = s.delete(&format!("/iam/v2/groups/{team}")).await;
        assert_error(b, st, &body, 400, 9, "FAILED_PRECONDITION");
        assert_eq!(
            body["message"], "Precondition failed: cannot delete group with child repos",
            "[{b}]"
        );
        assert!(body.to_string().contains("RESOURCE_NOT_EMPTY"), "[{b}] {body}");
        let (st, _) = s.delete(&format!("/registry/v2/repos/{ruid}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        let (st, body) = s.get(&format!("/registry/v2/repos/{ruid}")).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let (st, _) = s.delete(&format!("/iam/v2/groups/{team}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn readmes_are_sanitized() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let (_, repo) = s
            .post(&format!("/registry/v2/repos/{org}"), json!({"name": "app"}))
            .await;
        let ruid = uid(&repo);
        let (st, r) = s.get(&format!("/registry/v2/repos/{ruid}/readme")).await;
        assert_eq!((st, r["content"].clone()), (StatusCode::OK, json!("")), "[{b}] {r}");
        let md = "# App\n\nUse it <img src=x onerror=alert(1)> like this.\n\n<script>steal()</script>\n";
        let (st, r) = s
            .patch(&format!("/registry/v2/repos/{ruid}/readme"), json!({"content": md}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {r}");
        let stored = r["content"].as_str().unwrap_or_default().to_owned();
        assert!(stored.starts_with("# App\n\nUse it <img src=\"x\">"), "[{b}] {stored}");
        assert!(
            !stored.contains("onerror") && !stored.contains("steal"),
            "[{b}] {stored}"
        );
        let (_, again) = s.get(&format!("/registry/v2/repos/{ruid}/readme")).await;
        assert_eq!(again["content"], json!(stored));
        let (st, body) = s
            .patch(
                &format!("/registry/v2/repos/{ruid}/readme"),
                json!({"content": "[click](javascript:alert(1))"}),
            )
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tags_through_the_api_are_what_the_registry_serves() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let name = format!("{org}/app");
        let (d1, _) = push_image(&s, &name, "v1", "amd64").await;
        let (d2, _) = push_image(&s, &name, "v2", "amd64").await;
        let repo = repo_by_name(&s, &org, "app").await;
        let ruid = uid(&repo);

        // Create through the API; the registry serves it.
        let (st, tag) = s
            .post(
                &format!("/registry/v2/tags/{ruid}"),
                json!({"name": "stable", "digest": d1}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {tag}");
        let tuid = uid(&tag);
        assert_eq!(served(&s, &name, "stable").await, (200, Some(d1.clone())), "[{b}]");

        // Re-pointing keeps the uid and moves updateTime; the same digest does not.
        let t0 = tag["updateTime"].clone();
        s.clock.advance_millis(5_000);
        let (_, same) = s
            .post(
                &format!("/registry/v2/tags/{ruid}"),
                json!({"name": "stable", "digest": d1}),
            )
            .await;
        assert_eq!(
            (same["uid"].clone(), same["updateTime"].clone()),
            (json!(tuid), t0.clone()),
            "[{b}]"
        );
        let (_, moved) = s
            .post(
                &format!("/registry/v2/tags/{ruid}"),
                json!({"name": "stable", "digest": d2}),
            )
            .await;
        assert_eq!(moved["uid"], json!(tuid), "[{b}]");
        assert_ne!(moved["updateTime"], t0, "[{b}]");
        assert_eq!(served(&s, &name, "stable").await, (200, Some(d2.clone())), "[{b}]");

        // A digest the repo does not hold, and a bad tag.
        let (st, body) = s
            .post(
                &format!("/registry/v2/tags/{ruid}"),
                json!({"name": "x", "digest": sha256(b"nothing")}),
            )
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        let (st, body) = s
            .post(
                &format!("/registry/v2/tags/{ruid}"),
                json!({"name": ".x", "digest": d1}),
            )
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");

        // Hidden classes and filters.
        for t in ["sha256-abc.sig", "1.0-20240101", "1.0-r3"] {
            let (st, _) = s
                .post(&format!("/registry/v2/tags/{ruid}"), json!({"name": t, "digest": d1}))
                .await;
            assert_eq!(st, StatusCode::OK, "[{b}] {t}");
        }
        let names = |v: &Value| -> Vec<String> {
            let mut n: Vec<String> = v["tags"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
                .collect();
            n.sort();
            n
        };
        let (_, l) = s.get(&format!("/registry/v2/tags?uidp.childrenOf={ruid}")).await;
        assert_eq!(names(&l), ["stable", "v1", "v2"], "[{b}] {l}");
        let (_, l) = s
            .get(&format!(
                "/registry/v2/tags?uidp.childrenOf={ruid}&includeReferrers=true&includeDates=true&includeEpochs=true"
            ))
            .await;
        assert_eq!(names(&l).len(), 6, "[{b}] {l}");
        let (_, l) = s
            .get(&format!(
                "/registry/v2/tags?uidp.childrenOf={ruid}&digest={}",
                common::enc(&d2)
            ))
            .await;
        assert_eq!(names(&l), ["stable", "v2"], "[{b}] {l}");
        let (_, l) = s
            .get(&format!(
                "/registry/v2/tags?uidp.childrenOf={ruid}&updatedSince={}",
                common::enc(moved["updateTime"].as_str().unwrap())
            ))
            .await;
        assert!(
            names(&l).contains(&"stable".to_owned()) && !names(&l).contains(&"v1".to_owned()),
            "[{b}] {l}"
        );

        // Deleting through the API stops the registry serving it.
        let (st, _) = s.delete(&format!("/registry/v2/tags/{tuid}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        assert_eq!(served(&s, &name, "stable").await.0, 404, "[{b}]");
        let (st, body) = s.get(&format!("/registry/v2/tags/{tuid}")).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let (st, body) = s.delete(&format!("/registry/v2/tags/{tuid}")).await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn images_rest_grpc_and_cli() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let name = format!("{org}/multi");
        let (amd, amd_size) = push_image(&s, &name, "amd", "amd64").await;
        let (arm, arm_size) = push_image(&s, &name, "arm", "arm64").await;
        let index = json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
            {"mediaType": MANIFEST, "digest": amd, "size": 1, "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": MANIFEST, "digest": arm, "size": 1, "platform": {"os": "linux", "architecture": "arm64"}},
        ]});
        let idx = push_manifest(&s, &name, "latest", INDEX, &index).await;
        let ruid = uid(&repo_by_name(&s, &org, "multi").await);

        // Content negotiation: an index is not served to a client that lists
        // only image manifests, and is to one that lists it (or nothing).
        let get = |accept: Option<&'static str>| {
            let mut r = s
                .http
                .get(format!("{}/v2/{name}/manifests/latest", s.base))
                .bearer_auth(&s.token);
            if let Some(a) = accept {
                r = r.header("accept", a);
            }
            r.send()
        };
        let r = get(Some(MANIFEST)).await.unwrap();
        assert_eq!(r.status(), 404, "[{b}]");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["errors"][0]["code"], "MANIFEST_UNKNOWN", "[{b}] {body}");
        for accept in [
            Some("application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"),
            None,
        ] {
            let r = get(accept).await.unwrap();
            assert_eq!(r.status(), 200, "[{b}] {accept:?}");
            assert_eq!(r.headers()["content-type"], INDEX);
        }

        let (st, a) = s
            .get(&format!("/registry/v2/repos/{ruid}/digests/{idx}/architectures"))
            .await;
        assert_eq!(
            (st, a["architectures"].clone()),
            (StatusCode::OK, json!(["amd64", "arm64"])),
            "[{b}] {a}"
        );
        let (st, z) = s
            .get(&format!(
                "/registry/v2/repos/{ruid}/digests/{idx}/size?architecture=arm64"
            ))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {z}");
        assert_eq!(
            (z["size"].clone(), z["architecture"].clone()),
            (json!(arm_size.to_string()), json!("arm64"))
        );
        let (_, z) = s.get(&format!("/registry/v2/repos/{ruid}/digests/{idx}/size")).await;
        assert_eq!(z["size"], json!(amd_size.to_string()), "[{b}] default amd64: {z}");
        let (_, a) = s
            .get(&format!("/registry/v2/repos/{ruid}/digests/{arm}/architectures"))
            .await;
        assert_eq!(a["architectures"], json!(["arm64"]), "[{b}] single image: {a}");
        let (st, body) = s
            .get(&format!(
                "/registry/v2/repos/{ruid}/digests/{idx}/size?architecture=s390x"
            ))
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");

        // gRPC, v2 and v2beta1.
        let ch = Channel::from_shared(format!("http://{}", s.addr()))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let bearer = Bearer(s.token.clone());
        let archs = ImagesServiceClient::with_interceptor(ch.clone(), bearer.clone())
            .get_architectures(GetArchitecturesRequest {
                repo_uid: ruid.clone(),
                digest: idx.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(archs.architectures, ["amd64", "arm64"]);
        let mut repos = ReposServiceClient::with_interceptor(ch.clone(), bearer.clone());
        let got = repos
            .get_repo(GetRepoRequest { uid: ruid.clone() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.name, "multi");
        let listed = repos
            .list_repos(ListReposRequest {
                name: Some("multi".into()),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(listed.repos.len(), 1);
        let missing = repos
            .get_repo(GetRepoRequest {
                uid: format!("{org}/0000000000000000"),
            })
            .await
            .unwrap_err();
        assert_eq!(missing.code(), tonic::Code::NotFound);
        let tags = BetaTags::with_interceptor(ch, bearer)
            .list_tags(ward_proto::registry::v2::ListTagsRequest {
                uidp: Some(ward_proto::common::UidpFilter {
                    children_of: ruid.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let mut names: Vec<String> = tags.tags.into_iter().map(|t| t.name).collect();
        names.sort();
        assert_eq!(names, ["amd", "arm", "latest"]);

        // The CLI.
        let ward = |args: &[&str]| {
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"));
            cmd.args(args)
                .args(["--api", &s.base])
                .env("WARD_TOKEN", &s.token)
                .env_remove("WARD_TOKEN_FILE")
                .kill_on_drop(true);
            cmd
        };
        let out = ward(&["registry", "tags", "list", "--repo", &ruid, "-o", "json"])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "[{b}] {}", String::from_utf8_lossy(&out.stderr));
        let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(listed.as_array().map(Vec::len), Some(3), "[{b}] {listed}");
        let out = ward(&["registry", "repos", "create", "cli/made", "--parent", &org])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "[{b}] {}", String::from_utf8_lossy(&out.stderr));
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(table.contains("cli/made") && table.contains("UPDATED"), "[{b}] {table}");
        let out = ward(&["registry", "tags", "list", "--repo", &ruid])
            .output()
            .await
            .unwrap();
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(table.contains(&idx) && table.contains("DIGEST"), "[{b}] {table}");
    }
}
