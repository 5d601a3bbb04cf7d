//! Storage for people: identity providers and their group mappings, group
//! invites, what a login told Ward about a person, and one-time values.

use async_trait::async_trait;
use ward_core::Result;
use ward_core::listing::{ListQuery, Page};
use ward_core::rpc::Kind;
use ward_core::uidp::Uidp;

use crate::{IdentityRecord, RoleBindingRecord};

pub const IDENTITY_PROVIDER_TYPE: &str = Kind::IdentityProvider.type_name();
pub const GROUP_MAPPING_TYPE: &str = Kind::GroupMapping.type_name();
pub const GROUP_INVITE_TYPE: &str = Kind::GroupInvite.type_name();

/// Most group mappings one identity provider may hold (a login reads them all).
pub const MAX_MAPPINGS_PER_PROVIDER: usize = 1000;

/// A stored identity provider. `oidc` is its OIDC configuration as proto3
/// JSON without the client secret, which is kept sealed in `client_secret`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct IdentityProviderRecord {
    pub uid: String,
    pub parent_uid: String,
    pub name: String,
    pub description: String,
    pub default_role: String,
    pub issuer: String,
    pub oidc: String,
    pub client_secret: Option<Vec<u8>>,
    pub create_time: i64,
    pub update_time: i64,
}

/// The fields an update sets; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct IdentityProviderPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub default_role: Option<String>,
    /// (issuer, OIDC JSON)
    pub oidc: Option<(String, String)>,
    /// `Some(None)` clears the secret (a public client).
    pub client_secret: Option<Option<Vec<u8>>>,
}

/// A stored group mapping: `parent_uid` is the identity provider, `name` the
/// external group id.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct GroupMappingRecord {
    pub uid: String,
    pub parent_uid: String,
    pub name: String,
    pub role_uid: String,
    pub scope: String,
    pub create_time: i64,
    pub update_time: i64,
}

/// A stored invite: `name` is its key id.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct GroupInviteRecord {
    pub uid: String,
    pub parent_uid: String,
    pub name: String,
    pub role_uid: String,
    pub email: String,
    pub expire_time: i64,
    pub single_use: bool,
    pub create_time: i64,
    pub update_time: i64,
}

/// What a person's last login said about them.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct PersonRecord {
    pub identity_uid: String,
    pub identity_provider_uid: String,
    pub email: String,
    pub email_verified: bool,
    pub display_name: String,
}

/// A terms acceptance.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct TermsRecord {
    pub group_uid: String,
    pub doc_id: String,
    pub accepted_by: String,
    pub create_time: i64,
}

/// A request to join a group.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct AccessRequestRecord {
    pub group_uid: String,
    pub identity_uid: String,
    pub email: String,
    pub create_time: i64,
}

/// A headless login in progress.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct DeviceLoginRecord {
    /// SHA-256 (hex) of the device code.
    pub id: String,
    pub user_code: String,
    pub idp_uid: String,
    pub challenge: String,
    pub handoff: Option<String>,
    pub expire_time: i64,
}

/// Most headless logins in progress at once through one identity provider
/// (each expires in minutes), so a flood through one provider does not stop
/// the others'.
pub const MAX_DEVICE_LOGINS: i64 = 1000;
/// Default for the most headless logins pending at once that one client
/// address started (`--max-pending-logins-per-client`).
pub const MAX_DEVICE_LOGINS_PER_CLIENT: i64 = 10;

/// The error past a client's cap of pending headless logins.
pub fn too_many_device_logins_from_client(cap: i64) -> ward_core::Error {
    ward_core::Error::ResourceExhausted(format!(
        "this client has {cap} headless logins in progress; finish one or wait for it to expire"
    ))
}

/// Most rows the directory reads return (terms acceptances across a group's
/// ancestry, access requests of a group).
pub const MAX_DIRECTORY_ROWS: usize = 1000;

