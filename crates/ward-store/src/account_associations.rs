//! Storage for account associations: one per group, keyed by the group's uid.

use async_trait::async_trait;
use ward_core::Result;
use ward_core::listing::{ListQuery, Page};
use ward_core::rpc::Kind;
use ward_core::uidp::Uidp;

pub const ACCOUNT_ASSOCIATION_TYPE: &str = Kind::AccountAssociation.type_name();

/// The columns of `account_associations`, in [`AccountAssociationRecord`] order.
pub(crate) const ACCOUNT_ASSOCIATION_COLUMNS: &str =
    "uid, parent_uid, name, description, config, create_time, update_time";

/// A stored account association. `uid` and `parent_uid` are both the group's
/// uid (so UIDP filters and visibility work as for everything else); `config`
/// is the provider parts (amazon, google, chainguard, azure, github) as proto3
/// JSON, owned by the service layer.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct AccountAssociationRecord {
    pub uid: String,
    pub parent_uid: String,
    pub name: String,
    pub description: String,
    pub config: String,
    pub create_time: i64,
    pub update_time: i64,
}

/// The fields an update sets; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct AccountAssociationPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub config: Option<String>,
}

#[async_trait]
pub trait AccountAssociationStore: Send + Sync {
    /// NOT_FOUND when the group (`parent_uid`) does not exist; ALREADY_EXISTS
    /// when the group already has one.
    async fn create_account_association(
        &self,
        r: &AccountAssociationRecord,
        emit: crate::events::Emit<()>,
    ) -> Result<()>;
    async fn get_account_association(&self, uid: &Uidp) -> Result<Option<AccountAssociationRecord>>;
    /// Sets the given fields and moves `update_time` forward (by 1 ms if the
    /// clock has not). NOT_FOUND when it is gone.
    async fn update_account_association(
        &self,
        uid: &Uidp,
        p: &AccountAssociationPatch,
        now_ms: i64,
        emit: crate::events::Emit<AccountAssociationRecord>,
    ) -> Result<AccountAssociationRecord>;
    /// NOT_FOUND when absent.
    async fn delete_account_association(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()>;
    async fn list_account_associations(&self, q: &ListQuery) -> Result<Page<AccountAssociationRecord>>;
}
