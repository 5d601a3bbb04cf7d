//! Regressions for the third attack round (issue 21): expensive work only
//! after authorization and bounded, a byte budget on every listing and
//! export, per-client caps on connections, sessions and pending logins, and
//! the protocol gaps an attacker used. Each test names the rule it protects
//! and runs on every storage backend. Connection rules are in
//! `transport.rs`, headless-login caps in `people_regressions.rs`, the
//! visible-scope SQL in `ward-store/tests/conformance.rs`.

mod common;

use common::{Bearer, TestServer, assert_error, field_violations, person, servers, uid};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tonic::Code;
use tonic::transport::Channel;
use ward_proto::registry as reg1;
use ward_proto::registry::registry_client::RegistryClient;
use ward_proto::registry::v2 as reg2;
use ward_proto::registry::v2::repos_service_client::ReposServiceClient;

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn sha256(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)))
}

async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", s.addr()))
        .expect("valid uri")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("[{}] gRPC connect: {e}", s.backend))
}

/// Creates the repo `name` in `org` (v2, as the admin); its uid.
async fn repo(s: &TestServer, org: &str, name: &str) -> String {
    let (st, body) = s
        .post(&format!("/registry/v2/repos/{org}"), json!({ "name": name }))
        .await;
    assert_eq!(st, StatusCode::OK, "[{}] create repo {name}: {body}", s.backend);
    uid(&body)
}

/// Uploads `bytes` in one request as `token`: the status.
async fn put_blob(s: &TestServer, token: &str, name: &str, bytes: &[u8]) -> StatusCode {
    s.http
        .post(format!("{}/v2/{name}/blobs/uploads/?digest={}", s.base, sha256(bytes)))
        .bearer_auth(token)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap()
        .status()
}

/// A registry token from the token endpoint for `scope`, asked with `token`.
async fn registry_token(s: &TestServer, token: &str, scope: &str) -> String {
    let r = s
        .http
        .get(format!("{}/token?scope={}", s.base, common::enc(scope)))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "[{}] token for {scope}", s.backend);
    let body: Value = r.json().await.unwrap();
    body["token"].as_str().expect("a token").to_owned()
}

fn has_violation(body: &Value, field: &str) -> bool {
    field_violations(body).iter().any(|(f, _)| f == field)
}

// ---------------------------------------------------------------------------
// 1. Readmes: sanitized only after authorization, and bounded.