#[async_trait]
pub trait PeopleStore: Send + Sync {
    /// Fails NOT_FOUND when the parent group does not exist.
    async fn create_identity_provider(&self, r: &IdentityProviderRecord, emit: crate::events::Emit<()>) -> Result<()>;
    async fn get_identity_provider(&self, uid: &Uidp) -> Result<Option<IdentityProviderRecord>>;
    /// The identity providers directly under a group (at most a few).
    async fn identity_providers_of(&self, group: &Uidp) -> Result<Vec<IdentityProviderRecord>>;
    async fn update_identity_provider(
        &self,
        uid: &Uidp,
        p: &IdentityProviderPatch,
        now_ms: i64,
        emit: crate::events::Emit<IdentityProviderRecord>,
    ) -> Result<IdentityProviderRecord>;
    /// Deletes it with its group mappings.
    async fn delete_identity_provider(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()>;
    async fn list_identity_providers(&self, q: &ListQuery) -> Result<Page<IdentityProviderRecord>>;

    /// ALREADY_EXISTS for a repeat of (provider, group, role, scope); NOT_FOUND
    /// when the provider or role is gone; FAILED_PRECONDITION past
    /// [`MAX_MAPPINGS_PER_PROVIDER`].
    async fn create_group_mapping(&self, r: &GroupMappingRecord, emit: crate::events::Emit<()>) -> Result<()>;
    async fn get_group_mapping(&self, uid: &Uidp) -> Result<Option<GroupMappingRecord>>;
    /// Deletes those that exist, all at once; returns their uids. The event
    /// is recorded when one was deleted.
    async fn delete_group_mappings(
        &self,
        uids: &[String],
        emit: crate::events::Emit<Vec<String>>,
    ) -> Result<Vec<String>>;
    async fn list_group_mappings(&self, q: &ListQuery) -> Result<Page<GroupMappingRecord>>;
    /// Every mapping of one identity provider.
    async fn group_mappings_of(&self, provider: &str) -> Result<Vec<GroupMappingRecord>>;

    /// Fails NOT_FOUND when the parent group does not exist.
    async fn create_group_invite(&self, r: &GroupInviteRecord, emit: crate::events::Emit<()>) -> Result<()>;
    async fn get_group_invite(&self, uid: &Uidp) -> Result<Option<GroupInviteRecord>>;
    async fn delete_group_invite(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()>;
    async fn list_group_invites(&self, q: &ListQuery) -> Result<Page<GroupInviteRecord>>;
    /// In one transaction: the invite must exist with `key_id` and not have
    /// expired (NOT_FOUND, FAILED_PRECONDITION); binds `binding.identity_uid`
    /// at the invite's group with its role unless already so bound; deletes a
    /// single-use invite; records `emit`. Returns the invite as it was, and
    /// whether a binding was added.
    async fn accept_group_invite(
        &self,
        invite: &Uidp,
        key_id: &str,
        now_ms: i64,
        binding: &RoleBindingRecord,
        emit: crate::events::Emit<()>,
    ) -> Result<(GroupInviteRecord, bool)>;

    /// A login: creates the identity unless it exists, else marks it seen;
    /// binds `first_binding` (the provider's default role) on the person's
    /// first login through this provider (`person.identity_provider_uid`)
    /// unless so bound already; records what the login said about the person.
    /// Returns whether the identity was created.
    async fn record_login(
        &self,
        identity: &IdentityRecord,
        person: &PersonRecord,
        first_binding: Option<&RoleBindingRecord>,
        now_ms: i64,
    ) -> Result<bool>;
    async fn get_person(&self, identity_uid: &str) -> Result<Option<PersonRecord>>;

    /// Marks an organization verified and its email domains as its own (a
    /// domain moves from any organization that had it). NOT_FOUND when the
    /// group does not exist.
    async fn verify_org(&self, group: &Uidp, domains: &[String]) -> Result<()>;
    /// The verified organization of an email domain.
    async fn org_of_domain(&self, domain: &str) -> Result<Option<String>>;
    /// The verified organizations with this name (at most a few).
    async fn verified_orgs_named(&self, name: &str) -> Result<Vec<String>>;
    /// Records acceptances (repeats are kept once). NOT_FOUND without the group.
    async fn accept_terms(
        &self,
        group: &Uidp,
        doc_ids: &[String],
        by: &str,
        now_ms: i64,
        emit: crate::events::Emit<()>,
    ) -> Result<()>;
    /// Acceptances recorded at any of `groups`, newest first, at most
    /// [`MAX_DIRECTORY_ROWS`].
    async fn terms_acceptances(&self, groups: &[String]) -> Result<Vec<TermsRecord>>;
    /// Records a request to join (a repeat keeps the first); false if it existed.
    async fn request_access(&self, r: &AccessRequestRecord) -> Result<bool>;
    /// A group's requests to join, oldest first, at most [`MAX_DIRECTORY_ROWS`].
    async fn access_requests(&self, group: &str) -> Result<Vec<AccessRequestRecord>>;

    /// Starts a headless login for `client` (its address): forgets expired
    /// ones, then RESOURCE_EXHAUSTED past [`MAX_DEVICE_LOGINS`] for the
    /// provider or `per_client` for the client, ALREADY_EXISTS for a user
    /// code in use.
    async fn create_device_login(
        &self,
        r: &DeviceLoginRecord,
        client: &str,
        per_client: i64,
        now_ms: i64,
    ) -> Result<()>;
    /// A pending (not finished, not expired) login by its user code.
    async fn pending_device_login(&self, user_code: &str, now_ms: i64) -> Result<Option<DeviceLoginRecord>>;
    /// Records the handoff of a pending login; false if it was not pending.
    async fn finish_device_login(&self, id: &str, handoff: &str, now_ms: i64) -> Result<bool>;
    /// The login by device code hash: a finished one whose challenge is
    /// `challenge` is removed (it works once); any other is returned as it
    /// is; an expired one is None.
    async fn take_device_login(&self, id: &str, challenge: &str, now_ms: i64) -> Result<Option<DeviceLoginRecord>>;

    /// An identity's profile details (JSON), if any.
    async fn identity_metadata(&self, identity_uid: &str) -> Result<Option<String>>;
    /// Stores them with their event; NOT_FOUND when the identity does not
    /// exist.
    async fn set_identity_metadata(&self, identity_uid: &str, data: &str, emit: crate::events::Emit<()>) -> Result<()>;

    /// Records `id` as used until `expire_ms`; false when it already was.
    async fn use_once(&self, id: &str, expire_ms: i64, now_ms: i64) -> Result<bool>;
}
