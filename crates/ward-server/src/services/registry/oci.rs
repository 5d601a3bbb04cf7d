//! The distribution-spec operations (`/v2/`), on the same store and the same
//! authorization as the API. Errors are [`OciError`]s in the registry's own
//! vocabulary; the OCI transport only parses requests and writes responses.
//!
//! What each operation needs where (the repo's uid is the scope):
//! - pull: `manifest.list` (manifests), `repo.blobs.get` (blobs),
//!   `tag.list` (tags/list), `referrers.list` (referrers);
//! - push: `manifest.create` (blobs and manifests), plus `tag.create` for a
//!   manifest pushed by tag (`tag.update` to move an existing tag), plus
//!   `repo.create` at the organization when the repo does not exist yet;
//! - delete: `manifest.delete` (blobs; manifests, which also need
//!   `tag.delete` since their tags go with them), `tag.delete` (tags).
//!
//! A caller who cannot list repos there gets NAME_UNKNOWN, whether or not the
//! repo exists; one who can see it but lacks the capability gets DENIED.

use bytes::Bytes;
use serde_json::{Value, json};
use ward_blob::{BlobError, ByteStream};
use ward_core::capability::Capability;
use ward_core::listing::ListQuery;
use ward_core::registry::{Digest, is_repo_name, is_tag};
use ward_core::uidp::Uidp;
use ward_store::registry::{
    BLOB_TYPE, MANIFEST_TYPE, ManifestLinks, ManifestRecord, RepoRecord, TagRecord, UploadRecord,
};

use crate::authz::Caller;
use crate::ward::Ward;

/// Most upload sessions one identity holds open at once.
pub const MAX_UPLOADS_PER_IDENTITY: u32 = 128;
/// Most upload sessions open at once in one repository.
pub const MAX_UPLOADS_PER_REPO: u32 = 256;
/// Only sessions touched this recently count against the caps: a client
/// that crashed mid-push is not locked out until its sessions expire.
pub const UPLOAD_ACTIVE_MS: i64 = 3600 * 1000;
/// An upload session untouched this long expires (its bytes are removed).
pub const UPLOAD_TTL_MS: i64 = 24 * 3600 * 1000;
/// How often a server looks for expired upload sessions.
pub const UPLOAD_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Largest manifest accepted.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;
/// Most descriptors one manifest may name.
const MAX_DESCRIPTORS: usize = 10_000;
/// Most entries one tags/list or _catalog page holds.
pub const MAX_PAGE: u32 = 1000;
/// Most referrers listed for one digest.
const MAX_REFERRERS: u32 = 1000;
/// Largest `annotations` object (JSON bytes) repeated in referrer listings.
pub const MAX_ANNOTATION_BYTES: usize = 16 * 1024;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// An error in the distribution spec's terms.
#[derive(Debug, Clone)]
pub struct OciError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// For 401s: the scope to name in the challenge.
    pub scope: Option<String>,
}

impl OciError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            scope: None,
        }
    }
    pub fn name_unknown(name: &str) -> Self {
        Self::new(
            404,
            "NAME_UNKNOWN",
            format!("repository name not known to registry: {name}"),
        )
    }
    pub fn name_invalid(msg: impl Into<String>) -> Self {
        Self::new(400, "NAME_INVALID", msg)
    }
    pub fn digest_invalid(msg: impl Into<String>) -> Self {
        Self::new(400, "DIGEST_INVALID", msg)
    }
    pub fn blob_unknown(d: &str) -> Self {
        Self::new(404, "BLOB_UNKNOWN", format!("blob unknown to registry: {d}"))
    }
    pub fn manifest_unknown(r: &str) -> Self {
        Self::new(
            404,
            "MANIFEST_UNKNOWN",
            format!("manifest unknown: {}", ward_core::names::echo(r)),
        )
    }
    pub fn manifest_invalid(msg: impl Into<String>) -> Self {
        Self::new(400, "MANIFEST_INVALID", msg)
    }
    pub fn upload_unknown() -> Self {
        Self::new(404, "BLOB_UPLOAD_UNKNOWN", "blob upload unknown to registry")
    }
    pub fn denied(msg: impl Into<String>) -> Self {
        Self::new(403, "DENIED", msg)
    }
    pub fn range_invalid(at: i64) -> Self {
        Self::new(
            416,
            "BLOB_UPLOAD_INVALID",
            format!("the upload is at byte {at}; send the chunk that starts there"),
        )
    }
}

impl From<ward_core::Error> for OciError {
    fn from(e: ward_core::Error) -> Self {
        use ward_core::Error as E;
        match e {
            E::NotFound { resource_type, name } if resource_type == BLOB_TYPE => OciError::blob_unknown(&name),
            E::NotFound { resource_type, name } if resource_type == MANIFEST_TYPE => OciError::manifest_unknown(&name),
            E::NotFound { name, .. } => OciError::name_unknown(&name),
            E::PermissionDenied(m) => OciError::denied(m),
            E::Unauthenticated(m) => OciError::new(401, "UNAUTHORIZED", m),
            E::InvalidArgument(v) => OciError::new(
                400,
                "UNSUPPORTED",
                v.into_iter().map(|f| f.description).collect::<Vec<_>>().join("; "),
            ),
            E::AlreadyExists { name, .. } => OciError::denied(format!("{name} already exists")),
            E::ResourceExhausted(m) => OciError::new(429, "TOOMANYREQUESTS", m),
            E::Unavailable(m) => OciError::new(503, "UNAVAILABLE", m),
            e @ (E::FailedPrecondition(_) | E::Internal(_)) => {
                let msg = e.message();
                if let E::Internal(detail) = &e {
                    tracing::error!(error = %detail, "registry operation failed");
                }
                OciError::new(500, "UNKNOWN", msg)
            }
        }
    }
}

