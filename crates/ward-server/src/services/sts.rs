//! The token exchange (`/sts/exchange`): a workload presents its platform's
//! OIDC token and receives a one-hour Ward API token for an identity whose
//! relationship the token satisfies.
//!
//! Checks run cheapest first: the token's times, the identity, its issuer;
//! then the signature; and only then subject, audience and claims. Keys are
//! fetched only for an issuer that the identity names, and nothing about what
//! the identity expects of subject, audience or claims is revealed to a token
//! that is not validly signed by that issuer. Failures say which check
//! failed, never what the identity expects.

use ward_auth::upstream::{Unverified, parse_jwks};
use ward_auth::{Actor, Audience, Grant};
use ward_core::capability::{CapSet, Capability};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::iam::v2::{ClaimMatch, RelationshipType, StaticKeys, claim_match};
use ward_store::IdentityRecord;

use crate::authz::Grants;
use crate::ward::{LAST_SEEN_EVERY_MS, Ward};

/// What the caller asks for.
#[derive(Debug, Default)]
pub struct ExchangeRequest {
    /// Empty: the API URL.
    pub audiences: Vec<String>,
    pub identity: Option<String>,
    /// Group uids to restrict the token to.
    pub scopes: Vec<String>,
    /// Capability names (enum or dotted) to restrict the token to.
    pub caps: Vec<String>,
}

/// A minted token.
pub struct Exchanged {
    pub token: String,
    pub expiry_secs: i64,
}

/// Most group scopes one exchange may narrow to.
pub const MAX_SCOPES: usize = 8;
/// Most capabilities one exchange may narrow to.
pub const MAX_CAPS: usize = 32;
/// Most audience values one exchange may name (Ward serves two; repeats and
/// trailing-slash variants are folded).
pub const MAX_AUDIENCES: usize = 8;

/// The upstream audiences recorded in a token's `act`: at most
/// [`MAX_ACT_AUDIENCES`] of at most [`MAX_ACT_AUDIENCE_LEN`] bytes, so a
/// token with many audiences still exchanges.
const MAX_ACT_AUDIENCES: usize = 4;
const MAX_ACT_AUDIENCE_LEN: usize = 256;

fn act_audiences(auds: Vec<String>) -> Vec<String> {
    auds.into_iter()
        .filter(|a| a.len() <= MAX_ACT_AUDIENCE_LEN)
        .take(MAX_ACT_AUDIENCES)
        .collect()
}

fn reject(msg: impl Into<String>) -> Error {
    Error::Unauthenticated(msg.into())
}

/// A claim's value as text (strings as they are, other JSON as JSON).
fn claim_text(token: &Unverified, name: &str) -> Option<String> {
    token
        .claims
        .get(name)
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
}

impl Ward {
    /// `value` equals `exact`, or fully matches `pattern` (anchored, compiled
    /// once and cached). A stored pattern that no longer compiles matches
    /// nothing.
    async fn matches(&self, value: &str, exact: Option<&str>, pattern: Option<&str>) -> bool {
        match (exact, pattern) {
            (Some(e), _) => value == e,
            (None, Some(p)) => self.pattern(p).await.is_ok_and(|re| re.is_match(value)),
            (None, None) => false,
        }
    }

    /// The issuer check of a claim-match identity: before any key is fetched.
    async fn check_claim_issuer(&self, m: &ClaimMatch, iss: &str) -> Result<()> {
        let (exact, pattern) = match &m.iss {
            Some(claim_match::Iss::Issuer(s)) => (Some(s.as_str()), None),
            Some(claim_match::Iss::IssuerPattern(p)) => (None, Some(p.as_str())),
            None => (None, None),
        };
        if self.matches(iss, exact, pattern).await {
            Ok(())
        } else {
            Err(reject("the identity token's issuer does not match the identity"))
        }
    }

