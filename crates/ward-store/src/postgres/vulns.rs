//! Vulnerability reports and the job queue on PostgreSQL. Claims take due
//! rows `FOR UPDATE SKIP LOCKED`, so replicas never lease the same job.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use sqlx::PgConnection;
use ward_core::{Error, Result};

use super::PostgresStore;
use crate::advisories::AdvisoryRecord;
use crate::db_err;
use crate::sql::ADVISORY_COLUMNS;
use crate::vulns::{
    FeedCandidate, FindingRecord, InventoryRecord, JobEnd, JobRecord, Lane, ManifestKey, NAME_CHUNK, ReportRecord,
    ReportStamp, ReportWrite, VulnStore, within_sql,
};

type ReportRow = (String, String, String, i64, i64);

fn report_from_row(r: ReportRow) -> ReportRecord {
    ReportRecord {
        repo_uid: r.0,
        digest: r.1,
        report: r.2,
        data_time: r.3,
        create_time: r.4,
    }
}

async fn manifest_exists(c: &mut PgConnection, repo: &str, digest: &str) -> Result<bool> {
    let n: Option<i32> = sqlx::query_scalar("SELECT 1 FROM manifests WHERE repo_uid = $1 AND digest = $2 FOR SHARE")
        .bind(repo)
        .bind(digest)
        .fetch_optional(&mut *c)
        .await
        .map_err(|e| db_err("manifest exists", e))?;
    Ok(n.is_some())
}

type FindingRow = (String, String, String, String, String, i64, Option<i64>);

fn finding(r: FindingRow) -> FindingRecord {
    FindingRecord {
        repo_uid: r.0,
        digest: r.1,
        vuln_id: r.2,
        severity: r.3,
        aliases: serde_json::from_str(&r.4).unwrap_or_default(),
        first_seen: r.5,
        resolved_at: r.6,
    }
}

