//! The registry tables on PostgreSQL. Children of a repo (manifests, tags,
//! links, uploads) are written holding the repo `FOR SHARE`, so a concurrent
//! repo delete waits and then removes them too.

use async_trait::async_trait;
use sqlx::PgConnection;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event;
use super::{PostgresStore, lock};
use crate::events::Emit;
use crate::registry::{
    BLOB_TYPE, MANIFEST_TYPE, MAX_TAG_HISTORY, ManifestLinks, ManifestRecord, Pushed, REPO_TYPE, RegistryStore,
    RepoPatch, RepoRecord, TagHistoryRecord, TagRecord, UploadCaps, UploadRecord, repo_exists, tag_flags,
};
use crate::sql::{self, Dialect, REPO_COLUMNS, TAG_COLUMNS};
use crate::{GROUP_TYPE, db_err};

const MANIFEST_SELECT: &str = "repo_uid, digest, media_type, artifact_type, subject, annotations, content, \
                               create_time, octet_length(content)::BIGINT AS size";

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|d| d.is_unique_violation())
}

async fn find_repo(c: &mut PgConnection, org: &str, name: &str) -> Result<Option<RepoRecord>> {
    sqlx::query_as(&format!(
        "SELECT {REPO_COLUMNS} FROM repos WHERE org_uid = $1 AND name = $2"
    ))
    .bind(org)
    .bind(name)
    .fetch_optional(c)
    .await
    .map_err(|e| db_err("find repo", e))
}

async fn has_row(c: &mut PgConnection, sql: &str, a: &str, b: &str) -> Result<bool> {
    let row: Option<(i32,)> = sqlx::query_as(sql)
        .bind(a)
        .bind(b)
        .fetch_optional(c)
        .await
        .map_err(|e| db_err("lookup", e))?;
    Ok(row.is_some())
}

/// Inserts or re-points a tag inside a transaction, recording the move in
/// its history; returns it as stored. Its update_time only changes (and then
/// grows) when its digest does, so a history row keyed by it is new exactly
/// when the tag is created or moved.
async fn upsert_tag(c: &mut PgConnection, t: &TagRecord, labels: bool) -> Result<TagRecord> {
    let (referrer, dated, epoch) = tag_flags(&t.name);
    let row: TagRecord = sqlx::query_as(&format!(
        "INSERT INTO tags (uid, parent_uid, name, digest, is_referrer, is_dated, is_epoch, create_time, update_time, \
         deprecated, bundles) \
         VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (parent_uid, name) DO UPDATE SET digest = COALESCE(excluded.digest, tags.digest), \
         update_time = CASE WHEN excluded.digest IS NULL OR tags.digest IS NOT DISTINCT FROM excluded.digest \
                            THEN tags.update_time \
                            WHEN excluded.update_time > tags.update_time THEN excluded.update_time \
                            ELSE tags.update_time + 1 END, \
         deprecated = CASE WHEN $12 THEN excluded.deprecated ELSE tags.deprecated END, \
         bundles = CASE WHEN $12 THEN excluded.bundles ELSE tags.bundles END \
         RETURNING {TAG_COLUMNS}"
    ))
    .bind(&t.uid)
    .bind(&t.parent_uid)
    .bind(&t.name)
    .bind(&t.digest)
    .bind(i64::from(referrer))
    .bind(i64::from(dated))
    .bind(i64::from(epoch))
    .bind(t.create_time)
    .bind(t.update_time)
    .bind(t.deprecated)
    .bind(&t.bundles)
    .bind(labels)
    .fetch_one(&mut *c)
    .await
    .map_err(|e| db_err("upsert tag", e))?;
    if row.digest.is_empty() {
        return Ok(row);
    }
    sqlx::query(
        "INSERT INTO tag_history (tag_uid, update_time, digest) VALUES ($1, $2, $3) \
         ON CONFLICT (tag_uid, update_time) DO NOTHING",
    )
    .bind(&row.uid)
    .bind(row.update_time)
    .bind(&row.digest)
    .execute(&mut *c)
    .await
    .map_err(|e| db_err("record tag history", e))?;
    Ok(row)
}