    /// Subject, audience and claims of a claim-match identity: only once the
    /// token's signature has been verified. Without `audience` or
    /// `audience_pattern`, the token must be meant for Ward: its `aud` must
    /// include Ward's issuer URL.
    async fn check_claim_rest(&self, m: &ClaimMatch, token: &Unverified, sub: &str) -> Result<()> {
        let (sub_exact, sub_pattern) = match &m.sub {
            Some(claim_match::Sub::Subject(s)) => (Some(s.as_str()), None),
            Some(claim_match::Sub::SubjectPattern(p)) => (None, Some(p.as_str())),
            None => (None, None),
        };
        if !self.matches(sub, sub_exact, sub_pattern).await {
            return Err(reject("the identity token's subject does not match the identity"));
        }
        let auds = token.audiences();
        let aud_ok = match &m.aud {
            Some(claim_match::Aud::Audience(a)) => auds.iter().any(|x| x == a),
            Some(claim_match::Aud::AudiencePattern(p)) => {
                let mut any = false;
                for x in &auds {
                    if self.matches(x, None, Some(p)).await {
                        any = true;
                        break;
                    }
                }
                any
            }
            None => auds.iter().any(|x| x == self.tokens.issuer()),
        };
        if !aud_ok {
            return Err(reject("the identity token's audience does not match the identity"));
        }
        for (name, want) in &m.claims {
            if claim_text(token, name).as_deref() != Some(want.as_str()) {
                return Err(reject(format!(
                    "the identity token's claim \"{name}\" does not match the identity"
                )));
            }
        }
        for (name, pattern) in &m.claim_patterns {
            let ok = match claim_text(token, name) {
                Some(v) => self.matches(&v, None, Some(pattern)).await,
                None => false,
            };
            if !ok {
                return Err(reject(format!(
                    "the identity token's claim \"{name}\" does not match the identity"
                )));
            }
        }
        Ok(())
    }

    /// A static-keys identity: expiry and issuer, then the signature with the
    /// stored keys, then subject and audience.
    fn check_static_keys(&self, k: &StaticKeys, token: &Unverified, iss: &str, sub: &str, now_ms: i64) -> Result<()> {
        if k.expiration_time.is_some_and(|t| t.to_millis() <= now_ms) {
            return Err(reject("the identity has expired"));
        }
        if iss != k.issuer {
            return Err(reject("the identity token's issuer does not match the identity"));
        }
        token.verify_signature(&parse_jwks(&k.issuer_keys)?)?;
        if sub != k.subject {
            return Err(reject("the identity token's subject does not match the identity"));
        }
        let auds = token.audiences();
        let want = k.audiences.first().map_or(self.tokens.issuer(), String::as_str);
        if !auds.iter().any(|a| a == want) {
            return Err(reject("the identity token's audience does not match the identity"));
        }
        Ok(())
    }

    /// The identity the token is for. Named (`identity=`): that one. Not
    /// named: the one *root-level* identity (a registered user) whose exact
    /// issuer and subject are the token's. Identities that live in a group
    /// (assumable identities) are never resolved implicitly: any organization
    /// can create one with any issuer and subject, so implicit resolution
    /// would let one tenant make another's exchange ambiguous or capture it.
    async fn identity_for(&self, named: Option<&str>, iss: &str, sub: &str) -> Result<IdentityRecord> {
        if let Some(uid) = named {
            let uid = Uidp::parse("identity", uid)?;
            return self
                .store
                .get_identity(&uid)
                .await?
                .ok_or_else(|| reject("unknown identity"));
        }
        let mut found: Vec<IdentityRecord> = self
            .store
            .find_identities(iss, sub)
            .await?
            .into_iter()
            .filter(|r| r.parent_uid.is_none() && !r.uid.contains('/'))
            .collect();
        if found.len() == 1 {
            Ok(found.remove(0))
        } else {
            Err(reject(
                "no registered identity matches this token's issuer and subject; \
                 to assume an identity in a group, pass identity=<uid>",
            ))
        }
    }

    /// `SecurityTokenService.Exchange`, as gRPC and REST carry it: the
    /// deprecated `scope` joins `scopes`; an identity provider is refused
    /// (people log in through the browser flow, not an exchange).
    pub async fn exchange_token(
        &self,
        authorization: Option<&str>,
        req: ward_proto::oidc::ExchangeRequest,
    ) -> Result<ward_proto::oidc::RawToken> {
        if !req.identity_provider.is_empty() {
            return Err(Error::invalid(
                "identity_provider",
                "exchanges through an identity provider are not supported; people log in with \
                 `ward auth login --idp`",
            ));
        }
        #[allow(deprecated)]
        let mut scopes = req.scopes;
        #[allow(deprecated)]
        if !req.scope.is_empty() {
            scopes.push(req.scope);
        }
        let out = self
            .exchange(
                authorization,
                ExchangeRequest {
                    audiences: req.aud,
                    identity: (!req.identity.is_empty()).then_some(req.identity),
                    scopes,
                    caps: req.cap,
                },
            )
            .await?;
        Ok(ward_proto::oidc::RawToken {
            token: out.token,
            refresh_token: String::new(),
            expiry: Some(ward_proto::Timestamp {
                seconds: out.expiry_secs,
                nanos: 0,
            }),
        })
    }

    pub async fn exchange(&self, authorization: Option<&str>, req: ExchangeRequest) -> Result<Exchanged> {
        let r = self.exchange_checked(authorization, req).await;
        metrics::counter!("ward_token_exchanges_total", "outcome" => crate::telemetry::outcome(&r)).increment(1);
        r
    }

