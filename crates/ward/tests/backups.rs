//! Backups with the `ward` binary, as an operator runs them: `ward admin
//! backup` while 16 writers keep writing, `ward admin restore` into a new
//! data directory, `ward admin check` clean, and a server on the restored
//! data holding every write acknowledged before the backup began (groups
//! and registry blobs). `check` also finds what is wrong when something is.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{TestServer, uid};
use reqwest::StatusCode;
use serde_json::json;

/// A pushed blob: its digest and bytes.
type Blob = (String, Vec<u8>);

fn ward(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ward"))
        .args(args)
        .env_remove("WARD_DATABASE")
        .env_remove("WARD_SECRET_KEY")
        .output()
        .expect("ward runs")
}

fn ok(what: &str, out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn backup_under_write_load_restores_every_acknowledged_write() {
    let s = TestServer::start(ward_store::testing::sqlite()).await;
    let org = uid(&s.create_group(None, "backed-up").await);
    let (status, body) = s
        .post(&format!("/registry/v2/repos/{org}"), json!({"name": "app"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let repo = format!("{org}/app");

    // 16 writers: 12 create groups, 4 push blobs; each write is recorded
    // once acknowledged.
    let groups: Arc<Mutex<Vec<String>>> = Arc::default();
    let blobs: Arc<Mutex<Vec<Blob>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..16 {
        let (base, token, org, repo) = (s.base.clone(), s.token.clone(), org.clone(), repo.clone());
        let (groups, blobs, stop) = (groups.clone(), blobs.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut n = 0u32;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                if w < 12 {
                    let r = http
                        .post(format!("{base}/iam/v2beta1/groups/{org}"))
                        .bearer_auth(&token)
                        .json(&json!({"name": format!("w{w}-{n}")}))
                        .send()
                        .await
                        .expect("sent");
                    if r.status() == StatusCode::OK {
                        let g: serde_json::Value = r.json().await.expect("json");
                        groups.lock().unwrap().push(uid(&g));
                    }
                } else {
                    let bytes = format!("blob of writer {w}, number {n}").into_bytes();
                    let d = common::sha256(&bytes);
                    let r = http
                        .post(format!("{base}/v2/{repo}/blobs/uploads/?digest={d}"))
                        .bearer_auth(&token)
                        .body(bytes.clone())
                        .send()
                        .await
                        .expect("sent");
                    if r.status() == StatusCode::CREATED {
                        blobs.lock().unwrap().push((d, bytes));
                    }
                }
            }
        }));
    }
    // Let the load run, then note what was acknowledged before the backup.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while groups.lock().unwrap().len() < 50 || blobs.lock().unwrap().len() < 20 {
        assert!(std::time::Instant::now() < deadline, "the load never got going");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let groups_before = groups.lock().unwrap().clone();
    let blobs_before = blobs.lock().unwrap().clone();
    let out = tempfile::tempdir().expect("backup dir");
    let data_dir = s.config.data_dir.display().to_string();
    let database = s.config.database.clone().expect("database");
    let out_dir = out.path().join("b").display().to_string();
    let backed = tokio::task::spawn_blocking({
        let (data_dir, database, out_dir) = (data_dir.clone(), database.clone(), out_dir.clone());
        move || {
            ward(&[
                "admin",
                "backup",
                "--data-dir",
                &data_dir,
                "--database",
                &database,
                "--out",
                &out_dir,
            ])
        }
    })
    .await
    .unwrap();
    let printed = ok("ward admin backup", &backed);
    assert!(printed.contains("backed up the database"), "{printed}");
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    let after = groups.lock().unwrap().len();
    assert!(
        after > groups_before.len(),
        "the writers kept writing during the backup"
    );

    // Restore into a new data directory and check it.
    let restored = tempfile::tempdir().expect("restore dir");
    let new_dir = restored.path().display().to_string();
    let new_db = restored.path().join("ward.db").display().to_string();
    let printed = ok(
        "ward admin restore",
        &ward(&[
            "admin",
            "restore",
            "--data-dir",
            &new_dir,
            "--database",
            &new_db,
            "--from",
            &out_dir,
        ]),
    );
    assert!(printed.contains("database: ok"), "{printed}");
    let printed = ok(
        "ward admin check",
        &ward(&["admin", "check", "--data-dir", &new_dir, "--database", &new_db]),
    );
    assert!(printed.contains("0 missing, 0 corrupt, 0 unreferenced"), "{printed}");
    // Restoring over it again needs --force.
    let again = ward(&[
        "admin",
        "restore",
        "--data-dir",
        &new_dir,
        "--database",
        &new_db,
        "--from",
        &out_dir,
    ]);
    assert!(!again.status.success(), "a restore over a database without --force");

    // A server on the restored data holds every acknowledged write.
    let mut config = ward_server::ServerConfig::new("127.0.0.1:0".parse().unwrap(), restored.path().to_path_buf());
    config.database = Some(new_db.clone());
    let running = ward_server::start(
        &config,
        Arc::new(ward_core::clock::OffsetClock::default()),
        std::future::pending(),
    )
    .await
    .expect("a server on the restored data");
    let base = format!("http://{}", running.addr);
    let token = std::fs::read_to_string(restored.path().join("admin.token")).unwrap();
    let http = reqwest::Client::new();
    for g in &groups_before {
        let r = http
            .get(format!("{base}/iam/v2/groups/{g}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "group {g}, acknowledged before the backup");
    }
    for (d, bytes) in &blobs_before {
        let r = http
            .get(format!("{base}/v2/{repo}/blobs/{d}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "blob {d}, acknowledged before the backup");
        assert_eq!(&r.bytes().await.unwrap()[..], &bytes[..], "blob {d}'s bytes");
    }
    running.stop().await.unwrap();

    // Check finds a missing blob and a stray file.
    let (gone, _) = &blobs_before[0];
    let hex = gone.trim_start_matches("sha256:");
    let path = restored.path().join("registry/blobs/sha256").join(&hex[..2]).join(hex);
    std::fs::remove_file(&path).expect("remove a blob file");
    let stray = b"a file nothing names";
    let stray_hex = common::sha256(stray).trim_start_matches("sha256:").to_owned();
    let stray_dir = restored.path().join("registry/blobs/sha256").join(&stray_hex[..2]);
    std::fs::create_dir_all(&stray_dir).unwrap();
    std::fs::write(stray_dir.join(&stray_hex), stray).unwrap();
    let found = ward(&["admin", "check", "--data-dir", &new_dir, "--database", &new_db]);
    assert!(!found.status.success(), "check must fail");
    let printed = String::from_utf8_lossy(&found.stdout);
    assert!(printed.contains(&format!("missing: {gone}")), "{printed}");
    assert!(
        printed.contains(&format!("unreferenced: sha256:{stray_hex}")),
        "{printed}"
    );
}

/// On PostgreSQL: `backup` points to pg_dump, `check` verifies the database
/// and the blob store all the same.
#[tokio::test]
async fn check_works_on_postgres_and_backup_points_to_pg_dump() {
    let Some(db) = ward_store::testing::postgres().await else {
        assert_ne!(std::env::var("WARD_TEST_REQUIRE_POSTGRES").as_deref(), Ok("1"));
        return;
    };
    let s = TestServer::start(db).await;
    let org = uid(&s.create_group(None, "pg").await);
    let (status, body) = s
        .post(&format!("/registry/v2/repos/{org}"), json!({"name": "app"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let d = common::push_blob(&s, &format!("{org}/app"), b"bytes on postgres").await;
    let data_dir = s.config.data_dir.display().to_string();
    let database = s.config.database.clone().unwrap();
    let printed = ok(
        "ward admin check",
        &ward(&["admin", "check", "--data-dir", &data_dir, "--database", &database]),
    );
    assert!(printed.contains("1 known, 0 missing"), "{printed}");
    let hex = d.trim_start_matches("sha256:");
    std::fs::remove_file(
        s.config
            .data_dir
            .join("registry/blobs/sha256")
            .join(&hex[..2])
            .join(hex),
    )
    .unwrap();
    let found = ward(&["admin", "check", "--data-dir", &data_dir, "--database", &database]);
    assert!(!found.status.success());
    assert!(String::from_utf8_lossy(&found.stdout).contains(&format!("missing: {d}")));
    let out = tempfile::tempdir().unwrap();
    let refused = ward(&[
        "admin",
        "backup",
        "--data-dir",
        &data_dir,
        "--database",
        &database,
        "--out",
        &out.path().display().to_string(),
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("pg_dump"));
}
