//! Authentication and the one authorization function every call goes through.
//!
//! Authorization is evaluated live against role bindings. A capability holds at
//! scope S when the caller has a binding at S or at an ancestor of S whose role
//! includes it. A caller's grants (group → capabilities) are loaded with one
//! indexed query and cached per identity for at most [`GRANTS_TTL`]. Role and
//! binding changes clear the cache at once, on this server and (by a database
//! notification, see `replicas`) on every replica sharing the database; the
//! TTL bounds staleness only when a notification is lost. A check is then a
//! walk over the scope's prefixes (its ancestors), with no tree walk and no
//! binding scan.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ward_core::capability::{CapSet, Capability};
use ward_core::rpc::Rule;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use crate::ward::Ward;

/// How long a replica may act on grants it read from the database.
pub const GRANTS_TTL: Duration = Duration::from_secs(2);

/// Most session roles a token's `roles` claim is read for.
pub const MAX_SESSION_ROLES: usize = 64;

/// What an identity is granted, by group.
#[derive(Debug, Default)]
pub struct Grants {
    by_scope: HashMap<String, CapSet>,
}

impl Grants {
    pub fn from_rows(rows: Vec<(String, String)>) -> Self {
        let mut by_scope: HashMap<String, CapSet> = HashMap::new();
        for (scope, caps) in rows {
            let e = by_scope.entry(scope).or_default();
            *e = e.union(CapSet::from_storage(&caps));
        }
        Self { by_scope }
    }

    /// These grants with `rows` (scope, capabilities in storage form) added.
    pub fn with(&self, rows: Vec<(String, String)>) -> Grants {
        let mut by_scope = self.by_scope.clone();
        for (scope, caps) in rows {
            let e = by_scope.entry(scope).or_default();
            *e = e.union(CapSet::from_storage(&caps));
        }
        Grants { by_scope }
    }

    /// Everything granted at `scope`: bindings there and at every ancestor.
    pub fn at(&self, scope: &Uidp) -> CapSet {
        scope
            .self_and_ancestor_strs()
            .filter_map(|s| self.by_scope.get(s))
            .fold(CapSet::EMPTY, |a, b| a.union(*b))
    }

    /// The scopes whose bindings grant `cap` (everything below them is covered).
    pub fn scopes_with(&self, cap: Capability) -> Vec<Uidp> {
        let mut v: Vec<Uidp> = self
            .by_scope
            .iter()
            .filter(|(_, caps)| caps.contains(cap))
            .filter_map(|(s, _)| Uidp::parse("scope", s).ok())
            .collect();
        v.sort();
        v
    }

    pub fn anywhere(&self, cap: Capability) -> bool {
        self.by_scope.values().any(|c| c.contains(cap))
    }

    /// What a narrowed token may use: only `scopes` (each with everything
    /// inherited there) and only `caps`. Never more than `self`.
    pub fn narrowed(&self, scopes: Option<&[String]>, caps: Option<CapSet>) -> Grants {
        let mut by_scope: HashMap<String, CapSet> = match scopes {
            Some(scopes) => scopes
                .iter()
                .filter_map(|s| Uidp::parse("scope", s).ok())
                .map(|s| (s.as_str().to_owned(), self.at(&s)))
                .collect(),
            None => self.by_scope.clone(),
        };
        if let Some(caps) = caps {
            for c in by_scope.values_mut() {
                *c = c.intersection(caps);
            }
        }
        Grants { by_scope }
    }

    /// Every group the caller has bindings at, with what they grant there.
    pub fn iter(&self) -> impl Iterator<Item = (&str, CapSet)> {
        self.by_scope.iter().map(|(s, c)| (s.as_str(), *c))
    }
}

/// Who is calling, as established from a verified token.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The identity UIDP (`sub`).
    pub subject: String,
    pub is_admin: bool,
    pub grants: Arc<Grants>,
    /// The verified token.
    pub claims: Arc<ward_auth::Claims>,
}

impl Caller {
    /// The organizations (root groups) the caller has bindings in, sorted,
    /// without repeats.
    pub fn organizations(&self) -> Vec<&str> {
        let mut roots: Vec<&str> = self
            .grants
            .iter()
            .map(|(s, _)| s.split('/').next().unwrap_or(s))
            .collect();
        roots.sort_unstable();
        roots.dedup();
        roots
    }
}

