//! Identity providers: an organization's OIDC provider for its people. The
//! client secret is write-only and sealed with the server's secret key.

use ward_auth::secret::Purpose;
use ward_core::capability::CapSet;
use ward_core::error::FieldViolation;
use ward_core::fieldmask::Updatable;
use ward_core::names::{check_description, check_name, check_text};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::identity_provider::{Configuration, Oidc};
use ward_proto::iam::v2::{
    CreateIdentityProviderRequest, DeleteIdentityProviderRequest, GetIdentityProviderRequest, IdentityProvider,
    ListIdentityProvidersRequest, ListIdentityProvidersResponse,
};
use ward_store::people::{IDENTITY_PROVIDER_TYPE, IdentityProviderPatch, IdentityProviderRecord};

use super::violation;
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::services::events;
use crate::services::list::ListParams;
use crate::ward::Ward;

const COLLECTION: &str = "identity_providers";

pub const PROVIDER_FIELDS: Updatable = Updatable {
    mutable: &[
        "name",
        "description",
        "default_role",
        "oidc.issuer",
        "oidc.client_id",
        "oidc.client_secret",
        "oidc.additional_scopes",
        "oidc.groups_claim",
        "oidc.pkce_enabled",
    ],
    output_only: &["uid", "create_time", "update_time", "scim"],
    immutable: &["oidc.correlation_rule"],
};

/// Bounds on an OIDC configuration.
pub const MAX_URL_LEN: usize = 2048;
pub const MAX_CLIENT_ID_LEN: usize = 256;
pub const MAX_CLIENT_SECRET_LEN: usize = 1024;
pub const MAX_SCOPES: usize = 16;
pub const MAX_SCOPE_LEN: usize = 64;
pub const MAX_CLAIM_NAME_LEN: usize = 128;

/// Checks an issuer URL: http(s), a host, no query, fragment or credentials.
fn check_issuer(field: &str, issuer: &str, allow_http: bool, bad: &mut Vec<FieldViolation>) {
    if issuer.is_empty() {
        bad.push(violation(field, format!("{field} is required")));
        return;
    }
    if issuer.len() > MAX_URL_LEN {
        bad.push(violation(field, format!("{field} is longer than {MAX_URL_LEN} bytes")));
        return;
    }
    let ok = url::Url::parse(issuer).is_ok_and(|u| {
        (u.scheme() == "https" || (allow_http && u.scheme() == "http"))
            && u.host_str().is_some_and(|h| !h.is_empty())
            && u.query().is_none()
            && u.fragment().is_none()
            && u.username().is_empty()
            && u.password().is_none()
    });
    if !ok {
        bad.push(violation(
            field,
            format!("{field} must be an https URL with a host and no query, fragment or credentials"),
        ));
    }
}

/// Checks the OIDC configuration; `secret_stored` is whether a secret will be
/// kept (on update, the stored one unless cleared).
fn check_oidc(o: &Oidc, secret_stored: bool, allow_http: bool, bad: &mut Vec<FieldViolation>) {
    check_issuer("oidc.issuer", &o.issuer, allow_http, bad);
    if o.client_id.is_empty() {
        bad.push(violation("oidc.client_id", "oidc.client_id is required"));
    } else {
        check_text("oidc.client_id", &o.client_id, MAX_CLIENT_ID_LEN, bad);
    }
    if !o.client_secret.is_empty() {
        check_text("oidc.client_secret", &o.client_secret, MAX_CLIENT_SECRET_LEN, bad);
    }
    if !secret_stored && !o.pkce_enabled {
        bad.push(violation(
            "oidc.client_secret",
            "a client secret or pkce_enabled is required (a public client must use PKCE)",
        ));
    }
    if o.additional_scopes.len() > MAX_SCOPES {
        bad.push(violation(
            "oidc.additional_scopes",
            format!("at most {MAX_SCOPES} additional scopes"),
        ));
    }
    for s in &o.additional_scopes {
        let token = !s.is_empty()
            && s.len() <= MAX_SCOPE_LEN
            && s.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
        if !token {
            bad.push(violation(
                "oidc.additional_scopes",
                format!("a scope is 1 to {MAX_SCOPE_LEN} visible ASCII characters without quotes or backslashes"),
            ));
            break;
        }
    }
    if !o.groups_claim.is_empty() {
        check_text("oidc.groups_claim", &o.groups_claim, MAX_CLAIM_NAME_LEN, bad);
    }
    if Oidc::default().correlation_rule != o.correlation_rule
        && ward_proto::iam::v2::identity_provider::CorrelationRule::try_from(o.correlation_rule).is_err()
    {
        bad.push(violation("oidc.correlation_rule", "unknown correlation rule"));
    }
}

