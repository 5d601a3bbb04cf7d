//! The registry tables on SQLite.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event;
use super::{SqliteStore, exists, values};
use crate::GROUP_TYPE;
use crate::events::Emit;
use crate::registry::{
    BLOB_TYPE, MANIFEST_TYPE, MAX_TAG_HISTORY, ManifestLinks, ManifestRecord, Pushed, REPO_TYPE, RegistryStore,
    RepoPatch, RepoRecord, TagHistoryRecord, TagRecord, UploadCaps, UploadRecord, repo_exists, tag_flags,
};
use crate::sql::{self, Dialect, REPO_COLUMNS, TAG_COLUMNS};

/// Columns a manifest is inserted with; selects add its size.
const MANIFEST_COLUMNS: &str =
    "repo_uid, digest, media_type, artifact_type, subject, annotations, content, create_time";
const MANIFEST_SELECT: &str =
    "repo_uid, digest, media_type, artifact_type, subject, annotations, content, create_time, length(content)";

fn repo_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RepoRecord> {
    Ok(RepoRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        org_uid: r.get(2)?,
        name: r.get(3)?,
        description: r.get(4)?,
        catalog_tier: r.get(5)?,
        bundles: r.get(6)?,
        aliases: r.get(7)?,
        active_tags: r.get(8)?,
        create_time: r.get(9)?,
        update_time: r.get(10)?,
    })
}

fn tag_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TagRecord> {
    Ok(TagRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        digest: r.get(3)?,
        create_time: r.get(4)?,
        update_time: r.get(5)?,
        deprecated: r.get(6)?,
        bundles: r.get(7)?,
    })
}

fn manifest_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ManifestRecord> {
    Ok(ManifestRecord {
        repo_uid: r.get(0)?,
        digest: r.get(1)?,
        media_type: r.get(2)?,
        artifact_type: r.get(3)?,
        subject: r.get(4)?,
        annotations: r.get(5)?,
        content: r.get(6)?,
        create_time: r.get(7)?,
        size: r.get(8)?,
    })
}

fn find_repo(c: &Connection, org: &str, name: &str) -> rusqlite::Result<Option<RepoRecord>> {
    c.prepare_cached(&format!(
        "SELECT {REPO_COLUMNS} FROM repos WHERE org_uid = ?1 AND name = ?2"
    ))?
    .query_row([org, name], repo_from_row)
    .optional()
}

fn has_manifest(c: &Connection, repo: &str, digest: &str) -> rusqlite::Result<bool> {
    Ok(
        c.prepare_cached("SELECT 1 FROM manifests WHERE repo_uid = ?1 AND digest = ?2")?
            .query_row([repo, digest], |_| Ok(()))
            .optional()?
            .is_some(),
    )
}

/// Inserts or re-points a tag inside a transaction, recording the move in
/// its history; returns it as stored. Its update_time only changes (and then
/// grows) when its digest does, so a history row keyed by it is new exactly
/// when the tag is created or moved.
fn upsert_tag(c: &Connection, t: &TagRecord, labels: bool) -> rusqlite::Result<TagRecord> {
    let (referrer, dated, epoch) = tag_flags(&t.name);
    let row = c.prepare_cached(&format!(
        "INSERT INTO tags (uid, parent_uid, name, digest, is_referrer, is_dated, is_epoch, create_time, update_time, \
         deprecated, bundles) \
         VALUES (?1, ?2, ?3, NULLIF(?4, ''), ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (parent_uid, name) DO UPDATE SET digest = COALESCE(excluded.digest, tags.digest), \
         update_time = CASE WHEN excluded.digest IS NULL OR tags.digest IS excluded.digest THEN tags.update_time \
                            WHEN excluded.update_time > tags.update_time THEN excluded.update_time \
                            ELSE tags.update_time + 1 END, \
         deprecated = CASE WHEN ?12 THEN excluded.deprecated ELSE tags.deprecated END, \
         bundles = CASE WHEN ?12 THEN excluded.bundles ELSE tags.bundles END \
         RETURNING {TAG_COLUMNS}"
    ))?
    .query_row(
        params![
            t.uid,
            t.parent_uid,
            t.name,
            t.digest,
            referrer,
            dated,
            epoch,
            t.create_time,
            t.update_time,
            t.deprecated,
            t.bundles,
            labels
        ],
        tag_from_row,
    )?;
    if !row.digest.is_empty() {
        c.prepare_cached(
            "INSERT INTO tag_history (tag_uid, update_time, digest) VALUES (?1, ?2, ?3) \
             ON CONFLICT (tag_uid, update_time) DO NOTHING",
        )?
        .execute(params![row.uid, row.update_time, row.digest])?;
    }
    Ok(row)
}