/// Rule: a readme's raw HTML is sanitized only for a caller allowed to write
/// there (anyone else gets NOT_FOUND without the work), and HTML with more
/// tags than the sanitizer handles cheaply is refused as INVALID_ARGUMENT,
/// on v1 and v2, over REST and gRPC. Ordinary HTML still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_html_is_refused_past_its_bound_and_only_after_authorization() {
    let nasty = format!("<div>\n{}", "<ul><li>".repeat(32_000));
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        let evil = uid(&s.create_group(None, "evil").await);
        let (_, stranger) = person(&s, "stranger", &[(evil.as_str(), "owner")]).await;
        let create = json!({ "name": "zz", "readme": nasty });

        let (st, body) = s
            .call_as(
                &stranger,
                Method::POST,
                &format!("/registry/v1/repos/{acme}"),
                Some(create.clone()),
            )
            .await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");

        let (st, body) = s.post(&format!("/registry/v1/repos/{acme}"), create).await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        assert!(has_violation(&body, "readme"), "[{b}] {body}");
        let (_, list) = s
            .get(&format!("/registry/v2/repos?uidp.childrenOf={acme}&name=zz"))
            .await;
        assert_eq!(list["repos"], json!([]), "[{b}] nothing was created: {list}");

        let app = repo(&s, &acme, "app").await;
        let (st, body) = s
            .call_as(
                &stranger,
                Method::PATCH,
                &format!("/registry/v2/repos/{app}/readme"),
                Some(json!({ "content": nasty })),
            )
            .await;
        assert_error(b, st, &body, 404, 5, "NOT_FOUND");
        let (st, body) = s
            .patch(&format!("/registry/v2/repos/{app}/readme"), json!({ "content": nasty }))
            .await;
        assert_error(b, st, &body, 400, 3, "INVALID_ARGUMENT");
        assert!(has_violation(&body, "content"), "[{b}] {body}");

        let mut v1 = RegistryClient::with_interceptor(channel(&s).await, Bearer(s.token.clone()));
        let e = v1
            .create_repo(reg1::CreateRepoRequest {
                parent_id: acme.clone(),
                repo: Some(reg1::Repo {
                    name: "grpc".into(),
                    readme: nasty.clone(),
                    ..Default::default()
                }),
                prevent_existing: true,
            })
            .await
            .expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument, "[{b}] {e:?}");
        let mut v2 = ReposServiceClient::with_interceptor(channel(&s).await, Bearer(stranger.clone()));
        let e = v2
            .update_repo_readme(reg2::UpdateRepoReadmeRequest {
                repo_readme: Some(reg2::RepoReadme {
                    uid: app.clone(),
                    content: nasty.clone(),
                }),
                update_mask: None,
            })
            .await
            .expect_err("refused");
        assert_eq!(e.code(), Code::NotFound, "[{b}] {e:?}");

        // A readme with a reasonable amount of HTML is still sanitized and kept.
        let fine = format!("# App\n\n{}\n", "<p><b>bold</b> <i>it</i></p>\n".repeat(200));
        let (st, body) = s
            .patch(&format!("/registry/v2/repos/{app}/readme"), json!({ "content": fine }))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {body}");
        assert!(
            body["content"].as_str().unwrap_or_default().contains("<b>bold</b>"),
            "[{b}]"
        );
    }
}

// ---------------------------------------------------------------------------
// 4. v1 ListRepos: a byte budget.

