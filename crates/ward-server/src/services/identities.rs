//! Identities: workloads that act in the platform, each under a group, with
//! exactly one relationship (how a presented token proves it is this identity).

use std::sync::Arc;
use ward_core::error::FieldViolation;
use ward_core::fieldmask::Updatable;
use ward_core::listing::FilterValue;

use ward_core::capability::Capability;
use ward_core::names::{MAX_CLAIM_NAME_LEN, MAX_CLAIM_VALUE_LEN, check_description, check_name, check_text};
use ward_core::pattern::Pattern;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::identity::Relationship;
use ward_proto::iam::v2::{
    ClaimMatch, CreateIdentityRequest, DeleteIdentityRequest, GetIdentityRequest, Identity, ListIdentitiesRequest,
    ListIdentitiesResponse, LookupIdentityRequest, LookupIdentityResponse, RelationshipType, StaticKeys, claim_match,
};
use ward_store::{IDENTITY_TYPE, IdentityPatch, IdentityRecord};

use super::events;
use super::list::ListParams;
use super::{UpdateMask, hide_bindings};
use crate::authz::{Caller, Grants};
use crate::ward::Ward;

const COLLECTION: &str = "identities";
/// Largest accepted JWKS document for static keys, and most keys in it.
const MAX_JWKS_BYTES: usize = 64 * 1024;
const MAX_JWKS_KEYS: usize = 16;
/// Longest lifetime of a static-keys identity, counted from its creation.
const MAX_STATIC_LIFETIME_MS: i64 = 365 * 24 * 60 * 60 * 1000;
/// Most entries in `claims` and `claim_patterns` together.
pub const MAX_CLAIMS: usize = 32;
/// Most pattern bytes one identity may hold, all its patterns together.
pub const MAX_PATTERN_BYTES: usize = 8 * 1024;

pub const IDENTITY_FIELDS: Updatable = Updatable {
    mutable: &["name", "description", "company", "claim_match", "static_keys"],
    output_only: &[
        "uid",
        "email",
        "email_unverified",
        "last_seen_time",
        "create_time",
        "update_time",
    ],
    immutable: &[],
};

fn violation(field: &str, description: impl Into<String>) -> FieldViolation {
    FieldViolation {
        field: field.into(),
        description: description.into(),
    }
}

/// A relationship that passed the cheap checks: its stored form, and the
/// patterns still to compile (compiling is the expensive part, done after
/// authorization and off the async workers).
struct CheckedRelationship {
    relationship_type: i64,
    json: String,
    issuer: String,
    subject: String,
    patterns: Vec<(String, String)>,
}

/// Checks a required exact value or pattern (issuer, subject).
fn exact_or_pattern(
    field: &str,
    missing: &str,
    exact: Option<&str>,
    pattern: Option<&str>,
    patterns: &mut Vec<(String, String)>,
    bad: &mut Vec<FieldViolation>,
) {
    match (exact, pattern) {
        (Some(s), _) if !s.is_empty() => check_text(&format!("claim_match.{field}"), s, MAX_CLAIM_VALUE_LEN, bad),
        (None, Some(p)) if !p.is_empty() => push_pattern(&format!("claim_match.{field}_pattern"), p, patterns, bad),
        _ => bad.push(violation(&format!("claim_match.{field}"), missing)),
    }
}

