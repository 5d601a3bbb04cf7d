//! The people tables on PostgreSQL.

use async_trait::async_trait;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event;
use super::{PostgresStore, bind_identity, insert_binding, insert_identity_sql, lock};
use crate::events::Emit;
use crate::people::{
    AccessRequestRecord, DeviceLoginRecord, GROUP_INVITE_TYPE, GROUP_MAPPING_TYPE, GroupInviteRecord,
    GroupMappingRecord, IDENTITY_PROVIDER_TYPE, IdentityProviderPatch, IdentityProviderRecord, MAX_DEVICE_LOGINS,
    MAX_DIRECTORY_ROWS, MAX_MAPPINGS_PER_PROVIDER, PeopleStore, PersonRecord, TermsRecord,
};
use crate::sql::{GROUP_INVITE_COLUMNS, GROUP_MAPPING_COLUMNS, IDENTITY_PROVIDER_COLUMNS, PERSON_COLUMNS};
use crate::{IDENTITY_TYPE, IdentityRecord, ROLE_TYPE, RoleBindingRecord, db_err};

#[async_trait]
impl PeopleStore for PostgresStore {
    async fn create_identity_provider(&self, r: &IdentityProviderRecord, emit: Emit<()>) -> Result<()> {
        let sql = format!(
            "INSERT INTO identity_providers ({IDENTITY_PROVIDER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        );
        let insert = sqlx::query(&sql)
            .bind(&r.uid)
            .bind(&r.parent_uid)
            .bind(&r.name)
            .bind(&r.description)
            .bind(&r.default_role)
            .bind(&r.issuer)
            .bind(&r.oidc)
            .bind(&r.client_secret)
            .bind(r.create_time)
            .bind(r.update_time);
        self.insert_under_group(Some(&r.parent_uid), insert, Some(emit.record(&())))
            .await
    }

    async fn get_identity_provider(&self, uid: &Uidp) -> Result<Option<IdentityProviderRecord>> {
        self.get_one("identity_providers", IDENTITY_PROVIDER_COLUMNS, uid).await
    }

    async fn identity_providers_of(&self, group: &Uidp) -> Result<Vec<IdentityProviderRecord>> {
        sqlx::query_as(&format!(
            "SELECT {IDENTITY_PROVIDER_COLUMNS} FROM identity_providers WHERE parent_uid = $1 ORDER BY uid LIMIT 100"
        ))
        .bind(group.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("identity providers of a group", e))
    }

    async fn update_identity_provider(
        &self,
        uid: &Uidp,
        p: &IdentityProviderPatch,
        now_ms: i64,
        emit: Emit<IdentityProviderRecord>,
    ) -> Result<IdentityProviderRecord> {
        let mut tx = self.begin().await?;
        let (issuer, oidc) = p.oidc.clone().unzip();
        let (set_secret, secret) = match &p.client_secret {
            Some(s) => (true, s.clone()),
            None => (false, None),
        };
        let row: Option<IdentityProviderRecord> = sqlx::query_as(&format!(
            "UPDATE identity_providers SET name = COALESCE($1, name), \
             description = COALESCE($2, description), default_role = COALESCE($3, default_role), \
             issuer = COALESCE($4, issuer), oidc = COALESCE($5, oidc), \
             client_secret = CASE WHEN $6 THEN $7 ELSE client_secret END, \
             update_time = CASE WHEN $8 > update_time THEN $8 ELSE update_time + 1 END \
             WHERE uid = $9 RETURNING {IDENTITY_PROVIDER_COLUMNS}"
        ))
        .bind(&p.name)
        .bind(&p.description)
        .bind(&p.default_role)
        .bind(issuer)
        .bind(oidc)
        .bind(set_secret)
        .bind(secret)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_err("update identity provider", e))?;
        let row = row.ok_or_else(|| Error::not_found(IDENTITY_PROVIDER_TYPE, uid.as_str()))?;
        insert_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn delete_identity_provider(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        self.delete_by_uid("identity_providers", IDENTITY_PROVIDER_TYPE, uid, emit)
            .await
    }

    async fn list_identity_providers(&self, q: &ListQuery) -> Result<Page<IdentityProviderRecord>> {
        self.list("identity_providers", IDENTITY_PROVIDER_COLUMNS, q).await
    }

    async fn create_group_mapping(&self, r: &GroupMappingRecord, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        // Locking the provider serializes creates under it: the count and the
        // duplicate check hold until commit.
        if !lock(&mut tx, "identity_providers", &r.parent_uid, "FOR UPDATE").await? {
            return Err(Error::not_found(IDENTITY_PROVIDER_TYPE, r.parent_uid.clone()));
        }
        if !lock(&mut tx, "roles", &r.role_uid, "FOR SHARE").await? {
            return Err(Error::not_found(ROLE_TYPE, r.role_uid.clone()));
        }
        let (dup, count): (bool, i64) = sqlx::query_as(
            "SELECT COALESCE(BOOL_OR(name = $2 AND role_uid = $3 AND scope = $4), FALSE), COUNT(*) \
             FROM external_group_role_mappings WHERE parent_uid = $1",
        )
        .bind(&r.parent_uid)
        .bind(&r.name)
        .bind(&r.role_uid)
        .bind(&r.scope)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| db_err("check group mappings", e))?;
        if dup {
            return Err(Error::AlreadyExists {
                resource_type: GROUP_MAPPING_TYPE,
                name: r.name.clone(),
            });
        }
        if usize::try_from(count).unwrap_or(usize::MAX) >= MAX_MAPPINGS_PER_PROVIDER {
            return Err(Error::precondition(
                "TOO_MANY_MAPPINGS",
                r.parent_uid.clone(),
                format!("an identity provider holds at most {MAX_MAPPINGS_PER_PROVIDER} group mappings"),
            ));
        }
        sqlx::query(&format!(
            "INSERT INTO external_group_role_mappings ({GROUP_MAPPING_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(&r.uid)
        .bind(&r.parent_uid)
        .bind(&r.name)
        .bind(&r.role_uid)
        .bind(&r.scope)
        .bind(r.create_time)
        .bind(r.update_time)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("insert group mapping", e))?;
        insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_group_mapping(&self, uid: &Uidp) -> Result<Option<GroupMappingRecord>> {
        self.get_one("external_group_role_mappings", GROUP_MAPPING_COLUMNS, uid)
            .await
    }

    async fn delete_group_mappings(&self, uids: &[String], emit: Emit<Vec<String>>) -> Result<Vec<String>> {
        let mut tx = self.begin().await?;
        let rows: Vec<(String,)> =
            sqlx::query_as("DELETE FROM external_group_role_mappings WHERE uid = ANY($1) RETURNING uid")
                .bind(uids)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| db_err("delete group mappings", e))?;
        let deleted: Vec<String> = rows.into_iter().map(|(u,)| u).collect();
        if !deleted.is_empty() {
            insert_event(&mut tx, &emit.record(&deleted)).await?;
        }
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(deleted)
    }

    async fn list_group_mappings(&self, q: &ListQuery) -> Result<Page<GroupMappingRecord>> {
        self.list("external_group_role_mappings", GROUP_MAPPING_COLUMNS, q)
            .await
    }

    async fn group_mappings_of(&self, provider: &str) -> Result<Vec<GroupMappingRecord>> {
        sqlx::query_as(&format!(
            "SELECT {GROUP_MAPPING_COLUMNS} FROM external_group_role_mappings WHERE parent_uid = $1 \
             ORDER BY uid LIMIT {MAX_MAPPINGS_PER_PROVIDER}"
        ))
        .bind(provider)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("group mappings of a provider", e))
    }