impl Ward {
    /// Verifies the `Authorization` header value and returns the caller with
    /// their current grants.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Caller> {
        let header = authorization.ok_or_else(|| {
            Error::Unauthenticated("a bearer token is required (Authorization: Bearer <token>)".into())
        })?;
        let token = ward_auth::bearer(header)
            .ok_or_else(|| Error::Unauthenticated("the Authorization header must be \"Bearer <token>\"".into()))?;
        let claims = self.tokens.verify(token).await?;
        if !claims.aud.contains(self.tokens.audience()) || claims.access.is_some() {
            return Err(Error::Unauthenticated(
                "the token's audience is not this API (a registry token works at /v2/ only)".into(),
            ));
        }
        self.caller_of(claims).await
    }

    /// The caller a verified token stands for, with its current grants.
    pub(crate) async fn caller_of(&self, claims: Arc<ward_auth::Claims>) -> Result<Caller> {
        let is_admin = claims.sub == self.admin.as_str();
        let mut grants = if is_admin {
            Arc::new(Grants::default())
        } else {
            self.grants_of(&claims.sub).await?
        };
        if !is_admin && let Some(roles) = &claims.roles {
            // Roles ride in the token, but only while its person exists (a
            // deletion ends them at once, here and on every replica).
            if !self.identity_exists(&claims.sub).await? {
                return Err(Error::Unauthenticated("the token's identity no longer exists".into()));
            }
            grants = Arc::new(grants.with(self.session_grants(roles).await?));
        }
        if !is_admin && (claims.scopes.is_some() || claims.cap.is_some()) {
            let caps = claims
                .cap
                .as_ref()
                .map(|names| names.iter().filter_map(|n| Capability::from_name(n)).collect());
            grants = Arc::new(grants.narrowed(claims.scopes.as_deref(), caps));
        }
        Ok(Caller {
            subject: claims.sub.clone(),
            is_admin,
            grants,
            claims,
        })
    }

    async fn grants_of(&self, subject: &str) -> Result<Arc<Grants>> {
        if let Some(g) = self.grants_cache.get(subject) {
            return Ok(g);
        }
        let epoch = self.access_epoch();
        let g = Arc::new(Grants::from_rows(self.store.grants(subject).await?));
        if self.still_epoch(epoch) {
            self.grants_cache.insert(subject.to_owned(), g.clone());
        }
        Ok(g)
    }

    /// Whether an identity exists (cached for at most `GRANTS_TTL`).
    async fn identity_exists(&self, uid: &str) -> Result<bool> {
        let key = format!("identity:{uid}");
        if let Some(found) = self.session_role_caps.get(&key) {
            return Ok(found.is_some());
        }
        let epoch = self.access_epoch();
        let found = match Uidp::parse("sub", uid) {
            // A pending person (bound before a first login) is no one yet.
            Ok(u) => self
                .store
                .get_identity(&u)
                .await?
                .is_some_and(|r| !(r.parent_uid.is_none() && r.relationship_type == 0 && r.issuer.is_empty())),
            Err(_) => false,
        };
        if self.still_epoch(epoch) {
            self.session_role_caps.insert(key, found.then(String::new));
        }
        Ok(found)
    }

    /// What a login session's mapped roles grant: (scope, capabilities) rows.
    /// A role deleted since the login grants nothing.
    async fn session_grants(&self, roles: &[ward_auth::SessionRole]) -> Result<Vec<(String, String)>> {
        let mut rows = Vec::with_capacity(roles.len());
        for r in roles.iter().take(MAX_SESSION_ROLES) {
            let caps = match self.session_role_caps.get(&r.role) {
                Some(c) => c,
                None => {
                    let epoch = self.access_epoch();
                    let caps = match Uidp::parse("role", &r.role) {
                        Ok(uid) => self.store.get_role(&uid).await?.map(|role| role.capabilities),
                        Err(_) => None,
                    };
                    if self.still_epoch(epoch) {
                        self.session_role_caps.insert(r.role.clone(), caps.clone());
                    }
                    caps
                }
            };
            if let Some(caps) = caps {
                rows.push((r.scope.clone(), caps));
            }
        }
        Ok(rows)
    }

    /// The capabilities `caller` holds at `scope` (everything, for the admin).
    pub fn caps_at(&self, caller: &Caller, scope: &Uidp) -> CapSet {
        if caller.is_admin {
            CapSet::all()
        } else {
            caller.grants.at(scope)
        }
    }

    /// Applies `rule` (see `ward_core::rpc`) at `scope`: the parent group for
    /// creates, the resource's uid otherwise. A caller who cannot see the thing
    /// at `scope` gets NOT_FOUND; one who can see it but lacks the rule's
    /// capability gets PERMISSION_DENIED.
    pub fn authorize(&self, caller: &Caller, rule: &Rule, scope: &Uidp) -> Result<()> {
        let cap = rule.capability;
        let (seen_with, resource_type) = rule.seen_with();
        if caller.is_admin {
            tracing::info!(target: "ward::audit", cap = cap.dotted_name(), scope = %scope, "server admin access");
            return Ok(());
        }
        let caps = caller.grants.at(scope);
        if caps.contains(cap) {
            Ok(())
        } else if caps.contains(seen_with) {
            Err(Error::PermissionDenied(format!(
                "{} is required on {scope}",
                cap.dotted_name()
            )))
        } else {
            Err(Error::not_found(resource_type, scope.as_str()))
        }
    }

    /// Refuses to grant more than the caller holds at `scope` (no escalation).
    pub fn check_no_escalation(&self, caller: &Caller, scope: &Uidp, granted: CapSet) -> Result<()> {
        let held = self.caps_at(caller, scope);
        if granted.is_subset(held) {
            return Ok(());
        }
        let missing: Vec<&str> = granted
            .iter()
            .filter(|c| !held.contains(*c))
            .map(Capability::dotted_name)
            .collect();
        Err(Error::PermissionDenied(format!(
            "cannot grant capabilities you do not hold on {scope}: {}",
            missing.join(", ")
        )))
    }

    /// The scopes in which `caller` may list with `cap`: `None` means everywhere.
    pub fn visible_scopes(&self, caller: &Caller, cap: Capability) -> Option<Vec<Uidp>> {
        if caller.is_admin {
            None
        } else {
            Some(caller.grants.scopes_with(cap))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ward_core::capability::Capability::*;

    #[test]
    fn grants_cover_descendants_only() {
        let org = Uidp::new_root();
        let team = org.new_child();
        let other = org.new_child();
        let g = Grants::from_rows(vec![
            (team.as_str().into(), CapSet::from_iter([IamGroupsList]).to_storage()),
            (org.as_str().into(), CapSet::from_iter([IamRolesList]).to_storage()),
        ]);
        assert!(g.at(&team.new_child()).contains(IamGroupsList));
        assert!(g.at(&team).contains(IamRolesList));
        assert!(!g.at(&other).contains(IamGroupsList));
        assert!(!g.at(&org).contains(IamGroupsList));
        assert_eq!(g.scopes_with(IamGroupsList), vec![team]);
        assert!(g.anywhere(IamRolesList) && !g.anywhere(IamGroupsDelete));
    }
}