/// The stored form of the configuration: without the secret.
fn oidc_json(o: &Oidc) -> Result<String> {
    let stored = Oidc {
        client_secret: String::new(),
        ..o.clone()
    };
    serde_json::to_string(&stored).map_err(|e| Error::internal(format_args!("encode oidc: {e}")))
}

pub(crate) fn stored_oidc(r: &IdentityProviderRecord) -> Result<Oidc> {
    serde_json::from_str(&r.oidc).map_err(|e| Error::internal(format_args!("stored oidc of {}: {e}", r.uid)))
}

fn to_proto(r: IdentityProviderRecord) -> Result<IdentityProvider> {
    let oidc = stored_oidc(&r)?;
    Ok(IdentityProvider {
        uid: r.uid,
        name: r.name,
        description: r.description,
        create_time: Some(Timestamp::from_millis(r.create_time)),
        update_time: Some(Timestamp::from_millis(r.update_time)),
        default_role: r.default_role,
        configuration: Some(Configuration::Oidc(oidc)),
        scim: None,
    })
}

impl Ward {
    fn seal_secret(&self, uid: &str, secret: &str) -> Option<Vec<u8>> {
        (!secret.is_empty()).then(|| {
            self.secret
                .seal(Purpose::ClientSecret, uid.as_bytes(), secret.as_bytes())
        })
    }

    /// The provider's client secret, unsealed.
    pub(crate) fn client_secret(&self, r: &IdentityProviderRecord) -> Result<Option<String>> {
        let Some(sealed) = &r.client_secret else {
            return Ok(None);
        };
        let plain = self
            .secret
            .open(Purpose::ClientSecret, r.uid.as_bytes(), sealed)
            .ok_or_else(|| {
                Error::internal(format_args!(
                    "the client secret of {} does not open with this server's secret key",
                    r.uid
                ))
            })?;
        String::from_utf8(plain)
            .map(Some)
            .map_err(|_| Error::internal("stored client secret is not text"))
    }

    /// Everything the provider's logins may hold: its default role and every
    /// mapped role (roles deleted since grant nothing).
    async fn provider_grants(&self, idp: &IdentityProviderRecord) -> Result<CapSet> {
        let mut roles = vec![idp.default_role.clone()];
        roles.extend(
            self.store
                .group_mappings_of(&idp.uid)
                .await?
                .into_iter()
                .map(|m| m.role_uid),
        );
        roles.sort();
        roles.dedup();
        let mut caps = CapSet::EMPTY;
        for r in roles {
            if let Ok(uid) = Uidp::parse("role", &r)
                && let Some(role) = self.store.get_role(&uid).await?
            {
                caps = caps.union(CapSet::from_storage(&role.capabilities));
            }
        }
        Ok(caps)
    }

    /// An identity provider the caller may see.
    async fn visible_provider(&self, caller: &Caller, uid: &Uidp) -> Result<IdentityProviderRecord> {
        let found = self.store.get_identity_provider(uid).await?;
        match found {
            Some(r)
                if self
                    .caps_at(caller, uid)
                    .contains(rpc::GET_IDENTITY_PROVIDER.capability) =>
            {
                Ok(r)
            }
            _ => Err(Error::not_found(IDENTITY_PROVIDER_TYPE, uid.as_str())),
        }
    }

