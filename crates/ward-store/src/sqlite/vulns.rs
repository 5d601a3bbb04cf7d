//! Vulnerability reports and the job queue on SQLite. Claims go through the
//! single writer, so two workers never lease the same job.

use std::collections::HashMap;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use ward_core::Result;

use super::SqliteStore;
use super::advisories::advisory_from_row;
use crate::advisories::AdvisoryRecord;
use crate::sql::ADVISORY_COLUMNS;
use crate::vulns::{
    FeedCandidate, FindingRecord, InventoryRecord, JobEnd, JobRecord, Lane, ManifestKey, NAME_CHUNK, ReportRecord,
    ReportStamp, ReportWrite, VulnStore, within_sql,
};

fn manifest_exists(c: &Connection, repo: &str, digest: &str) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT 1 FROM manifests WHERE repo_uid = ?1 AND digest = ?2")?
        .query_row([repo, digest], |_| Ok(()))
        .optional()
        .map(|r| r.is_some())
}

const INVENTORY_SELECT: &str =
    "SELECT repo_uid, digest, status, error, source, sbom_digest, document, update_time FROM inventories";
/// The stamp comes from the covering index (migration 0016): from the row
/// it would walk the report's JSON.
const STAMP_SELECT: &str = "SELECT i.status, i.error, i.source, r.create_time FROM inventories i \
     LEFT JOIN vuln_reports r INDEXED BY vuln_reports_stamp ON r.repo_uid = i.repo_uid AND r.digest = i.digest \
     WHERE i.repo_uid = ?1 AND i.digest = ?2";
const REPORT_SELECT: &str = "SELECT repo_uid, digest, report, data_time, create_time FROM vuln_reports";

fn inventory_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<InventoryRecord> {
    Ok(InventoryRecord {
        repo_uid: r.get(0)?,
        digest: r.get(1)?,
        status: r.get(2)?,
        error: r.get(3)?,
        source: r.get(4)?,
        sbom_digest: r.get(5)?,
        document: r.get(6)?,
        update_time: r.get(7)?,
    })
}

fn report_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReportRecord> {
    Ok(ReportRecord {
        repo_uid: r.get(0)?,
        digest: r.get(1)?,
        report: r.get(2)?,
        data_time: r.get(3)?,
        create_time: r.get(4)?,
    })
}

fn placeholders(n: usize, from: usize) -> String {
    (from..from + n).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ")
}

fn finding_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FindingRecord> {
    let aliases: String = r.get(4)?;
    Ok(FindingRecord {
        repo_uid: r.get(0)?,
        digest: r.get(1)?,
        vuln_id: r.get(2)?,
        severity: r.get(3)?,
        aliases: serde_json::from_str(&aliases).unwrap_or_default(),
        first_seen: r.get(5)?,
        resolved_at: r.get(6)?,
    })
}

/// Writes a finding's ids (its own and its aliases').
fn insert_ids(c: &Connection, f: &FindingRecord) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(
        "INSERT OR IGNORE INTO vuln_finding_ids (repo_uid, digest, vuln_id, id) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for id in std::iter::once(&f.vuln_id).chain(&f.aliases) {
        st.execute(params![f.repo_uid, f.digest, f.vuln_id, id])?;
    }
    Ok(())
}