impl PostgresStore {
    async fn commit(tx: super::Tx) -> Result<()> {
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn exec(
        &self,
        context: &str,
        q: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<u64> {
        Ok(q.execute(&self.pool)
            .await
            .map_err(|e| db_err(context, e))?
            .rows_affected())
    }
}

#[async_trait]
impl RegistryStore for PostgresStore {
    async fn create_repo(&self, r: &RepoRecord, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "groups", &r.parent_uid, "FOR SHARE").await? {
            return Err(Error::not_found(GROUP_TYPE, r.parent_uid.clone()));
        }
        let inserted = sqlx::query(&format!(
            "INSERT INTO repos ({REPO_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ))
        .bind(&r.uid)
        .bind(&r.parent_uid)
        .bind(&r.org_uid)
        .bind(&r.name)
        .bind(&r.description)
        .bind(r.catalog_tier)
        .bind(&r.bundles)
        .bind(&r.aliases)
        .bind(&r.active_tags)
        .bind(r.create_time)
        .bind(r.update_time)
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => Err(repo_exists(&r.org_uid, &r.name)),
            Err(e) => Err(db_err("insert repo", e)),
            Ok(_) => {
                insert_event(&mut tx, &emit.record(&())).await?;
                Self::commit(tx).await
            }
        }
    }

    async fn get_repo(&self, uid: &Uidp) -> Result<Option<RepoRecord>> {
        self.get_one("repos", REPO_COLUMNS, uid).await
    }

    async fn find_repo(&self, org_uid: &str, name: &str) -> Result<Option<RepoRecord>> {
        let mut c = self.pool.acquire().await.map_err(|e| db_err("acquire", e))?;
        find_repo(&mut c, org_uid, name).await
    }

    async fn update_repo(&self, uid: &Uidp, p: &RepoPatch, now_ms: i64, emit: Emit<RepoRecord>) -> Result<RepoRecord> {
        let mut tx = self.begin().await?;
        let row: std::result::Result<Option<RepoRecord>, sqlx::Error> = sqlx::query_as(&format!(
            "UPDATE repos SET name = COALESCE($1, name), description = COALESCE($2, description), \
             catalog_tier = COALESCE($3, catalog_tier), bundles = COALESCE($4, bundles), \
             aliases = COALESCE($5, aliases), active_tags = COALESCE($6, active_tags), \
             update_time = CASE WHEN $7 > update_time THEN $7 ELSE update_time + 1 END \
             WHERE uid = $8 RETURNING {REPO_COLUMNS}"
        ))
        .bind(&p.name)
        .bind(&p.description)
        .bind(p.catalog_tier)
        .bind(&p.bundles)
        .bind(&p.aliases)
        .bind(&p.active_tags)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&mut *tx)
        .await;
        match row {
            Ok(Some(r)) => {
                insert_event(&mut tx, &emit.record(&r)).await?;
                Self::commit(tx).await?;
                Ok(r)
            }
            Ok(None) => Err(Error::not_found(REPO_TYPE, uid.as_str())),
            Err(e) if is_unique_violation(&e) => Err(Error::AlreadyExists {
                resource_type: REPO_TYPE,
                name: p.name.clone().unwrap_or_default(),
            }),
            Err(e) => Err(db_err("update repo", e)),
        }
    }

    async fn delete_repo(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "repos", uid.as_str(), "FOR UPDATE").await? {
            return Err(Error::not_found(REPO_TYPE, uid.as_str()));
        }
        for sql in [
            "DELETE FROM tags WHERE parent_uid = $1",
            "DELETE FROM repos WHERE uid = $1",
        ] {
            sqlx::query(sql)
                .bind(uid.as_str())
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("delete repo", e))?;
        }
        insert_event(&mut tx, &emit.record(&())).await?;
        Self::commit(tx).await
    }

    async fn list_repos(&self, q: &ListQuery) -> Result<Page<RepoRecord>> {
        self.list("repos", REPO_COLUMNS, q).await
    }

    async fn catalog(
        &self,
        visible: Option<&[Uidp]>,
        after: Option<(&str, &str)>,
        limit: u32,
    ) -> Result<Vec<(String, String)>> {
        let q = sql::catalog(Dialect::Postgres, visible, after, limit);
        sql::bind_all(sqlx::query_as(&q.sql), q.binds)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db_err("catalog", e))
    }

    async fn repo_readme(&self, uid: &Uidp) -> Result<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT readme FROM repos WHERE uid = $1")
            .bind(uid.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("repo readme", e))?;
        Ok(row.map(|(r,)| r))
    }

    async fn set_repo_readme(&self, uid: &Uidp, content: &str, now_ms: i64) -> Result<()> {
        let n = self
            .exec(
                "set repo readme",
                sqlx::query(
                    "UPDATE repos SET readme = $1, \
                     update_time = CASE WHEN $2 > update_time THEN $2 ELSE update_time + 1 END WHERE uid = $3",
                )
                .bind(content)
                .bind(now_ms)
                .bind(uid.as_str()),
            )
            .await?;
        if n == 0 {
            return Err(Error::not_found(REPO_TYPE, uid.as_str()));
        }
        Ok(())
    }

    async fn link_blob(&self, repo_uid: &str, digest: &str, size: i64, now_ms: i64) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "repos", repo_uid, "FOR SHARE").await? {
            return Err(Error::not_found(REPO_TYPE, repo_uid));
        }
        sqlx::query(
            "INSERT INTO blobs (digest, size, create_time) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING",
        )
        .bind(digest)
        .bind(size)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("insert blob", e))?;
        sqlx::query(
            "INSERT INTO repo_blobs (repo_uid, digest, create_time) VALUES ($1, $2, $3) \
             ON CONFLICT (repo_uid, digest) DO NOTHING",
        )
        .bind(repo_uid)
        .bind(digest)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("link blob", e))?;
        Self::commit(tx).await
    }

    async fn repo_blob(&self, repo_uid: &str, digest: &str) -> Result<Option<i64>> {
        let row: Option<(i64,)> = sqlx::query_as(
            "SELECT b.size FROM repo_blobs rb JOIN blobs b ON b.digest = rb.digest \
             WHERE rb.repo_uid = $1 AND rb.digest = $2",
        )
        .bind(repo_uid)
        .bind(digest)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("repo blob", e))?;
        Ok(row.map(|(n,)| n))
    }

    async fn unlink_blob(&self, repo_uid: &str, digest: &str) -> Result<bool> {
        let n = self
            .exec(
                "unlink blob",
                sqlx::query("DELETE FROM repo_blobs WHERE repo_uid = $1 AND digest = $2")
                    .bind(repo_uid)
                    .bind(digest),
            )
            .await?;
        Ok(n > 0)
    }

    async fn put_manifest(
        &self,
        m: &ManifestRecord,
        links: &ManifestLinks,
        tag: Option<&TagRecord>,
        emit: Emit<Pushed>,
    ) -> Result<Option<TagRecord>> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "repos", &m.repo_uid, "FOR SHARE").await? {
            return Err(Error::not_found(REPO_TYPE, m.repo_uid.clone()));
        }
        for (i, b) in links.blobs.iter().enumerate() {
            // FOR SHARE: a concurrent unlink waits for this manifest.
            let linked: Option<(i64,)> = sqlx::query_as(
                "SELECT b.size FROM repo_blobs r JOIN blobs b ON b.digest = r.digest \
                 WHERE r.repo_uid = $1 AND r.digest = $2 FOR SHARE OF r",
            )
            .bind(&m.repo_uid)
            .bind(b)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db_err("check a manifest's blob", e))?;
            match (linked, links.blob_sizes.get(i)) {
                (None, _) => return Err(Error::not_found(BLOB_TYPE, b.clone())),
                (Some((stored,)), Some(&declared)) if stored != declared => {
                    return Err(crate::registry::blob_size_mismatch(b, declared, stored));
                }
                _ => {}
            }
        }
        for child in &links.manifests {
            let sql = "SELECT 1 FROM manifests WHERE repo_uid = $1 AND digest = $2 FOR SHARE";
            if !has_row(&mut tx, sql, &m.repo_uid, child).await? {
                return Err(Error::not_found(MANIFEST_TYPE, child.clone()));
            }
        }
        let inserted = sqlx::query(
            "INSERT INTO manifests (repo_uid, digest, media_type, artifact_type, subject, annotations, content, \
             create_time) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (repo_uid, digest) DO NOTHING",
        )
        .bind(&m.repo_uid)
        .bind(&m.digest)
        .bind(&m.media_type)
        .bind(&m.artifact_type)
        .bind(&m.subject)
        .bind(&m.annotations)
        .bind(&m.content)
        .bind(m.create_time)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("insert manifest", e))?
        .rows_affected();
        if inserted > 0 {
            let targets: Vec<&String> = links.blobs.iter().chain(&links.manifests).collect();
            sqlx::query(
                "INSERT INTO manifest_refs (repo_uid, manifest_digest, target) \
                 SELECT $1, $2, t FROM UNNEST($3::TEXT[]) AS t ON CONFLICT DO NOTHING",
            )
            .bind(&m.repo_uid)
            .bind(&m.digest)
            .bind(targets)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("insert manifest refs", e))?;
        }
        let mut pushed = Pushed::default();
        if let Some(t) = tag {
            let before: Option<(Option<String>,)> =
                sqlx::query_as("SELECT digest FROM tags WHERE parent_uid = $1 AND name = $2")
                    .bind(&t.parent_uid)
                    .bind(&t.name)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| db_err("read tag", e))?;
            pushed.previous_digest = before.and_then(|(d,)| d).unwrap_or_default();
            pushed.tag = Some(upsert_tag(&mut tx, t, false).await?);
        }
        insert_event(&mut tx, &emit.record(&pushed)).await?;
        Self::commit(tx).await?;
        Ok(pushed.tag)
    }

    async fn get_manifest(&self, repo_uid: &str, digest: &str) -> Result<Option<ManifestRecord>> {
        sqlx::query_as(&format!(
            "SELECT {MANIFEST_SELECT} FROM manifests WHERE repo_uid = $1 AND digest = $2"
        ))
        .bind(repo_uid)
        .bind(digest)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("get manifest", e))
    }

    async fn delete_manifest(&self, repo_uid: &str, digest: &str) -> Result<bool> {
        let mut tx = self.begin().await?;
        let mut n = 0;
        for sql in [
            "DELETE FROM tags WHERE parent_uid = $1 AND digest = $2",
            "DELETE FROM manifests WHERE repo_uid = $1 AND digest = $2",
        ] {
            n = sqlx::query(sql)
                .bind(repo_uid)
                .bind(digest)
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("delete manifest", e))?
                .rows_affected();
        }
        Self::commit(tx).await?;
        Ok(n > 0)
    }

    async fn referrers(&self, repo_uid: &str, digest: &str, limit: u32) -> Result<Vec<ManifestRecord>> {
        sqlx::query_as(
            "SELECT repo_uid, digest, media_type, artifact_type, subject, annotations, ''::BYTEA AS content, \
             create_time, octet_length(content)::BIGINT AS size FROM manifests \
             WHERE repo_uid = $1 AND subject = $2 ORDER BY digest LIMIT $3",
        )
        .bind(repo_uid)
        .bind(digest)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("referrers", e))
    }

    async fn put_tag(&self, t: &TagRecord, emit: Emit<TagRecord>) -> Result<TagRecord> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "repos", &t.parent_uid, "FOR SHARE").await? {
            return Err(Error::not_found(REPO_TYPE, t.parent_uid.clone()));
        }
        let sql = "SELECT 1 FROM manifests WHERE repo_uid = $1 AND digest = $2 FOR SHARE";
        if !t.digest.is_empty() && !has_row(&mut tx, sql, &t.parent_uid, &t.digest).await? {
            return Err(Error::not_found(MANIFEST_TYPE, t.digest.clone()));
        }
        let row = upsert_tag(&mut tx, t, true).await?;
        insert_event(&mut tx, &emit.record(&row)).await?;
        Self::commit(tx).await?;
        Ok(row)
    }

    async fn get_tag(&self, uid: &Uidp) -> Result<Option<TagRecord>> {
        self.get_one("tags", TAG_COLUMNS, uid).await
    }

    async fn find_tag(&self, repo_uid: &str, name: &str) -> Result<Option<TagRecord>> {
        sqlx::query_as(&format!(
            "SELECT {TAG_COLUMNS} FROM tags WHERE parent_uid = $1 AND name = $2"
        ))
        .bind(repo_uid)
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("find tag", e))
    }

    async fn delete_tag(&self, uid: &Uidp, emit: Emit<()>) -> Result<bool> {
        let mut tx = self.begin().await?;
        let n = sqlx::query("DELETE FROM tags WHERE uid = $1")
            .bind(uid.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("delete tag", e))?
            .rows_affected();
        if n > 0 {
            insert_event(&mut tx, &emit.record(&())).await?;
        }
        Self::commit(tx).await?;
        Ok(n > 0)
    }

    async fn list_tags(&self, q: &ListQuery) -> Result<Page<TagRecord>> {
        self.list("tags", TAG_COLUMNS, q).await
    }

    async fn tag_history(
        &self,
        tag_uid: &Uidp,
        start_ms: i64,
        end_ms: i64,
        limit: u32,
    ) -> Result<Vec<TagHistoryRecord>> {
        sqlx::query_as(
            "SELECT update_time, digest FROM tag_history \
             WHERE tag_uid = $1 AND update_time >= $2 AND update_time <= $3 ORDER BY update_time LIMIT $4",
        )
        .bind(tag_uid.as_str())
        .bind(start_ms)
        .bind(end_ms)
        .bind(i64::from(limit.min(MAX_TAG_HISTORY)))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("tag history", e))
    }

    async fn tag_names(&self, repo_uid: &str, last: Option<&str>, limit: u32) -> Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT name FROM tags WHERE parent_uid = $1 AND name > $2 AND digest IS NOT NULL ORDER BY name LIMIT $3",
        )
        .bind(repo_uid)
        .bind(last.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("tag names", e))?;
        Ok(rows.into_iter().map(|(n,)| n).collect())
    }

    async fn create_upload(&self, u: &UploadRecord, creator: &str, caps: UploadCaps) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "repos", &u.repo_uid, "FOR SHARE").await? {
            return Err(Error::not_found(REPO_TYPE, u.repo_uid.clone()));
        }
        // Counted under transaction-scoped advisory locks on the creator and
        // the repo, so concurrent creates (on any replica) cannot both pass
        // the last free slot.
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtext('upload:' || $1)), pg_advisory_xact_lock(hashtext('upload:' || $2))",
        )
        .bind(creator)
        .bind(&u.repo_uid)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("lock upload counts", e))?;
        let (by_creator, by_repo): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM uploads WHERE creator = $1 AND update_time >= $3), \
                    (SELECT count(*) FROM uploads WHERE repo_uid = $2 AND update_time >= $3)",
        )
        .bind(creator)
        .bind(&u.repo_uid)
        .bind(caps.active_since)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| db_err("count uploads", e))?;
        if by_creator >= i64::from(caps.per_creator) {
            return Err(crate::registry::too_many_uploads("this identity", caps.per_creator));
        }
        if by_repo >= i64::from(caps.per_repo) {
            return Err(crate::registry::too_many_uploads("this repository", caps.per_repo));
        }
        sqlx::query(
            "INSERT INTO uploads (uuid, repo_uid, size, create_time, update_time, creator) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&u.uuid)
        .bind(&u.repo_uid)
        .bind(u.size)
        .bind(u.create_time)
        .bind(u.update_time)
        .bind(creator)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("insert upload", e))?;
        Self::commit(tx).await
    }

    async fn get_upload(&self, uuid: &str) -> Result<Option<UploadRecord>> {
        sqlx::query_as("SELECT uuid, repo_uid, size, create_time, update_time FROM uploads WHERE uuid = $1")
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("get upload", e))
    }

    async fn advance_upload(&self, uuid: &str, from: i64, to: i64, now_ms: i64) -> Result<bool> {
        let n = self
            .exec(
                "advance upload",
                sqlx::query("UPDATE uploads SET size = $1, update_time = $2 WHERE uuid = $3 AND size = $4")
                    .bind(to)
                    .bind(now_ms)
                    .bind(uuid)
                    .bind(from),
            )
            .await?;
        Ok(n > 0)
    }

    async fn delete_upload(&self, uuid: &str) -> Result<bool> {
        let n = self
            .exec(
                "delete upload",
                sqlx::query("DELETE FROM uploads WHERE uuid = $1").bind(uuid),
            )
            .await?;
        Ok(n > 0)
    }

    async fn unreferenced_blobs(&self, before_ms: i64, limit: u32) -> Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT digest FROM blobs b WHERE create_time < $1 \
             AND NOT EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.digest = b.digest) \
             AND NOT EXISTS (SELECT 1 FROM manifest_refs mr WHERE mr.target = b.digest) \
             ORDER BY digest LIMIT $2",
        )
        .bind(before_ms)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("unreferenced blobs", e))?;
        Ok(rows.into_iter().map(|(d,)| d).collect())
    }

    async fn known_blobs(&self, after: &str, limit: u32) -> Result<Vec<(String, i64)>> {
        // COLLATE "C": the byte order SQLite's keyset uses too.
        sqlx::query_as(
            "SELECT digest, size FROM blobs WHERE digest > $1 COLLATE \"C\" ORDER BY digest COLLATE \"C\" LIMIT $2",
        )
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("known blobs", e))
    }

    async fn forget_blob(&self, digest: &str) -> Result<bool> {
        let n = self
            .exec(
                "forget blob",
                sqlx::query(
                    "DELETE FROM blobs WHERE digest = $1 \
                     AND NOT EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.digest = $1) \
                     AND NOT EXISTS (SELECT 1 FROM manifest_refs mr WHERE mr.target = $1)",
                )
                .bind(digest),
            )
            .await?;
        Ok(n > 0)
    }

    async fn stale_uploads(&self, before_ms: i64, limit: u32) -> Result<Vec<String>> {
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT uuid FROM uploads WHERE update_time < $1 ORDER BY update_time LIMIT $2")
                .bind(before_ms)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
                .map_err(|e| db_err("stale uploads", e))?;
        Ok(rows.into_iter().map(|(u,)| u).collect())
    }
}