fn check_claim_match(m: &ClaimMatch, bad: &mut Vec<FieldViolation>) -> Vec<(String, String)> {
    let mut patterns = Vec::new();
    let (iss, iss_p) = match &m.iss {
        Some(claim_match::Iss::Issuer(s)) => (Some(s.as_str()), None),
        Some(claim_match::Iss::IssuerPattern(p)) => (None, Some(p.as_str())),
        None => (None, None),
    };
    exact_or_pattern(
        "issuer",
        "claim_match needs an issuer or an issuer_pattern",
        iss,
        iss_p,
        &mut patterns,
        bad,
    );
    let (sub, sub_p) = match &m.sub {
        Some(claim_match::Sub::Subject(s)) => (Some(s.as_str()), None),
        Some(claim_match::Sub::SubjectPattern(p)) => (None, Some(p.as_str())),
        None => (None, None),
    };
    exact_or_pattern(
        "subject",
        "claim_match needs a subject or a subject_pattern",
        sub,
        sub_p,
        &mut patterns,
        bad,
    );
    match &m.aud {
        Some(claim_match::Aud::Audience(a)) => check_text("claim_match.audience", a, MAX_CLAIM_VALUE_LEN, bad),
        Some(claim_match::Aud::AudiencePattern(p)) => {
            push_pattern("claim_match.audience_pattern", p, &mut patterns, bad);
        }
        None => {}
    }
    if m.claims.len() + m.claim_patterns.len() > MAX_CLAIMS {
        bad.push(violation(
            "claim_match.claims",
            format!("claim_match.claims and claim_match.claim_patterns may hold at most {MAX_CLAIMS} entries together"),
        ));
        return patterns;
    }
    for (k, v) in &m.claims {
        check_claim_name("claim_match.claims", k, bad);
        check_text(&format!("claim_match.claims[{k}]"), v, MAX_CLAIM_VALUE_LEN, bad);
    }
    for (k, p) in &m.claim_patterns {
        check_claim_name("claim_match.claim_patterns", k, bad);
        push_pattern(&format!("claim_match.claim_patterns[{k}]"), p, &mut patterns, bad);
    }
    let total: usize = patterns.iter().map(|(_, p)| p.len()).sum();
    if total > MAX_PATTERN_BYTES {
        bad.push(violation(
            "claim_match",
            format!("an identity's patterns may hold at most {MAX_PATTERN_BYTES} bytes together"),
        ));
        patterns.clear();
    }
    patterns
}

/// Queues a pattern for compiling once its text passes the character rule
/// that every stored string follows (escapes such as `\x00` stay allowed).
fn push_pattern(field: &str, pattern: &str, patterns: &mut Vec<(String, String)>, bad: &mut Vec<FieldViolation>) {
    let before = bad.len();
    check_text(field, pattern, ward_core::pattern::MAX_PATTERN_LEN, bad);
    if bad.len() == before {
        patterns.push((field.to_owned(), pattern.to_owned()));
    }
}

fn check_claim_name(field: &str, name: &str, bad: &mut Vec<FieldViolation>) {
    if name.is_empty() {
        bad.push(violation(field, "claim names must not be empty"));
    } else {
        check_text(field, name, MAX_CLAIM_NAME_LEN, bad);
    }
}

/// A JWKS the exchange can use: parseable, 1 to [`MAX_JWKS_KEYS`] keys, each
/// one a verification key of a supported type and algorithm.
fn check_jwks(json: &str) -> std::result::Result<(), String> {
    use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
    if json.len() > MAX_JWKS_BYTES {
        return Err(format!("must be at most {MAX_JWKS_BYTES} bytes"));
    }
    let set: JwkSet =
        serde_json::from_str(json).map_err(|e| format!("must be a JWKS document (JSON with a \"keys\" array): {e}"))?;
    if set.keys.is_empty() || set.keys.len() > MAX_JWKS_KEYS {
        return Err(format!("must hold between 1 and {MAX_JWKS_KEYS} keys"));
    }
    for (i, jwk) in set.keys.iter().enumerate() {
        use jsonwebtoken::Algorithm as A;
        use jsonwebtoken::jwk::{EllipticCurve as C, KeyAlgorithm as K};
        let by_type = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => A::RS256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == C::P256 => A::ES256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == C::P384 => A::ES384,
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == C::Ed25519 => A::EdDSA,
            _ => {
                return Err(format!(
                    "key {i}: only RSA, EC P-256/P-384 and Ed25519 keys are supported"
                ));
            }
        };
        let alg = match jwk.common.key_algorithm {
            None => by_type,
            Some(K::RS256) => A::RS256,
            Some(K::RS384) => A::RS384,
            Some(K::RS512) => A::RS512,
            Some(K::PS256) => A::PS256,
            Some(K::ES256) => A::ES256,
            Some(K::ES384) => A::ES384,
            Some(K::EdDSA) => A::EdDSA,
            Some(other) => return Err(format!("key {i}: algorithm {other:?} is not accepted")),
        };
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| format!("key {i} is not a usable key: {e}"))?;
        // Building a verifier parses the key material (curve points, RSA
        // components): a key that cannot verify anything fails here, at
        // create time, instead of at every exchange.
        jsonwebtoken::crypto::verify("AAAA", b"probe", &key, alg)
            .map_err(|e| format!("key {i} is not a usable {alg:?} key: {e}"))?;
    }
    Ok(())
}