/// Replaces one manifest's report and brings its findings up to date,
/// writing only the findings that changed.
fn put_report(c: &Connection, r: &ReportRecord, findings: &[FindingRecord]) -> rusqlite::Result<()> {
    if !manifest_exists(c, &r.repo_uid, &r.digest)? {
        return Ok(());
    }
    c.prepare_cached(
        "INSERT INTO vuln_reports (repo_uid, digest, report, data_time, create_time) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (repo_uid, digest) DO UPDATE SET \
         report = excluded.report, data_time = excluded.data_time, create_time = excluded.create_time",
    )?
    .execute(params![r.repo_uid, r.digest, r.report, r.data_time, r.create_time])?;
    // vuln_id → (severity, aliases, resolved_at)
    let stored: HashMap<String, (String, String, Option<i64>)> = c
        .prepare_cached(
            "SELECT vuln_id, severity, aliases, resolved_at FROM vuln_findings WHERE repo_uid = ?1 AND digest = ?2",
        )?
        .query_map([&r.repo_uid, &r.digest], |row| {
            Ok((row.get(0)?, (row.get(1)?, row.get(2)?, row.get(3)?)))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let now = r.create_time;
    for f in findings {
        let aliases = serde_json::to_string(&f.aliases).unwrap_or_else(|_| "[]".into());
        match stored.get(&f.vuln_id) {
            Some((severity, a, None)) if *severity == f.severity && *a == aliases => continue,
            Some(_) => {
                c.prepare_cached(
                    "UPDATE vuln_findings SET severity = ?4, aliases = ?5, resolved_at = NULL \
                     WHERE repo_uid = ?1 AND digest = ?2 AND vuln_id = ?3",
                )?
                .execute(params![f.repo_uid, f.digest, f.vuln_id, f.severity, aliases])?;
            }
            None => {
                c.prepare_cached(
                    "INSERT INTO vuln_findings (repo_uid, digest, vuln_id, severity, aliases, first_seen) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![f.repo_uid, f.digest, f.vuln_id, f.severity, aliases, now])?;
            }
        }
        insert_ids(c, f)?;
    }
    let current: std::collections::HashSet<&str> = findings.iter().map(|f| f.vuln_id.as_str()).collect();
    let mut resolve = c.prepare_cached(
        "UPDATE vuln_findings SET resolved_at = ?4 WHERE repo_uid = ?1 AND digest = ?2 AND vuln_id = ?3",
    )?;
    for (id, (_, _, resolved)) in &stored {
        if resolved.is_none() && !current.contains(id.as_str()) {
            resolve.execute(params![r.repo_uid, r.digest, id, now])?;
        }
    }
    Ok(())
}

#[async_trait]
impl VulnStore for SqliteStore {
    async fn enqueue_jobs(&self, jobs: &[(String, String)], run_after: i64, now_ms: i64) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let jobs = jobs.to_vec();
        self.write("enqueue jobs", move |c| {
            let mut st = c.prepare_cached(
                "INSERT INTO jobs (kind, key, run_after, create_time) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (kind, key) DO UPDATE SET run_after = MIN(run_after, excluded.run_after), \
                 again = CASE WHEN lease_until IS NOT NULL AND lease_until >= ?4 THEN 1 ELSE again END",
            )?;
            for (kind, key) in &jobs {
                st.execute(params![kind, key, run_after, now_ms])?;
            }
            Ok(())
        })
        .await
    }

    async fn release_orphaned_leases(&self) -> Result<()> {
        self.write("release leases", |c| {
            c.execute("UPDATE jobs SET lease_until = NULL WHERE lease_until IS NOT NULL", [])
                .map(drop)
        })
        .await
    }

    async fn claim_jobs(&self, lane: Lane, now_ms: i64, lease_ms: i64, limit: u32) -> Result<Vec<JobRecord>> {
        let deliveries = lane.is_deliveries();
        // A read first: an idle queue costs no write.
        let due = self
            .read("due jobs", move |c| {
                c.prepare_cached(
                    "SELECT 1 FROM jobs WHERE run_after <= ?1 AND (lease_until IS NULL OR lease_until < ?1) \
                     AND (kind = 'deliver') = ?2 LIMIT 1",
                )?
                .query_row(params![now_ms, deliveries], |_| Ok(()))
                .optional()
            })
            .await?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        self.write("claim jobs", move |c| {
            c.prepare_cached(
                "UPDATE jobs SET lease_until = ?1 + ?2, attempts = attempts + 1 WHERE id IN \
                 (SELECT id FROM jobs WHERE run_after <= ?1 AND (lease_until IS NULL OR lease_until < ?1) \
                 AND (kind = 'deliver') = ?4 ORDER BY run_after, id LIMIT ?3) \
                 RETURNING id, kind, key, attempts, lease_until",
            )?
            .query_map(params![now_ms, lease_ms, limit, deliveries], |r| {
                Ok(JobRecord {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    key: r.get(2)?,
                    attempts: r.get(3)?,
                    lease_until: r.get(4)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn finish_job(&self, job: &JobRecord, end: JobEnd, now_ms: i64) -> Result<()> {
        let (id, lease) = (job.id, job.lease_until);
        self.write("finish job", move |c| {
            match end {
                JobEnd::Done => {
                    c.execute(
                        "DELETE FROM jobs WHERE id = ?1 AND lease_until = ?2 AND again = 0",
                        [id, lease],
                    )?;
                    c.execute(
                        "UPDATE jobs SET again = 0, lease_until = NULL, run_after = ?2, attempts = 0, \
                         last_error = '' WHERE id = ?1 AND lease_until = ?3",
                        params![id, now_ms, lease],
                    )?;
                }
                JobEnd::Defer { at } => {
                    c.execute(
                        "UPDATE jobs SET lease_until = NULL, run_after = ?2, attempts = MAX(attempts - 1, 0) \
                         WHERE id = ?1 AND lease_until = ?3",
                        params![id, at, lease],
                    )?;
                }
                JobEnd::Retry { at, error } => {
                    c.execute(
                        "UPDATE jobs SET lease_until = NULL, run_after = ?2, last_error = ?3 \
                         WHERE id = ?1 AND lease_until = ?4",
                        params![id, at, error, lease],
                    )?;
                }
            }
            Ok(())
        })
        .await
    }

    async fn job_backlog(&self) -> Result<Vec<(String, i64, i64)>> {
        self.read("job backlog", |c| {
            c.prepare_cached("SELECT kind, COUNT(*), MIN(run_after) FROM jobs GROUP BY kind ORDER BY kind")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .await
    }

    async fn job_counts(&self) -> Result<Vec<(String, i64)>> {
        self.read("job counts", |c| {
            c.prepare_cached("SELECT kind, COUNT(*) FROM jobs GROUP BY kind ORDER BY kind")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .await
    }

    async fn inventory_progress(&self) -> Result<(i64, i64)> {
        self.read("inventory progress", |c| {
            c.query_row(
                "SELECT (SELECT COUNT(*) FROM manifests), (SELECT COUNT(*) FROM inventories)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .await
    }

    async fn put_inventory(&self, inv: &InventoryRecord, names: &[String]) -> Result<()> {
        let (inv, names) = (inv.clone(), names.to_vec());
        self.write("put inventory", move |c| {
            if !manifest_exists(c, &inv.repo_uid, &inv.digest)? {
                return Ok(());
            }
            c.execute(
                "DELETE FROM inventory_packages WHERE repo_uid = ?1 AND digest = ?2",
                [&inv.repo_uid, &inv.digest],
            )?;
            c.execute(
                "INSERT INTO inventories (repo_uid, digest, status, error, source, sbom_digest, document, update_time) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (repo_uid, digest) DO UPDATE SET \
                 status = excluded.status, error = excluded.error, source = excluded.source, \
                 sbom_digest = excluded.sbom_digest, document = excluded.document, update_time = excluded.update_time",
                params![
                    inv.repo_uid,
                    inv.digest,
                    inv.status,
                    inv.error,
                    inv.source,
                    inv.sbom_digest,
                    inv.document,
                    inv.update_time
                ],
            )?;
            let mut st = c.prepare_cached(
                "INSERT OR IGNORE INTO inventory_packages (repo_uid, digest, name) VALUES (?1, ?2, ?3)",
            )?;
            for n in &names {
                st.execute(params![inv.repo_uid, inv.digest, n])?;
            }
            Ok(())
        })
        .await
    }

    async fn get_inventory(&self, repo_uid: &str, digest: &str) -> Result<Option<InventoryRecord>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("get inventory", move |c| {
            c.prepare_cached(
                "SELECT repo_uid, digest, status, error, source, sbom_digest, document, update_time \
                 FROM inventories WHERE repo_uid = ?1 AND digest = ?2",
            )?
            .query_row([repo, digest], inventory_from_row)
            .optional()
        })
        .await
    }

    async fn report_stamp(&self, repo_uid: &str, digest: &str) -> Result<Option<ReportStamp>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("report stamp", move |c| {
            c.prepare_cached(STAMP_SELECT)?
                .query_row([repo, digest], |r| {
                    Ok(ReportStamp {
                        status: r.get(0)?,
                        error: r.get(1)?,
                        source: r.get(2)?,
                        report_time: r.get(3)?,
                    })
                })
                .optional()
        })
        .await
    }

    async fn get_inventories(&self, keys: &[ManifestKey]) -> Result<Vec<InventoryRecord>> {
        let keys = keys.to_vec();
        self.read("get inventories", move |c| {
            let mut st = c.prepare_cached(&format!("{INVENTORY_SELECT} WHERE repo_uid = ?1 AND digest = ?2"))?;
            let mut out = Vec::with_capacity(keys.len());
            for (repo, digest) in &keys {
                out.extend(st.query_row([repo, digest], inventory_from_row).optional()?);
            }
            Ok(out)
        })
        .await
    }

    async fn reports_within(&self, scope: &str, after: Option<&ManifestKey>, limit: u32) -> Result<Vec<ReportRecord>> {
        let scope = scope.to_owned();
        let after = after.cloned().unwrap_or_default();
        self.read("reports within", move |c| {
            c.prepare_cached(&format!(
                "{REPORT_SELECT} WHERE (repo_uid = ?1 OR repo_uid LIKE ?1 || '/%') AND (repo_uid, digest) > (?2, ?3) \
                 ORDER BY repo_uid, digest LIMIT ?4"
            ))?
            .query_map(params![scope, after.0, after.1, limit], report_from_row)?
            .collect()
        })
        .await
    }

    async fn get_reports(&self, keys: &[ManifestKey]) -> Result<Vec<ReportRecord>> {
        let keys = keys.to_vec();
        self.read("get reports", move |c| {
            let mut st = c.prepare_cached(&format!("{REPORT_SELECT} WHERE repo_uid = ?1 AND digest = ?2"))?;
            let mut out = Vec::with_capacity(keys.len());
            for (repo, digest) in &keys {
                out.extend(st.query_row([repo, digest], report_from_row).optional()?);
            }
            Ok(out)
        })
        .await
    }

    async fn manifests_with_packages(
        &self,
        names: &[String],
        scope: Option<&str>,
        after: Option<&ManifestKey>,
        limit: u32,
    ) -> Result<Vec<ManifestKey>> {
        let names = names.to_vec();
        let scope = scope.map(str::to_owned);
        let after = after.cloned().unwrap_or_default();
        self.read("manifests with packages", move |c| {
            let mut out: Vec<ManifestKey> = Vec::new();
            for chunk in names.chunks(NAME_CHUNK) {
                let sql = format!(
                    "SELECT DISTINCT repo_uid, digest FROM inventory_packages WHERE name IN ({}) \
                     AND (repo_uid, digest) > (?1, ?2) AND (?4 IS NULL OR repo_uid = ?4 OR repo_uid LIKE ?4 || '/%') \
                     ORDER BY repo_uid, digest LIMIT ?3",
                    placeholders(chunk.len(), 5)
                );
                let mut binds: Vec<rusqlite::types::Value> = vec![
                    after.0.clone().into(),
                    after.1.clone().into(),
                    i64::from(limit).into(),
                    scope.clone().into(),
                ];
                binds.extend(chunk.iter().map(|n| n.clone().into()));
                let rows = c
                    .prepare(&sql)?
                    .query_map(params_from_iter(binds), |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<Vec<ManifestKey>>>()?;
                out.extend(rows);
            }
            out.sort();
            out.dedup();
            out.truncate(limit as usize);
            Ok(out)
        })
        .await
    }

    async fn parents_of(&self, repo_uid: &str, digest: &str) -> Result<Vec<String>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("parents of", move |c| {
            c.prepare_cached(
                "SELECT manifest_digest FROM manifest_refs WHERE repo_uid = ?1 AND target = ?2 \
                 ORDER BY manifest_digest LIMIT 100",
            )?
            .query_map([repo, digest], |r| r.get(0))?
            .collect()
        })
        .await
    }

    async fn manifests_without_inventory(&self, after: Option<&ManifestKey>, limit: u32) -> Result<Vec<ManifestKey>> {
        let after = after.cloned().unwrap_or_default();
        self.read("manifests without inventory", move |c| {
            c.prepare_cached(
                "SELECT m.repo_uid, m.digest FROM manifests m WHERE (m.repo_uid, m.digest) > (?1, ?2) \
                 AND NOT EXISTS (SELECT 1 FROM inventories i WHERE i.repo_uid = m.repo_uid AND i.digest = m.digest) \
                 ORDER BY m.repo_uid, m.digest LIMIT ?3",
            )?
            .query_map(params![after.0, after.1, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect()
        })
        .await
    }

    async fn put_reports(&self, writes: &[ReportWrite]) -> Result<Vec<bool>> {
        let writes = writes.to_vec();
        self.write("put reports", move |c| {
            let mut out = Vec::with_capacity(writes.len());
            for w in &writes {
                if let Some(t) = w.if_created {
                    let stored: Option<i64> = c
                        .prepare_cached(
                            "SELECT create_time FROM vuln_reports INDEXED BY vuln_reports_stamp \
                             WHERE repo_uid = ?1 AND digest = ?2",
                        )?
                        .query_row([&w.report.repo_uid, &w.report.digest], |r| r.get(0))
                        .optional()?;
                    if stored != Some(t) {
                        out.push(false);
                        continue;
                    }
                }
                put_report(c, &w.report, &w.findings)?;
                out.push(true);
            }
            Ok(out)
        })
        .await
    }

    async fn get_report(&self, repo_uid: &str, digest: &str) -> Result<Option<ReportRecord>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("get report", move |c| {
            c.prepare_cached(
                "SELECT repo_uid, digest, report, data_time, create_time FROM vuln_reports \
                 WHERE repo_uid = ?1 AND digest = ?2",
            )?
            .query_row([repo, digest], report_from_row)
            .optional()
        })
        .await
    }

    async fn findings_of(&self, repo_uid: &str, digests: &[String]) -> Result<Vec<FindingRecord>> {
        let (repo, digests) = (repo_uid.to_owned(), digests.to_vec());
        self.read("findings", move |c| {
            let mut out = Vec::new();
            for chunk in digests.chunks(NAME_CHUNK) {
                let sql = format!(
                    "SELECT repo_uid, digest, vuln_id, severity, aliases, first_seen, resolved_at FROM vuln_findings \
                     WHERE repo_uid = ?1 AND digest IN ({}) ORDER BY digest, vuln_id",
                    placeholders(chunk.len(), 2)
                );
                let mut binds: Vec<rusqlite::types::Value> = vec![repo.clone().into()];
                binds.extend(chunk.iter().map(|d| d.clone().into()));
                let rows = c
                    .prepare(&sql)?
                    .query_map(params_from_iter(binds), finding_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                out.extend(rows);
            }
            Ok(out)
        })
        .await
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
        let ids = ids.to_vec();
        let scopes: Option<Vec<String>> = scopes.map(<[String]>::to_vec);
        let after = after.cloned().unwrap_or_default();
        self.read("affected by", move |c| {
            let within = match &scopes {
                Some(s) => within_sql("i.repo_uid", s.len(), 4 + ids.len(), false),
                None => "TRUE".into(),
            };
            let sql = format!(
                "SELECT DISTINCT i.repo_uid, i.digest, i.vuln_id FROM vuln_finding_ids i JOIN vuln_findings f \
                 ON f.repo_uid = i.repo_uid AND f.digest = i.digest AND f.vuln_id = i.vuln_id \
                 WHERE i.id IN ({}) AND f.resolved_at IS NULL AND (i.repo_uid, i.digest) > (?1, ?2) AND {within} \
                 ORDER BY i.repo_uid, i.digest, i.vuln_id LIMIT ?3",
                placeholders(ids.len(), 4)
            );
            let mut binds: Vec<rusqlite::types::Value> =
                vec![after.0.clone().into(), after.1.clone().into(), i64::from(limit).into()];
            binds.extend(ids.iter().map(|n| n.clone().into()));
            binds.extend(scopes.iter().flatten().map(|n| n.clone().into()));
            c.prepare(&sql)?
                .query_map(params_from_iter(binds), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .await
    }

    async fn repos_holding(&self, digest: &str, limit: u32) -> Result<Vec<String>> {
        let digest = digest.to_owned();
        self.read("repos holding", move |c| {
            c.prepare_cached("SELECT repo_uid FROM manifests WHERE digest = ?1 ORDER BY repo_uid LIMIT ?2")?
                .query_map(params![digest, limit], |r| r.get(0))?
                .collect()
        })
        .await
    }

    async fn tags_pointing(&self, repo_uid: &str, digest: &str, limit: u32) -> Result<Vec<String>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("tags pointing", move |c| {
            c.prepare_cached("SELECT name FROM tags WHERE parent_uid = ?1 AND digest = ?2 ORDER BY name LIMIT ?3")?
                .query_map(params![repo, digest, limit], |r| r.get(0))?
                .collect()
        })
        .await
    }

    async fn feed_candidates(&self, names: &[String], scopes: &[String]) -> Result<Vec<FeedCandidate>> {
        let (names, scopes) = (names.to_vec(), scopes.to_vec());
        self.read("feed candidates", move |c| {
            let mut out = Vec::new();
            for chunk in names.chunks(NAME_CHUNK) {
                let sql = format!(
                    "SELECT p.parent_uid, p.record_id, p.ecosystem, p.name, p.affected, p.digest, p.withdrawn <> 0, \
                     p.update_time FROM feed_record_packages p WHERE p.name IN ({}) AND {}",
                    placeholders(chunk.len(), 1),
                    within_sql("p.parent_uid", scopes.len(), 1 + chunk.len(), false)
                );
                let binds: Vec<&String> = chunk.iter().chain(&scopes).collect();
                let rows = c
                    .prepare(&sql)?
                    .query_map(params_from_iter(binds), |r| {
                        Ok(FeedCandidate {
                            parent_uid: r.get(0)?,
                            id: r.get(1)?,
                            ecosystem: r.get(2)?,
                            name: r.get(3)?,
                            affected: r.get(4)?,
                            digest: r.get(5)?,
                            withdrawn: r.get(6)?,
                            update_time: r.get(7)?,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                out.extend(rows);
            }
            Ok(out)
        })
        .await
    }

    async fn feed_bodies(&self, keys: &[(String, String)]) -> Result<Vec<(String, String, String)>> {
        let keys = keys.to_vec();
        self.read("feed bodies", move |c| {
            let mut st = c.prepare_cached("SELECT body FROM feed_records WHERE parent_uid = ?1 AND id = ?2")?;
            let mut out = Vec::with_capacity(keys.len());
            for (parent, id) in keys {
                if let Some(body) = st.query_row([&parent, &id], |r| r.get(0)).optional()? {
                    out.push((parent, id, body));
                }
            }
            Ok(out)
        })
        .await
    }

    async fn advisories_naming(&self, names: &[String], scopes: &[String]) -> Result<Vec<AdvisoryRecord>> {
        let (names, scopes) = (names.to_vec(), scopes.to_vec());
        self.read("advisories naming", move |c| {
            let mut out: Vec<AdvisoryRecord> = Vec::new();
            for chunk in names.chunks(NAME_CHUNK) {
                let list = placeholders(chunk.len(), 1);
                let within = within_sql("parent_uid", scopes.len(), 1 + chunk.len(), false);
                let sql = format!(
                    "SELECT {ADVISORY_COLUMNS} FROM advisories WHERE delete_time IS NULL AND \
                     (artifact_name IN ({list}) OR component_name IN ({list}) OR origin IN ({list})) AND {within}"
                );
                let binds: Vec<&String> = chunk.iter().chain(&scopes).collect();
                let rows = c
                    .prepare(&sql)?
                    .query_map(params_from_iter(binds), advisory_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                out.extend(rows);
            }
            out.sort_by(|a, b| a.uid.cmp(&b.uid));
            out.dedup_by(|a, b| a.uid == b.uid);
            Ok(out)
        })
        .await
    }

    async fn tidy_feed_index(&self) -> Result<()> {
        Ok(())
    }

    async fn ids_aliased(&self, alias: &str) -> Result<Vec<(String, String)>> {
        let alias = alias.to_owned();
        self.read("ids aliased", move |c| {
            let mut ids: Vec<(String, String)> = c
                .prepare_cached(
                    "SELECT record_id, parent_uid FROM feed_record_aliases WHERE alias = ?1 \
                     UNION SELECT a.advisory_id, a.parent_uid FROM advisory_aliases x \
                     JOIN advisories a ON a.uid = x.advisory_uid WHERE x.alias = ?1 AND a.delete_time IS NULL \
                     LIMIT 1000",
                )?
                .query_map([&alias], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            ids.sort();
            ids.dedup();
            Ok(ids)
        })
        .await
    }
}
