//! The registry's storage: repos, their manifests (bytes included: they are
//! small, bounded, and must commit atomically with their tags), tags, which
//! blobs each repo may serve, and upload sessions. Blob bytes live in a blob
//! store (`ward-blob`); only their digests and sizes are here.

use async_trait::async_trait;
use ward_core::listing::{ListQuery, Page};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

pub const REPO_TYPE: &str = ward_core::rpc::Kind::Repo.type_name();
pub const TAG_TYPE: &str = ward_core::rpc::Kind::Tag.type_name();
/// NOT_FOUND types the OCI transport maps to its own error codes.
pub const BLOB_TYPE: &str = "oci/blob";
pub const MANIFEST_TYPE: &str = "oci/manifest";
pub const UPLOAD_TYPE: &str = "oci/upload";

/// A stored repo. `bundles`, `aliases` and `active_tags` are JSON arrays.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct RepoRecord {
    pub uid: String,
    pub parent_uid: String,
    /// The organization (first UIDP segment): names are unique within it.
    pub org_uid: String,
    pub name: String,
    pub description: String,
    pub catalog_tier: i64,
    pub bundles: String,
    pub aliases: String,
    pub active_tags: String,
    pub create_time: i64,
    pub update_time: i64,
}

/// Fields a repo update sets; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct RepoPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub catalog_tier: Option<i64>,
    pub bundles: Option<String>,
    pub aliases: Option<String>,
    pub active_tags: Option<String>,
}

/// A stored tag; `parent_uid` is its repo.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct TagRecord {
    pub uid: String,
    pub parent_uid: String,
    pub name: String,
    /// Empty for a tag made by name that no push has pointed yet.
    pub digest: String,
    pub create_time: i64,
    pub update_time: i64,
    pub deprecated: bool,
    /// JSON array of the tag's bundle labels.
    pub bundles: String,
}

/// One step of a tag's history: from `update_time` on, the tag pointed at
/// `digest`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct TagHistoryRecord {
    pub update_time: i64,
    pub digest: String,
}

/// Most history rows one read returns.
pub const MAX_TAG_HISTORY: u32 = 1000;

/// A manifest as stored in one repo.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct ManifestRecord {
    pub repo_uid: String,
    pub digest: String,
    pub media_type: String,
    /// The manifest's `artifactType`, else its config's media type ("" if none).
    pub artifact_type: String,
    /// The digest of its `subject`, for the referrers API.
    pub subject: Option<String>,
    /// The manifest's `annotations` as JSON ("" if none).
    pub annotations: String,
    /// The manifest's bytes (empty in referrer listings).
    pub content: Vec<u8>,
    pub create_time: i64,
    /// Length of the stored bytes.
    pub size: i64,
}

/// What a manifest push names besides itself.
#[derive(Clone, Debug, Default)]
pub struct ManifestLinks {
    /// Blobs (config and layers) that must be in the repo.
    pub blobs: Vec<String>,
    /// The size the manifest declares for each of `blobs`, in order: a
    /// stored blob of another size refuses the push (`BLOB_SIZE_MISMATCH`),
    /// since clients and image reads trust the declared size.
    pub blob_sizes: Vec<i64>,
    /// Manifests (an index's children) that must be in the repo.
    pub manifests: Vec<String>,
}

/// The error for a manifest whose descriptor size is not its blob's.
pub fn blob_size_mismatch(digest: &str, declared: i64, stored: i64) -> ward_core::Error {
    ward_core::Error::precondition(
        BLOB_SIZE_MISMATCH,
        digest,
        format!("the manifest says {digest} has {declared} bytes; the stored blob has {stored}"),
    )
}

/// The precondition kind of [`blob_size_mismatch`].
pub const BLOB_SIZE_MISMATCH: &str = "BLOB_SIZE_MISMATCH";