/// Rule: a v1 List gathers at most MAX_V1_BYTES (readmes included) and is
/// refused past it as FAILED_PRECONDITION, over REST and gRPC, instead of
/// holding every readme of every repo in memory; the paged v2 list serves
/// the same repos.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_repo_lists_have_a_byte_budget() {
    let readme = "lorem ipsum dolor sit amet ".repeat(9_300);
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        for i in 0..70 {
            let r = repo(&s, &acme, &format!("repo-{i:02}")).await;
            let (st, body) = s
                .patch(&format!("/registry/v2/repos/{r}/readme"), json!({ "content": readme }))
                .await;
            assert_eq!(st, StatusCode::OK, "[{b}] readme {i}: {body}");
        }
        let (st, body) = s.get(&format!("/registry/v1/repos?uidp.childrenOf={acme}")).await;
        assert_error(b, st, &body, 400, 9, "FAILED_PRECONDITION");
        assert!(body.to_string().contains("V1_LIST_TOO_LARGE"), "[{b}] {body}");

        let mut v1 = RegistryClient::with_interceptor(channel(&s).await, Bearer(s.token.clone()));
        let e = v1
            .list_repos(reg1::RepoFilter {
                uidp: Some(ward_proto::common::UidpFilter {
                    children_of: acme.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .expect_err("over the budget");
        assert_eq!(e.code(), Code::FailedPrecondition, "[{b}] {e:?}");

        // A narrower v1 list, and the paged v2 list, still answer.
        let (st, body) = s.get("/registry/v1/repos?name=repo-07").await;
        assert_eq!(st, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["items"].as_array().map(Vec::len), Some(1), "[{b}]");
        let (st, body) = s
            .get(&format!("/registry/v2/repos?uidp.childrenOf={acme}&pageSize=100"))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["repos"].as_array().map(Vec::len), Some(70), "[{b}]");
    }
}

// ---------------------------------------------------------------------------
// 5. OSV exports: bounded and capped.

/// Publishes an advisory with one approved detection under `org`: its CGA id.
async fn publish(s: &TestServer, org: &str, approver: &str, artifact: &str) -> String {
    let (st, a) = s
        .post(
            "/vulnerabilities/v1/advisories",
            json!({ "parentId": org, "advisory": {
                "artifactName": artifact, "artifactType": "apk", "componentName": "openssl",
                "componentType": "binary", "componentLocation": "/usr/lib/libssl.so.3",
                "aliases": [format!("CVE-2025-{}", 1000 + artifact.len())],
                "events": [{"timestamp": "2025-01-01T00:00:00Z", "detection": {"manual": {}}}],
            }}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "[{}] create advisory: {a}", s.backend);
    let event = a["events"][0]["id"].as_str().expect("event id").to_owned();
    let (st, e) = s
        .call_as(
            approver,
            Method::PUT,
            &format!("/vulnerabilities/v1/advisory_events/{event}"),
            Some(json!({ "status": "APPROVED" })),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "[{}] approve: {e}", s.backend);
    a["advisoryId"].as_str().expect("CGA id").to_owned()
}

/// Rule: `/osv/all.json` and `/osv/all.zip` hold at most
/// `--max-export-bytes` of documents (FAILED_PRECONDITION past it, while
/// single documents still answer), and at most EXPORTS_AT_ONCE run at once
/// (RESOURCE_EXHAUSTED, 429, beyond).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn osv_exports_have_a_byte_budget_and_a_concurrency_cap() {
    for db in ward_store::testing::backends().await {
        let s = TestServer::start_with(db, |c| c.max_export_bytes = 1_500).await;
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        let (_, approver) = person(&s, "approver", &[(acme.as_str(), "advisories.approver")]).await;
        let first = publish(&s, &acme, &approver, "zephyr").await;
        let (st, docs) = s.get("/osv/all.json").await;
        assert_eq!(st, StatusCode::OK, "[{b}] one document fits: {docs}");
        assert_eq!(docs.as_array().map(Vec::len), Some(1), "[{b}] {docs}");
        assert_eq!(docs[0]["id"], first.as_str(), "[{b}]");

        for artifact in ["yarrow", "xylophone"] {
            publish(&s, &acme, &approver, artifact).await;
        }
        for file in ["all.json", "all.zip"] {
            let (st, body) = s.get(&format!("/osv/{file}")).await;
            assert_error(b, st, &body, 400, 9, "FAILED_PRECONDITION");
            assert!(body.to_string().contains("EXPORT_TOO_LARGE"), "[{b}] {file}: {body}");
        }
        let (st, doc) = s.get(&format!("/osv/{first}.json")).await;
        assert_eq!(st, StatusCode::OK, "[{b}] one document still answers: {doc}");

        // Every export slot taken: the next export waits for none.
        let held = s
            .ward()
            .export_permits
            .try_acquire_many(ward_server::services::advisories::osv::EXPORTS_AT_ONCE as u32)
            .expect("the export slots are free");
        let (st, body) = s.get("/osv/all.zip").await;
        assert_error(b, st, &body, 429, 8, "RESOURCE_EXHAUSTED");
        drop(held);
        let (st, _) = s.get(&format!("/osv/{first}.json")).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
    }
}

// ---------------------------------------------------------------------------
// 6. Update masks from nested body keys.

/// Rule: a PATCH without `update_mask` changes the nested fields its body
/// names (`{"oidc": {"clientSecret": …, "groupsClaim": …}}` is the mask
/// `oidc.client_secret,oidc.groups_claim`), and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_body_keys_are_update_mask_paths() {
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        let viewer = ward_core::capability::builtin_role("viewer").unwrap().uid();
        let (st, created) = s
            .post(
                &format!("/iam/v2/identityProviders/{acme}"),
                json!({
                    "name": "corp", "defaultRole": viewer,
                    "oidc": {"issuer": "https://idp.example.com", "clientId": "ward",
                             "clientSecret": "OLD-SECRET", "groupsClaim": "groups"},
                }),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {created}");
        let idp = uid(&created);
        let before = common::people::stored_idp(&s, &idp).await;

        let (st, patched) = s
            .patch(
                &format!("/iam/v2/identityProviders/{idp}"),
                json!({ "oidc": { "clientSecret": "NEW-SECRET", "groupsClaim": "grp" } }),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {patched}");
        assert_eq!(patched["oidc"]["groupsClaim"], "grp", "[{b}] {patched}");
        assert_eq!(patched["oidc"]["clientId"], "ward", "[{b}] untouched: {patched}");
        assert_eq!(patched["oidc"]["issuer"], "https://idp.example.com", "[{b}] {patched}");
        let after = common::people::stored_idp(&s, &idp).await;
        assert!(after.client_secret.is_some(), "[{b}] a secret is stored");
        assert_ne!(after.client_secret, before.client_secret, "[{b}] the secret changed");
        let (_, got) = s.get(&format!("/iam/v2/identityProviders/{idp}")).await;
        assert_eq!(got["oidc"]["groupsClaim"], "grp", "[{b}] {got}");

        // Read, change one field, write the whole body back without a mask:
        // the description changes; the secret (read as "") and the rest stay.
        let mut edited = got.clone();
        edited["description"] = json!("edited");
        let (st, written) = s.patch(&format!("/iam/v2/identityProviders/{idp}"), edited).await;
        assert_eq!(st, StatusCode::OK, "[{b}] {written}");
        assert_eq!(written["description"], "edited", "[{b}] {written}");
        assert_eq!(written["oidc"], got["oidc"], "[{b}] {written}");
        let kept = common::people::stored_idp(&s, &idp).await;
        assert_eq!(kept.client_secret, after.client_secret, "[{b}] the secret is kept");
    }
}

// ---------------------------------------------------------------------------
// 7, 10, 11, 12, 13: the registry.

/// Rule: a cross-repository mount reads `from`, so a registry token must
/// allow pull there too; without it the mount is not done: the token is
/// re-challenged for both scopes (the caller may pull there), nothing is
/// linked, and the blob stays unreadable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_needs_pull_on_its_source() {
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        repo(&s, &acme, "app").await;
        repo(&s, &acme, "secret").await;
        let secret = b"the secret layer".to_vec();
        assert_eq!(put_blob(&s, &s.token, &format!("{acme}/secret"), &secret).await, 201);
        let (_, pusher) = person(&s, "pusher", &[(acme.as_str(), "registry.push")]).await;
        let narrow = registry_token(&s, &pusher, &format!("repository:{acme}/app:pull,push")).await;
        let mount = |token: String| {
            let url = format!(
                "{}/v2/{acme}/app/blobs/uploads/?mount={}&from={acme}/secret",
                s.base,
                sha256(&secret)
            );
            let http = s.http.clone();
            async move { http.post(url).bearer_auth(token).send().await.unwrap().status() }
        };
        assert_eq!(
            mount(narrow.clone()).await,
            401,
            "[{b}] no mount without pull on from: re-challenged for it"
        );
        let r = s
            .http
            .get(format!("{}/v2/{acme}/app/blobs/{}", s.base, sha256(&secret)))
            .bearer_auth(&narrow)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "[{b}] the blob is not readable from app");
        // A token for both repositories mounts.
        let both = registry_token(
            &s,
            &pusher,
            &format!("repository:{acme}/app:pull,push repository:{acme}/secret:pull"),
        )
        .await;
        assert_eq!(mount(both).await, 201, "[{b}] mounted with pull on from");
    }
}