fn blob_error(e: BlobError, digest: Option<&Digest>) -> OciError {
    match e {
        BlobError::DigestMismatch { actual } => OciError::digest_invalid(format!(
            "the uploaded content has digest {actual}, not {}",
            digest.map_or("", Digest::as_str)
        )),
        BlobError::TooLarge { limit } => {
            OciError::new(413, "SIZE_INVALID", format!("blobs are limited to {limit} bytes"))
        }
        BlobError::Offset { at } => OciError::range_invalid(at as i64),
        BlobError::UnknownUpload => OciError::upload_unknown(),
        BlobError::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            OciError::new(408, "BLOB_UPLOAD_INVALID", "the upload stalled")
        }
        BlobError::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            OciError::new(400, "BLOB_UPLOAD_INVALID", format!("the upload could not be read: {e}"))
        }
        BlobError::Io(e) => {
            tracing::error!(error = %e, "blob storage failed");
            OciError::new(500, "UNKNOWN", "blob storage failed")
        }
    }
}

pub type OciResult<T> = Result<T, OciError>;

/// What a request does to a repository (the token scope's actions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Pull,
    Push,
    Delete,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Pull => "pull",
            Action::Push => "push",
            Action::Delete => "delete",
        }
    }
}

/// A repository as a request names it, resolved.
pub struct Target {
    /// `<org uid>/<name>`, what registry tokens name.
    pub full: String,
    pub org: Uidp,
    pub name: String,
    /// None when it does not exist yet (push creates it).
    pub repo: Option<RepoRecord>,
}

/// A manifest as the registry serves it.
pub struct Served {
    pub media_type: String,
    pub digest: String,
    pub content: Bytes,
}

/// An upload session's state, for Location and Range headers.
pub struct UploadState {
    pub uuid: String,
    pub size: i64,
}

/// One blob read: `[start, end)` of `size` bytes.
pub struct BlobRead {
    pub size: u64,
    pub start: u64,
    pub end: u64,
    pub body: Option<ByteStream>,
}

/// A parsed manifest push.
struct Parsed {
    media_type: String,
    links: ManifestLinks,
    subject: Option<String>,
    artifact_type: String,
    annotations: String,
}

fn descriptor_digest(d: &Value, what: &str) -> OciResult<String> {
    let raw = d
        .get("digest")
        .and_then(Value::as_str)
        .ok_or_else(|| OciError::manifest_invalid(format!("{what}: a descriptor has no digest")))?;
    if d.get("size").and_then(Value::as_i64).is_none_or(|s| s < 0) {
        return Err(OciError::manifest_invalid(format!(
            "{what}: descriptor {raw} has no valid size"
        )));
    }
    Digest::parse(raw).map(|d| d.as_str().to_owned()).ok_or_else(|| {
        OciError::manifest_invalid(format!("{what}: \"{}\" is not a digest", ward_core::names::echo(raw)))
    })
}

/// Adds a config or layer descriptor to the blobs a manifest needs, with
/// its declared size; one digest declared with two sizes is invalid.
fn add_blob(links: &mut ManifestLinks, d: &Value, what: &str) -> OciResult<()> {
    let digest = descriptor_digest(d, what)?;
    let size = d.get("size").and_then(Value::as_i64).unwrap_or_default();
    match links.blobs.iter().position(|b| *b == digest) {
        Some(i) if links.blob_sizes[i] != size => Err(OciError::manifest_invalid(format!(
            "{what}: {digest} is declared with two sizes"
        ))),
        Some(_) => Ok(()),
        None => {
            links.blobs.push(digest);
            links.blob_sizes.push(size);
            Ok(())
        }
    }
}

/// Layers that clients do not push (foreign / non-distributable).
fn is_foreign(d: &Value) -> bool {
    d.get("mediaType")
        .and_then(Value::as_str)
        .is_some_and(|m| m.contains("nondistributable") || m.contains("foreign"))
}