#[async_trait]
impl VulnStore for PostgresStore {
    async fn enqueue_jobs(&self, jobs: &[(String, String)], run_after: i64, now_ms: i64) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let (kinds, keys): (Vec<String>, Vec<String>) = jobs.iter().cloned().unzip();
        sqlx::query(
            "INSERT INTO jobs (kind, key, run_after, create_time) \
             SELECT k, v, $3, $4 FROM UNNEST($1::text[], $2::text[]) AS t(k, v) \
             ON CONFLICT (kind, key) DO UPDATE SET run_after = LEAST(jobs.run_after, excluded.run_after), \
             again = CASE WHEN jobs.lease_until IS NOT NULL AND jobs.lease_until >= $4 THEN 1 ELSE jobs.again END",
        )
        .bind(&kinds)
        .bind(&keys)
        .bind(run_after)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| db_err("enqueue jobs", e))?;
        Ok(())
    }

    async fn claim_jobs(&self, lane: Lane, now_ms: i64, lease_ms: i64, limit: u32) -> Result<Vec<JobRecord>> {
        let rows: Vec<(i64, String, String, i64, i64)> = sqlx::query_as(
            "UPDATE jobs SET lease_until = $1 + $2, attempts = attempts + 1 WHERE id IN \
             (SELECT id FROM jobs WHERE run_after <= $1 AND (lease_until IS NULL OR lease_until < $1) \
             AND (kind = 'deliver') = $4 ORDER BY run_after, id LIMIT $3 FOR UPDATE SKIP LOCKED) \
             RETURNING id, kind, key, attempts, lease_until",
        )
        .bind(now_ms)
        .bind(lease_ms)
        .bind(i64::from(limit))
        .bind(lane.is_deliveries())
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("claim jobs", e))?;
        Ok(rows
            .into_iter()
            .map(|(id, kind, key, attempts, lease_until)| JobRecord {
                id,
                kind,
                key,
                attempts,
                lease_until,
            })
            .collect())
    }

    async fn finish_job(&self, job: &JobRecord, end: JobEnd, now_ms: i64) -> Result<()> {
        let (id, lease) = (job.id, job.lease_until);
        let mut tx = self.begin().await?;
        match end {
            JobEnd::Done => {
                sqlx::query("DELETE FROM jobs WHERE id = $1 AND lease_until = $2 AND again = 0")
                    .bind(id)
                    .bind(lease)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_err("finish job", e))?;
                sqlx::query(
                    "UPDATE jobs SET again = 0, lease_until = NULL, run_after = $2, attempts = 0, last_error = '' \
                     WHERE id = $1 AND lease_until = $3",
                )
                .bind(id)
                .bind(now_ms)
                .bind(lease)
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("finish job", e))?;
            }
            JobEnd::Defer { at } => {
                sqlx::query(
                    "UPDATE jobs SET lease_until = NULL, run_after = $2, attempts = GREATEST(attempts - 1, 0) \
                     WHERE id = $1 AND lease_until = $3",
                )
                .bind(id)
                .bind(at)
                .bind(lease)
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("finish job", e))?;
            }
            JobEnd::Retry { at, error } => {
                sqlx::query(
                    "UPDATE jobs SET lease_until = NULL, run_after = $2, last_error = $3 WHERE id = $1 AND lease_until = $4",
                )
                .bind(id)
                .bind(at)
                .bind(error)
                .bind(lease)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| db_err("finish job", e))?;
            }
        }
        tx.commit().await.map_err(|e| db_err("finish job", e))
    }

    async fn job_backlog(&self) -> Result<Vec<(String, i64, i64)>> {
        sqlx::query_as("SELECT kind, COUNT(*), MIN(run_after) FROM jobs GROUP BY kind ORDER BY kind")
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("job backlog", e))
    }

    async fn job_counts(&self) -> Result<Vec<(String, i64)>> {
        sqlx::query_as("SELECT kind, COUNT(*) FROM jobs GROUP BY kind ORDER BY kind")
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("job counts", e))
    }

    async fn inventory_progress(&self) -> Result<(i64, i64)> {
        sqlx::query_as("SELECT (SELECT COUNT(*) FROM manifests), (SELECT COUNT(*) FROM inventories)")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_err("inventory progress", e))
    }

    async fn put_inventory(&self, inv: &InventoryRecord, names: &[String]) -> Result<()> {
        let mut tx = self.begin().await?;
        if !manifest_exists(&mut tx, &inv.repo_uid, &inv.digest).await? {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO inventories (repo_uid, digest, status, error, source, sbom_digest, document, update_time) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (repo_uid, digest) DO UPDATE SET \
             status = excluded.status, error = excluded.error, source = excluded.source, \
             sbom_digest = excluded.sbom_digest, document = excluded.document, update_time = excluded.update_time",
        )
        .bind(&inv.repo_uid)
        .bind(&inv.digest)
        .bind(&inv.status)
        .bind(&inv.error)
        .bind(&inv.source)
        .bind(&inv.sbom_digest)
        .bind(&inv.document)
        .bind(inv.update_time)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("put inventory", e))?;
        sqlx::query("DELETE FROM inventory_packages WHERE repo_uid = $1 AND digest = $2")
            .bind(&inv.repo_uid)
            .bind(&inv.digest)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("put inventory", e))?;
        sqlx::query(
            "INSERT INTO inventory_packages (repo_uid, digest, name) SELECT $1, $2, n FROM UNNEST($3::text[]) AS t(n) \
             ON CONFLICT DO NOTHING",
        )
        .bind(&inv.repo_uid)
        .bind(&inv.digest)
        .bind(names)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("put inventory", e))?;
        tx.commit().await.map_err(|e| db_err("put inventory", e))
    }

    async fn get_inventory(&self, repo_uid: &str, digest: &str) -> Result<Option<InventoryRecord>> {
        Ok(self
            .get_inventories(&[(repo_uid.to_owned(), digest.to_owned())])
            .await?
            .pop())
    }

    async fn manifests_with_packages(
        &self,
        names: &[String],
        scope: Option<&str>,
        after: Option<&ManifestKey>,
        limit: u32,
    ) -> Result<Vec<ManifestKey>> {
        let after = after.cloned().unwrap_or_default();
        sqlx::query_as(
            "SELECT DISTINCT repo_uid, digest FROM inventory_packages WHERE name = ANY($1) \
             AND (repo_uid, digest) > ($2, $3) AND ($5::text IS NULL OR repo_uid = $5 OR repo_uid LIKE $5 || '/%') \
             ORDER BY repo_uid, digest LIMIT $4",
        )
        .bind(names)
        .bind(&after.0)
        .bind(&after.1)
        .bind(i64::from(limit))
        .bind(scope)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("manifests with packages", e))
    }

    async fn parents_of(&self, repo_uid: &str, digest: &str) -> Result<Vec<String>> {
        sqlx::query_scalar(
            "SELECT manifest_digest FROM manifest_refs WHERE repo_uid = $1 AND target = $2 \
             ORDER BY manifest_digest LIMIT 100",
        )
        .bind(repo_uid)
        .bind(digest)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("parents of", e))
    }

    async fn manifests_without_inventory(&self, after: Option<&ManifestKey>, limit: u32) -> Result<Vec<ManifestKey>> {
        let after = after.cloned().unwrap_or_default();
        sqlx::query_as(
            "SELECT m.repo_uid, m.digest FROM manifests m WHERE (m.repo_uid, m.digest) > ($1, $2) \
             AND NOT EXISTS (SELECT 1 FROM inventories i WHERE i.repo_uid = m.repo_uid AND i.digest = m.digest) \
             ORDER BY m.repo_uid, m.digest LIMIT $3",
        )
        .bind(&after.0)
        .bind(&after.1)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("manifests without inventory", e))
    }

    async fn release_orphaned_leases(&self) -> Result<()> {
        // Replicas share the queue: a lease held by another replica may be
        // live; expired ones are claimed again as usual.
        Ok(())
    }

    async fn put_reports(&self, writes: &[ReportWrite]) -> Result<Vec<bool>> {
        let e = |e| db_err("put reports", e);
        let mut tx = self.begin().await?;
        // Reports are derived data: their writer (a job) commits its own
        // end synchronously right after, which makes this durable too, and
        // a crash before that runs the job again. Not waiting for this
        // commit's WAL flush saves the write a disk round trip.
        sqlx::query("SET LOCAL synchronous_commit = off")
            .execute(&mut *tx)
            .await
            .map_err(e)?;
        // The reports, in two statements: conditional ones replace the
        // stored report only if it is still the one they were derived from
        // (the row lock makes that check and the write one step);
        // unconditional ones are upserted, for manifests that still exist.
        let mut written: HashSet<(String, String)> = HashSet::new();
        for conditional in [true, false] {
            let batch: Vec<&ReportWrite> = writes
                .iter()
                .filter(|w| w.if_created.is_some() == conditional)
                .collect();
            if batch.is_empty() {
                continue;
            }
            let col = |f: fn(&ReportRecord) -> String| batch.iter().map(|w| f(&w.report)).collect::<Vec<String>>();
            let (repos, digests, reports) = (
                col(|r| r.repo_uid.clone()),
                col(|r| r.digest.clone()),
                col(|r| r.report.clone()),
            );
            let data: Vec<i64> = batch.iter().map(|w| w.report.data_time).collect();
            let created: Vec<i64> = batch.iter().map(|w| w.report.create_time).collect();
            let sql = if conditional {
                "UPDATE vuln_reports r SET report = k.report, data_time = k.data_time, create_time = k.create_time \
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) \
                 AS k(repo_uid, digest, report, data_time, create_time, expected) \
                 WHERE r.repo_uid = k.repo_uid AND r.digest = k.digest AND r.create_time = k.expected \
                 RETURNING r.repo_uid, r.digest"
            } else {
                "INSERT INTO vuln_reports (repo_uid, digest, report, data_time, create_time) \
                 SELECT k.repo_uid, k.digest, k.report, k.data_time, k.create_time \
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) \
                 AS k(repo_uid, digest, report, data_time, create_time) \
                 JOIN manifests m ON m.repo_uid = k.repo_uid AND m.digest = k.digest \
                 ON CONFLICT (repo_uid, digest) DO UPDATE SET report = excluded.report, \
                 data_time = excluded.data_time, create_time = excluded.create_time \
                 RETURNING repo_uid, digest"
            };
            let mut q = sqlx::query_as::<_, (String, String)>(sql)
                .bind(&repos)
                .bind(&digests)
                .bind(&reports)
                .bind(&data)
                .bind(&created);
            if conditional {
                let expected: Vec<i64> = batch.iter().map(|w| w.if_created.unwrap_or_default()).collect();
                q = q.bind(expected);
            }
            written.extend(q.fetch_all(&mut *tx).await.map_err(e)?);
        }
        // The findings of the written reports: what is stored, then one
        // statement each for new or changed ones (with the ids they answer
        // to, migration 0022) and the resolved ones.
        let (repos, digests): (Vec<String>, Vec<String>) = written.iter().cloned().unzip();
        let stored: Vec<(String, String, String, String, String, Option<i64>)> = sqlx::query_as(
            "SELECT f.repo_uid, f.digest, f.vuln_id, f.severity, f.aliases, f.resolved_at \
             FROM UNNEST($1::text[], $2::text[]) AS k(repo_uid, digest) \
             JOIN vuln_findings f ON f.repo_uid = k.repo_uid AND f.digest = k.digest FOR UPDATE OF f",
        )
        .bind(&repos)
        .bind(&digests)
        .fetch_all(&mut *tx)
        .await
        .map_err(e)?;
        let mut before: HashMap<(String, String, String), (String, String, Option<i64>)> = stored
            .into_iter()
            .map(|(r, d, v, sev, a, res)| ((r, d, v), (sev, a, res)))
            .collect();
        let mut upsert: [Vec<String>; 5] = Default::default();
        let mut first_seen: Vec<i64> = Vec::new();
        let mut resolve: [Vec<String>; 3] = Default::default();
        let mut resolve_at: Vec<i64> = Vec::new();
        for w in writes {
            let key = (w.report.repo_uid.clone(), w.report.digest.clone());
            if !written.contains(&key) {
                continue;
            }
            for f in &w.findings {
                let aliases = serde_json::to_string(&f.aliases).unwrap_or_else(|_| "[]".into());
                let k = (f.repo_uid.clone(), f.digest.clone(), f.vuln_id.clone());
                if let Some((severity, a, None)) = before.remove(&k)
                    && severity == f.severity
                    && a == aliases
                {
                    continue;
                }
                for (col, v) in upsert
                    .iter_mut()
                    .zip([&f.repo_uid, &f.digest, &f.vuln_id, &f.severity, &aliases])
                {
                    col.push(v.clone());
                }
                first_seen.push(w.report.create_time);
            }
            let gone: Vec<(String, String, String)> = before
                .iter()
                .filter(|((r, d, _), (_, _, resolved))| (r, d) == (&key.0, &key.1) && resolved.is_none())
                .map(|(k, _)| k.clone())
                .collect();
            for k in gone {
                before.remove(&k);
                for (col, v) in resolve.iter_mut().zip([k.0, k.1, k.2]) {
                    col.push(v);
                }
                resolve_at.push(w.report.create_time);
            }
        }
        if !first_seen.is_empty() {
            sqlx::query(
                "INSERT INTO vuln_findings (repo_uid, digest, vuln_id, severity, aliases, first_seen, ids) \
                 SELECT k.*, ARRAY[k.vuln_id] || ARRAY(SELECT jsonb_array_elements_text(k.aliases::jsonb)) \
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) \
                 AS k(repo_uid, digest, vuln_id, severity, aliases, first_seen) \
                 ON CONFLICT (repo_uid, digest, vuln_id) DO UPDATE SET severity = excluded.severity, \
                 aliases = excluded.aliases, ids = excluded.ids, resolved_at = NULL",
            )
            .bind(&upsert[0])
            .bind(&upsert[1])
            .bind(&upsert[2])
            .bind(&upsert[3])
            .bind(&upsert[4])
            .bind(&first_seen)
            .execute(&mut *tx)
            .await
            .map_err(e)?;
        }
        if !resolve_at.is_empty() {
            sqlx::query(
                "UPDATE vuln_findings f SET resolved_at = k.t \
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[]) AS k(repo_uid, digest, vuln_id, t) \
                 WHERE f.repo_uid = k.repo_uid AND f.digest = k.digest AND f.vuln_id = k.vuln_id",
            )
            .bind(&resolve[0])
            .bind(&resolve[1])
            .bind(&resolve[2])
            .bind(&resolve_at)
            .execute(&mut *tx)
            .await
            .map_err(e)?;
        }
        tx.commit().await.map_err(e)?;
        Ok(writes
            .iter()
            .map(|w| {
                // A manifest that is gone counts as written (nothing to do).
                written.contains(&(w.report.repo_uid.clone(), w.report.digest.clone())) || w.if_created.is_none()
            })
            .collect())
    }

    async fn report_stamp(&self, repo_uid: &str, digest: &str) -> Result<Option<ReportStamp>> {
        let row: Option<(String, String, String, Option<i64>)> = sqlx::query_as(
            "SELECT i.status, i.error, i.source, r.create_time FROM inventories i \
             LEFT JOIN vuln_reports r ON r.repo_uid = i.repo_uid AND r.digest = i.digest \
             WHERE i.repo_uid = $1 AND i.digest = $2",
        )
        .bind(repo_uid)
        .bind(digest)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("report stamp", e))?;
        Ok(row.map(|r| ReportStamp {
            status: r.0,
            error: r.1,
            source: r.2,
            report_time: r.3,
        }))
    }

    async fn get_inventories(&self, keys: &[ManifestKey]) -> Result<Vec<InventoryRecord>> {
        let (repos, digests): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
        let rows: Vec<(String, String, String, String, String, String, String, i64)> = sqlx::query_as(
            "SELECT i.repo_uid, i.digest, i.status, i.error, i.source, i.sbom_digest, i.document, i.update_time \
             FROM UNNEST($1::text[], $2::text[]) AS k(repo_uid, digest) \
             JOIN inventories i ON i.repo_uid = k.repo_uid AND i.digest = k.digest",
        )
        .bind(repos)
        .bind(digests)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("get inventories", e))?;
        Ok(rows
            .into_iter()
            .map(|r| InventoryRecord {
                repo_uid: r.0,
                digest: r.1,
                status: r.2,
                error: r.3,
                source: r.4,
                sbom_digest: r.5,
                document: r.6,
                update_time: r.7,
            })
            .collect())
    }

    async fn reports_within(&self, scope: &str, after: Option<&ManifestKey>, limit: u32) -> Result<Vec<ReportRecord>> {
        let after = after.cloned().unwrap_or_default();
        let rows: Vec<ReportRow> = sqlx::query_as(
            "SELECT repo_uid, digest, report, data_time, create_time FROM vuln_reports \
             WHERE (repo_uid = $1 OR repo_uid LIKE $1 || '/%') AND (repo_uid, digest) > ($2, $3) \
             ORDER BY repo_uid, digest LIMIT $4",
        )
        .bind(scope)
        .bind(&after.0)
        .bind(&after.1)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("reports within", e))?;
        Ok(rows.into_iter().map(report_from_row).collect())
    }

    async fn get_reports(&self, keys: &[ManifestKey]) -> Result<Vec<ReportRecord>> {
        let (repos, digests): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
        let rows: Vec<ReportRow> = sqlx::query_as(
            "SELECT r.repo_uid, r.digest, r.report, r.data_time, r.create_time \
             FROM UNNEST($1::text[], $2::text[]) AS k(repo_uid, digest) \
             JOIN vuln_reports r ON r.repo_uid = k.repo_uid AND r.digest = k.digest",
        )
        .bind(repos)
        .bind(digests)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("get reports", e))?;
        Ok(rows.into_iter().map(report_from_row).collect())
    }

    async fn get_report(&self, repo_uid: &str, digest: &str) -> Result<Option<ReportRecord>> {
        Ok(self
            .get_reports(&[(repo_uid.to_owned(), digest.to_owned())])
            .await?
            .pop())
    }

    async fn findings_of(&self, repo_uid: &str, digests: &[String]) -> Result<Vec<FindingRecord>> {
        let rows: Vec<FindingRow> = sqlx::query_as(
            "SELECT repo_uid, digest, vuln_id, severity, aliases, first_seen, resolved_at FROM vuln_findings \
             WHERE repo_uid = $1 AND digest = ANY($2) ORDER BY digest, vuln_id",
        )
        .bind(repo_uid)
        .bind(digests)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("findings", e))?;
        Ok(rows.into_iter().map(finding).collect())
    }

    async fn affected_by(
        &self,
        ids: &[String],
        scopes: Option<&[String]>,
        after: Option<&ManifestKey>,
        limit: u32,
    ) -> Result<Vec<(String, String, String)>> {
        if ids.len() > NAME_CHUNK {
            return Err(ward_core::Error::invalid(
                "id",
                format!("the id has over {NAME_CHUNK} aliases"),
            ));
        }
        let after = after.cloned().unwrap_or_default();
        let within = match scopes {
            Some(s) => within_sql("repo_uid", s.len(), 5, true),
            None => "TRUE".into(),
        };
        let sql = format!(
            "SELECT repo_uid, digest, vuln_id FROM vuln_findings \
             WHERE ids && $1::text[] AND resolved_at IS NULL AND (repo_uid, digest) > ($2, $3) AND {within} \
             ORDER BY repo_uid, digest, vuln_id LIMIT $4"
        );
        let mut q = sqlx::query_as(&sql)
            .bind(ids)
            .bind(&after.0)
            .bind(&after.1)
            .bind(i64::from(limit));
        for s in scopes.into_iter().flatten() {
            q = q.bind(s);
        }
        q.fetch_all(&self.pool).await.map_err(|e| db_err("affected by", e))
    }

    async fn repos_holding(&self, digest: &str, limit: u32) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT repo_uid FROM manifests WHERE digest = $1 ORDER BY repo_uid LIMIT $2")
            .bind(digest)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("repos holding", e))
    }

    async fn tags_pointing(&self, repo_uid: &str, digest: &str, limit: u32) -> Result<Vec<String>> {
        sqlx::query_scalar("SELECT name FROM tags WHERE parent_uid = $1 AND digest = $2 ORDER BY name LIMIT $3")
            .bind(repo_uid)
            .bind(digest)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("tags pointing", e))
    }

    async fn feed_candidates(&self, names: &[String], scopes: &[String]) -> Result<Vec<FeedCandidate>> {
        // One row per (group, ecosystem, name): see migration 0019.
        let sql = format!(
            "SELECT parent_uid, ecosystem, name, entries FROM feed_name_packages WHERE name = ANY($1) AND {}",
            within_sql("parent_uid", scopes.len(), 2, true)
        );
        let mut q = sqlx::query_as::<_, (String, String, String, String)>(&sql).bind(names);
        for s in scopes {
            q = q.bind(s);
        }
        let rows = q
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("feed candidates", e))?;
        /// `[record_id, affected, digest, withdrawn, update_time]`.
        type Entry = (String, Option<String>, String, bool, i64);
        let mut out = Vec::new();
        for (parent_uid, ecosystem, name, entries) in rows {
            let entries: Vec<Entry> =
                serde_json::from_str(&entries).map_err(|e| Error::internal(format_args!("feed candidates: {e}")))?;
            out.extend(
                entries
                    .into_iter()
                    .map(|(id, affected, digest, withdrawn, update_time)| FeedCandidate {
                        parent_uid: parent_uid.clone(),
                        id,
                        ecosystem: ecosystem.clone(),
                        name: name.clone(),
                        affected,
                        digest,
                        withdrawn,
                        update_time,
                    }),
            );
        }
        Ok(out)
    }

    async fn feed_bodies(&self, keys: &[(String, String)]) -> Result<Vec<(String, String, String)>> {
        let (parents, ids): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
        sqlx::query_as(
            "SELECT r.parent_uid, r.id, r.body FROM UNNEST($1::text[], $2::text[]) AS k(parent_uid, id) \
             JOIN feed_records r ON r.parent_uid = k.parent_uid AND r.id = k.id",
        )
        .bind(parents)
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("feed bodies", e))
    }

    async fn advisories_naming(&self, names: &[String], scopes: &[String]) -> Result<Vec<AdvisoryRecord>> {
        let sql = format!(
            "SELECT {ADVISORY_COLUMNS} FROM advisories WHERE delete_time IS NULL AND \
             (artifact_name = ANY($1) OR component_name = ANY($1) OR origin = ANY($1)) AND {} ORDER BY uid",
            within_sql("parent_uid", scopes.len(), 2, true)
        );
        let mut q = sqlx::query_as(&sql).bind(names);
        for s in scopes {
            q = q.bind(s);
        }
        q.fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("advisories naming", e))
    }

    async fn tidy_feed_index(&self) -> Result<()> {
        // VACUUM runs outside a transaction, on a connection of the pool.
        sqlx::raw_sql("VACUUM (ANALYZE) feed_name_packages")
            .execute(&self.pool)
            .await
            .map_err(|e| db_err("tidy the feed index", e))?;
        Ok(())
    }

    async fn ids_aliased(&self, alias: &str) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "SELECT record_id, parent_uid FROM feed_record_aliases WHERE alias = $1 \
             UNION SELECT a.advisory_id, a.parent_uid FROM advisory_aliases x JOIN advisories a \
             ON a.uid = x.advisory_uid WHERE x.alias = $1 AND a.delete_time IS NULL ORDER BY 1, 2 LIMIT 1000",
        )
        .bind(alias)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("ids aliased", e))
    }
}