    async fn exchange_checked(&self, authorization: Option<&str>, req: ExchangeRequest) -> Result<Exchanged> {
        let now_ms = self.clock.now_millis();
        let raw = authorization
            .and_then(ward_auth::bearer)
            .ok_or_else(|| reject("an identity token is required (Authorization: Bearer <token>)"))?;
        for (field, n, max) in [
            ("scopes", req.scopes.len(), MAX_SCOPES),
            ("cap", req.caps.len(), MAX_CAPS),
            ("aud", req.audiences.len(), MAX_AUDIENCES),
        ] {
            if n > max {
                return Err(Error::invalid(field, format!("{field} takes at most {max} values")));
            }
        }
        let token = Unverified::peek(raw)?;
        token.check_times(now_ms.div_euclid(1000))?;
        let iss = token
            .str_claim("iss")
            .ok_or_else(|| reject("the identity token has no iss claim"))?
            .to_owned();
        let sub = token
            .str_claim("sub")
            .ok_or_else(|| reject("the identity token has no sub claim"))?
            .to_owned();
        let identity = self.identity_for(req.identity.as_deref(), &iss, &sub).await?;
        let unusable = |_| reject("the identity cannot be assumed (its stored relationship does not parse)");
        let mut expires_at = None;
        if identity.relationship_type == RelationshipType::Static as i64 {
            let k: StaticKeys = serde_json::from_str(&identity.relationship).map_err(unusable)?;
            self.check_static_keys(&k, &token, &iss, &sub, now_ms)?;
            expires_at = k.expiration_time.map(|t| t.seconds);
        } else if identity.relationship_type == RelationshipType::ClaimMatch as i64 {
            let m: ClaimMatch = serde_json::from_str(&identity.relationship).map_err(unusable)?;
            self.check_claim_issuer(&m, &iss).await?;
            let keys = self.upstream.keys(&iss, false).await?;
            let unknown_kid = token
                .header
                .kid
                .as_ref()
                .is_some_and(|kid| !keys.keys.iter().any(|k| k.common.key_id.as_ref() == Some(kid)));
            let keys = if unknown_kid {
                self.upstream.keys(&iss, true).await?
            } else {
                keys
            };
            token.verify_signature(&keys)?;
            self.check_claim_rest(&m, &token, &sub).await?;
        } else {
            return Err(reject("the identity cannot be assumed through a token exchange"));
        }
        let uid = Uidp::parse("identity", &identity.uid)?;
        let (scopes, cap) = self.narrowing(&identity.uid, &req).await?;
        let audiences = self.token_audiences(req.audiences)?;
        let grant = Grant {
            subject: identity.uid.clone(),
            audiences,
            expires_at,
            act: Some(Actor {
                iss,
                sub,
                aud: match act_audiences(token.audiences()) {
                    mut v if v.len() == 1 => Audience::One(v.remove(0)),
                    v => Audience::Many(v),
                },
            }),
            scopes,
            cap,
            access: None,
            roles: None,
        };
        let (token, expiry_secs) = self.tokens.mint_grant(&grant)?;
        // Never hand out a token this server would itself refuse.
        if token.len() > ward_auth::MAX_TOKEN_BYTES {
            return Err(Error::invalid(
                if req.scopes.is_empty() && req.caps.is_empty() {
                    "identity_token"
                } else {
                    "scopes"
                },
                format!(
                    "the token would exceed {} bytes: the requested scopes and capabilities, with the \
                     identity token's issuer, subject and audiences (recorded in act), are too large",
                    ward_auth::MAX_TOKEN_BYTES
                ),
            ));
        }
        self.note_seen(&uid, now_ms).await?;
        tracing::info!(identity = %identity.uid, "token exchanged");
        Ok(Exchanged { token, expiry_secs })
    }

    /// Records that `uid` exchanged a token now, unless this server already
    /// did within [`LAST_SEEN_EVERY_MS`]: `lastSeenTime` is a coarse signal
    /// (an identity unused for weeks), and a durable write per exchange would
    /// make the database's commit rate the exchange's ceiling.
    async fn note_seen(&self, uid: &Uidp, now_ms: i64) -> Result<()> {
        let recent = self
            .last_seen_written
            .get(uid.as_str())
            .is_some_and(|at| (0..LAST_SEEN_EVERY_MS).contains(&(now_ms - at)));
        if recent {
            return Ok(());
        }
        self.store.touch_identity(uid, now_ms).await?;
        self.last_seen_written.insert(uid.as_str().to_owned(), now_ms);
        Ok(())
    }