/// Checks static keys; returns them with `expiration_time` defaulted to 365
/// days after `created_ms`, the most it may be.
fn check_static_keys(k: &StaticKeys, now_ms: i64, created_ms: i64, bad: &mut Vec<FieldViolation>) -> StaticKeys {
    let mut k = k.clone();
    for (field, value) in [("static_keys.issuer", &k.issuer), ("static_keys.subject", &k.subject)] {
        if value.is_empty() {
            bad.push(violation(field, format!("{field} is required")));
        } else {
            check_text(field, value, MAX_CLAIM_VALUE_LEN, bad);
        }
    }
    if let Err(e) = check_jwks(&k.issuer_keys) {
        bad.push(violation(
            "static_keys.issuer_keys",
            format!("static_keys.issuer_keys {e}"),
        ));
    }
    let latest = created_ms.saturating_add(MAX_STATIC_LIFETIME_MS);
    match k.expiration_time {
        Some(exp) if !exp.is_valid() || exp.to_millis() <= now_ms || exp.to_millis() > latest => bad.push(violation(
            "static_keys.expiration_time",
            "static_keys.expiration_time must be in the future and at most 365 days after the identity's creation",
        )),
        Some(_) => {}
        None => k.expiration_time = Some(Timestamp::from_millis(latest)),
    }
    if k.audiences.len() > 1 {
        bad.push(violation(
            "static_keys.audiences",
            "static_keys.audiences takes at most one value",
        ));
    }
    for a in &k.audiences {
        check_text("static_keys.audiences", a, MAX_CLAIM_VALUE_LEN, bad);
    }
    k
}

/// Checks a relationship (cheap checks only) and turns it into its stored
/// form. `created_ms` is the identity's creation time (now, for a create).
fn relationship_record(
    rel: Option<&Relationship>,
    now_ms: i64,
    created_ms: i64,
    bad: &mut Vec<FieldViolation>,
) -> Option<CheckedRelationship> {
    match rel {
        None => {
            bad.push(violation(
                "claim_match",
                "an identity needs exactly one relationship: claim_match or static_keys",
            ));
            None
        }
        Some(Relationship::ClaimMatch(m)) => {
            let patterns = check_claim_match(m, bad);
            let exact = |v: Option<String>| v.unwrap_or_default();
            Some(CheckedRelationship {
                relationship_type: RelationshipType::ClaimMatch as i64,
                json: json(m, "claim_match", bad),
                issuer: exact(match &m.iss {
                    Some(claim_match::Iss::Issuer(s)) => Some(s.clone()),
                    _ => None,
                }),
                subject: exact(match &m.sub {
                    Some(claim_match::Sub::Subject(s)) => Some(s.clone()),
                    _ => None,
                }),
                patterns,
            })
        }
        Some(Relationship::StaticKeys(k)) => {
            let k = check_static_keys(k, now_ms, created_ms, bad);
            Some(CheckedRelationship {
                relationship_type: RelationshipType::Static as i64,
                json: json(&k, "static_keys", bad),
                issuer: k.issuer,
                subject: k.subject,
                patterns: Vec::new(),
            })
        }
        Some(Relationship::AwsIdentity(_)) => {
            bad.push(violation(
                "aws_identity",
                "aws_identity is not supported by this server; use claim_match with AWS outbound identity federation, or static_keys",
            ));
            None
        }
        Some(Relationship::ServicePrincipal(_)) => {
            bad.push(violation(
                "service_principal",
                "service_principal is not supported by this server: it names platform services Ward does not run",
            ));
            None
        }
    }
}

/// proto3 JSON of a relationship message (its stored form). Serializing
/// fails only on values the checks already refused (e.g. a timestamp out of
/// range); that is recorded as a violation, never a panic.
fn json<T: serde::Serialize>(v: &T, field: &str, bad: &mut Vec<FieldViolation>) -> String {
    serde_json::to_string(v).unwrap_or_else(|e| {
        bad.push(violation(field, format!("{field} cannot be stored: {e}")));
        String::new()
    })
}

