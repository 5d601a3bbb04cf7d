//! Operating the registry: `ward admin gc`, pull-token lifecycle through the
//! CLI, and a registry with a URL (token audience) of its own.

mod common;

use common::{TestServer, servers, uid};
use reqwest::StatusCode;
use serde_json::Value;
use sha2::Digest as _;

fn sha256(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)))
}

/// `ward <args>` with the server's admin token; (success, stdout, stderr).
async fn ward(s: &TestServer, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"))
        .args(args)
        .env("WARD_TOKEN", &s.token)
        .env_remove("WARD_TOKEN_FILE")
        .env_remove("WARD_API")
        .env_remove("WARD_DATABASE")
        .env_remove("WARD_DATA_DIR")
        .env_remove("WARD_BLOB_STORE")
        .kill_on_drop(true)
        .output()
        .await
        .expect("ward runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn blob_status(s: &TestServer, user: Option<(&str, &str)>, name: &str, d: &str) -> u16 {
    let mut r = s.http.get(format!("{}/v2/{name}/blobs/{d}", s.base));
    r = match user {
        Some((u, p)) => r.basic_auth(u, Some(p)),
        None => r.bearer_auth(&s.token),
    };
    r.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_removes_only_unreferenced_blobs_and_stale_uploads() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let (keep, drop) = (b"kept blob".to_vec(), b"dropped blob".to_vec());
        for (repo, bytes) in [("keep", &keep), ("drop", &drop)] {
            let r = s
                .http
                .post(format!(
                    "{}/v2/{org}/{repo}/blobs/uploads/?digest={}",
                    s.base,
                    sha256(bytes)
                ))
                .bearer_auth(&s.token)
                .body(bytes.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201, "[{b}]");
        }
        let r = s
            .http
            .post(format!("{}/v2/{org}/keep/blobs/uploads/", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        let upload = r.headers()["location"].to_str().unwrap().to_owned();
        let (_, repos) = s
            .get(&format!("/registry/v2/repos?name=drop&uidp.descendantsOf={org}"))
            .await;
        let (st, _) = s
            .delete(&format!(
                "/registry/v2/repos/{}",
                repos["repos"][0]["uid"].as_str().unwrap()
            ))
            .await;
        assert_eq!(st, StatusCode::OK);

        let data_dir = s.config.data_dir.display().to_string();
        let db = s.config.database_url();
        let gc = |extra: &'static [&'static str]| {
            let mut args = vec![
                "admin",
                "gc",
                "--data-dir",
                &data_dir,
                "--database",
                &db,
                "--grace",
                "0s",
            ];
            args.extend_from_slice(extra);
            args
        };
        let (ok, out, err) = ward(&s, &gc(&["--dry-run"])).await;
        assert!(ok, "[{b}] {err}");
        assert!(
            out.contains("would delete 1 blob(s) and 1 stale upload(s)"),
            "[{b}] {out}"
        );
        let hex = |bytes: &[u8]| sha256(bytes)[7..].to_owned();
        let on_disk = |bytes: &[u8]| {
            let h = hex(bytes);
            s.config
                .data_dir
                .join(format!("registry/blobs/sha256/{}/{h}", &h[..2]))
                .exists()
        };
        assert!(on_disk(&drop), "[{b}] a dry run deletes nothing");
        let (ok, out, err) = ward(&s, &gc(&[])).await;
        assert!(ok, "[{b}] {err}");
        assert!(out.contains("deleted 1 blob(s) and 1 stale upload(s)"), "[{b}] {out}");
        assert!(!on_disk(&drop) && on_disk(&keep), "[{b}]");
        assert_eq!(blob_status(&s, None, &format!("{org}/keep"), &sha256(&keep)).await, 200);
        let r = s
            .http
            .get(format!("{}{upload}", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "[{b}] the stale upload is gone");
        // The default grace keeps everything recent.
        let (ok, out, _) = ward(&s, &["admin", "gc", "--data-dir", &data_dir, "--database", &db]).await;
        assert!(ok && out.contains("deleted 0 blob(s)"), "[{b}] {out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_tokens_are_listed_and_revoked() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let bytes = b"layer".to_vec();
        let r = s
            .http
            .post(format!(
                "{}/v2/{org}/app/blobs/uploads/?digest={}",
                s.base,
                sha256(&bytes)
            ))
            .bearer_auth(&s.token)
            .body(bytes.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let (ok, out, err) = ward(
            &s,
            &[
                "registry",
                "pull-token",
                "create",
                "--api",
                &s.base,
                "--group",
                &org,
                "--ttl",
                "1h",
                "-o",
                "json",
            ],
        )
        .await;
        assert!(ok, "[{b}] {err}");
        let created: Value = serde_json::from_str(&out).unwrap();
        let (user, pass) = (
            created["username"].as_str().unwrap(),
            created["password"].as_str().unwrap(),
        );
        let name = format!("{org}/app");
        assert_eq!(
            blob_status(&s, Some((user, pass)), &name, &sha256(&bytes)).await,
            200,
            "[{b}]"
        );

        let (ok, out, _) = ward(
            &s,
            &["registry", "pull-token", "list", "--api", &s.base, "--group", &org],
        )
        .await;
        assert!(ok && out.contains(user), "[{b}] {out}");
        let (ok, table, err) = ward(
            &s,
            &[
                "registry",
                "pull-token",
                "create",
                "--api",
                &s.base,
                "--group",
                &org,
                "--ttl",
                "2d",
            ],
        )
        .await;
        assert!(ok, "[{b}] {err}");
        assert!(
            table.contains("docker login") && table.contains("skopeo login"),
            "[{b}] {table}"
        );
        let (ok, _, err) = ward(
            &s,
            &[
                "registry",
                "pull-token",
                "create",
                "--api",
                &s.base,
                "--group",
                &org,
                "--ttl",
                "400d",
            ],
        )
        .await;
        assert!(!ok && err.contains("--ttl"), "[{b}] {err}");

        let (ok, _, err) = ward(&s, &["registry", "pull-token", "delete", "--api", &s.base, user]).await;
        assert!(ok, "[{b}] {err}");
        // Revoked: the credentials stop working.
        assert_eq!(
            blob_status(&s, Some((user, pass)), &name, &sha256(&bytes)).await,
            401,
            "[{b}]"
        );
        let (ok, out, _) = ward(
            &s,
            &["registry", "pull-token", "list", "--api", &s.base, "--group", &org],
        )
        .await;
        assert!(ok && !out.contains(user), "[{b}] {out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_url_of_its_own_separates_the_audiences() {
    let s = TestServer::start_with(ward_store::testing::sqlite(), |c| {
        c.registry_url = Some("https://registry.example".into());
    })
    .await;
    let org = uid(&s.create_group(None, "acme").await);
    let api_token = s.token.clone();
    // An API token is not a registry credential here.
    let r = s
        .http
        .get(format!("{}/v2/", s.base))
        .bearer_auth(&api_token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.contains("service=\"registry.example\""), "{challenge}");
    // A registry token (minted for the registry's audience) is, and only there.
    let grant = ward_auth::Grant {
        subject: s.ward().admin.to_string(),
        audiences: vec!["https://registry.example".into()],
        ..Default::default()
    };
    let (registry_token, _) = s.ward().tokens.mint_grant(&grant).unwrap();
    let r = s
        .http
        .get(format!("{}/v2/{org}/app/tags/list", s.base))
        .bearer_auth(&registry_token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "a real answer: NAME_UNKNOWN");
    let (st, _) = s
        .call_as(&registry_token, reqwest::Method::GET, "/iam/v2/groups", None)
        .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
}