    pub async fn create_identity_provider(
        &self,
        caller: &Caller,
        req: CreateIdentityProviderRequest,
    ) -> Result<IdentityProvider> {
        let idp = req.identity_provider.unwrap_or_default();
        let mut bad = Vec::new();
        let parent = crate::services::parse_uidp("parent", &req.parent, &mut bad);
        check_name("name", &idp.name, &mut bad);
        check_description("description", &idp.description, &mut bad);
        let oidc = match &idp.configuration {
            Some(Configuration::Oidc(o)) => Some(o.clone()),
            None => {
                bad.push(violation("oidc", "an OIDC configuration (oidc) is required"));
                None
            }
        };
        if let Some(o) = &oidc {
            check_oidc(o, !o.client_secret.is_empty(), self.upstream.allows_http(), &mut bad);
        }
        if let Some(p) = &parent
            && !p.is_root()
        {
            bad.push(violation(
                "parent",
                "identity providers belong to an organization (a root group)",
            ));
        }
        let (Some(parent), Some(oidc), true) = (parent, oidc, bad.is_empty()) else {
            return Err(Error::InvalidArgument(bad));
        };
        self.authorize(caller, &rpc::CREATE_IDENTITY_PROVIDER, &parent)?;
        self.authorize(caller, &rpc::CREATE_ROLE_BINDING, &parent)?;
        let (role, caps) = self
            .grantable_role(caller, "default_role", &idp.default_role, &parent)
            .await?;
        self.check_no_escalation(caller, &parent, caps)?;
        let now = self.clock.now_millis();
        let uid = parent.new_child();
        let record = IdentityProviderRecord {
            uid: uid.as_str().into(),
            parent_uid: parent.into(),
            name: idp.name,
            description: idp.description,
            default_role: role.into(),
            issuer: oidc.issuer.trim_end_matches('/').to_owned(),
            oidc: oidc_json(&Oidc {
                issuer: oidc.issuer.trim_end_matches('/').to_owned(),
                ..oidc.clone()
            })?,
            client_secret: self.seal_secret(uid.as_str(), &oidc.client_secret),
            create_time: now,
            update_time: now,
        };
        let reply = to_proto(record.clone())?;
        let emit = self.created(
            caller,
            events::types::IDENTITY_PROVIDER_CREATED,
            &record.uid,
            &record.parent_uid,
            &reply,
        );
        self.store.create_identity_provider(&record, emit).await?;
        tracing::info!(uid = %record.uid, issuer = %record.issuer, "identity provider created");
        Ok(reply)
    }

    pub async fn get_identity_provider(
        &self,
        caller: &Caller,
        req: GetIdentityProviderRequest,
    ) -> Result<IdentityProvider> {
        let uid = Uidp::parse("uid", &req.uid)?;
        to_proto(self.visible_provider(caller, &uid).await?)
    }