/// Rule: a registry token keeps the roles the person's session holds (from
/// their identity provider's groups): a push right that comes from a mapping
/// works with the token the token endpoint hands out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_tokens_keep_session_roles() {
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        repo(&s, &acme, "app").await;
        let someone = common::root_identity(&s, "mapped").await;
        let push = ward_core::capability::builtin_role("registry.push").unwrap().uid();
        let (session, _) = s
            .ward()
            .tokens
            .mint_grant(&ward_auth::Grant {
                subject: someone.clone(),
                roles: Some(vec![ward_auth::SessionRole {
                    scope: acme.clone(),
                    role: push,
                }]),
                ..Default::default()
            })
            .expect("a session token");
        let token = registry_token(&s, &session, &format!("repository:{acme}/app:pull,push")).await;
        let claims = common::people::claims(&token);
        assert_eq!(claims["roles"][0]["scope"], acme.as_str(), "[{b}] {claims}");
        assert_eq!(
            put_blob(&s, &token, &format!("{acme}/app"), b"pushed through a mapped role").await,
            201,
            "[{b}] the registry token pushes"
        );
    }
}

/// Rule: a manifest whose descriptor declares a size other than its stored
/// blob's is refused at push (400 MANIFEST_INVALID); image reads never
/// answer 500 for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptor_sizes_must_match_their_blobs() {
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        let app = repo(&s, &acme, "app").await;
        let name = format!("{acme}/app");
        let config = serde_json::to_vec(&json!({"architecture": "arm64", "os": "linux"})).unwrap();
        let layer = b"one layer".to_vec();
        assert_eq!(put_blob(&s, &s.token, &name, &config).await, 201);
        assert_eq!(put_blob(&s, &s.token, &name, &layer).await, 201);
        let manifest = |config_size: usize| {
            serde_json::to_vec(&json!({
                "schemaVersion": 2, "mediaType": MANIFEST,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": sha256(&config), "size": config_size},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                            "digest": sha256(&layer), "size": layer.len()}],
            }))
            .unwrap()
        };
        let put = |body: Vec<u8>, tag: &'static str| {
            let req = s
                .http
                .put(format!("{}/v2/{name}/manifests/{tag}", s.base))
                .bearer_auth(&s.token)
                .header("content-type", MANIFEST)
                .body(body);
            async move {
                let r = req.send().await.unwrap();
                (r.status(), r.text().await.unwrap_or_default())
            }
        };
        let lying = manifest(config.len() + 4096);
        let (st, text) = put(lying.clone(), "lying").await;
        assert_eq!(st, 400, "[{b}] {text}");
        assert!(text.contains("MANIFEST_INVALID"), "[{b}] {text}");
        let (st, text) = put(manifest(config.len()), "honest").await;
        assert_eq!(st, 201, "[{b}] {text}");
        let honest = sha256(&manifest(config.len()));
        let (st, arch) = s
            .get(&format!("/registry/v2/repos/{app}/digests/{honest}/architectures"))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {arch}");
        assert_eq!(arch["architectures"], json!(["arm64"]), "[{b}] {arch}");
    }
}

