//! The people tables on SQLite.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event;
use super::{SqliteStore, exists, insert_binding};
use crate::events::Emit;
use crate::people::{
    AccessRequestRecord, DeviceLoginRecord, GROUP_INVITE_TYPE, GROUP_MAPPING_TYPE, GroupInviteRecord,
    GroupMappingRecord, IDENTITY_PROVIDER_TYPE, IdentityProviderPatch, IdentityProviderRecord, MAX_DEVICE_LOGINS,
    MAX_DIRECTORY_ROWS, MAX_MAPPINGS_PER_PROVIDER, PeopleStore, PersonRecord, TermsRecord,
};
use crate::sql::{GROUP_INVITE_COLUMNS, GROUP_MAPPING_COLUMNS, IDENTITY_PROVIDER_COLUMNS, PERSON_COLUMNS};
use crate::{GROUP_TYPE, IDENTITY_TYPE, IdentityRecord, ROLE_TYPE, RoleBindingRecord};

fn provider_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IdentityProviderRecord> {
    Ok(IdentityProviderRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        default_role: r.get(4)?,
        issuer: r.get(5)?,
        oidc: r.get(6)?,
        client_secret: r.get(7)?,
        create_time: r.get(8)?,
        update_time: r.get(9)?,
    })
}

fn mapping_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GroupMappingRecord> {
    Ok(GroupMappingRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        role_uid: r.get(3)?,
        scope: r.get(4)?,
        create_time: r.get(5)?,
        update_time: r.get(6)?,
    })
}

fn invite_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GroupInviteRecord> {
    Ok(GroupInviteRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        role_uid: r.get(3)?,
        email: r.get(4)?,
        expire_time: r.get(5)?,
        single_use: r.get(6)?,
        create_time: r.get(7)?,
        update_time: r.get(8)?,
    })
}

fn person_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PersonRecord> {
    Ok(PersonRecord {
        identity_uid: r.get(0)?,
        identity_provider_uid: r.get(1)?,
        email: r.get(2)?,
        email_verified: r.get(3)?,
        display_name: r.get(4)?,
    })
}

fn device_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DeviceLoginRecord> {
    Ok(DeviceLoginRecord {
        id: r.get(0)?,
        user_code: r.get(1)?,
        idp_uid: r.get(2)?,
        challenge: r.get(3)?,
        handoff: r.get(4)?,
        expire_time: r.get(5)?,
    })
}

fn upsert_person(c: &Connection, p: &PersonRecord) -> rusqlite::Result<usize> {
    c.prepare_cached(&format!(
        "INSERT INTO people ({PERSON_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (identity_uid) DO UPDATE SET identity_provider_uid = excluded.identity_provider_uid, \
         email = excluded.email, email_verified = excluded.email_verified, display_name = excluded.display_name"
    ))?
    .execute(params![
        p.identity_uid,
        p.identity_provider_uid,
        p.email,
        p.email_verified,
        p.display_name
    ])
}