fn other_kind(kind: &str) -> &'static str {
    if kind == "claim_match" {
        "static_keys"
    } else {
        "claim_match"
    }
}

/// The deterministic root-level uid of a registered person (see
/// [`Ward::lookup_identity`]). Length-prefixed, so no two (issuer, subject)
/// pairs share an input.
pub fn registered_identity_uid(issuer: &str, subject: &str) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"ward registered identity\n");
    h.update((issuer.len() as u64).to_be_bytes());
    h.update(issuer.as_bytes());
    h.update(subject.as_bytes());
    hex::encode(&h.finalize()[..20])
}

fn relationship_kind(rel: Option<&Relationship>) -> Option<&'static str> {
    match rel {
        Some(Relationship::ClaimMatch(_)) => Some("claim_match"),
        Some(Relationship::StaticKeys(_)) => Some("static_keys"),
        Some(Relationship::AwsIdentity(_)) => Some("aws_identity"),
        Some(Relationship::ServicePrincipal(_)) => Some("service_principal"),
        None => None,
    }
}

pub(crate) fn to_proto(r: IdentityRecord) -> Identity {
    let relationship = if r.relationship_type == RelationshipType::Static as i64 {
        serde_json::from_str(&r.relationship).ok().map(Relationship::StaticKeys)
    } else {
        serde_json::from_str(&r.relationship).ok().map(Relationship::ClaimMatch)
    };
    Identity {
        uid: r.uid,
        name: r.name,
        description: r.description,
        email: String::new(),
        email_unverified: String::new(),
        company: r.company,
        last_seen_time: r.last_seen_time.map(Timestamp::from_millis),
        create_time: Some(Timestamp::from_millis(r.create_time)),
        update_time: Some(Timestamp::from_millis(r.update_time)),
        relationship,
    }
}

impl Ward {
    /// A compiled claim pattern, from the cache or compiled on a blocking
    /// thread (compiling can take milliseconds; async workers never wait on
    /// it). Patterns are cached by their text, weighed by compiled size.
    pub(crate) async fn pattern(&self, pattern: &str) -> std::result::Result<Arc<Pattern>, String> {
        if let Some(p) = self.patterns.get(pattern) {
            return Ok(p);
        }
        // Compiled off the async workers, one per core at a time (a burst
        // queues instead of multiplying memory and threads); the cache is
        // checked again when a permit frees up in case another request just
        // compiled it.
        let owned = pattern.to_owned();
        let patterns = self.patterns.clone();
        let compiled = self
            .cpu(move || {
                patterns
                    .get(&owned)
                    .map_or_else(|| Pattern::compile(&owned).map(Arc::new), Ok)
            })
            .await
            .map_err(|_| "could not be compiled".to_owned())??;
        self.patterns.insert(pattern.to_owned(), compiled.clone());
        Ok(compiled)
    }

    /// Checks every pattern's syntax (cheap, all reported), then compiles
    /// them in order and stops at the first that fails: compiling is the one
    /// expensive check, so one request pays for at most one failure.
    async fn check_patterns(&self, patterns: &[(String, String)], bad: &mut Vec<FieldViolation>) {
        let before = bad.len();
        for (field, p) in patterns {
            if let Err(e) = Pattern::check_syntax(p) {
                bad.push(violation(field, format!("{field} {e}")));
            }
        }
        if bad.len() > before {
            return;
        }
        for (field, p) in patterns {
            if let Err(e) = self.pattern(p).await {
                bad.push(violation(field, format!("{field} {e}")));
                return;
            }
        }
    }

