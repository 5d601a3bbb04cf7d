//! The background job queue on both backends: claims lease jobs, a lease
//! hides a job from other claims until it expires, and a restarted SQLite
//! server takes back the leases of the run that died.

use ward_store::testing;
use ward_store::vulns::{JobEnd, Lane};

const T0: i64 = 1_700_000_000_000;
const LEASE: i64 = 5 * 60 * 1000;

#[tokio::test(flavor = "multi_thread")]
async fn leases_hide_jobs_until_they_expire_or_the_sqlite_server_restarts() {
    for db in testing::stores().await {
        let (b, s) = (db.name, &db.store);
        let jobs = [
            ("report".to_owned(), "r|a".to_owned()),
            ("report".to_owned(), "r|b".to_owned()),
        ];
        s.enqueue_jobs(&jobs, T0, T0).await.unwrap();
        let first = s.claim_jobs(Lane::Work, T0, LEASE, 1).await.unwrap();
        assert_eq!(first.len(), 1, "[{b}]");
        let second = s.claim_jobs(Lane::Work, T0 + 1, LEASE, 8).await.unwrap();
        assert_eq!(second.len(), 1, "[{b}] the leased job is not claimed twice");
        assert_ne!(first[0].key, second[0].key, "[{b}]");
        assert!(
            s.claim_jobs(Lane::Work, T0 + 2, LEASE, 8).await.unwrap().is_empty(),
            "[{b}]"
        );

        // The server dies holding `first`; a new one starts.
        s.release_orphaned_leases().await.unwrap();
        let again = s.claim_jobs(Lane::Work, T0 + 3, LEASE, 8).await.unwrap();
        if b == "sqlite" {
            let keys: Vec<&str> = again.iter().map(|j| j.key.as_str()).collect();
            assert_eq!(keys.len(), 2, "[{b}] both jobs run again at once: {keys:?}");
            // The dead run's claims can no longer finish them.
            s.finish_job(&first[0], JobEnd::Done, T0 + 4).await.unwrap();
            let mine = again.iter().find(|j| j.key == first[0].key).unwrap();
            s.finish_job(mine, JobEnd::Done, T0 + 5).await.unwrap();
        } else {
            assert!(again.is_empty(), "[{b}] replicas' leases are left to expire: {again:?}");
            let expired = s.claim_jobs(Lane::Work, T0 + LEASE + 10, LEASE, 8).await.unwrap();
            assert_eq!(expired.len(), 2, "[{b}] expired leases are claimed again");
        }
    }
}