    pub async fn list_identity_providers(
        &self,
        caller: &Caller,
        req: ListIdentityProvidersRequest,
    ) -> Result<ListIdentityProvidersResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_IDENTITY_PROVIDERS.capability);
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: &req.name,
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters: Vec::new(),
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_identity_providers(&q).await?;
        Ok(ListIdentityProvidersResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            identity_providers: page.items.into_iter().map(to_proto).collect::<Result<_>>()?,
        })
    }

    pub async fn update_identity_provider(
        &self,
        caller: &Caller,
        idp: IdentityProvider,
        mask: UpdateMask,
    ) -> Result<IdentityProvider> {
        let uid = Uidp::parse("identity_provider.uid", &idp.uid)?;
        let given = match &idp.configuration {
            Some(Configuration::Oidc(o)) => o.clone(),
            None => Oidc::default(),
        };
        // A read shows the client secret as "": a body sent back without a
        // mask (read, change a field, write) carries that "", which means
        // "unchanged", not "clear it" (an explicit mask clears it).
        let secret_unchanged = matches!(mask, UpdateMask::BodyKeys(_)) && given.client_secret.is_empty();
        let mask = mask.resolve(
            &PROVIDER_FIELDS,
            &[
                ("name", !idp.name.is_empty()),
                ("description", !idp.description.is_empty()),
                ("default_role", !idp.default_role.is_empty()),
                ("oidc.issuer", !given.issuer.is_empty()),
                ("oidc.client_id", !given.client_id.is_empty()),
                ("oidc.client_secret", !given.client_secret.is_empty()),
                ("oidc.additional_scopes", !given.additional_scopes.is_empty()),
                ("oidc.groups_claim", !given.groups_claim.is_empty()),
                ("oidc.pkce_enabled", given.pkce_enabled),
            ],
        )?;
        let current = self.visible_provider(caller, &uid).await?;
        self.authorize(caller, &rpc::UPDATE_IDENTITY_PROVIDER, &uid)?;
        let org = Uidp::parse("parent", &current.parent_uid)?;
        let mut bad = Vec::new();
        let mut patch = IdentityProviderPatch::default();
        // A field outside the mask is not written, but a value that breaks
        // its schema is still refused (a strict client expects the 400).
        if mask.contains("name") || !idp.name.is_empty() {
            check_name("name", &idp.name, &mut bad);
        }
        if mask.contains("name") {
            patch.name = Some(idp.name.clone());
        }
        check_description("description", &idp.description, &mut bad);
        if mask.contains("description") {
            patch.description = Some(idp.description.clone());
        }
        let mut oidc = stored_oidc(&current)?;
        let before = oidc.clone();
        let mut oidc_changed = false;
        let sets_secret = mask.contains("oidc.client_secret") && !secret_unchanged;
        for (path, apply) in [
            (
                "oidc.issuer",
                &(|o: &mut Oidc, g: &Oidc| o.issuer = g.issuer.trim_end_matches('/').to_owned())
                    as &dyn Fn(&mut Oidc, &Oidc),
            ),
            ("oidc.client_id", &|o: &mut Oidc, g: &Oidc| {
                o.client_id = g.client_id.clone()
            }),
            ("oidc.additional_scopes", &|o: &mut Oidc, g: &Oidc| {
                o.additional_scopes = g.additional_scopes.clone()
            }),
            ("oidc.groups_claim", &|o: &mut Oidc, g: &Oidc| {
                o.groups_claim = g.groups_claim.clone()
            }),
            ("oidc.pkce_enabled", &|o: &mut Oidc, g: &Oidc| {
                o.pkce_enabled = g.pkce_enabled
            }),
        ] {
            if mask.contains(path) {
                apply(&mut oidc, &given);
                oidc_changed = true;
            }
        }
        let secret_stored = if sets_secret {
            patch.client_secret = Some(self.seal_secret(uid.as_str(), &given.client_secret));
            !given.client_secret.is_empty()
        } else {
            current.client_secret.is_some()
        };
        if oidc_changed || sets_secret {
            check_oidc(
                &Oidc {
                    client_secret: given.client_secret.clone(),
                    ..oidc.clone()
                },
                secret_stored,
                self.upstream.allows_http(),
                &mut bad,
            );
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        if oidc_changed {
            patch.oidc = Some((oidc.issuer.clone(), oidc_json(&oidc)?));
        }
        // Repointing the provider (issuer, client, groups claim) decides who
        // receives its default and mapped roles: it needs what granting them
        // needs, and the stored secret is never sent to a new endpoint.
        // What counts is a value that changes: a body sent back as it was
        // read names these fields without repointing anything.
        let new_endpoint = oidc.issuer != before.issuer || oidc.client_id != before.client_id;
        let repoints = new_endpoint || oidc.groups_claim != before.groups_claim;
        if repoints {
            self.authorize(caller, &rpc::CREATE_ROLE_BINDING, &org)?;
            let granted = self.provider_grants(&current).await?;
            self.check_no_escalation(caller, &org, granted)?;
        }
        if new_endpoint && current.client_secret.is_some() && !sets_secret {
            return Err(Error::invalid(
                "oidc.client_secret",
                "give the client secret again when changing the issuer or client id \
                 (an empty one makes a public client, which needs pkce_enabled)",
            ));
        }
        if mask.contains("default_role") {
            self.authorize(caller, &rpc::CREATE_ROLE_BINDING, &org)?;
            let (role, caps) = self
                .grantable_role(caller, "default_role", &idp.default_role, &org)
                .await?;
            self.check_no_escalation(caller, &org, caps)?;
            patch.default_role = Some(role.into());
        }
        if mask.is_empty() {
            return to_proto(current);
        }
        let emit = self.updated(
            caller,
            events::types::IDENTITY_PROVIDER_UPDATED,
            uid.as_str(),
            &Ward::event_group(uid.as_str()),
            |r| to_proto(r).unwrap_or_default(),
        );
        let record = self
            .store
            .update_identity_provider(&uid, &patch, self.clock.now_millis(), emit)
            .await?;
        to_proto(record)
    }

    pub async fn delete_identity_provider(&self, caller: &Caller, req: DeleteIdentityProviderRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.visible_provider(caller, &uid).await?;
        self.authorize(caller, &rpc::DELETE_IDENTITY_PROVIDER, &uid)?;
        let emit = self.deleted(
            caller,
            events::types::IDENTITY_PROVIDER_DELETED,
            uid.as_str(),
            &Ward::event_group(uid.as_str()),
        );
        self.store.delete_identity_provider(&uid, emit).await
    }
}
