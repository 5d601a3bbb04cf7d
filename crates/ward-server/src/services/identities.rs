//! Identities: workloads that act in the platform, each under a group, with
//! exactly one relationship (how a presented token proves it is this identity).

use ward_core::error::FieldViolation;
use ward_core::fieldmask::Updatable;
use ward_core::listing::FilterValue;
use ward_core::names::{check_description, check_name};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::identity::Relationship;
use ward_proto::iam::v2::{
    ClaimMatch, CreateIdentityRequest, DeleteIdentityRequest, GetIdentityRequest, Identity, ListIdentitiesRequest,
    ListIdentitiesResponse, RelationshipType, StaticKeys, claim_match,
};
use ward_store::{IDENTITY_TYPE, IdentityPatch, IdentityRecord};

use super::list::ListParams;
use super::{UpdateMask, parse_uidp};
use crate::authz::Caller;
use crate::ward::Ward;

const COLLECTION: &str = "identities";
/// Longest accepted pattern, and the compiled-size limit: patterns come from
/// API callers and are matched on every token exchange.
const MAX_PATTERN_LEN: usize = 1024;
const MAX_REGEX_SIZE: usize = 1 << 20;
/// Largest accepted JWKS document for static keys.
const MAX_JWKS_BYTES: usize = 64 * 1024;
/// Longest lifetime of a static-keys identity.
const MAX_STATIC_LIFETIME_MS: i64 = 365 * 24 * 60 * 60 * 1000;

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
};

/// Compiles a pattern the way token checks use it: anchored at both ends.
pub fn compile_pattern(pattern: &str) -> std::result::Result<regex::Regex, String> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(format!("must be at most {MAX_PATTERN_LEN} characters"));
    }
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(MAX_REGEX_SIZE)
        .build()
        .map_err(|e| {
            format!(
                "is not a valid regular expression: {}",
                e.to_string().lines().last().unwrap_or("")
            )
        })
}

fn violation(field: &str, description: impl Into<String>) -> FieldViolation {
    FieldViolation {
        field: field.into(),
        description: description.into(),
    }
}

fn check_pattern(field: &str, pattern: &str, bad: &mut Vec<FieldViolation>) {
    if let Err(e) = compile_pattern(pattern) {
        bad.push(violation(field, format!("{field} {e}")));
    }
}

fn check_claim_match(m: &ClaimMatch, bad: &mut Vec<FieldViolation>) {
    match &m.iss {
        Some(claim_match::Iss::Issuer(s)) if !s.is_empty() => {}
        Some(claim_match::Iss::IssuerPattern(p)) if !p.is_empty() => {
            check_pattern("claim_match.issuer_pattern", p, bad)
        }
        _ => bad.push(violation(
            "claim_match.issuer",
            "claim_match needs an issuer or an issuer_pattern",
        )),
    }
    match &m.sub {
        Some(claim_match::Sub::Subject(s)) if !s.is_empty() => {}
        Some(claim_match::Sub::SubjectPattern(p)) if !p.is_empty() => {
            check_pattern("claim_match.subject_pattern", p, bad)
        }
        _ => bad.push(violation(
            "claim_match.subject",
            "claim_match needs a subject or a subject_pattern",
        )),
    }
    if let Some(claim_match::Aud::AudiencePattern(p)) = &m.aud {
        check_pattern("claim_match.audience_pattern", p, bad);
    }
    for (k, p) in &m.claim_patterns {
        check_pattern(&format!("claim_match.claim_patterns[{k}]"), p, bad);
    }
    if m.claims.keys().chain(m.claim_patterns.keys()).any(String::is_empty) {
        bad.push(violation("claim_match.claims", "claim names must not be empty"));
    }
}

fn check_static_keys(k: &StaticKeys, now_ms: i64, bad: &mut Vec<FieldViolation>) {
    if k.issuer.is_empty() {
        bad.push(violation("static_keys.issuer", "static_keys.issuer is required"));
    }
    if k.subject.is_empty() {
        bad.push(violation("static_keys.subject", "static_keys.subject is required"));
    }
    let jwks_ok = k.issuer_keys.len() <= MAX_JWKS_BYTES
        && serde_json::from_str::<serde_json::Value>(&k.issuer_keys)
            .ok()
            .and_then(|v| v.get("keys").and_then(|keys| keys.as_array().map(|a| !a.is_empty())))
            .unwrap_or(false);
    if !jwks_ok {
        bad.push(violation(
            "static_keys.issuer_keys",
            format!("static_keys.issuer_keys must be a JWKS document (JSON with a non-empty \"keys\" array, at most {MAX_JWKS_BYTES} bytes)"),
        ));
    }
    if let Some(exp) = k.expiration_time {
        let exp = exp.to_millis();
        if exp <= now_ms || exp > now_ms + MAX_STATIC_LIFETIME_MS {
            bad.push(violation(
                "static_keys.expiration_time",
                "static_keys.expiration_time must be in the future and at most 365 days away",
            ));
        }
    }
    if k.audiences.len() > 1 {
        bad.push(violation(
            "static_keys.audiences",
            "static_keys.audiences takes at most one value",
        ));
    }
}

