//! Disposable databases for tests, on both backends.
//!
//! PostgreSQL tests need `WARD_TEST_POSTGRES_URL` (CI sets it); each
//! [`TestDatabase`] gets its own schema, selected through the connection's
//! `search_path`, and drops it when dropped. Without the variable,
//! [`backends`] yields SQLite only, unless `WARD_TEST_REQUIRE_POSTGRES=1`
//! (set in CI) makes the absence a failure rather than a silent skip.

use rand::Rng;

/// A database that exists for one test.
pub struct TestDatabase {
    /// What `ward server --database` takes.
    pub url: String,
    /// Which backend this is ("sqlite" or "postgres"), for test output.
    pub backend: &'static str,
    cleanup: Cleanup,
}

enum Cleanup {
    // Held for its Drop, which removes the directory.
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Schema { admin_url: String, schema: String },
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Cleanup::Schema { admin_url, schema } = &self.cleanup {
            let (url, schema) = (admin_url.clone(), schema.clone());
            let (done, wait) = std::sync::mpsc::channel();
            // Drop may run on a runtime thread whose own tasks (e.g. a pool
            // rolling back an open transaction) hold locks DROP SCHEMA needs, so
            // never block indefinitely: wait a while, then let it finish alone.
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()?;
                rt.block_on(async {
                    let pool = sqlx::PgPool::connect(&url).await.ok()?;
                    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                        .execute(&pool)
                        .await
                        .ok()?;
                    pool.close().await;
                    Some(())
                })?;
                done.send(()).ok()
            });
            let _ = wait.recv_timeout(std::time::Duration::from_secs(5));
        }
    }
}

fn random_suffix() -> String {
    let n: u64 = rand::thread_rng().r#gen();
    format!("{n:016x}")
}

/// A fresh SQLite database in its own temporary directory.
pub fn sqlite() -> TestDatabase {
    let dir = tempfile::Builder::new()
        .prefix("ward-test-")
        .tempdir()
        .expect("create temp dir");
    TestDatabase {
        url: dir.path().join("ward.db").display().to_string(),
        backend: "sqlite",
        cleanup: Cleanup::Dir(dir),
    }
}

/// A fresh schema in the test PostgreSQL server, if one is configured.
pub async fn postgres() -> Option<TestDatabase> {
    let admin_url = std::env::var("WARD_TEST_POSTGRES_URL").ok().filter(|s| !s.is_empty())?;
    let schema = format!("ward_test_{}", random_suffix());
    let pool = sqlx::PgPool::connect(&admin_url)
        .await
        .expect("connect to WARD_TEST_POSTGRES_URL");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&pool)
        .await
        .expect("create test schema");
    pool.close().await;
    let sep = if admin_url.contains('?') { '&' } else { '?' };
    let url = format!("{admin_url}{sep}options=-c%20search_path%3D{schema}");
    Some(TestDatabase {
        url,
        backend: "postgres",
        cleanup: Cleanup::Schema { admin_url, schema },
    })
}

/// Every backend to run a suite against: SQLite always, PostgreSQL when
/// configured (and required when `WARD_TEST_REQUIRE_POSTGRES=1`).
pub async fn backends() -> Vec<TestDatabase> {
    let mut v = vec![sqlite()];
    match postgres().await {
        Some(pg) => v.push(pg),
        None if std::env::var("WARD_TEST_REQUIRE_POSTGRES").as_deref() == Ok("1") => {
            panic!("WARD_TEST_REQUIRE_POSTGRES=1 but WARD_TEST_POSTGRES_URL is not set")
        }
        None => eprintln!("note: WARD_TEST_POSTGRES_URL unset; PostgreSQL tests skipped"),
    }
    v
}

/// An opened store on one test database.
pub struct OpenStore {
    pub name: &'static str,
    pub store: std::sync::Arc<dyn crate::Store>,
    // Declared last so the store (and its connections) goes before the database.
    _db: TestDatabase,
}

/// Every backend of [`backends`], opened (migrated).
pub async fn stores() -> Vec<OpenStore> {
    let mut v = Vec::new();
    for db in backends().await {
        let store = crate::open(&db.url)
            .await
            .unwrap_or_else(|e| panic!("{}: open: {e:?}", db.backend));
        v.push(OpenStore {
            name: db.backend,
            store,
            _db: db,
        });
    }
    v
}

/// An event for a store write made by a test (the store requires one with
/// every write that records events).
pub fn emit<R>() -> crate::events::Emit<R> {
    let id = format!("test-{:032x}", rand::thread_rng().r#gen::<u128>());
    crate::events::Emit::fixed(crate::events::EventRecord {
        seq: 0,
        id,
        event_type: "dev.ward.test.v1".into(),
        subject: String::new(),
        group_uid: String::new(),
        actor: String::new(),
        act: "{}".into(),
        body: "{}".into(),
        audience: crate::events::CUSTOMER.into(),
        time: 0,
    })
}