    /// Changing how an identity authenticates lets the caller act as it, so
    /// the caller must already hold everything the identity holds, wherever
    /// it holds it (the anti-escalation rule of role bindings).
    async fn check_may_become(&self, caller: &Caller, identity: &Uidp) -> Result<()> {
        if caller.is_admin {
            return Ok(());
        }
        let held = Grants::from_rows(self.store.grants(identity.as_str()).await?);
        for (scope, caps) in held.iter() {
            let Ok(scope) = Uidp::parse("scope", scope) else {
                continue;
            };
            let mine = self.caps_at(caller, &scope);
            let missing: Vec<&str> = caps
                .iter()
                .filter(|c| !mine.contains(*c))
                .map(Capability::dotted_name)
                .collect();
            if !missing.is_empty() {
                // What it holds, and where, may be outside the caller's view.
                return Err(Error::PermissionDenied(format!(
                    "cannot change how identity {identity} authenticates: it holds capabilities you do not hold"
                )));
            }
        }
        Ok(())
    }

    pub async fn create_identity(&self, caller: &Caller, req: CreateIdentityRequest) -> Result<Identity> {
        let identity = req.identity.unwrap_or_default();
        let now = self.clock.now_millis();
        let parent = Uidp::parse("parent", &req.parent)?;
        self.authorize(caller, &rpc::CREATE_IDENTITY, &parent)?;
        let mut bad = Vec::new();
        check_name("name", &identity.name, &mut bad);
        check_description("description", &identity.description, &mut bad);
        check_description("company", &identity.company, &mut bad);
        let rel = relationship_record(identity.relationship.as_ref(), now, now, &mut bad);
        if let Some(rel) = &rel {
            self.check_patterns(&rel.patterns, &mut bad).await;
        }
        let (Some(rel), true) = (rel, bad.is_empty()) else {
            return Err(Error::InvalidArgument(bad));
        };
        let record = IdentityRecord {
            uid: parent.new_child().into(),
            parent_uid: Some(parent.into()),
            name: identity.name,
            description: identity.description,
            company: identity.company,
            relationship_type: rel.relationship_type,
            relationship: rel.json,
            issuer: rel.issuer,
            subject: rel.subject,
            last_seen_time: None,
            create_time: now,
            update_time: now,
        };
        let group = Ward::event_group(&record.uid);
        let emit = self.created(
            caller,
            events::types::IDENTITY_CREATED,
            &record.uid,
            &group,
            &to_proto(record.clone()),
        );
        self.store.create_identity(&record, emit).await?;
        Ok(to_proto(record))
    }