#[async_trait]
impl PeopleStore for SqliteStore {
    async fn create_identity_provider(&self, r: &IdentityProviderRecord, emit: Emit<()>) -> Result<()> {
        let r = r.clone();
        self.write("create identity provider", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &r.parent_uid)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, r.parent_uid.clone())));
            }
            tx.execute(
                &format!("INSERT INTO identity_providers ({IDENTITY_PROVIDER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
                params![
                    r.uid,
                    r.parent_uid,
                    r.name,
                    r.description,
                    r.default_role,
                    r.issuer,
                    r.oidc,
                    r.client_secret,
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

    async fn get_identity_provider(&self, uid: &Uidp) -> Result<Option<IdentityProviderRecord>> {
        self.get_one(
            "get identity provider",
            "identity_providers",
            IDENTITY_PROVIDER_COLUMNS,
            uid,
            provider_from_row,
        )
        .await
    }

    async fn identity_providers_of(&self, group: &Uidp) -> Result<Vec<IdentityProviderRecord>> {
        let group = group.as_str().to_owned();
        self.read("identity providers of a group", move |c| {
            c.prepare_cached(&format!(
                "SELECT {IDENTITY_PROVIDER_COLUMNS} FROM identity_providers WHERE parent_uid = ?1 ORDER BY uid LIMIT 100"
            ))?
            .query_map([group], provider_from_row)?
            .collect()
        })
        .await
    }

    async fn update_identity_provider(
        &self,
        uid: &Uidp,
        p: &IdentityProviderPatch,
        now_ms: i64,
        emit: Emit<IdentityProviderRecord>,
    ) -> Result<IdentityProviderRecord> {
        let (key, p) = (uid.as_str().to_owned(), p.clone());
        let (issuer, oidc) = p.oidc.clone().unzip();
        let (set_secret, secret) = match p.client_secret {
            Some(s) => (true, s),
            None => (false, None),
        };
        let row = self
            .write("update identity provider", move |c| {
                let tx = c.savepoint()?;
                let row = tx
                    .prepare_cached(&format!(
                        "UPDATE identity_providers SET name = COALESCE(?1, name), \
                     description = COALESCE(?2, description), default_role = COALESCE(?3, default_role), \
                     issuer = COALESCE(?4, issuer), oidc = COALESCE(?5, oidc), \
                     client_secret = CASE WHEN ?6 THEN ?7 ELSE client_secret END, \
                     update_time = CASE WHEN ?8 > update_time THEN ?8 ELSE update_time + 1 END \
                     WHERE uid = ?9 RETURNING {IDENTITY_PROVIDER_COLUMNS}"
                    ))?
                    .query_row(
                        params![
                            p.name,
                            p.description,
                            p.default_role,
                            issuer,
                            oidc,
                            set_secret,
                            secret,
                            now_ms,
                            key
                        ],
                        provider_from_row,
                    )
                    .optional()?;
                if let Some(r) = &row {
                    insert_event(&tx, &emit.record(r))?;
                }
                tx.commit()?;
                Ok(row)
            })
            .await?;
        row.ok_or_else(|| Error::not_found(IDENTITY_PROVIDER_TYPE, uid.as_str()))
    }

    async fn delete_identity_provider(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        self.delete_by_uid(
            "delete identity provider",
            "identity_providers",
            IDENTITY_PROVIDER_TYPE,
            uid,
            emit,
        )
        .await
    }

    async fn list_identity_providers(&self, q: &ListQuery) -> Result<Page<IdentityProviderRecord>> {
        self.list(
            "list identity providers",
            "identity_providers",
            IDENTITY_PROVIDER_COLUMNS,
            q,
            provider_from_row,
        )
        .await
    }

    async fn create_group_mapping(&self, r: &GroupMappingRecord, emit: Emit<()>) -> Result<()> {
        let r = r.clone();
        self.write("create group mapping", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "identity_providers", &r.parent_uid)? {
                return Ok(Err(Error::not_found(IDENTITY_PROVIDER_TYPE, r.parent_uid.clone())));
            }
            if !exists(&tx, "roles", &r.role_uid)? {
                return Ok(Err(Error::not_found(ROLE_TYPE, r.role_uid.clone())));
            }
            let (dup, count): (bool, usize) = tx.query_row(
                "SELECT COALESCE(MAX(name = ?2 AND role_uid = ?3 AND scope = ?4), 0), COUNT(*) \
                 FROM external_group_role_mappings WHERE parent_uid = ?1",
                params![r.parent_uid, r.name, r.role_uid, r.scope],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            if dup {
                return Ok(Err(Error::AlreadyExists {
                    resource_type: GROUP_MAPPING_TYPE,
                    name: r.name.clone(),
                }));
            }
            if count >= MAX_MAPPINGS_PER_PROVIDER {
                return Ok(Err(Error::precondition(
                    "TOO_MANY_MAPPINGS",
                    r.parent_uid.clone(),
                    format!("an identity provider holds at most {MAX_MAPPINGS_PER_PROVIDER} group mappings"),
                )));
            }
            tx.execute(
                &format!(
                    "INSERT INTO external_group_role_mappings ({GROUP_MAPPING_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                params![r.uid, r.parent_uid, r.name, r.role_uid, r.scope, r.create_time, r.update_time],
            )?;
            insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn get_group_mapping(&self, uid: &Uidp) -> Result<Option<GroupMappingRecord>> {
        self.get_one(
            "get group mapping",
            "external_group_role_mappings",
            GROUP_MAPPING_COLUMNS,
            uid,
            mapping_from_row,
        )
        .await
    }

    async fn delete_group_mappings(&self, uids: &[String], emit: Emit<Vec<String>>) -> Result<Vec<String>> {
        let uids = uids.to_vec();
        self.write("delete group mappings", move |c| {
            let tx = c.savepoint()?;
            let mut deleted = Vec::new();
            for uid in uids {
                if tx.execute("DELETE FROM external_group_role_mappings WHERE uid = ?1", [&uid])? > 0 {
                    deleted.push(uid);
                }
            }
            if !deleted.is_empty() {
                insert_event(&tx, &emit.record(&deleted))?;
            }
            tx.commit()?;
            Ok(deleted)
        })
        .await
    }

    async fn list_group_mappings(&self, q: &ListQuery) -> Result<Page<GroupMappingRecord>> {
        self.list(
            "list group mappings",
            "external_group_role_mappings",
            GROUP_MAPPING_COLUMNS,
            q,
            mapping_from_row,
        )
        .await
    }

    async fn group_mappings_of(&self, provider: &str) -> Result<Vec<GroupMappingRecord>> {
        let provider = provider.to_owned();
        self.read("group mappings of a provider", move |c| {
            c.prepare_cached(&format!(
                "SELECT {GROUP_MAPPING_COLUMNS} FROM external_group_role_mappings WHERE parent_uid = ?1 \
                 ORDER BY uid LIMIT {MAX_MAPPINGS_PER_PROVIDER}"
            ))?
            .query_map([provider], mapping_from_row)?
            .collect()
        })
        .await
    }

    async fn create_group_invite(&self, r: &GroupInviteRecord, emit: Emit<()>) -> Result<()> {
        let r = r.clone();
        self.write("create group invite", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &r.parent_uid)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, r.parent_uid.clone())));
            }
            tx.execute(
                &format!(
                    "INSERT INTO group_invites ({GROUP_INVITE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ),
                params![
                    r.uid,
                    r.parent_uid,
                    r.name,
                    r.role_uid,
                    r.email,
                    r.expire_time,
                    r.single_use,
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

    async fn get_group_invite(&self, uid: &Uidp) -> Result<Option<GroupInviteRecord>> {
        self.get_one(
            "get group invite",
            "group_invites",
            GROUP_INVITE_COLUMNS,
            uid,
            invite_from_row,
        )
        .await
    }

    async fn delete_group_invite(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        self.delete_by_uid("delete group invite", "group_invites", GROUP_INVITE_TYPE, uid, emit)
            .await
    }

    async fn list_group_invites(&self, q: &ListQuery) -> Result<Page<GroupInviteRecord>> {
        self.list(
            "list group invites",
            "group_invites",
            GROUP_INVITE_COLUMNS,
            q,
            invite_from_row,
        )
        .await
    }

    async fn accept_group_invite(
        &self,
        invite: &Uidp,
        key_id: &str,
        now_ms: i64,
        binding: &RoleBindingRecord,
        emit: Emit<()>,
    ) -> Result<(GroupInviteRecord, bool)> {
        let (invite, key_id, binding) = (invite.as_str().to_owned(), key_id.to_owned(), binding.clone());
        self.write("accept group invite", move |c| {
            let tx = c.savepoint()?;
            let found = tx
                .prepare_cached(&format!(
                    "SELECT {GROUP_INVITE_COLUMNS} FROM group_invites WHERE uid = ?1"
                ))?
                .query_row([&invite], invite_from_row)
                .optional()?;
            let Some(inv) = found.filter(|i| i.name == key_id) else {
                return Ok(Err(Error::not_found(GROUP_INVITE_TYPE, invite)));
            };
            if inv.expire_time <= now_ms {
                return Ok(Err(Error::precondition(
                    "INVITE_EXPIRED",
                    invite,
                    "the invite has expired",
                )));
            }
            if !exists(&tx, "identities", &binding.identity_uid)? {
                return Ok(Err(Error::not_found(IDENTITY_TYPE, binding.identity_uid)));
            }
            if !exists(&tx, "roles", &inv.role_uid)? {
                return Ok(Err(Error::precondition(
                    "INVITE_ROLE_DELETED",
                    invite,
                    "the invite's role no longer exists",
                )));
            }
            let bound = tx
                .prepare_cached(
                    "SELECT 1 FROM role_bindings WHERE parent_uid = ?1 AND identity_uid = ?2 AND role_uid = ?3",
                )?
                .query_row(params![inv.parent_uid, binding.identity_uid, inv.role_uid], |_| Ok(()))
                .optional()?
                .is_some();
            if !bound {
                insert_binding(
                    &tx,
                    &RoleBindingRecord {
                        parent_uid: inv.parent_uid.clone(),
                        role_uid: inv.role_uid.clone(),
                        ..binding
                    },
                )?;
            }
            if inv.single_use {
                tx.execute("DELETE FROM group_invites WHERE uid = ?1", [&invite])?;
            }
            insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok((inv, !bound)))
        })
        .await?
    }

    async fn record_login(
        &self,
        identity: &IdentityRecord,
        person: &PersonRecord,
        first_binding: Option<&RoleBindingRecord>,
        now_ms: i64,
    ) -> Result<bool> {
        let (identity, person, binding) = (identity.clone(), person.clone(), first_binding.cloned());
        self.write("record login", move |c| {
            let tx = c.savepoint()?;
            let created = if exists(&tx, "identities", &identity.uid)? {
                // A person bound before their first login: this login fills
                // in the identity the binding made.
                let filled = tx.execute(
                    "UPDATE identities SET name = ?1, description = ?2, relationship_type = ?3, relationship = ?4, \
                     issuer = ?5, subject = ?6, last_seen_time = ?7, update_time = ?7 \
                     WHERE uid = ?8 AND relationship_type = 0 AND issuer = ''",
                    params![
                        identity.name,
                        identity.description,
                        identity.relationship_type,
                        identity.relationship,
                        identity.issuer,
                        identity.subject,
                        now_ms,
                        identity.uid
                    ],
                )? == 1;
                if !filled {
                    tx.execute(
                        "UPDATE identities SET last_seen_time = ?1 WHERE uid = ?2",
                        params![now_ms, identity.uid],
                    )?;
                }
                filled
            } else {
                super::insert_identity(&tx, &identity)?;
                true
            };
            let first_here = tx.execute(
                "INSERT INTO person_providers (identity_uid, identity_provider_uid) VALUES (?1, ?2) \
                 ON CONFLICT DO NOTHING",
                params![identity.uid, person.identity_provider_uid],
            )? == 1;
            if first_here
                && let Some(b) = &binding
                && exists(&tx, "groups", &b.parent_uid)?
                && exists(&tx, "roles", &b.role_uid)?
            {
                let bound = tx
                    .prepare_cached(
                        "SELECT 1 FROM role_bindings WHERE parent_uid = ?1 AND identity_uid = ?2 AND role_uid = ?3",
                    )?
                    .query_row(params![b.parent_uid, b.identity_uid, b.role_uid], |_| Ok(()))
                    .optional()?
                    .is_some();
                if !bound {
                    insert_binding(&tx, b)?;
                }
            }
            upsert_person(&tx, &person)?;
            tx.commit()?;
            Ok(created)
        })
        .await
    }

    async fn get_person(&self, identity_uid: &str) -> Result<Option<PersonRecord>> {
        let key = identity_uid.to_owned();
        self.read("get person", move |c| {
            c.prepare_cached(&format!("SELECT {PERSON_COLUMNS} FROM people WHERE identity_uid = ?1"))?
                .query_row([key], person_from_row)
                .optional()
        })
        .await
    }

    async fn verify_org(&self, group: &Uidp, domains: &[String]) -> Result<()> {
        let (group, domains) = (group.as_str().to_owned(), domains.to_vec());
        self.write("verify organization", move |c| {
            let tx = c.savepoint()?;
            if tx.execute("UPDATE groups SET verified = 1 WHERE uid = ?1", [&group])? == 0 {
                return Ok(Err(Error::not_found(GROUP_TYPE, group)));
            }
            for d in &domains {
                tx.execute(
                    "INSERT INTO verified_domains (domain, group_uid) VALUES (?1, ?2) \
                     ON CONFLICT (domain) DO UPDATE SET group_uid = excluded.group_uid",
                    params![d, group],
                )?;
            }
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn verified_orgs_named(&self, name: &str) -> Result<Vec<String>> {
        let name = name.to_owned();
        self.read("verified organizations by name", move |c| {
            c.prepare_cached(
                "SELECT uid FROM groups WHERE parent_uid IS NULL AND name = ?1 AND verified = 1 ORDER BY uid LIMIT 2",
            )?
            .query_map([name], |r| r.get(0))?
            .collect()
        })
        .await
    }

    async fn org_of_domain(&self, domain: &str) -> Result<Option<String>> {
        let domain = domain.to_owned();
        self.read("organization of a domain", move |c| {
            c.prepare_cached("SELECT group_uid FROM verified_domains WHERE domain = ?1")?
                .query_row([domain], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn accept_terms(
        &self,
        group: &Uidp,
        doc_ids: &[String],
        by: &str,
        now_ms: i64,
        emit: Emit<()>,
    ) -> Result<()> {
        let (group, doc_ids, by) = (group.as_str().to_owned(), doc_ids.to_vec(), by.to_owned());
        self.write("accept terms", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &group)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, group)));
            }
            for d in &doc_ids {
                tx.execute(
                    "INSERT INTO terms_acceptances (group_uid, doc_id, accepted_by, create_time) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                    params![group, d, by, now_ms],
                )?;
            }
            insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn terms_acceptances(&self, groups: &[String]) -> Result<Vec<TermsRecord>> {
        let groups = groups.to_vec();
        self.read("terms acceptances", move |c| {
            let marks = vec!["?"; groups.len()].join(", ");
            c.prepare(&format!(
                "SELECT group_uid, doc_id, accepted_by, create_time FROM terms_acceptances \
                 WHERE group_uid IN ({marks}) ORDER BY create_time DESC, doc_id, accepted_by LIMIT {MAX_DIRECTORY_ROWS}"
            ))?
            .query_map(rusqlite::params_from_iter(groups.iter()), |r| {
                Ok(TermsRecord {
                    group_uid: r.get(0)?,
                    doc_id: r.get(1)?,
                    accepted_by: r.get(2)?,
                    create_time: r.get(3)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn request_access(&self, r: &AccessRequestRecord) -> Result<bool> {
        let r = r.clone();
        self.write("request group access", move |c| {
            c.execute(
                "INSERT INTO group_access_requests (group_uid, identity_uid, email, create_time) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                params![r.group_uid, r.identity_uid, r.email, r.create_time],
            )
            .map(|n| n == 1)
        })
        .await
    }

    async fn access_requests(&self, group: &str) -> Result<Vec<AccessRequestRecord>> {
        let group = group.to_owned();
        self.read("group access requests", move |c| {
            c.prepare_cached(&format!(
                "SELECT group_uid, identity_uid, email, create_time FROM group_access_requests \
                 WHERE group_uid = ?1 ORDER BY create_time, identity_uid LIMIT {MAX_DIRECTORY_ROWS}"
            ))?
            .query_map([group], |r| {
                Ok(AccessRequestRecord {
                    group_uid: r.get(0)?,
                    identity_uid: r.get(1)?,
                    email: r.get(2)?,
                    create_time: r.get(3)?,
                })
            })?
            .collect()
        })
        .await
    }

    async fn create_device_login(
        &self,
        r: &DeviceLoginRecord,
        client: &str,
        per_client: i64,
        now_ms: i64,
    ) -> Result<()> {
        let (r, client) = (r.clone(), client.to_owned());
        self.write("start headless login", move |c| {
            let tx = c.savepoint()?;
            tx.execute("DELETE FROM device_logins WHERE expire_time <= ?1", [now_ms])?;
            let count = |sql: &str, key: &str| -> rusqlite::Result<i64> { tx.query_row(sql, [key], |row| row.get(0)) };
            if count("SELECT COUNT(*) FROM device_logins WHERE client = ?1", &client)? >= per_client {
                return Ok(Err(crate::people::too_many_device_logins_from_client(per_client)));
            }
            if count("SELECT COUNT(*) FROM device_logins WHERE idp_uid = ?1", &r.idp_uid)? >= MAX_DEVICE_LOGINS {
                return Ok(Err(Error::ResourceExhausted(
                    "too many headless logins are in progress; try again in a few minutes".into(),
                )));
            }
            let inserted = tx.execute(
                "INSERT INTO device_logins (id, user_code, idp_uid, challenge, handoff, expire_time, client) \
                 VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6) ON CONFLICT DO NOTHING",
                params![r.id, r.user_code, r.idp_uid, r.challenge, r.expire_time, client],
            )?;
            if inserted == 0 {
                return Ok(Err(Error::AlreadyExists {
                    resource_type: "device login",
                    name: String::new(),
                }));
            }
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn pending_device_login(&self, user_code: &str, now_ms: i64) -> Result<Option<DeviceLoginRecord>> {
        let code = user_code.to_owned();
        self.read("find headless login", move |c| {
            c.prepare_cached(
                "SELECT id, user_code, idp_uid, challenge, handoff, expire_time FROM device_logins \
                 WHERE user_code = ?1 AND handoff IS NULL AND expire_time > ?2",
            )?
            .query_row(params![code, now_ms], device_from_row)
            .optional()
        })
        .await
    }

    async fn finish_device_login(&self, id: &str, handoff: &str, now_ms: i64) -> Result<bool> {
        let (id, handoff) = (id.to_owned(), handoff.to_owned());
        self.write("finish headless login", move |c| {
            c.execute(
                "UPDATE device_logins SET handoff = ?1 WHERE id = ?2 AND handoff IS NULL AND expire_time > ?3",
                params![handoff, id, now_ms],
            )
            .map(|n| n == 1)
        })
        .await
    }

    async fn take_device_login(&self, id: &str, challenge: &str, now_ms: i64) -> Result<Option<DeviceLoginRecord>> {
        let (id, challenge) = (id.to_owned(), challenge.to_owned());
        self.write("take headless login", move |c| {
            let tx = c.savepoint()?;
            let found = tx
                .prepare_cached(
                    "SELECT id, user_code, idp_uid, challenge, handoff, expire_time FROM device_logins WHERE id = ?1",
                )?
                .query_row([&id], device_from_row)
                .optional()?;
            let out = match found {
                Some(r) if r.expire_time <= now_ms || (r.handoff.is_some() && r.challenge == challenge) => {
                    tx.execute("DELETE FROM device_logins WHERE id = ?1", [&id])?;
                    (r.expire_time > now_ms).then_some(r)
                }
                other => other,
            };
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    async fn identity_metadata(&self, identity_uid: &str) -> Result<Option<String>> {
        let key = identity_uid.to_owned();
        self.read("identity metadata", move |c| {
            c.prepare_cached("SELECT data FROM identity_metadata WHERE identity_uid = ?1")?
                .query_row([key], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn set_identity_metadata(&self, identity_uid: &str, data: &str, emit: Emit<()>) -> Result<()> {
        let (key, data) = (identity_uid.to_owned(), data.to_owned());
        self.write("set identity metadata", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "identities", &key)? {
                return Ok(Err(Error::not_found(IDENTITY_TYPE, key)));
            }
            tx.execute(
                "INSERT INTO identity_metadata (identity_uid, data) VALUES (?1, ?2) \
                 ON CONFLICT (identity_uid) DO UPDATE SET data = excluded.data",
                params![key, data],
            )?;
            insert_event(&tx, &emit.record(&()))?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .await?
    }

    async fn use_once(&self, id: &str, expire_ms: i64, now_ms: i64) -> Result<bool> {
        let id = id.to_owned();
        self.write("use once", move |c| {
            let tx = c.savepoint()?;
            tx.execute("DELETE FROM used_once WHERE expire_time < ?1", [now_ms])?;
            let n = tx.execute(
                "INSERT INTO used_once (id, expire_time) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
                params![id, expire_ms],
            )?;
            tx.commit()?;
            Ok(n == 1)
        })
        .await
    }
}
