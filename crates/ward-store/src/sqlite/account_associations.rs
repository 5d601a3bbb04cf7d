//! The account associations table on SQLite.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event;
use super::{SqliteStore, exists};
use crate::GROUP_TYPE;
use crate::account_associations::{
    ACCOUNT_ASSOCIATION_COLUMNS, ACCOUNT_ASSOCIATION_TYPE, AccountAssociationPatch, AccountAssociationRecord,
    AccountAssociationStore,
};
use crate::events::Emit;

fn association_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AccountAssociationRecord> {
    Ok(AccountAssociationRecord {
        uid: r.get(0)?,
        parent_uid: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        config: r.get(4)?,
        create_time: r.get(5)?,
        update_time: r.get(6)?,
    })
}

#[async_trait]
impl AccountAssociationStore for SqliteStore {
    async fn create_account_association(&self, r: &AccountAssociationRecord, emit: Emit<()>) -> Result<()> {
        let r = r.clone();
        self.write("create account association", move |c| {
            let tx = c.savepoint()?;
            if !exists(&tx, "groups", &r.parent_uid)? {
                return Ok(Err(Error::not_found(GROUP_TYPE, r.parent_uid.clone())));
            }
            if exists(&tx, "account_associations", &r.uid)? {
                return Ok(Err(Error::AlreadyExists {
                    resource_type: ACCOUNT_ASSOCIATION_TYPE,
                    name: r.uid.clone(),
                }));
            }
            tx.execute(
                &format!(
                    "INSERT INTO account_associations ({ACCOUNT_ASSOCIATION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                params![
                    r.uid,
                    r.parent_uid,
                    r.name,
                    r.description,
                    r.config,
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

    async fn get_account_association(&self, uid: &Uidp) -> Result<Option<AccountAssociationRecord>> {
        self.get_one(
            "get account association",
            "account_associations",
            ACCOUNT_ASSOCIATION_COLUMNS,
            uid,
            association_from_row,
        )
        .await
    }

    async fn update_account_association(
        &self,
        uid: &Uidp,
        p: &AccountAssociationPatch,
        now_ms: i64,
        emit: Emit<AccountAssociationRecord>,
    ) -> Result<AccountAssociationRecord> {
        let (key, p) = (uid.as_str().to_owned(), p.clone());
        let row = self
            .write("update account association", move |c| {
                let tx = c.savepoint()?;
                let row = tx
                    .prepare_cached(&format!(
                        "UPDATE account_associations SET name = COALESCE(?1, name), \
                     description = COALESCE(?2, description), config = COALESCE(?3, config), \
                     update_time = CASE WHEN ?4 > update_time THEN ?4 ELSE update_time + 1 END \
                     WHERE uid = ?5 RETURNING {ACCOUNT_ASSOCIATION_COLUMNS}"
                    ))?
                    .query_row(
                        params![p.name, p.description, p.config, now_ms, key],
                        association_from_row,
                    )
                    .optional()?;
                if let Some(r) = &row {
                    insert_event(&tx, &emit.record(r))?;
                }
                tx.commit()?;
                Ok(row)
            })
            .await?;
        row.ok_or_else(|| Error::not_found(ACCOUNT_ASSOCIATION_TYPE, uid.as_str()))
    }

    async fn delete_account_association(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        self.delete_by_uid(
            "delete account association",
            "account_associations",
            ACCOUNT_ASSOCIATION_TYPE,
            uid,
            emit,
        )
        .await
    }

    async fn list_account_associations(&self, q: &ListQuery) -> Result<Page<AccountAssociationRecord>> {
        self.list(
            "list account associations",
            "account_associations",
            ACCOUNT_ASSOCIATION_COLUMNS,
            q,
            association_from_row,
        )
        .await
    }
}
