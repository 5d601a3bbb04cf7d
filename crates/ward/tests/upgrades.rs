//! Upgrades: a database written by an earlier release opens and reads back
//! whole, and a database written by a newer release is refused with a clear
//! error instead of being misread.

mod common;

use std::path::Path;
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::Value;
use ward_core::clock::OffsetClock;
use ward_server::ServerConfig;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/upgrade/schema-18");

/// Copies `from` into `to`, directories and all.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// The schema-18 fixture (made by populating a server of that release
/// through its API) restored into a data directory, then served by this
/// build: every record it holds reads back as written.
#[tokio::test]
async fn a_database_from_the_previous_release_opens_and_reads_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path();
    let sql = std::fs::read_to_string(Path::new(FIXTURE).join("ward.sql")).expect("the fixture's dump");
    rusqlite::Connection::open(data.join("ward.db"))
        .expect("a new database file")
        .execute_batch(&sql)
        .expect("the dump loads");
    std::fs::copy(Path::new(FIXTURE).join("secret.key"), data.join("secret.key")).expect("the secret key");
    copy_tree(&Path::new(FIXTURE).join("registry"), &data.join("registry"));
    let ids: Value = serde_json::from_str(&std::fs::read_to_string(Path::new(FIXTURE).join("ids.json")).expect("ids"))
        .expect("json");
    let id = |k: &str| {
        ids[k]
            .as_str()
            .unwrap_or_else(|| panic!("no {k} in ids.json"))
            .to_owned()
    };

    let config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), data.to_path_buf());
    let running = ward_server::start(&config, Arc::new(OffsetClock::default()), std::future::pending())
        .await
        .expect("this build opens the previous release's database");
    let base = format!("http://{}", running.addr);
    let token = std::fs::read_to_string(data.join("admin.token")).expect("admin token");
    let http = reqwest::Client::new();
    let get = |path: String| {
        let req = http.get(format!("{base}{path}")).bearer_auth(&token);
        async move {
            let resp = req.send().await.expect("sent");
            let status = resp.status();
            let bytes = resp.bytes().await.expect("body");
            (status, bytes)
        }
    };
    let json = |(status, bytes): (StatusCode, bytes::Bytes), what: &str| -> Value {
        assert_eq!(status, StatusCode::OK, "{what}: {}", String::from_utf8_lossy(&bytes));
        serde_json::from_slice(&bytes).expect("json")
    };

    let org = json(get(format!("/iam/v2/groups/{}", id("org"))).await, "the organization");
    assert_eq!(org["name"], "fixture-org");
    assert_eq!(org["description"], "made by ward at schema 18");
    let team = json(get(format!("/iam/v2/groups/{}", id("team"))).await, "the team");
    assert_eq!(team["name"], "team");
    let identity = json(
        get(format!("/iam/v2/identities/{}", id("identity"))).await,
        "the identity",
    );
    assert_eq!(identity["name"], "ci-robot");
    assert_eq!(identity["claimMatch"]["subject"], "repo:acme/app");
    let role = json(get(format!("/iam/v2/roles/{}", id("role"))).await, "the role");
    assert_eq!(role["name"], "puller");
    let caps: Vec<&str> = role["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        caps.contains(&"CAP_REPO_LIST") && caps.contains(&"CAP_IAM_GROUPS_LIST"),
        "{role}"
    );
    let binding = json(
        get(format!("/iam/v2/roleBindings/{}", id("binding"))).await,
        "the binding",
    );
    assert_eq!(binding["identityUid"], id("identity"), "{binding}");
    assert_eq!(binding["role"]["name"], "puller", "{binding}");
    let repo = json(get(format!("/registry/v2/repos/{}", id("repo"))).await, "the repo");
    assert_eq!(repo["name"], "app");
    assert_eq!(repo["description"], "the app");
    // The image: its tag, its manifest's bytes, its blobs.
    let (status, manifest) = get(format!("/v2/{}/app/manifests/v1", id("org"))).await;
    assert_eq!(status, StatusCode::OK, "the manifest");
    assert_eq!(
        common::sha256(&manifest),
        id("manifest"),
        "the manifest's bytes are unchanged"
    );
    let m: Value = serde_json::from_slice(&manifest).expect("manifest json");
    let layer = m["layers"][0]["digest"].as_str().expect("layer digest");
    let (status, bytes) = get(format!("/v2/{}/app/blobs/{layer}", id("org"))).await;
    assert_eq!(status, StatusCode::OK, "the layer");
    assert_eq!(&bytes[..], b"fixture layer bytes");
    let advisory = json(
        get(format!("/vulnerabilities/v2/advisories/{}", id("advisory"))).await,
        "the advisory",
    );
    assert_eq!(advisory["artifactName"], "openssl", "{advisory}");
    assert_eq!(advisory["aliases"], serde_json::json!(["CVE-2024-0001"]), "{advisory}");
    // The audit trail the release recorded.
    let events = json(
        get(format!("/events/v1/events?group={}", id("org"))).await,
        "the event log",
    );
    let types: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        types.contains(&"dev.chainguard.api.iam.group.created.v1"),
        "the events recorded before the upgrade: {types:?}"
    );
    running.stop().await.expect("stops");
}

/// A database a newer release migrated: this build refuses to start on it,
/// saying why, on both backends.
#[tokio::test]
async fn a_database_from_a_newer_release_is_refused() {
    for db in ward_store::testing::backends().await {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), dir.path().to_path_buf());
        config.database = Some(db.url.clone());
        let running = ward_server::start(&config, Arc::new(OffsetClock::default()), std::future::pending())
            .await
            .expect("a new database");
        running.stop().await.expect("stops");
        // What a newer release's migration leaves behind.
        if db.backend == "sqlite" {
            rusqlite::Connection::open(&db.url)
                .expect("open")
                .pragma_update(None, "user_version", 999)
                .expect("bump the version");
        } else {
            let pool = sqlx::PgPool::connect(&db.url).await.expect("connect");
            sqlx::query(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
                 VALUES (999, 'from the future', true, '\\x00', 1)",
            )
            .execute(&pool)
            .await
            .expect("record a newer migration");
            pool.close().await;
        }
        let err = match ward_server::start(&config, Arc::new(OffsetClock::default()), std::future::pending()).await {
            Ok(_) => panic!("[{}] started on a newer schema", db.backend),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            err.contains("schema is version 999, newer than this ward knows"),
            "[{}] {err}",
            db.backend
        );
    }
}