#[async_trait]
impl RegistryStore for SqliteStore {
    async fn create_repo(&self, r: &RepoRecord, emit: Emit<()>) -> Result<()> {
        let r = r.clone();
        self.write("create repo", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &r.parent_uid)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, r.parent_uid.clone())));
            }
            if find_repo(&tx, &r.org_uid, &r.name)?.is_some() {
                return Ok(Err(repo_exists(&r.org_uid, &r.name)));
            }
            tx.execute(
                &format!("INSERT INTO repos ({REPO_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
                params![
                    r.uid,
                    r.parent_uid,
                    r.org_uid,
                    r.name,
                    r.description,
                    r.catalog_tier,
                    r.bundles,
                    r.aliases,
                    r.active_tags,
                    r.create_time,
                    r.update_time
                ],
            )?;
            insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_repo(&self, uid: &Uidp) -> Result<Option<RepoRecord>> {
        self.get_one("get repo", "repos", REPO_COLUMNS, uid, repo_from_row)
            .await
    }

    async fn find_repo(&self, org_uid: &str, name: &str) -> Result<Option<RepoRecord>> {
        let (org, name) = (org_uid.to_owned(), name.to_owned());
        self.read("find repo", move |c| find_repo(c, &org, &name)).await
    }

    async fn update_repo(&self, uid: &Uidp, p: &RepoPatch, now_ms: i64, emit: Emit<RepoRecord>) -> Result<RepoRecord> {
        let (key, p) = (uid.as_str().to_owned(), p.clone());
        self.write("update repo", move |c| {
            let tx = c.savepoint()?;
            let Some(cur) = tx
                .prepare_cached(&format!("SELECT {REPO_COLUMNS} FROM repos WHERE uid = ?1"))?
                .query_row([&key], repo_from_row)
                .optional()?
            else {
                return Ok(Err(Error::not_found(REPO_TYPE, key)));
            };
            if let Some(name) = &p.name
                && *name != cur.name
                && find_repo(&tx, &cur.org_uid, name)?.is_some()
            {
                return Ok(Err(repo_exists(&cur.org_uid, name)));
            }
            let row = tx
                .prepare_cached(&format!(
                    "UPDATE repos SET name = COALESCE(?1, name), description = COALESCE(?2, description), \
                     catalog_tier = COALESCE(?3, catalog_tier), bundles = COALESCE(?4, bundles), \
                     aliases = COALESCE(?5, aliases), active_tags = COALESCE(?6, active_tags), \
                     update_time = CASE WHEN ?7 > update_time THEN ?7 ELSE update_time + 1 END \
                     WHERE uid = ?8 RETURNING {REPO_COLUMNS}"
                ))?
                .query_row(
                    params![
                        p.name,
                        p.description,
                        p.catalog_tier,
                        p.bundles,
                        p.aliases,
                        p.active_tags,
                        now_ms,
                        key
                    ],
                    repo_from_row,
                )?;
            insert_event(&tx, &emit.record(&row))?;
            tx.commit()?;
            Ok(Ok(row))
        })
        .await?
    }

    async fn delete_repo(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        let u = uid.as_str().to_owned();
        let n = self
            .write("delete repo", move |c| {
                let tx = c.savepoint()?;
                // Tags first: their foreign key names the manifests.
                tx.execute("DELETE FROM tags WHERE parent_uid = ?1", [&u])?;
                let n = tx.execute("DELETE FROM repos WHERE uid = ?1", [&u])?;
                if n == 0 {
                    // Nothing deleted: the savepoint (and no event) is dropped.
                    return Ok(0);
                }
                insert_event(&tx, &emit.record(&()))?;
                tx.commit()?;
                Ok(n)
            })
            .await?;
        if n == 0 {
            return Err(Error::not_found(REPO_TYPE, uid.as_str()));
        }
        Ok(())
    }

    async fn list_repos(&self, q: &ListQuery) -> Result<Page<RepoRecord>> {
        self.list("list repos", "repos", REPO_COLUMNS, q, repo_from_row).await
    }

    async fn catalog(
        &self,
        visible: Option<&[Uidp]>,
        after: Option<(&str, &str)>,
        limit: u32,
    ) -> Result<Vec<(String, String)>> {
        let q = sql::catalog(Dialect::Sqlite, visible, after, limit);
        self.read("catalog", move |c| {
            c.prepare_cached(&q.sql)?
                .query_map(params_from_iter(values(q.binds)), |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .await
    }

    async fn repo_readme(&self, uid: &Uidp) -> Result<Option<String>> {
        let u = uid.as_str().to_owned();
        self.read("repo readme", move |c| {
            c.prepare_cached("SELECT readme FROM repos WHERE uid = ?1")?
                .query_row([u], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn set_repo_readme(&self, uid: &Uidp, content: &str, now_ms: i64) -> Result<()> {
        let (u, content) = (uid.as_str().to_owned(), content.to_owned());
        let n = self
            .write("set repo readme", move |c| {
                c.execute(
                    "UPDATE repos SET readme = ?1, \
                     update_time = CASE WHEN ?2 > update_time THEN ?2 ELSE update_time + 1 END WHERE uid = ?3",
                    params![content, now_ms, u],
                )
            })
            .await?;
        if n == 0 {
            return Err(Error::not_found(REPO_TYPE, uid.as_str()));
        }
        Ok(())
    }

    async fn link_blob(&self, repo_uid: &str, digest: &str, size: i64, now_ms: i64) -> Result<()> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.write("link blob", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "repos", &repo)? {
                return Ok(Err(Error::not_found(REPO_TYPE, repo)));
            }
            tx.execute(
                "INSERT INTO blobs (digest, size, create_time) VALUES (?1, ?2, ?3) ON CONFLICT (digest) DO NOTHING",
                params![digest, size, now_ms],
            )?;
            tx.execute(
                "INSERT INTO repo_blobs (repo_uid, digest, create_time) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (repo_uid, digest) DO NOTHING",
                params![repo, digest, now_ms],
            )?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn repo_blob(&self, repo_uid: &str, digest: &str) -> Result<Option<i64>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("repo blob", move |c| {
            c.prepare_cached(
                "SELECT b.size FROM repo_blobs rb JOIN blobs b ON b.digest = rb.digest \
                 WHERE rb.repo_uid = ?1 AND rb.digest = ?2",
            )?
            .query_row([repo, digest], |r| r.get(0))
            .optional()
        })
        .await
    }

    async fn unlink_blob(&self, repo_uid: &str, digest: &str) -> Result<bool> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.write("unlink blob", move |c| {
            Ok(c.execute(
                "DELETE FROM repo_blobs WHERE repo_uid = ?1 AND digest = ?2",
                [repo, digest],
            )? > 0)
        })
        .await
    }

    async fn put_manifest(
        &self,
        m: &ManifestRecord,
        links: &ManifestLinks,
        tag: Option<&TagRecord>,
        emit: Emit<Pushed>,
    ) -> Result<Option<TagRecord>> {
        let (m, links, tag) = (m.clone(), links.clone(), tag.cloned());
        self.write("put manifest", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "repos", &m.repo_uid)? {
                return Ok(Err(Error::not_found(REPO_TYPE, m.repo_uid.clone())));
            }
            for (i, b) in links.blobs.iter().enumerate() {
                let linked: Option<i64> = tx
                    .prepare_cached(
                        "SELECT b.size FROM repo_blobs r JOIN blobs b ON b.digest = r.digest \
                         WHERE r.repo_uid = ?1 AND r.digest = ?2",
                    )?
                    .query_row([&m.repo_uid, b], |r| r.get(0))
                    .optional()?;
                match (linked, links.blob_sizes.get(i)) {
                    (None, _) => return Ok(Err(Error::not_found(BLOB_TYPE, b.clone()))),
                    (Some(stored), Some(&declared)) if stored != declared => {
                        return Ok(Err(crate::registry::blob_size_mismatch(b, declared, stored)));
                    }
                    _ => {}
                }
            }
            for child in &links.manifests {
                if !has_manifest(&tx, &m.repo_uid, child)? {
                    return Ok(Err(Error::not_found(MANIFEST_TYPE, child.clone())));
                }
            }
            let inserted = tx.execute(
                &format!(
                    "INSERT INTO manifests ({MANIFEST_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                     ON CONFLICT (repo_uid, digest) DO NOTHING"
                ),
                params![
                    m.repo_uid,
                    m.digest,
                    m.media_type,
                    m.artifact_type,
                    m.subject,
                    m.annotations,
                    m.content,
                    m.create_time
                ],
            )?;
            if inserted > 0 {
                for target in links.blobs.iter().chain(&links.manifests) {
                    tx.execute(
                        "INSERT INTO manifest_refs (repo_uid, manifest_digest, target) VALUES (?1, ?2, ?3) \
                         ON CONFLICT DO NOTHING",
                        [&m.repo_uid, &m.digest, target],
                    )?;
                }
            }
            let mut pushed = Pushed::default();
            if let Some(t) = &tag {
                pushed.previous_digest = tx
                    .prepare_cached("SELECT digest FROM tags WHERE parent_uid = ?1 AND name = ?2")?
                    .query_row([&t.parent_uid, &t.name], |r| r.get::<_, Option<String>>(0))
                    .optional()?
                    .flatten()
                    .unwrap_or_default();
                pushed.tag = Some(upsert_tag(&tx, t, false)?);
            }
            insert_event(&tx, &emit.record(&pushed))?;
            tx.commit()?;
            Ok(Ok(pushed.tag))
        })
        .await?
    }

    async fn get_manifest(&self, repo_uid: &str, digest: &str) -> Result<Option<ManifestRecord>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("get manifest", move |c| {
            c.prepare_cached(&format!(
                "SELECT {MANIFEST_SELECT} FROM manifests WHERE repo_uid = ?1 AND digest = ?2"
            ))?
            .query_row([repo, digest], manifest_from_row)
            .optional()
        })
        .await
    }

    async fn delete_manifest(&self, repo_uid: &str, digest: &str) -> Result<bool> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.write("delete manifest", move |c| {
            let tx = c.savepoint()?;
            tx.execute(
                "DELETE FROM tags WHERE parent_uid = ?1 AND digest = ?2",
                [&repo, &digest],
            )?;
            let n = tx.execute(
                "DELETE FROM manifests WHERE repo_uid = ?1 AND digest = ?2",
                [&repo, &digest],
            )?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    async fn referrers(&self, repo_uid: &str, digest: &str, limit: u32) -> Result<Vec<ManifestRecord>> {
        let (repo, digest) = (repo_uid.to_owned(), digest.to_owned());
        self.read("referrers", move |c| {
            c.prepare_cached(
                "SELECT repo_uid, digest, media_type, artifact_type, subject, annotations, x'', create_time, \
                 length(content) FROM manifests WHERE repo_uid = ?1 AND subject = ?2 ORDER BY digest LIMIT ?3",
            )?
            .query_map(params![repo, digest, limit], manifest_from_row)?
            .collect()
        })
        .await
    }

    async fn put_tag(&self, t: &TagRecord, emit: Emit<TagRecord>) -> Result<TagRecord> {
        let t = t.clone();
        self.write("put tag", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "repos", &t.parent_uid)? {
                return Ok(Err(Error::not_found(REPO_TYPE, t.parent_uid.clone())));
            }
            if !t.digest.is_empty() && !has_manifest(&tx, &t.parent_uid, &t.digest)? {
                return Ok(Err(Error::not_found(MANIFEST_TYPE, t.digest.clone())));
            }
            let row = upsert_tag(&tx, &t, true)?;
            insert_event(&tx, &emit.record(&row))?;
            tx.commit()?;
            Ok(Ok(row))
        })
        .await?
    }

    async fn get_tag(&self, uid: &Uidp) -> Result<Option<TagRecord>> {
        self.get_one("get tag", "tags", TAG_COLUMNS, uid, tag_from_row).await
    }

    async fn find_tag(&self, repo_uid: &str, name: &str) -> Result<Option<TagRecord>> {
        let (repo, name) = (repo_uid.to_owned(), name.to_owned());
        self.read("find tag", move |c| {
            c.prepare_cached(&format!(
                "SELECT {TAG_COLUMNS} FROM tags WHERE parent_uid = ?1 AND name = ?2"
            ))?
            .query_row([repo, name], tag_from_row)
            .optional()
        })
        .await
    }

    async fn delete_tag(&self, uid: &Uidp, emit: Emit<()>) -> Result<bool> {
        let u = uid.as_str().to_owned();
        self.write("delete tag", move |c| {
            let tx = c.savepoint()?;
            let gone = tx.execute("DELETE FROM tags WHERE uid = ?1", [u])? > 0;
            if gone {
                insert_event(&tx, &emit.record(&()))?;
            }
            tx.commit()?;
            Ok(gone)
        })
        .await
    }

    async fn list_tags(&self, q: &ListQuery) -> Result<Page<TagRecord>> {
        self.list("list tags", "tags", TAG_COLUMNS, q, tag_from_row).await
    }

    async fn tag_history(
        &self,
        tag_uid: &Uidp,
        start_ms: i64,
        end_ms: i64,
        limit: u32,
    ) -> Result<Vec<TagHistoryRecord>> {
        let (u, limit) = (tag_uid.as_str().to_owned(), limit.min(MAX_TAG_HISTORY));
        self.read("tag history", move |c| {
            c.prepare_cached(
                "SELECT update_time, digest FROM tag_history \
                 WHERE tag_uid = ?1 AND update_time >= ?2 AND update_time <= ?3 ORDER BY update_time LIMIT ?4",
            )?
            .query_map(params![u, start_ms, end_ms, limit], |r| {
                Ok(TagHistoryRecord {
                    update_time: r.get(0)?,
                    digest: r.get(1)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn tag_names(&self, repo_uid: &str, last: Option<&str>, limit: u32) -> Result<Vec<String>> {
        let (repo, last) = (repo_uid.to_owned(), last.unwrap_or("").to_owned());
        self.read("tag names", move |c| {
            c.prepare_cached("SELECT name FROM tags WHERE parent_uid = ?1 AND name > ?2 AND digest IS NOT NULL ORDER BY name LIMIT ?3")?
                .query_map(params![repo, last, limit], |r| r.get(0))?
                .collect()
        })
        .await
    }

    async fn create_upload(&self, u: &UploadRecord, creator: &str, caps: UploadCaps) -> Result<()> {
        let (u, creator) = (u.clone(), creator.to_owned());
        self.write("create upload", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "repos", &u.repo_uid)? {
                return Ok(Err(Error::not_found(REPO_TYPE, u.repo_uid.clone())));
            }
            let count = |sql: &str, key: &str| -> rusqlite::Result<i64> {
                tx.prepare_cached(sql)?
                    .query_row(params![key, caps.active_since], |r| r.get(0))
            };
            let by_creator = "SELECT count(*) FROM uploads WHERE creator = ?1 AND update_time >= ?2";
            if count(by_creator, &creator)? >= i64::from(caps.per_creator) {
                return Ok(Err(crate::registry::too_many_uploads(
                    "this identity",
                    caps.per_creator,
                )));
            }
            let by_repo = "SELECT count(*) FROM uploads WHERE repo_uid = ?1 AND update_time >= ?2";
            if count(by_repo, &u.repo_uid)? >= i64::from(caps.per_repo) {
                return Ok(Err(crate::registry::too_many_uploads("this repository", caps.per_repo)));
            }
            tx.execute(
                "INSERT INTO uploads (uuid, repo_uid, size, create_time, update_time, creator) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![u.uuid, u.repo_uid, u.size, u.create_time, u.update_time, creator],
            )?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_upload(&self, uuid: &str) -> Result<Option<UploadRecord>> {
        let id = uuid.to_owned();
        self.read("get upload", move |c| {
            c.prepare_cached("SELECT uuid, repo_uid, size, create_time, update_time FROM uploads WHERE uuid = ?1")?
                .query_row([id], |r| {
                    Ok(UploadRecord {
                        uuid: r.get(0)?,
                        repo_uid: r.get(1)?,
                        size: r.get(2)?,
                        create_time: r.get(3)?,
                        update_time: r.get(4)?,
                    })
                })
                .optional()
        })
        .await
    }

    async fn advance_upload(&self, uuid: &str, from: i64, to: i64, now_ms: i64) -> Result<bool> {
        let id = uuid.to_owned();
        self.write("advance upload", move |c| {
            Ok(c.execute(
                "UPDATE uploads SET size = ?1, update_time = ?2 WHERE uuid = ?3 AND size = ?4",
                params![to, now_ms, id, from],
            )? > 0)
        })
        .await
    }

    async fn delete_upload(&self, uuid: &str) -> Result<bool> {
        let id = uuid.to_owned();
        self.write("delete upload", move |c| {
            Ok(c.execute("DELETE FROM uploads WHERE uuid = ?1", [id])? > 0)
        })
        .await
    }

    async fn unreferenced_blobs(&self, before_ms: i64, limit: u32) -> Result<Vec<String>> {
        self.read("unreferenced blobs", move |c| {
            c.prepare_cached(
                "SELECT digest FROM blobs b WHERE create_time < ?1 \
                 AND NOT EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.digest = b.digest) \
                 AND NOT EXISTS (SELECT 1 FROM manifest_refs mr WHERE mr.target = b.digest) \
                 ORDER BY digest LIMIT ?2",
            )?
            .query_map(params![before_ms, limit], |r| r.get(0))?
            .collect()
        })
        .await
    }

    async fn known_blobs(&self, after: &str, limit: u32) -> Result<Vec<(String, i64)>> {
        let after = after.to_owned();
        self.read("known blobs", move |c| {
            c.prepare_cached("SELECT digest, size FROM blobs WHERE digest > ?1 ORDER BY digest LIMIT ?2")?
                .query_map(params![after, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .await
    }

    async fn forget_blob(&self, digest: &str) -> Result<bool> {
        let d = digest.to_owned();
        self.write("forget blob", move |c| {
            Ok(c.execute(
                "DELETE FROM blobs WHERE digest = ?1 \
                 AND NOT EXISTS (SELECT 1 FROM repo_blobs rb WHERE rb.digest = ?1) \
                 AND NOT EXISTS (SELECT 1 FROM manifest_refs mr WHERE mr.target = ?1)",
                [d],
            )? > 0)
        })
        .await
    }

    async fn stale_uploads(&self, before_ms: i64, limit: u32) -> Result<Vec<String>> {
        self.read("stale uploads", move |c| {
            c.prepare_cached("SELECT uuid FROM uploads WHERE update_time < ?1 ORDER BY update_time LIMIT ?2")?
                .query_map(params![before_ms, limit], |r| r.get(0))?
                .collect()
        })
        .await
    }
}