/// Most upload sessions open at once (see [`RegistryStore::create_upload`]):
/// only sessions touched at or after `active_since` (ms) count, so sessions
/// a crashed client left behind stop counting long before they expire.
#[derive(Clone, Copy, Debug)]
pub struct UploadCaps {
    pub per_creator: u32,
    pub per_repo: u32,
    pub active_since: i64,
}

/// The error for a session over one of the [`UploadCaps`].
pub fn too_many_uploads(whose: &str, cap: u32) -> ward_core::Error {
    ward_core::Error::ResourceExhausted(format!(
        "{whose} already holds {cap} open upload sessions; finish or cancel some, or wait for stale ones to expire"
    ))
}

/// An upload session.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct UploadRecord {
    pub uuid: String,
    pub repo_uid: String,
    /// Bytes received so far.
    pub size: i64,
    pub create_time: i64,
    pub update_time: i64,
}

/// What one manifest push stored: the tag as stored (when the push named
/// one), and the digest it pointed at before ("" for a new tag).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pushed {
    pub tag: Option<TagRecord>,
    pub previous_digest: String,
}

#[async_trait]
pub trait RegistryStore: Send + Sync + 'static {
    /// NOT_FOUND if the group is gone; ALREADY_EXISTS if the organization
    /// already has a repo of that name.
    async fn create_repo(&self, repo: &RepoRecord, emit: crate::events::Emit<()>) -> Result<()>;
    async fn get_repo(&self, uid: &Uidp) -> Result<Option<RepoRecord>>;
    /// The repo named `name` in organization `org_uid`.
    async fn find_repo(&self, org_uid: &str, name: &str) -> Result<Option<RepoRecord>>;
    /// ALREADY_EXISTS when renamed onto another repo's name.
    async fn update_repo(
        &self,
        uid: &Uidp,
        patch: &RepoPatch,
        now_ms: i64,
        emit: crate::events::Emit<RepoRecord>,
    ) -> Result<RepoRecord>;
    /// Deletes the repo with its tags, manifests, blob links and uploads.
    async fn delete_repo(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<()>;
    async fn list_repos(&self, query: &ListQuery) -> Result<Page<RepoRecord>>;
    /// `(org_uid, name)` of repos in `visible` (None: all) after `after`, in
    /// that order: the OCI catalog.
    async fn catalog(
        &self,
        visible: Option<&[Uidp]>,
        after: Option<(&str, &str)>,
        limit: u32,
    ) -> Result<Vec<(String, String)>>;
    async fn repo_readme(&self, uid: &Uidp) -> Result<Option<String>>;
    async fn set_repo_readme(&self, uid: &Uidp, content: &str, now_ms: i64) -> Result<()>;

    /// Records that the repo holds the blob (after its bytes are stored).
    async fn link_blob(&self, repo_uid: &str, digest: &str, size: i64, now_ms: i64) -> Result<()>;
    /// The blob's size if the repo holds it.
    async fn repo_blob(&self, repo_uid: &str, digest: &str) -> Result<Option<i64>>;
    /// Whether a link was removed.
    async fn unlink_blob(&self, repo_uid: &str, digest: &str) -> Result<bool>;

    /// Stores a manifest (idempotent by digest) and, with `tag`, points the
    /// tag at it, in one transaction. NOT_FOUND (`BLOB_TYPE` / `MANIFEST_TYPE`)
    /// naming the first linked blob or child the repo does not hold. Returns
    /// the tag as stored.
    /// `emit` is the push's event, rendered from what was stored.
    async fn put_manifest(
        &self,
        manifest: &ManifestRecord,
        links: &ManifestLinks,
        tag: Option<&TagRecord>,
        emit: crate::events::Emit<Pushed>,
    ) -> Result<Option<TagRecord>>;
    async fn get_manifest(&self, repo_uid: &str, digest: &str) -> Result<Option<ManifestRecord>>;
    /// Deletes a manifest and the tags that point at it; whether it existed.
    async fn delete_manifest(&self, repo_uid: &str, digest: &str) -> Result<bool>;
    /// Manifests in the repo whose subject is `digest` (content omitted), at most `limit`.
    async fn referrers(&self, repo_uid: &str, digest: &str, limit: u32) -> Result<Vec<ManifestRecord>>;

    /// Creates the tag, or re-points the existing tag of that name (keeping its
    /// uid and create time) and sets its labels (`deprecated`, `bundles`). An
    /// empty digest creates a tag no push has pointed yet, and leaves an
    /// existing tag's digest as it is. NOT_FOUND (`MANIFEST_TYPE`) if the repo
    /// does not hold a non-empty digest. (A push re-points a tag through
    /// `put_manifest`, which keeps its labels.)
    async fn put_tag(&self, tag: &TagRecord, emit: crate::events::Emit<TagRecord>) -> Result<TagRecord>;
    async fn get_tag(&self, uid: &Uidp) -> Result<Option<TagRecord>>;
    async fn find_tag(&self, repo_uid: &str, name: &str) -> Result<Option<TagRecord>>;
    /// Whether a tag was deleted (its event recorded only then).
    async fn delete_tag(&self, uid: &Uidp, emit: crate::events::Emit<()>) -> Result<bool>;
    async fn list_tags(&self, query: &ListQuery) -> Result<Page<TagRecord>>;
    /// The tag's history rows with `start_ms <= update_time <= end_ms`,
    /// oldest first, at most `limit` (capped at [`MAX_TAG_HISTORY`]). Every
    /// tag write that creates the tag or changes its digest adds one, in the
    /// same transaction; they are deleted with the tag.
    async fn tag_history(
        &self,
        tag_uid: &Uidp,
        start_ms: i64,
        end_ms: i64,
        limit: u32,
    ) -> Result<Vec<TagHistoryRecord>>;
    /// Tag names of a repo after `last`, in order, at most `limit`.
    async fn tag_names(&self, repo_uid: &str, last: Option<&str>, limit: u32) -> Result<Vec<String>>;

    /// Records a new upload session opened by `creator` (an identity uid),
    /// unless the creator or the repo already holds its cap of sessions:
    /// then RESOURCE_EXHAUSTED and nothing is written.
    async fn create_upload(&self, upload: &UploadRecord, creator: &str, caps: UploadCaps) -> Result<()>;
    async fn get_upload(&self, uuid: &str) -> Result<Option<UploadRecord>>;
    /// Moves an upload from `from` bytes to `to`; false if it was not at `from`
    /// (another request appended meanwhile) or is gone.
    async fn advance_upload(&self, uuid: &str, from: i64, to: i64, now_ms: i64) -> Result<bool>;
    /// Whether an upload was deleted.
    async fn delete_upload(&self, uuid: &str) -> Result<bool>;

    /// Blobs no repo links and no manifest names, created before `before_ms`.
    async fn unreferenced_blobs(&self, before_ms: i64, limit: u32) -> Result<Vec<String>>;
    /// Blobs the database knows (digest, size), in digest order after
    /// `after`, at most `limit`: what must be in the blob store.
    async fn known_blobs(&self, after: &str, limit: u32) -> Result<Vec<(String, i64)>>;
    /// Forgets a blob if it is still unreferenced; whether it did.
    async fn forget_blob(&self, digest: &str) -> Result<bool>;
    /// Uploads last touched before `before_ms`.
    async fn stale_uploads(&self, before_ms: i64, limit: u32) -> Result<Vec<String>>;
}

/// The repo-name conflict error.
pub(crate) fn repo_exists(org: &str, name: &str) -> Error {
    Error::AlreadyExists {
        resource_type: REPO_TYPE,
        name: format!("{org}/{name}"),
    }
}

/// Postgres/SQLite text of a `TagClass` flag triple, for inserts.
pub(crate) fn tag_flags(name: &str) -> (bool, bool, bool) {
    let c = ward_core::registry::TagClass::of(name);
    (c.referrer, c.dated, c.epoch)
}