    pub async fn get_identity(&self, caller: &Caller, req: GetIdentityRequest) -> Result<Identity> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::GET_IDENTITY, &uid)?;
        let r = self
            .store
            .get_identity(&uid)
            .await?
            .ok_or_else(|| Error::not_found(IDENTITY_TYPE, uid.as_str()))?;
        let person = if r.parent_uid.is_none() {
            self.store.get_person(&r.uid).await?
        } else {
            None
        };
        let mut identity = to_proto(r);
        // A person's email, from their last login.
        if let Some(p) = person {
            if p.email_verified {
                identity.email = p.email;
            } else {
                identity.email_unverified = p.email;
            }
        }
        Ok(identity)
    }

    pub async fn list_identities(&self, caller: &Caller, req: ListIdentitiesRequest) -> Result<ListIdentitiesResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_IDENTITIES.capability);
        let mut filters = Vec::new();
        if req.relationship_type != 0 {
            filters.push(("relationship_type", FilterValue::Int(i64::from(req.relationship_type))));
        }
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: &req.name,
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters,
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_identities(&q).await?;
        Ok(ListIdentitiesResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            identities: page.items.into_iter().map(to_proto).collect(),
        })
    }

    pub async fn update_identity(&self, caller: &Caller, identity: Identity, mask: UpdateMask) -> Result<Identity> {
        let uid = Uidp::parse("identity.uid", &identity.uid)?;
        let body_kind = relationship_kind(identity.relationship.as_ref());
        let mask = mask.resolve(
            &IDENTITY_FIELDS,
            &[
                ("name", !identity.name.is_empty()),
                ("description", !identity.description.is_empty()),
                ("company", !identity.company.is_empty()),
                ("claim_match", body_kind == Some("claim_match")),
                ("static_keys", body_kind == Some("static_keys")),
            ],
        )?;
        self.authorize(caller, &rpc::UPDATE_IDENTITY, &uid)?;
        let changes_relationship = mask.contains("claim_match") || mask.contains("static_keys");
        let existing = if mask.is_empty() || changes_relationship {
            Some(
                self.store
                    .get_identity(&uid)
                    .await?
                    .ok_or_else(|| Error::not_found(IDENTITY_TYPE, uid.as_str()))?,
            )
        } else {
            None
        };
        let mut bad = Vec::new();
        let mut patch = IdentityPatch::default();
        // A field outside the mask is not written, but a value that breaks
        // its schema is still refused (a strict client expects the 400).
        if mask.contains("name") || !identity.name.is_empty() {
            check_name("name", &identity.name, &mut bad);
        }
        if mask.contains("name") {
            patch.name = Some(identity.name);
        }
        check_description("description", &identity.description, &mut bad);
        if mask.contains("description") {
            patch.description = Some(identity.description);
        }
        if mask.contains("company") {
            check_description("company", &identity.company, &mut bad);
            patch.company = Some(identity.company);
        }
        // A mask naming one kind of relationship takes that kind from the body:
        // it never switches to the other kind by accident.
        for kind in ["claim_match", "static_keys"] {
            if mask.contains(kind) && !mask.contains(other_kind(kind)) && body_kind.is_some_and(|k| k != kind) {
                bad.push(violation(
                    kind,
                    format!(
                        "update_mask names {kind} but the body carries {}",
                        body_kind.unwrap_or_default()
                    ),
                ));
            }
        }
        let mut patterns = Vec::new();
        if changes_relationship {
            let created = existing.as_ref().map_or(0, |r| r.create_time);
            let rel = relationship_record(
                identity.relationship.as_ref(),
                self.clock.now_millis(),
                created,
                &mut bad,
            );
            if let Some(rel) = rel {
                patterns = rel.patterns;
                patch.relationship = Some((rel.relationship_type, rel.json, rel.issuer, rel.subject));
            }
        }
        self.check_patterns(&patterns, &mut bad).await;
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        if changes_relationship {
            self.check_may_become(caller, &uid).await?;
        }
        let record = match existing {
            Some(r) if mask.is_empty() => r,
            _ => {
                let group = Ward::event_group(uid.as_str());
                let emit = self.updated(caller, events::types::IDENTITY_UPDATED, uid.as_str(), &group, to_proto);
                self.store
                    .update_identity(&uid, &patch, self.clock.now_millis(), emit)
                    .await?
            }
        };
        Ok(to_proto(record))
    }

    /// The uid a registered person with this issuer and subject has (or will
    /// have): the first 20 bytes of SHA-256 over a fixed label, the issuer and
    /// the subject, in hex. Any authenticated caller may ask; it reveals
    /// nothing stored.
    pub async fn lookup_identity(
        &self,
        _caller: &Caller,
        req: LookupIdentityRequest,
    ) -> Result<LookupIdentityResponse> {
        let mut bad = Vec::new();
        for (field, value) in [("issuer", &req.issuer), ("subject", &req.subject)] {
            if value.is_empty() {
                bad.push(violation(field, format!("{field} is required")));
            } else {
                check_text(field, value, MAX_CLAIM_VALUE_LEN, &mut bad);
            }
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        Ok(LookupIdentityResponse {
            uid: registered_identity_uid(&req.issuer, &req.subject),
        })
    }

    pub async fn delete_identity(&self, caller: &Caller, req: DeleteIdentityRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::DELETE_IDENTITY, &uid)?;
        let group = Ward::event_group(uid.as_str());
        let emit = self.deleted(caller, events::types::IDENTITY_DELETED, uid.as_str(), &group);
        self.store
            .delete_identity(&uid, emit)
            .await
            .map_err(|e| hide_bindings(caller, e, "identity"))?;
        // Its grants, its existence and registry logins remembered for it
        // end now, here and on every replica.
        self.grants_changed().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwks_must_be_usable() {
        let ed = r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","alg":"EdDSA","kid":"k"}]}"#;
        assert!(check_jwks(ed).is_ok());
        for bad in [
            "{}",
            r#"{"keys":[]}"#,
            r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#,
            r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"!!"}]}"#,
            r#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","alg":"HS256"}]}"#,
            r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}"#,
            "not json",
        ] {
            assert!(check_jwks(bad).is_err(), "{bad}");
        }
    }
}