/// Rule: one identity holds at most MAX_UPLOADS_PER_IDENTITY open upload
/// sessions (429 TOOMANYREQUESTS past it; a finished or cancelled one frees
/// its slot), and sessions untouched for UPLOAD_TTL expire with their bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_sessions_are_capped_and_expire() {
    use ward_server::services::registry::oci::{MAX_UPLOADS_PER_IDENTITY, UPLOAD_TTL_MS};
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        repo(&s, &acme, "app").await;
        let (pusher_uid, mut pusher) = person(&s, "pusher", &[(acme.as_str(), "registry.push")]).await;
        let start = |pusher: String| {
            let req = s
                .http
                .post(format!("{}/v2/{acme}/app/blobs/uploads/", s.base))
                .bearer_auth(pusher);
            async move {
                let r = req.send().await.unwrap();
                let location = r
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                (r.status(), location, r.text().await.unwrap_or_default())
            }
        };
        let mut sessions = Vec::new();
        for i in 0..MAX_UPLOADS_PER_IDENTITY {
            let (st, location, text) = start(pusher.clone()).await;
            assert_eq!(st, 202, "[{b}] session {i}: {text}");
            sessions.push(location.expect("a Location"));
        }
        let (st, _, text) = start(pusher.clone()).await;
        assert_eq!(st, 429, "[{b}] one session too many: {text}");
        assert!(text.contains("TOOMANYREQUESTS"), "[{b}] {text}");
        // Cancelling one frees its slot.
        let cancelled = sessions.pop().unwrap();
        let r = s
            .http
            .delete(format!("{}{cancelled}", s.base))
            .bearer_auth(&pusher)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204, "[{b}] cancel");
        let (st, location, text) = start(pusher.clone()).await;
        assert_eq!(st, 202, "[{b}] a freed slot: {text}");
        sessions.push(location.unwrap());

        // A day later they have expired, bytes and all.
        s.clock.advance_millis(UPLOAD_TTL_MS + 1);
        let removed = s.ward().expire_uploads().await.expect("expire");
        pusher = common::mint(&s, &pusher_uid);
        assert_eq!(removed, sessions.len(), "[{b}]");
        let r = s
            .http
            .get(format!("{}{}", s.base, sessions[0]))
            .bearer_auth(&pusher)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "[{b}] an expired session is unknown");
        let uploads = s.config.data_dir.join("registry").join("uploads");
        let left = std::fs::read_dir(&uploads).map(|d| d.count()).unwrap_or(0);
        assert_eq!(
            left,
            0,
            "[{b}] expired sessions leave no files in {}",
            uploads.display()
        );
        let (st, _, text) = start(pusher.clone()).await;
        assert_eq!(st, 202, "[{b}] slots are free again: {text}");
    }
}