    async fn create_group_invite(&self, r: &GroupInviteRecord, emit: Emit<()>) -> Result<()> {
        let sql =
            format!("INSERT INTO group_invites ({GROUP_INVITE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
        let insert = sqlx::query(&sql)
            .bind(&r.uid)
            .bind(&r.parent_uid)
            .bind(&r.name)
            .bind(&r.role_uid)
            .bind(&r.email)
            .bind(r.expire_time)
            .bind(r.single_use)
            .bind(r.create_time)
            .bind(r.update_time);
        self.insert_under_group(Some(&r.parent_uid), insert, Some(emit.record(&())))
            .await
    }

    async fn get_group_invite(&self, uid: &Uidp) -> Result<Option<GroupInviteRecord>> {
        self.get_one("group_invites", GROUP_INVITE_COLUMNS, uid).await
    }

    async fn delete_group_invite(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        self.delete_by_uid("group_invites", GROUP_INVITE_TYPE, uid, emit).await
    }

    async fn list_group_invites(&self, q: &ListQuery) -> Result<Page<GroupInviteRecord>> {
        self.list("group_invites", GROUP_INVITE_COLUMNS, q).await
    }

    async fn accept_group_invite(
        &self,
        invite: &Uidp,
        key_id: &str,
        now_ms: i64,
        binding: &RoleBindingRecord,
        emit: Emit<()>,
    ) -> Result<(GroupInviteRecord, bool)> {
        let mut tx = self.begin().await?;
        // FOR UPDATE: two accepts of a single-use invite run one after the
        // other, and the second finds it gone.
        let found: Option<GroupInviteRecord> = sqlx::query_as(&format!(
            "SELECT {GROUP_INVITE_COLUMNS} FROM group_invites WHERE uid = $1 FOR UPDATE"
        ))
        .bind(invite.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_err("find group invite", e))?;
        let Some(inv) = found.filter(|i| i.name == key_id) else {
            return Err(Error::not_found(GROUP_INVITE_TYPE, invite.as_str()));
        };
        if inv.expire_time <= now_ms {
            return Err(Error::precondition(
                "INVITE_EXPIRED",
                invite.as_str(),
                "the invite has expired",
            ));
        }
        if !lock(&mut tx, "identities", &binding.identity_uid, "FOR SHARE").await? {
            return Err(Error::not_found(IDENTITY_TYPE, binding.identity_uid.clone()));
        }
        if !lock(&mut tx, "roles", &inv.role_uid, "FOR SHARE").await? {
            return Err(Error::precondition(
                "INVITE_ROLE_DELETED",
                invite.as_str(),
                "the invite's role no longer exists",
            ));
        }
        let bound: Option<(i32,)> =
            sqlx::query_as("SELECT 1 FROM role_bindings WHERE parent_uid = $1 AND identity_uid = $2 AND role_uid = $3")
                .bind(&inv.parent_uid)
                .bind(&binding.identity_uid)
                .bind(&inv.role_uid)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| db_err("find role binding", e))?;
        if bound.is_none() {
            let b = RoleBindingRecord {
                parent_uid: inv.parent_uid.clone(),
                role_uid: inv.role_uid.clone(),
                ..binding.clone()
            };
            insert_binding(&mut tx, &b).await?;
        }
        if inv.single_use {
            sqlx::query("DELETE FROM group_invites WHERE uid = $1")
                .bind(invite.as_str())
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("delete group invite", e))?;
        }
        insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok((inv, bound.is_none()))
    }

    async fn record_login(
        &self,
        identity: &IdentityRecord,
        person: &PersonRecord,
        first_binding: Option<&RoleBindingRecord>,
        now_ms: i64,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let sql = format!("{} ON CONFLICT (uid) DO NOTHING", insert_identity_sql());
        let mut created = bind_identity(sqlx::query(&sql), identity)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("insert identity", e))?
            .rows_affected()
            == 1;
        if !created {
            // A person bound before their first login: this login fills in
            // the identity the binding made.
            created = sqlx::query(
                "UPDATE identities SET name = $1, description = $2, relationship_type = $3, relationship = $4, \
                 issuer = $5, subject = $6, last_seen_time = $7, update_time = $7 \
                 WHERE uid = $8 AND relationship_type = 0 AND issuer = ''",
            )
            .bind(&identity.name)
            .bind(&identity.description)
            .bind(identity.relationship_type)
            .bind(&identity.relationship)
            .bind(&identity.issuer)
            .bind(&identity.subject)
            .bind(now_ms)
            .bind(&identity.uid)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("fill in a pending identity", e))?
            .rows_affected()
                == 1;
        }
        let first_here = sqlx::query(
            "INSERT INTO person_providers (identity_uid, identity_provider_uid) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(&identity.uid)
        .bind(&person.identity_provider_uid)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("record the provider", e))?
        .rows_affected()
            == 1;
        if first_here
            && let Some(b) = first_binding
            && lock(&mut tx, "groups", &b.parent_uid, "FOR SHARE").await?
            && lock(&mut tx, "roles", &b.role_uid, "FOR SHARE").await?
        {
            let bound: Option<(i32,)> = sqlx::query_as(
                "SELECT 1 FROM role_bindings WHERE parent_uid = $1 AND identity_uid = $2 AND role_uid = $3",
            )
            .bind(&b.parent_uid)
            .bind(&b.identity_uid)
            .bind(&b.role_uid)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db_err("find role binding", e))?;
            if bound.is_none() {
                insert_binding(&mut tx, b).await?;
            }
        }
        if !created {
            sqlx::query("UPDATE identities SET last_seen_time = $1 WHERE uid = $2")
                .bind(now_ms)
                .bind(&identity.uid)
                .execute(&mut *tx)
                .await
                .map_err(|e| db_err("mark identity seen", e))?;
        }
        sqlx::query(&format!(
            "INSERT INTO people ({PERSON_COLUMNS}) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (identity_uid) DO UPDATE SET identity_provider_uid = EXCLUDED.identity_provider_uid, \
             email = EXCLUDED.email, email_verified = EXCLUDED.email_verified, display_name = EXCLUDED.display_name"
        ))
        .bind(&person.identity_uid)
        .bind(&person.identity_provider_uid)
        .bind(&person.email)
        .bind(person.email_verified)
        .bind(&person.display_name)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("record person", e))?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(created)
    }

    async fn get_person(&self, identity_uid: &str) -> Result<Option<PersonRecord>> {
        sqlx::query_as(&format!("SELECT {PERSON_COLUMNS} FROM people WHERE identity_uid = $1"))
            .bind(identity_uid)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("get person", e))
    }

    async fn verify_org(&self, group: &Uidp, domains: &[String]) -> Result<()> {
        let mut tx = self.begin().await?;
        let done = sqlx::query("UPDATE groups SET verified = TRUE WHERE uid = $1")
            .bind(group.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("verify organization", e))?;
        if done.rows_affected() == 0 {
            return Err(Error::not_found(crate::GROUP_TYPE, group.as_str()));
        }
        for d in domains {
            sqlx::query(
                "INSERT INTO verified_domains (domain, group_uid) VALUES ($1, $2) \
                 ON CONFLICT (domain) DO UPDATE SET group_uid = EXCLUDED.group_uid",
            )
            .bind(d)
            .bind(group.as_str())
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("record verified domain", e))?;
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn verified_orgs_named(&self, name: &str) -> Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT uid FROM groups WHERE parent_uid IS NULL AND name = $1 AND verified ORDER BY uid LIMIT 2",
        )
        .bind(name)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("verified organizations by name", e))?;
        Ok(rows.into_iter().map(|(u,)| u).collect())
    }

    async fn org_of_domain(&self, domain: &str) -> Result<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT group_uid FROM verified_domains WHERE domain = $1")
            .bind(domain)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("organization of a domain", e))?;
        Ok(row.map(|(g,)| g))
    }

    async fn accept_terms(
        &self,
        group: &Uidp,
        doc_ids: &[String],
        by: &str,
        now_ms: i64,
        emit: Emit<()>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "groups", group.as_str(), "FOR SHARE").await? {
            return Err(Error::not_found(crate::GROUP_TYPE, group.as_str()));
        }
        for d in doc_ids {
            sqlx::query(
                "INSERT INTO terms_acceptances (group_uid, doc_id, accepted_by, create_time) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(group.as_str())
            .bind(d)
            .bind(by)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("accept terms", e))?;
        }
        insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn terms_acceptances(&self, groups: &[String]) -> Result<Vec<TermsRecord>> {
        sqlx::query_as(&format!(
            "SELECT group_uid, doc_id, accepted_by, create_time FROM terms_acceptances \
             WHERE group_uid = ANY($1) ORDER BY create_time DESC, doc_id, accepted_by LIMIT {MAX_DIRECTORY_ROWS}"
        ))
        .bind(groups)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("terms acceptances", e))
    }

    async fn request_access(&self, r: &AccessRequestRecord) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO group_access_requests (group_uid, identity_uid, email, create_time) \
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(&r.group_uid)
        .bind(&r.identity_uid)
        .bind(&r.email)
        .bind(r.create_time)
        .execute(&self.pool)
        .await
        .map_err(|e| db_err("request group access", e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn access_requests(&self, group: &str) -> Result<Vec<AccessRequestRecord>> {
        sqlx::query_as(&format!(
            "SELECT group_uid, identity_uid, email, create_time FROM group_access_requests \
             WHERE group_uid = $1 ORDER BY create_time, identity_uid LIMIT {MAX_DIRECTORY_ROWS}"
        ))
        .bind(group)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| db_err("group access requests", e))
    }

    async fn create_device_login(
        &self,
        r: &DeviceLoginRecord,
        client: &str,
        per_client: i64,
        now_ms: i64,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        // One start at a time: the count holds until commit.
        sqlx::query("LOCK TABLE device_logins IN SHARE ROW EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("lock headless logins", e))?;
        sqlx::query("DELETE FROM device_logins WHERE expire_time <= $1")
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("forget expired headless logins", e))?;
        let (from_client,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM device_logins WHERE client = $1")
            .bind(client)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db_err("count headless logins", e))?;
        if from_client >= per_client {
            return Err(crate::people::too_many_device_logins_from_client(per_client));
        }
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM device_logins WHERE idp_uid = $1")
            .bind(&r.idp_uid)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| db_err("count headless logins", e))?;
        if n >= MAX_DEVICE_LOGINS {
            return Err(Error::ResourceExhausted(
                "too many headless logins are in progress; try again in a few minutes".into(),
            ));
        }
        let inserted = sqlx::query(
            "INSERT INTO device_logins (id, user_code, idp_uid, challenge, handoff, expire_time, client) \
             VALUES ($1, $2, $3, $4, NULL, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(&r.id)
        .bind(&r.user_code)
        .bind(&r.idp_uid)
        .bind(&r.challenge)
        .bind(r.expire_time)
        .bind(client)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("start headless login", e))?
        .rows_affected();
        if inserted == 0 {
            return Err(Error::AlreadyExists {
                resource_type: "device login",
                name: String::new(),
            });
        }
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn pending_device_login(&self, user_code: &str, now_ms: i64) -> Result<Option<DeviceLoginRecord>> {
        sqlx::query_as(
            "SELECT id, user_code, idp_uid, challenge, handoff, expire_time FROM device_logins \
             WHERE user_code = $1 AND handoff IS NULL AND expire_time > $2",
        )
        .bind(user_code)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("find headless login", e))
    }

    async fn finish_device_login(&self, id: &str, handoff: &str, now_ms: i64) -> Result<bool> {
        let done =
            sqlx::query("UPDATE device_logins SET handoff = $1 WHERE id = $2 AND handoff IS NULL AND expire_time > $3")
                .bind(handoff)
                .bind(id)
                .bind(now_ms)
                .execute(&self.pool)
                .await
                .map_err(|e| db_err("finish headless login", e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn take_device_login(&self, id: &str, challenge: &str, now_ms: i64) -> Result<Option<DeviceLoginRecord>> {
        // A finished login (with the right challenge) or an expired one is
        // deleted by the one poll that sees it.
        let taken: Option<DeviceLoginRecord> = sqlx::query_as(
            "DELETE FROM device_logins WHERE id = $1 \
             AND ((handoff IS NOT NULL AND challenge = $3) OR expire_time <= $2) \
             RETURNING id, user_code, idp_uid, challenge, handoff, expire_time",
        )
        .bind(id)
        .bind(now_ms)
        .bind(challenge)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("take headless login", e))?;
        if let Some(r) = taken {
            return Ok((r.expire_time > now_ms).then_some(r));
        }
        sqlx::query_as(
            "SELECT id, user_code, idp_uid, challenge, handoff, expire_time FROM device_logins \
             WHERE id = $1 AND expire_time > $2",
        )
        .bind(id)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| db_err("find headless login", e))
    }

    async fn identity_metadata(&self, identity_uid: &str) -> Result<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT data FROM identity_metadata WHERE identity_uid = $1")
            .bind(identity_uid)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err("identity metadata", e))?;
        Ok(row.map(|(d,)| d))
    }

    async fn set_identity_metadata(&self, identity_uid: &str, data: &str, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        if !lock(&mut tx, "identities", identity_uid, "FOR SHARE").await? {
            return Err(Error::not_found(IDENTITY_TYPE, identity_uid));
        }
        sqlx::query(
            "INSERT INTO identity_metadata (identity_uid, data) VALUES ($1, $2) \
             ON CONFLICT (identity_uid) DO UPDATE SET data = EXCLUDED.data",
        )
        .bind(identity_uid)
        .bind(data)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("set identity metadata", e))?;
        insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn use_once(&self, id: &str, expire_ms: i64, now_ms: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM used_once WHERE expire_time < $1")
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("forget expired one-time values", e))?;
        let n = sqlx::query("INSERT INTO used_once (id, expire_time) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
            .bind(id)
            .bind(expire_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| db_err("use once", e))?
            .rows_affected();
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(n == 1)
    }
}