fn parse_manifest(body: &[u8], content_type: Option<&str>) -> OciResult<Parsed> {
    let v: Value = serde_json::from_slice(body).map_err(|e| OciError::manifest_invalid(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| OciError::manifest_invalid("a manifest is a JSON object"))?;
    let declared = obj.get("mediaType").and_then(Value::as_str);
    let ct = content_type.map(|c| c.split(';').next().unwrap_or("").trim());
    // A manifest type in Content-Type that contradicts the body's own
    // mediaType: clients refuse such a manifest when they pull it, so it is
    // refused here, where the pusher can fix it.
    if let (Some(d), Some(c)) = (declared, ct)
        && c != d
        && [OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST].contains(&c)
    {
        return Err(OciError::manifest_invalid(format!(
            "the Content-Type {c} contradicts the manifest's mediaType {}",
            ward_core::names::echo(d)
        )));
    }
    let media_type = match (declared, ct) {
        (Some(d), _) => d.to_owned(),
        (None, Some(c)) if !c.is_empty() => c.to_owned(),
        _ => return Err(OciError::manifest_invalid("the manifest names no mediaType")),
    };
    if obj.get("schemaVersion").and_then(Value::as_i64) != Some(2) {
        return Err(OciError::manifest_invalid("schemaVersion must be 2"));
    }
    let mut links = ManifestLinks::default();
    let is_index = match media_type.as_str() {
        OCI_MANIFEST | DOCKER_MANIFEST => false,
        OCI_INDEX | DOCKER_LIST => true,
        other => {
            return Err(OciError::manifest_invalid(format!(
                "unsupported manifest media type \"{}\"",
                ward_core::names::echo(other)
            )));
        }
    };
    if is_index {
        let list = obj
            .get("manifests")
            .and_then(Value::as_array)
            .ok_or_else(|| OciError::manifest_invalid("an index needs a manifests array"))?;
        if list.len() > MAX_DESCRIPTORS {
            return Err(OciError::manifest_invalid(format!(
                "at most {MAX_DESCRIPTORS} manifests"
            )));
        }
        for d in list {
            links.manifests.push(descriptor_digest(d, "manifests")?);
        }
    } else {
        let config = obj
            .get("config")
            .ok_or_else(|| OciError::manifest_invalid("an image manifest needs a config"))?;
        add_blob(&mut links, config, "config")?;
        let layers = match obj.get("layers") {
            None => &Vec::new(),
            Some(l) => l
                .as_array()
                .ok_or_else(|| OciError::manifest_invalid("layers must be an array"))?,
        };
        if layers.len() > MAX_DESCRIPTORS {
            return Err(OciError::manifest_invalid(format!("at most {MAX_DESCRIPTORS} layers")));
        }
        for l in layers {
            if is_foreign(l) {
                descriptor_digest(l, "layers")?;
            } else {
                add_blob(&mut links, l, "layers")?;
            }
        }
    }
    let subject = match obj.get("subject") {
        None | Some(Value::Null) => None,
        Some(s) => Some(descriptor_digest(s, "subject")?),
    };
    let artifact_type = obj
        .get("artifactType")
        .and_then(Value::as_str)
        .or_else(|| {
            (!is_index)
                .then(|| {
                    obj.get("config")
                        .and_then(|c| c.get("mediaType"))
                        .and_then(Value::as_str)
                })
                .flatten()
        })
        .unwrap_or("")
        .to_owned();
    // Referrer listings repeat annotations: kept for them only while small,
    // so one listing stays bounded (the manifest itself keeps them all).
    let annotations = match obj.get("annotations") {
        Some(a @ Value::Object(m)) if !m.is_empty() => Some(a.to_string()),
        _ => None,
    }
    .filter(|a| a.len() <= MAX_ANNOTATION_BYTES)
    .unwrap_or_default();
    Ok(Parsed {
        media_type,
        links,
        subject,
        artifact_type,
        annotations,
    })
}

/// A reference: a tag or a digest.
enum Reference {
    Tag(String),
    Digest(Digest),
}

fn parse_reference(raw: &str) -> OciResult<Reference> {
    if raw.contains(':') {
        Digest::parse(raw).map(Reference::Digest).ok_or_else(|| {
            OciError::digest_invalid(format!("\"{}\" is not a valid digest", ward_core::names::echo(raw)))
        })
    } else if is_tag(raw) {
        Ok(Reference::Tag(raw.to_owned()))
    } else {
        Err(OciError::manifest_invalid(format!(
            "\"{}\" is not a valid tag",
            ward_core::names::echo(raw)
        )))
    }
}

/// Most `tag` parameters one manifest push may carry (the spec asks for at
/// least 10); more is 414.
pub const MAX_TAG_PARAMS: usize = 32;

/// A reference to read or delete: one that cannot be a tag names no
/// manifest (404 MANIFEST_UNKNOWN, as clients probing for a tag and the
/// conformance suite expect); a malformed digest is still 400.
fn lookup_reference(raw: &str) -> OciResult<Reference> {
    parse_reference(raw).map_err(|e| {
        if e.code == "MANIFEST_INVALID" {
            OciError::manifest_unknown(raw)
        } else {
            e
        }
    })
}

/// Parses a path digest (400 DIGEST_INVALID, never a 500).
pub fn parse_digest(raw: &str) -> OciResult<Digest> {
    Digest::parse(raw).ok_or_else(|| {
        if raw.split_once(':').is_some_and(|(a, _)| a != "sha256" && a != "sha512") {
            OciError::new(400, "UNSUPPORTED", "only sha256 and sha512 digests are supported")
        } else {
            OciError::digest_invalid(format!("\"{}\" is not a valid digest", ward_core::names::echo(raw)))
        }
    })
}

fn new_upload_id() -> String {
    use rand::RngCore as _;
    let mut b = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

impl Ward {
    /// Splits `<org>/<name>` and finds the organization (by uid, or by its
    /// name when exactly one organization has it).
    pub async fn oci_target(&self, caller: &Caller, raw: &str) -> OciResult<Target> {
        let (full, org, name) = self.oci_name(caller, raw).await?;
        let repo = self.store.find_repo(org.as_str(), name).await?;
        Ok(Target {
            full,
            org,
            name: name.to_owned(),
            repo,
        })
    }

    /// `<org>/<name>` as registry tokens name it (`<org uid>/<name>`), with
    /// the organization and the repository name, without looking the
    /// repository up: NAME_INVALID or NAME_UNKNOWN as [`Self::oci_target`].
    pub async fn oci_name<'a>(&self, caller: &Caller, raw: &'a str) -> OciResult<(String, Uidp, &'a str)> {
        let (org_raw, name) = raw
            .split_once('/')
            .ok_or_else(|| OciError::name_invalid("repository names are <organization>/<name>"))?;
        if !is_repo_name(name) {
            return Err(OciError::name_invalid(format!(
                "\"{}\" is not a repository name",
                ward_core::names::echo(name)
            )));
        }
        let org = if Uidp::is_valid(org_raw) && !org_raw.contains('/') {
            Uidp::parse("org", org_raw).map_err(|_| OciError::name_unknown(raw))?
        } else {
            self.org_by_name(caller, org_raw)
                .await?
                .ok_or_else(|| OciError::name_unknown(raw))?
        };
        // Whoever sees nothing in the organization learns nothing about it.
        if !caller.is_admin && !caller.grants.iter().any(|(s, _)| Uidp::is_within(s, org.as_str())) {
            return Err(OciError::name_unknown(raw));
        }
        Ok((format!("{org}/{name}"), org, name))
    }

    /// The organization named `name` among those the caller has bindings in
    /// (all, for the admin), when exactly one of them has that name. Names
    /// are not unique, so another organization taking a name never changes
    /// what it means to a caller outside that organization. Lookups are
    /// cached for a few seconds: names change rarely.
    async fn org_by_name(&self, caller: &Caller, name: &str) -> OciResult<Option<Uidp>> {
        if name.is_empty() || name.len() > 256 {
            return Ok(None);
        }
        // Only the caller's own organizations are searched (the query says
        // which), so organizations elsewhere with the same name, however
        // many, cannot push the caller's out of the answer.
        let mine: Option<Vec<Uidp>> = if caller.is_admin {
            None
        } else {
            Some(
                caller
                    .organizations()
                    .into_iter()
                    .filter_map(|r| Uidp::parse("org", r).ok())
                    .collect(),
            )
        };
        if mine.as_ref().is_some_and(Vec::is_empty) {
            return Ok(None);
        }
        let key = match &mine {
            None => format!("*\n{name}"),
            Some(roots) => {
                let mut k = String::with_capacity(name.len() + roots.len() * 41);
                for r in roots {
                    k.push_str(r.as_str());
                    k.push(',');
                }
                k.push('\n');
                k.push_str(name);
                k
            }
        };
        let found = match self.org_names.get(&key) {
            Some(hit) => hit,
            None => {
                let q = ListQuery {
                    name: Some(name.to_owned()),
                    // Two tell "exactly one" from "more than one".
                    page_size: 2,
                    uidp: ward_core::listing::UidpFilter {
                        in_root: true,
                        ids: mine.unwrap_or_default(),
                        ..Default::default()
                    },
                    ..ListQuery::default()
                };
                let page = self.store.list_groups(&q).await?;
                let found: std::sync::Arc<[Uidp]> = page
                    .items
                    .iter()
                    .filter_map(|g| Uidp::parse("org", &g.uid).ok())
                    .collect();
                self.org_names.insert(key, found.clone());
                found
            }
        };
        Ok(match &found[..] {
            [one] => Some(one.clone()),
            _ => None,
        })
    }

    /// The actions of a token scope (`pull,push,delete`; `*` is every one)
    /// the caller may have on `t`: what it holds at the repo, or (not pushed
    /// yet) at the organization, where a push would create it; never more
    /// than a registry token the caller already presents allows.
    pub fn oci_grantable(&self, caller: &Caller, t: &Target, actions: &str) -> Vec<String> {
        let actions = if actions.split(',').any(|a| a == "*") {
            "pull,push,delete"
        } else {
            actions
        };
        let scope = t
            .repo
            .as_ref()
            .and_then(|r| Uidp::parse("repo", &r.uid).ok())
            .unwrap_or_else(|| t.org.clone());
        let held = self.caps_at(caller, &scope);
        let mut granted: Vec<String> = Vec::new();
        for action in actions.split(',') {
            let ok = match action {
                "pull" => held.contains(Capability::RepoBlobsGet),
                "push" if t.repo.is_some() => held.contains(Capability::ManifestCreate),
                "push" => held.contains(Capability::RepoCreate),
                "delete" => held.contains(Capability::ManifestDelete),
                _ => false,
            };
            if ok && !granted.iter().any(|g| g == action) {
                granted.push(action.to_owned());
            }
        }
        if let Some(own) = &caller.claims.access {
            granted.retain(|a| own.iter().any(|o| o.name == t.full && o.actions.iter().any(|x| x == a)));
        }
        granted
    }

    /// Whether the caller (by its capabilities, whatever its token's scopes)
    /// may pull from the repository `raw` names: a mount from it is worth a
    /// re-challenge for its scope.
    pub async fn oci_could_pull(&self, caller: &Caller, raw: &str) -> bool {
        let Ok(t) = self.oci_target(caller, raw).await else {
            return false;
        };
        t.repo
            .as_ref()
            .and_then(|r| Uidp::parse("repo", &r.uid).ok())
            .is_some_and(|uid| self.caps_at(caller, &uid).contains(Capability::RepoBlobsGet))
    }

    /// Checks `cap` on an existing repo: NAME_UNKNOWN if the caller cannot
    /// see it, DENIED if it can but lacks `cap`.
    pub fn oci_check(&self, caller: &Caller, t: &Target, cap: Capability) -> OciResult<RepoRecord> {
        let repo = t.repo.clone().ok_or_else(|| OciError::name_unknown(&t.full))?;
        let uid = Uidp::parse("repo", &repo.uid).map_err(OciError::from)?;
        let caps = self.caps_at(caller, &uid);
        if caps.contains(cap) {
            Ok(repo)
        } else if caps.contains(Capability::RepoList) {
            Err(OciError::denied(format!(
                "{} is required on {}",
                cap.dotted_name(),
                t.full
            )))
        } else {
            Err(OciError::name_unknown(&t.full))
        }
    }

    /// The repo a push writes to, created in the organization when it does
    /// not exist yet and the caller may create repos there.
    pub async fn oci_push_repo(&self, caller: &Caller, t: &mut Target) -> OciResult<RepoRecord> {
        if t.repo.is_some() {
            return self.oci_check(caller, t, Capability::ManifestCreate);
        }
        // The new repo inherits what the caller holds at the organization:
        // refuse before creating it unless that allows this push.
        let caps = self.caps_at(caller, &t.org);
        if !caps.contains(Capability::RepoCreate) || !caps.contains(Capability::ManifestCreate) {
            return Err(if caps.contains(Capability::RepoList) {
                OciError::denied(format!(
                    "repo.create and manifest.create are required on {} to push a new repository",
                    t.org
                ))
            } else {
                OciError::name_unknown(&t.full)
            });
        }
        let now = self.clock.now_millis();
        let record = RepoRecord {
            uid: t.org.new_child().into(),
            parent_uid: t.org.as_str().into(),
            org_uid: t.org.as_str().into(),
            name: t.name.clone(),
            description: String::new(),
            catalog_tier: 0,
            bundles: "[]".into(),
            aliases: "[]".into(),
            active_tags: "[]".into(),
            create_time: now,
            update_time: now,
        };
        // The event of a push-created repo is CreateRepo's.
        let emit = self.created(
            caller,
            crate::services::events::types::REPO_CREATED,
            &record.uid,
            &record.parent_uid,
            &super::repos::to_proto(record.clone()),
        );
        let repo = match self.store.create_repo(&record, emit).await {
            Ok(()) => record,
            // Another push created it meanwhile.
            Err(ward_core::Error::AlreadyExists { .. }) => self
                .store
                .find_repo(t.org.as_str(), &t.name)
                .await?
                .ok_or_else(|| OciError::name_unknown(&t.full))?,
            Err(e) => return Err(e.into()),
        };
        tracing::info!(repo = %repo.uid, name = %t.full, "repository created by a push");
        t.repo = Some(repo.clone());
        self.oci_check(caller, t, Capability::ManifestCreate)
    }

    pub async fn oci_get_manifest(&self, caller: &Caller, t: &Target, reference: &str) -> OciResult<Served> {
        let repo = self.oci_check(caller, t, Capability::ManifestList)?;
        let digest = match lookup_reference(reference)? {
            Reference::Digest(d) => d.as_str().to_owned(),
            Reference::Tag(tag) => {
                self.store
                    .find_tag(&repo.uid, &tag)
                    .await?
                    .ok_or_else(|| OciError::manifest_unknown(&tag))?
                    .digest
            }
        };
        let m = self
            .store
            .get_manifest(&repo.uid, &digest)
            .await?
            .ok_or_else(|| OciError::manifest_unknown(reference))?;
        Ok(Served {
            media_type: m.media_type,
            digest: m.digest,
            content: Bytes::from(m.content),
        })
    }

    /// Stores a manifest and tags it: with the reference's tag, or, pushed
    /// by digest, with each `tag` parameter (distribution-spec 1.1; at most
    /// [`MAX_TAG_PARAMS`]). Returns its digest and subject.
    /// Each push records its event (`repository` as the request named it,
    /// `client` who sent it) with the manifest, one per tag.
    #[allow(clippy::too_many_arguments)]
    pub async fn oci_put_manifest(
        &self,
        caller: &Caller,
        t: &mut Target,
        reference: &str,
        tag_params: &[String],
        content_type: Option<&str>,
        body: Bytes,
        repository: &str,
        client: &crate::services::events::registry::Client,
    ) -> OciResult<(String, Option<String>)> {
        let reference = parse_reference(reference)?;
        let tags: Vec<String> = match &reference {
            Reference::Tag(tag) if tag_params.is_empty() => vec![tag.clone()],
            Reference::Tag(_) => {
                return Err(OciError::new(
                    400,
                    "TAG_INVALID",
                    "tag parameters are for a manifest pushed by digest",
                ));
            }
            Reference::Digest(_) => {
                if tag_params.len() > MAX_TAG_PARAMS {
                    return Err(OciError::new(
                        414,
                        "TAG_INVALID",
                        format!("at most {MAX_TAG_PARAMS} tag parameters"),
                    ));
                }
                if let Some(bad) = tag_params.iter().find(|t| !is_tag(t)) {
                    return Err(OciError::new(
                        400,
                        "TAG_INVALID",
                        format!("\"{}\" is not a valid tag", ward_core::names::echo(bad)),
                    ));
                }
                let mut tags: Vec<String> = Vec::with_capacity(tag_params.len());
                for t in tag_params {
                    if !tags.contains(t) {
                        tags.push(t.clone());
                    }
                }
                tags
            }
        };
        let repo = self.oci_push_repo(caller, t).await?;
        let repo_uid = Uidp::parse("repo", &repo.uid).map_err(OciError::from)?;
        for tag in &tags {
            let caps = self.caps_at(caller, &repo_uid);
            if !caps.contains(Capability::TagCreate) {
                return Err(OciError::denied(format!("tag.create is required on {}", t.full)));
            }
            if !caps.contains(Capability::TagUpdate) && self.store.find_tag(&repo.uid, tag).await?.is_some() {
                return Err(OciError::denied(format!(
                    "tag.update is required on {} to move {tag}",
                    t.full
                )));
            }
        }
        if body.len() > MAX_MANIFEST_BYTES {
            return Err(OciError::new(
                413,
                "SIZE_INVALID",
                format!("manifests are limited to {MAX_MANIFEST_BYTES} bytes"),
            ));
        }
        let digest = match &reference {
            Reference::Digest(d) => {
                let actual = d.of_same_kind(&body);
                if &actual != d {
                    return Err(OciError::digest_invalid(format!(
                        "the manifest's digest is {actual}, not {d}"
                    )));
                }
                actual
            }
            Reference::Tag(_) => Digest::sha256_of(&body),
        };
        let parsed = parse_manifest(&body, content_type)?;
        let now = self.clock.now_millis();
        let record = ManifestRecord {
            repo_uid: repo.uid.clone(),
            digest: digest.as_str().to_owned(),
            media_type: parsed.media_type,
            artifact_type: parsed.artifact_type,
            subject: parsed.subject.clone(),
            annotations: parsed.annotations,
            size: body.len() as i64,
            content: body.to_vec(),
            create_time: now,
        };
        let tag_record = |name: &String| TagRecord {
            uid: repo_uid.new_child().into(),
            parent_uid: repo.uid.clone(),
            name: name.clone(),
            digest: record.digest.clone(),
            create_time: now,
            update_time: now,
            // A push keeps a tag's labels (the store does not set them).
            deprecated: false,
            bundles: "[]".into(),
        };
        // The manifest with its first tag in one transaction; each further
        // tag parameter re-states the (now stored) manifest with its tag.
        let mut stored = Ok(None);
        for tag in tags.iter().map(Some).chain(tags.is_empty().then_some(None)) {
            let tag = tag.map(tag_record);
            let emit = self.push_event(caller, &record.repo_uid, repository, &record.digest, client);
            stored = self
                .store
                .put_manifest(&record, &parsed.links, tag.as_ref(), emit)
                .await;
            if stored.is_err() {
                break;
            }
        }
        match stored {
            Ok(_) => {
                self.on_manifest_pushed(&record.repo_uid, &record.digest, parsed.subject.as_deref(), &tags)
                    .await;
                Ok((record.digest, parsed.subject))
            }
            Err(ward_core::Error::NotFound { resource_type, name }) if resource_type == BLOB_TYPE => {
                Err(OciError::new(
                    400,
                    "MANIFEST_BLOB_UNKNOWN",
                    format!("blob unknown to registry: {name}"),
                ))
            }
            Err(ward_core::Error::FailedPrecondition(v))
                if v.first()
                    .is_some_and(|p| p.kind == ward_store::registry::BLOB_SIZE_MISMATCH) =>
            {
                Err(OciError::manifest_invalid(
                    v.into_iter().next().map(|p| p.description).unwrap_or_default(),
                ))
            }
            Err(ward_core::Error::NotFound { resource_type, name }) if resource_type == MANIFEST_TYPE => {
                Err(OciError::new(
                    400,
                    "MANIFEST_BLOB_UNKNOWN",
                    format!("manifest unknown to registry: {name}"),
                ))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a manifest (by digest: with its tags) or a tag (by tag).
    pub async fn oci_delete_manifest(&self, caller: &Caller, t: &Target, reference: &str) -> OciResult<()> {
        match lookup_reference(reference)? {
            Reference::Digest(d) => {
                // The manifest's tags go with it.
                self.oci_check(caller, t, Capability::TagDelete)?;
                let repo = self.oci_check(caller, t, Capability::ManifestDelete)?;
                let subject = self
                    .store
                    .get_manifest(&repo.uid, d.as_str())
                    .await?
                    .and_then(|m| m.subject);
                let tags = self.store.tags_pointing(&repo.uid, d.as_str(), 100).await?;
                if !self.store.delete_manifest(&repo.uid, d.as_str()).await? {
                    return Err(OciError::manifest_unknown(d.as_str()));
                }
                self.on_sboms_changed(&repo.uid, subject.as_deref(), &tags).await;
            }
            Reference::Tag(tag) => {
                let repo = self.oci_check(caller, t, Capability::TagDelete)?;
                let found = self
                    .store
                    .find_tag(&repo.uid, &tag)
                    .await?
                    .ok_or_else(|| OciError::manifest_unknown(&tag))?;
                let uid = Uidp::parse("tag", &found.uid).map_err(OciError::from)?;
                let emit = self.deleted(
                    caller,
                    crate::services::events::types::TAG_DELETED,
                    uid.as_str(),
                    &Ward::event_group(&repo.uid),
                );
                self.store.delete_tag(&uid, emit).await?;
                self.on_sboms_changed(&repo.uid, None, &[tag.to_string()]).await;
            }
        }
        Ok(())
    }

    /// A blob's bytes `range` (inclusive start/end from a Range header) or all.
    pub async fn oci_get_blob(
        &self,
        caller: &Caller,
        t: &Target,
        digest: &str,
        range: Option<(Option<u64>, Option<u64>)>,
        with_body: bool,
    ) -> OciResult<BlobRead> {
        let digest = parse_digest(digest)?;
        let repo = self.oci_check(caller, t, Capability::RepoBlobsGet)?;
        let size = self
            .store
            .repo_blob(&repo.uid, digest.as_str())
            .await?
            .ok_or_else(|| OciError::blob_unknown(digest.as_str()))? as u64;
        if size == 0 && range.is_some() {
            return Err(OciError::new(416, "SIZE_INVALID", "the blob is empty"));
        }
        let (start, end) = match range {
            None => (0, size),
            Some((Some(a), b)) => {
                let end = b.map_or(size, |b| b.saturating_add(1).min(size));
                if a >= size || end <= a {
                    return Err(OciError::new(416, "SIZE_INVALID", format!("the blob has {size} bytes")));
                }
                (a, end)
            }
            Some((None, Some(n))) => {
                if n == 0 {
                    return Err(OciError::new(416, "SIZE_INVALID", format!("the blob has {size} bytes")));
                }
                (size.saturating_sub(n), size)
            }
            Some((None, None)) => (0, size),
        };
        let body = if with_body {
            Some(
                self.blobs
                    .read(&digest, start, end)
                    .await
                    .map_err(|e| blob_error(BlobError::Io(e), None))?
                    .ok_or_else(|| {
                        tracing::error!(digest = %digest, "a linked blob is missing from the blob store");
                        OciError::blob_unknown(digest.as_str())
                    })?,
            )
        } else {
            None
        };
        Ok(BlobRead { size, start, end, body })
    }

    pub async fn oci_delete_blob(&self, caller: &Caller, t: &Target, digest: &str) -> OciResult<()> {
        let digest = parse_digest(digest)?;
        let repo = self.oci_check(caller, t, Capability::ManifestDelete)?;
        if !self.store.unlink_blob(&repo.uid, digest.as_str()).await? {
            return Err(OciError::blob_unknown(digest.as_str()));
        }
        Ok(())
    }

    /// Links a blob another repo holds (cross-repository mount); false when
    /// `from` does not hold it or the caller may not pull it there.
    pub async fn oci_mount(&self, caller: &Caller, repo: &RepoRecord, digest: &Digest, from: &str) -> OciResult<bool> {
        let Ok(source) = self.oci_target(caller, from).await else {
            return Ok(false);
        };
        // A registry token names what it may pull from: a mount reads `from`.
        if crate::oci::check_access(caller, &source, Action::Pull).is_err() {
            return Ok(false);
        }
        let Ok(src) = self.oci_check(caller, &source, Capability::RepoBlobsGet) else {
            return Ok(false);
        };
        let Some(size) = self.store.repo_blob(&src.uid, digest.as_str()).await? else {
            return Ok(false);
        };
        self.store
            .link_blob(&repo.uid, digest.as_str(), size, self.clock.now_millis())
            .await?;
        Ok(true)
    }

    /// Starts an upload session: at most [`MAX_UPLOADS_PER_IDENTITY`] active
    /// (touched within [`UPLOAD_ACTIVE_MS`]) per identity and
    /// [`MAX_UPLOADS_PER_REPO`] per repository (429 TOOMANYREQUESTS past
    /// either); stale ones expire on their own ([`Ward::expire_uploads`]).
    pub async fn oci_start_upload(&self, caller: &Caller, repo: &RepoRecord) -> OciResult<UploadState> {
        let now = self.clock.now_millis();
        let u = UploadRecord {
            uuid: new_upload_id(),
            repo_uid: repo.uid.clone(),
            size: 0,
            create_time: now,
            update_time: now,
        };
        let caps = ward_store::registry::UploadCaps {
            per_creator: MAX_UPLOADS_PER_IDENTITY,
            per_repo: MAX_UPLOADS_PER_REPO,
            active_since: now - UPLOAD_ACTIVE_MS,
        };
        self.store.create_upload(&u, &caller.subject, caps).await?;
        // An empty file now, so the session's bytes exist from the start.
        let empty: ByteStream = Box::pin(futures_util::stream::empty());
        self.blobs
            .append(&u.uuid, 0, empty, self.max_blob_bytes)
            .await
            .map_err(|e| blob_error(e, None))?;
        Ok(UploadState { uuid: u.uuid, size: 0 })
    }

    /// Removes upload sessions untouched for [`UPLOAD_TTL_MS`], with their
    /// bytes; how many. Every server runs it every [`UPLOAD_SWEEP_EVERY`]
    /// (replicas racing on one session both succeed: deletes are idempotent).
    pub async fn expire_uploads(&self) -> ward_core::Result<usize> {
        const BATCH: u32 = 500;
        let before = self.clock.now_millis() - UPLOAD_TTL_MS;
        let mut removed = 0;
        loop {
            let stale = self.store.stale_uploads(before, BATCH).await?;
            for id in &stale {
                self.store.delete_upload(id).await?;
                if let Err(e) = self.blobs.cancel(id).await {
                    tracing::warn!(error = %e, "removing an expired upload's bytes failed");
                }
            }
            removed += stale.len();
            if stale.len() < BATCH as usize {
                return Ok(removed);
            }
        }
    }

    /// The session `uuid` of `repo` (NOT_FOUND for another repo's).
    pub async fn oci_upload(&self, repo: &RepoRecord, uuid: &str) -> OciResult<UploadRecord> {
        if uuid.len() != 32 || !uuid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(OciError::upload_unknown());
        }
        match self.store.get_upload(uuid).await? {
            Some(u) if u.repo_uid == repo.uid => Ok(u),
            _ => Err(OciError::upload_unknown()),
        }
    }

    /// Appends a chunk; `range` is where the client says it begins and ends
    /// (from Content-Range, end inclusive), which must be where the upload is
    /// and what the body holds. Appends to one session run one at a time on
    /// this server, each from the size the database records once it holds
    /// the session, so concurrent requests cannot interleave their bytes.
    pub async fn oci_append(
        &self,
        upload: &UploadRecord,
        range: Option<(u64, u64)>,
        body: ByteStream,
    ) -> OciResult<i64> {
        let lock = self
            .upload_locks
            .get_with(upload.uuid.clone(), || std::sync::Arc::new(tokio::sync::Mutex::new(())));
        let _held = lock.lock().await;
        let size = self
            .store
            .get_upload(&upload.uuid)
            .await?
            .filter(|u| u.repo_uid == upload.repo_uid)
            .ok_or_else(OciError::upload_unknown)?
            .size;
        if let Some((s, _)) = range
            && s != size as u64
        {
            return Err(OciError::range_invalid(size));
        }
        let end = self
            .blobs
            .append(&upload.uuid, size as u64, body, self.max_blob_bytes)
            .await
            .map_err(|e| blob_error(e, None))? as i64;
        if let Some((_, last)) = range
            && last.checked_add(1) != Some(end as u64)
        {
            // Not recorded: the next append starts from `size` again.
            return Err(OciError::new(
                416,
                "BLOB_UPLOAD_INVALID",
                format!(
                    "Content-Range ends at byte {last} but the body ended at byte {}",
                    end - 1
                ),
            ));
        }
        if end != size
            && !self
                .store
                .advance_upload(&upload.uuid, size, end, self.clock.now_millis())
                .await?
        {
            return Err(OciError::range_invalid(size));
        }
        Ok(end)
    }

    /// Completes an upload as blob `digest` and links it to the repo.
    pub async fn oci_finish(&self, repo: &RepoRecord, uuid: &str, len: i64, digest: &Digest) -> OciResult<()> {
        let result = self.blobs.commit(uuid, len as u64, digest).await;
        self.store.delete_upload(uuid).await?;
        let size = result.map_err(|e| blob_error(e, Some(digest)))?;
        self.store
            .link_blob(&repo.uid, digest.as_str(), size as i64, self.clock.now_millis())
            .await?;
        Ok(())
    }

    /// A whole blob in one request (POST or PUT with `?digest=`).
    pub async fn oci_put_blob(&self, repo: &RepoRecord, digest: &Digest, body: ByteStream) -> OciResult<()> {
        let id = new_upload_id();
        let len = self
            .blobs
            .append(&id, 0, body, self.max_blob_bytes)
            .await
            .map_err(|e| blob_error(e, None));
        let len = match len {
            Ok(n) => n,
            Err(e) => {
                let _ = self.blobs.cancel(&id).await;
                return Err(e);
            }
        };
        let size = self
            .blobs
            .commit(&id, len, digest)
            .await
            .map_err(|e| blob_error(e, Some(digest)))?;
        self.store
            .link_blob(&repo.uid, digest.as_str(), size as i64, self.clock.now_millis())
            .await?;
        Ok(())
    }

    pub async fn oci_cancel_upload(&self, upload: &UploadRecord) -> OciResult<()> {
        self.store.delete_upload(&upload.uuid).await?;
        self.blobs
            .cancel(&upload.uuid)
            .await
            .map_err(|e| blob_error(BlobError::Io(e), None))
    }

    /// Tag names after `last`: at most `n` (callers ask for one more than a
    /// page, to know whether another follows).
    pub async fn oci_tags(&self, caller: &Caller, t: &Target, n: u32, last: Option<&str>) -> OciResult<Vec<String>> {
        let repo = self.oci_check(caller, t, Capability::TagList)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        Ok(self.store.tag_names(&repo.uid, last, n.min(MAX_PAGE + 1)).await?)
    }

    /// `<org uid>/<name>` the caller may list, after `last`, at most `n`
    /// (callers ask for one more than a page).
    pub async fn oci_catalog(&self, caller: &Caller, n: u32, last: Option<&str>) -> OciResult<Vec<String>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let visible = self.visible_scopes(caller, Capability::RepoList);
        let after = last.and_then(|l| l.split_once('/'));
        let rows = self
            .store
            .catalog(visible.as_deref(), after, n.min(MAX_PAGE + 1))
            .await?;
        Ok(rows.into_iter().map(|(org, name)| format!("{org}/{name}")).collect())
    }

    /// The referrers index of `digest`, optionally filtered by artifact type.
    pub async fn oci_referrers(
        &self,
        caller: &Caller,
        t: &Target,
        digest: &str,
        artifact_type: Option<&str>,
    ) -> OciResult<Value> {
        let digest = parse_digest(digest)?;
        let found = match &t.repo {
            Some(_) => {
                let repo = self.oci_check(caller, t, Capability::ReferrersList)?;
                self.store.referrers(&repo.uid, digest.as_str(), MAX_REFERRERS).await?
            }
            // Nothing was pushed there yet: nothing refers to anything, for
            // a caller who would see the repo if it existed (others learn
            // nothing about which names exist).
            None if self.caps_at(caller, &t.org).contains(Capability::RepoList) => Vec::new(),
            None => return Err(OciError::name_unknown(&t.full)),
        };
        let manifests: Vec<Value> = found
            .into_iter()
            .filter(|m| artifact_type.is_none_or(|a| a == m.artifact_type))
            .map(|m| {
                let mut d = json!({"mediaType": m.media_type, "digest": m.digest, "size": m.size});
                if !m.artifact_type.is_empty() {
                    d["artifactType"] = json!(m.artifact_type);
                }
                if let Ok(a @ Value::Object(_)) = serde_json::from_str::<Value>(&m.annotations) {
                    d["annotations"] = a;
                }
                d
            })
            .collect();
        Ok(json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn manifests_parse_and_name_what_they_need() {
        let m = json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": d('a'), "size": 2},
            "layers": [{"mediaType": "x", "digest": d('b'), "size": 3},
                       {"mediaType": "application/vnd.oci.image.layer.nondistributable.v1.tar", "digest": d('c'), "size": 3}],
            "subject": {"mediaType": OCI_MANIFEST, "digest": d('e'), "size": 9},
            "annotations": {"k": "v"}});
        let p = parse_manifest(m.to_string().as_bytes(), None).unwrap();
        assert_eq!(p.links.blobs, vec![d('a'), d('b')]);
        assert_eq!(p.subject, Some(d('e')));
        assert_eq!(p.artifact_type, "application/vnd.oci.image.config.v1+json");
        assert_eq!(p.annotations, r#"{"k":"v"}"#);
        let i = json!({"schemaVersion": 2, "manifests": [{"mediaType": OCI_MANIFEST, "digest": d('f'), "size": 1}]});
        let p = parse_manifest(i.to_string().as_bytes(), Some(OCI_INDEX)).unwrap();
        assert_eq!(p.links.manifests, vec![d('f')]);
        for bad in [
            "nope".to_string(),
            "[]".into(),
            json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST}).to_string(),
            json!({"schemaVersion": 1, "mediaType": OCI_MANIFEST, "config": {"digest": d('a'), "size": 1}}).to_string(),
            json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"digest": "sha256:x", "size": 1}})
                .to_string(),
            json!({"schemaVersion": 2, "mediaType": "text/plain"}).to_string(),
        ] {
            assert!(parse_manifest(bad.as_bytes(), None).is_err(), "{bad}");
        }
    }

    #[test]
    fn references_and_digests() {
        assert!(matches!(parse_reference("latest"), Ok(Reference::Tag(_))));
        assert!(matches!(parse_reference(&d('a')), Ok(Reference::Digest(_))));
        assert_eq!(
            parse_reference("sha256:zz").err().map(|e| e.code),
            Some("DIGEST_INVALID")
        );
        assert_eq!(parse_reference("-bad").err().map(|e| e.code), Some("MANIFEST_INVALID"));
        assert_eq!(parse_digest("md5:abc").err().map(|e| e.code), Some("UNSUPPORTED"));
        assert_eq!(parse_digest("sha256:abc").err().map(|e| e.status), Some(400));
    }
}