    /// Audiences Ward serves: its API URL and its issuer URL.
    fn token_audiences(&self, requested: Vec<String>) -> Result<Vec<String>> {
        let served = [self.tokens.audience(), self.tokens.issuer()];
        let mut out: Vec<String> = Vec::new();
        for a in requested.into_iter().map(|a| a.trim_end_matches('/').to_owned()) {
            if !served.contains(&a.as_str()) {
                return Err(Error::invalid(
                    "aud",
                    format!("aud \"{a}\" is not an audience this server issues tokens for"),
                ));
            }
            if !out.contains(&a) {
                out.push(a);
            }
        }
        Ok(out)
    }

    /// Checks a request to narrow the token; it can never widen: each scope
    /// must be a group where the identity holds something, and each capability
    /// one it holds in those scopes.
    async fn narrowing(
        &self,
        identity: &str,
        req: &ExchangeRequest,
    ) -> Result<(Option<Vec<String>>, Option<Vec<String>>)> {
        if req.scopes.is_empty() && req.caps.is_empty() {
            return Ok((None, None));
        }
        let grants = Grants::from_rows(self.store.grants(identity).await?);
        let mut held = CapSet::EMPTY;
        let scopes = if req.scopes.is_empty() {
            for (_, caps) in grants.iter() {
                held = held.union(caps);
            }
            None
        } else {
            let mut v = Vec::new();
            for s in &req.scopes {
                let uid = Uidp::parse("scopes", s)?;
                let at = grants.at(&uid);
                if at.is_empty() {
                    return Err(Error::PermissionDenied(format!(
                        "cannot narrow to scope {uid}: the identity holds nothing there"
                    )));
                }
                held = held.union(at);
                v.push(uid.into());
            }
            Some(v)
        };
        let cap = if req.caps.is_empty() {
            None
        } else {
            let mut v = Vec::new();
            for name in &req.caps {
                let c = Capability::from_name(name)
                    .ok_or_else(|| Error::invalid("cap", format!("\"{name}\" is not a capability")))?;
                if !held.contains(c) {
                    return Err(Error::PermissionDenied(format!(
                        "cannot request {}: the identity does not hold it there",
                        c.dotted_name()
                    )));
                }
                v.push(c.dotted_name().to_owned());
            }
            Some(v)
        };
        Ok((scopes, cap))
    }
}

/// Most groups `Auth.Validate` describes (the caller's grants, in uid order).
pub const MAX_WHOAMI_GROUPS: usize = 1000;

impl Ward {
    /// `Auth.Validate` (`GET /auth/v1/ok`): who the caller is, until when,
    /// and what it may do in which groups: each group as a v1 `Group`, its
    /// capabilities by enum name (no role: they may come from several).
    pub async fn validate(&self, caller: &crate::authz::Caller, _: ()) -> Result<ward_proto::auth::WhoAmI> {
        use ward_proto::auth::{WhoAmI, who_am_i};
        let mut grants: Vec<(&str, CapSet)> = caller.grants.iter().filter(|(_, caps)| !caps.is_empty()).collect();
        grants.sort_by(|a, b| a.0.cmp(b.0));
        grants.truncate(MAX_WHOAMI_GROUPS);
        let mut groups = std::collections::HashMap::new();
        for chunk in grants.chunks(200) {
            let q = ward_core::listing::ListQuery {
                uidp: ward_core::listing::UidpFilter {
                    ids: chunk.iter().filter_map(|(g, _)| Uidp::parse("group", g).ok()).collect(),
                    ..Default::default()
                },
                page_size: 200,
                ..Default::default()
            };
            for g in self.store.list_groups(&q).await?.items {
                groups.insert(g.uid.clone(), g);
            }
        }
        let capabilities = grants
            .into_iter()
            .map(|(scope, caps)| {
                let group = match groups.remove(scope) {
                    Some(g) => crate::services::v1::iam::group_out(crate::services::groups::to_proto(g)),
                    None => ward_proto::iam::Group {
                        id: scope.to_owned(),
                        ..Default::default()
                    },
                };
                who_am_i::Capability {
                    group: Some(group),
                    role: None,
                    capabilities: caps.iter().map(|c| c.enum_name().to_owned()).collect(),
                }
            })
            .collect();
        let claims = &caller.claims;
        Ok(WhoAmI {
            issuer: claims.iss.clone(),
            subject: claims.sub.clone(),
            audience: claims.aud.to_vec(),
            expiry: Some(ward_proto::Timestamp::from_millis(claims.exp.saturating_mul(1000))),
            issued_at: Some(ward_proto::Timestamp::from_millis(claims.iat.saturating_mul(1000))),
            capabilities,
            email: String::new(),
            profile: None,
        })
    }
}
