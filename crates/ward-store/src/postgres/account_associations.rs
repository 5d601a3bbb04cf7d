//! The account associations table on PostgreSQL.

use async_trait::async_trait;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use super::events::insert_event;
use super::{PostgresStore, lock};
use crate::account_associations::{
    ACCOUNT_ASSOCIATION_COLUMNS, ACCOUNT_ASSOCIATION_TYPE, AccountAssociationPatch, AccountAssociationRecord,
    AccountAssociationStore,
};
use crate::events::Emit;
use crate::{GROUP_TYPE, db_err};

#[async_trait]
impl AccountAssociationStore for PostgresStore {
    async fn create_account_association(&self, r: &AccountAssociationRecord, emit: Emit<()>) -> Result<()> {
        let mut tx = self.begin().await?;
        // Holding the group FOR SHARE makes a concurrent delete of the group
        // wait, and then take the association with it.
        if !lock(&mut tx, "groups", &r.parent_uid, "FOR SHARE").await? {
            return Err(Error::not_found(GROUP_TYPE, r.parent_uid.clone()));
        }
        let done = sqlx::query(&format!(
            "INSERT INTO account_associations ({ACCOUNT_ASSOCIATION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (uid) DO NOTHING"
        ))
        .bind(&r.uid)
        .bind(&r.parent_uid)
        .bind(&r.name)
        .bind(&r.description)
        .bind(&r.config)
        .bind(r.create_time)
        .bind(r.update_time)
        .execute(&mut *tx)
        .await
        .map_err(|e| db_err("insert account association", e))?;
        if done.rows_affected() == 0 {
            return Err(Error::AlreadyExists {
                resource_type: ACCOUNT_ASSOCIATION_TYPE,
                name: r.uid.clone(),
            });
        }
        insert_event(&mut tx, &emit.record(&())).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))
    }

    async fn get_account_association(&self, uid: &Uidp) -> Result<Option<AccountAssociationRecord>> {
        self.get_one("account_associations", ACCOUNT_ASSOCIATION_COLUMNS, uid)
            .await
    }

    async fn update_account_association(
        &self,
        uid: &Uidp,
        p: &AccountAssociationPatch,
        now_ms: i64,
        emit: Emit<AccountAssociationRecord>,
    ) -> Result<AccountAssociationRecord> {
        let mut tx = self.begin().await?;
        let row: Option<AccountAssociationRecord> = sqlx::query_as(&format!(
            "UPDATE account_associations SET name = COALESCE($1, name), \
             description = COALESCE($2, description), config = COALESCE($3, config), \
             update_time = CASE WHEN $4 > update_time THEN $4 ELSE update_time + 1 END \
             WHERE uid = $5 RETURNING {ACCOUNT_ASSOCIATION_COLUMNS}"
        ))
        .bind(&p.name)
        .bind(&p.description)
        .bind(&p.config)
        .bind(now_ms)
        .bind(uid.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| db_err("update account association", e))?;
        let row = row.ok_or_else(|| Error::not_found(ACCOUNT_ASSOCIATION_TYPE, uid.as_str()))?;
        insert_event(&mut tx, &emit.record(&row)).await?;
        tx.commit().await.map_err(|e| db_err("commit", e))?;
        Ok(row)
    }

    async fn delete_account_association(&self, uid: &Uidp, emit: Emit<()>) -> Result<()> {
        self.delete_by_uid("account_associations", ACCOUNT_ASSOCIATION_TYPE, uid, emit)
            .await
    }

    async fn list_account_associations(&self, q: &ListQuery) -> Result<Page<AccountAssociationRecord>> {
        self.list("account_associations", ACCOUNT_ASSOCIATION_COLUMNS, q).await
    }
}