/// Checks a relationship and turns it into its stored form
/// (type, JSON, exact issuer, exact subject).
fn relationship_record(
    rel: Option<&Relationship>,
    now_ms: i64,
    bad: &mut Vec<FieldViolation>,
) -> Option<(i64, String, String, String)> {
    match rel {
        None => {
            bad.push(violation(
                "claim_match",
                "an identity needs exactly one relationship: claim_match or static_keys",
            ));
            None
        }
        Some(Relationship::ClaimMatch(m)) => {
            check_claim_match(m, bad);
            let iss = match &m.iss {
                Some(claim_match::Iss::Issuer(s)) => s.clone(),
                _ => String::new(),
            };
            let sub = match &m.sub {
                Some(claim_match::Sub::Subject(s)) => s.clone(),
                _ => String::new(),
            };
            Some((RelationshipType::ClaimMatch as i64, json(m), iss, sub))
        }
        Some(Relationship::StaticKeys(k)) => {
            check_static_keys(k, now_ms, bad);
            Some((
                RelationshipType::Static as i64,
                json(k),
                k.issuer.clone(),
                k.subject.clone(),
            ))
        }
    }
}

/// proto3 JSON of a relationship message (its stored form).
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("proto messages serialize")
}

fn other_kind(kind: &str) -> &'static str {
    if kind == "claim_match" {
        "static_keys"
    } else {
        "claim_match"
    }
}

fn to_proto(r: IdentityRecord) -> Identity {
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
    pub async fn create_identity(&self, caller: &Caller, req: CreateIdentityRequest) -> Result<Identity> {
        let identity = req.identity.unwrap_or_default();
        let now = self.clock.now_millis();
        let mut bad = Vec::new();
        let parent = parse_uidp("parent", &req.parent, &mut bad);
        check_name("name", &identity.name, &mut bad);
        check_description("description", &identity.description, &mut bad);
        check_description("company", &identity.company, &mut bad);
        let rel = relationship_record(identity.relationship.as_ref(), now, &mut bad);
        let (Some(parent), Some((relationship_type, relationship, issuer, subject)), true) =
            (parent, rel, bad.is_empty())
        else {
            return Err(Error::InvalidArgument(bad));
        };
        self.authorize(caller, &rpc::CREATE_IDENTITY, &parent)?;
        let record = IdentityRecord {
            uid: parent.new_child().into(),
            parent_uid: Some(parent.into()),
            name: identity.name,
            description: identity.description,
            company: identity.company,
            relationship_type,
            relationship,
            issuer,
            subject,
            last_seen_time: None,
            create_time: now,
            update_time: now,
        };
        self.store.create_identity(&record).await?;
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
        Ok(to_proto(r))
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
        let q = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_identities(&q).await?;
        Ok(ListIdentitiesResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, &page),
            total_count: Some(page.total_count),
            skipped: req.skip,
            identities: page.items.into_iter().map(to_proto).collect(),
        })
    }

    pub async fn update_identity(&self, caller: &Caller, identity: Identity, mask: UpdateMask) -> Result<Identity> {
        let uid = Uidp::parse("identity.uid", &identity.uid)?;
        let mask = mask.resolve(
            &IDENTITY_FIELDS,
            &[
                ("name", !identity.name.is_empty()),
                ("description", !identity.description.is_empty()),
                ("company", !identity.company.is_empty()),
                (
                    "claim_match",
                    matches!(identity.relationship, Some(Relationship::ClaimMatch(_))),
                ),
                (
                    "static_keys",
                    matches!(identity.relationship, Some(Relationship::StaticKeys(_))),
                ),
            ],
        )?;
        let mut bad = Vec::new();
        let mut patch = IdentityPatch::default();
        if mask.contains("name") {
            check_name("name", &identity.name, &mut bad);
            patch.name = Some(identity.name);
        }
        if mask.contains("description") {
            check_description("description", &identity.description, &mut bad);
            patch.description = Some(identity.description);
        }
        if mask.contains("company") {
            check_description("company", &identity.company, &mut bad);
            patch.company = Some(identity.company);
        }
        let body_kind = match &identity.relationship {
            Some(Relationship::ClaimMatch(_)) => Some("claim_match"),
            Some(Relationship::StaticKeys(_)) => Some("static_keys"),
            None => None,
        };
        // A mask naming one kind of relationship takes that kind from the body:
        // it never switches to the other kind by accident.
        for kind in ["claim_match", "static_keys"] {
            if mask.contains(kind) && !mask.contains(other_kind(kind)) && body_kind.is_some_and(|k| k != kind) {
                bad.push(violation(
                    kind,
                    format!("update_mask names {kind} but the body carries {}", other_kind(kind)),
                ));
            }
        }
        if mask.contains("claim_match") || mask.contains("static_keys") {
            patch.relationship = relationship_record(identity.relationship.as_ref(), self.clock.now_millis(), &mut bad);
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        self.authorize(caller, &rpc::UPDATE_IDENTITY, &uid)?;
        let record = if mask.is_empty() {
            self.store
                .get_identity(&uid)
                .await?
                .ok_or_else(|| Error::not_found(IDENTITY_TYPE, uid.as_str()))?
        } else {
            self.store
                .update_identity(&uid, &patch, self.clock.now_millis())
                .await?
        };
        Ok(to_proto(record))
    }

    pub async fn delete_identity(&self, caller: &Caller, req: DeleteIdentityRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::DELETE_IDENTITY, &uid)?;
        self.store.delete_identity(&uid).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_anchored() {
        let re = compile_pattern("repo:acme/.*").unwrap();
        assert!(re.is_match("repo:acme/app"));
        assert!(!re.is_match("xrepo:acme/app"));
        assert!(compile_pattern("(unclosed").is_err());
        assert!(compile_pattern(&"a".repeat(2000)).is_err());
    }
}