/// Rule: a challenge names a scope only when the request's repository name
/// is made of scope characters, so a path cannot add parameters (a second
/// `realm`) to `WWW-Authenticate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn challenges_cannot_be_extended_from_the_path() {
    for s in servers().await {
        let b = s.backend;
        let mut c = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
        c.write_all(b"GET /v2/a\",realm=\"http://evil/x/tags/list HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(10), c.read_to_end(&mut raw))
            .await
            .expect("an answer")
            .unwrap();
        let text = String::from_utf8_lossy(&raw).to_lowercase();
        if let Some(line) = text.lines().find(|l| l.starts_with("www-authenticate:")) {
            assert_eq!(line.matches("realm=").count(), 1, "[{b}] {line}");
            assert!(!line.contains("evil"), "[{b}] {line}");
        }
        // A proper name still gets its scope.
        let r = s
            .http
            .get(format!("{}/v2/{}/app/tags/list", s.base, "0".repeat(40)))
            .send()
            .await
            .unwrap();
        let h = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
        assert!(h.contains("scope=\"repository:"), "[{b}] {h}");
    }
}

// ---------------------------------------------------------------------------
// 8. Organization names: the caller's own, however many share the name.

/// Rule: `/v2/<org name>/…` resolves among the caller's own organizations,
/// so any number of other organizations taking the same name cannot hide
/// the caller's (they were looked up server-wide and cut at 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organization_names_resolve_among_the_callers_own() {
    use ward_core::clock::Clock as _;
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        repo(&s, &acme, "app").await;
        let (_, owner) = person(&s, "owner", &[(acme.as_str(), "owner")]).await;
        // 300 other organizations named acme, each sorting before the real one.
        let now = s.clock.now_millis();
        for n in 0..300 {
            let record = ward_store::GroupRecord {
                uid: format!("{n:040x}"),
                parent_uid: None,
                name: "acme".into(),
                description: String::new(),
                verified: false,
                create_time: now,
                update_time: now,
                kind: 0,
            };
            s.ward()
                .store
                .create_group(&record, None, ward_store::testing::emit())
                .await
                .expect("squatter");
        }
        let r = s
            .http
            .get(format!("{}/v2/acme/app/tags/list", s.base))
            .bearer_auth(&owner)
            .send()
            .await
            .unwrap();
        let status = r.status();
        assert_eq!(status, 200, "[{b}] {}", r.text().await.unwrap_or_default());
    }
}
