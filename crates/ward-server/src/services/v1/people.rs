//! v1 ⇄ v2 for the IAM people resources: identity providers, account
//! associations, group invites and external group role mappings. Each v1
//! RPC is one v2 service call (or a few, for a List's pages); every rule,
//! check and error is the v2 service layer's. The write-only parts stay
//! write-only: a client secret is never returned, and an invite's code only
//! by Create.

use std::sync::Arc;

use ward_core::Result;
use ward_proto::common::UidpFilter;
use ward_proto::iam as v1;
use ward_proto::iam::v2;

use super::iam::role_out;
use super::{ID, V1_PAGE, collect_all, narrow_to_id, v1_named};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::services::account_associations::ASSOCIATION_FIELDS;
use crate::ward::Ward;

// ---------------------------------------------------------------- identity providers

pub fn oidc_in(o: v1::identity_provider::Oidc) -> v2::identity_provider::Oidc {
    v2::identity_provider::Oidc {
        issuer: o.issuer,
        client_id: o.client_id,
        client_secret: o.client_secret,
        additional_scopes: o.additional_scopes,
        groups_claim: o.groups_claim,
        correlation_rule: o.correlation_rule,
        pkce_enabled: o.pkce_enabled,
    }
}

/// The OIDC configuration as returned: never with a client secret.
pub fn oidc_out(o: v2::identity_provider::Oidc) -> v1::identity_provider::Oidc {
    v1::identity_provider::Oidc {
        issuer: o.issuer,
        client_id: o.client_id,
        client_secret: String::new(),
        additional_scopes: o.additional_scopes,
        groups_claim: o.groups_claim,
        correlation_rule: o.correlation_rule,
        pkce_enabled: o.pkce_enabled,
    }
}

fn scim_out(s: v2::identity_provider::Scim) -> v1::identity_provider::Scim {
    v1::identity_provider::Scim {
        enabled: s.enabled,
        endpoint_url: s.endpoint_url,
        token_expire_time: s.token_expire_time,
        previous_token_expire_time: s.previous_token_expire_time,
        credential_state: s.credential_state,
        etag: s.etag,
    }
}

/// A v1 provider as v2's; `scim` is output only and dropped.
pub fn identity_provider_in(p: v1::IdentityProvider) -> v2::IdentityProvider {
    use v1::identity_provider::Configuration as A;
    use v2::identity_provider::Configuration as B;
    v2::IdentityProvider {
        uid: p.id,
        name: p.name,
        description: p.description,
        create_time: None,
        update_time: None,
        default_role: p.default_role,
        configuration: p.configuration.map(|A::Oidc(o)| B::Oidc(oidc_in(o))),
        scim: None,
    }
}

pub fn identity_provider_out(p: v2::IdentityProvider) -> v1::IdentityProvider {
    use v1::identity_provider::Configuration as A;
    use v2::identity_provider::Configuration as B;
    v1::IdentityProvider {
        id: p.uid,
        name: p.name,
        description: p.description,
        default_role: p.default_role,
        configuration: p.configuration.map(|B::Oidc(o)| A::Oidc(oidc_out(o))),
        scim: p.scim.map(scim_out),
    }
}

fn oidc_of(p: &v2::IdentityProvider) -> v2::identity_provider::Oidc {
    match &p.configuration {
        Some(v2::identity_provider::Configuration::Oidc(o)) => o.clone(),
        None => Default::default(),
    }
}

/// The v2 update mask for a v1 full replacement of `current` by `given`:
/// every updatable field whose value differs (omitted fields count as their
/// zero value, so they are reset). Fields left as they are stay out of the
/// mask, so that writing back what List returned is not taken for
/// repointing the provider (which needs the write-only client secret again)
/// or for granting its default role anew. An empty client secret keeps the
/// stored one (v2's rule for an unmasked secret); a changed correlation rule
/// is put in the mask for v2 to refuse as immutable.
pub fn identity_provider_mask(given: &v2::IdentityProvider, current: &v2::IdentityProvider) -> Vec<String> {
    let (g, c) = (oidc_of(given), oidc_of(current));
    let issuer = |s: &str| s.trim_end_matches('/').to_owned();
    [
        ("name", given.name != current.name),
        ("description", given.description != current.description),
        ("default_role", given.default_role != current.default_role),
        ("oidc.issuer", issuer(&g.issuer) != issuer(&c.issuer)),
        ("oidc.client_id", g.client_id != c.client_id),
        ("oidc.client_secret", !g.client_secret.is_empty()),
        ("oidc.additional_scopes", g.additional_scopes != c.additional_scopes),
        ("oidc.groups_claim", g.groups_claim != c.groups_claim),
        ("oidc.correlation_rule", g.correlation_rule != c.correlation_rule),
        ("oidc.pkce_enabled", g.pkce_enabled != c.pkce_enabled),
    ]
    .into_iter()
    .filter(|(_, changed)| *changed)
    .map(|(path, _)| path.to_owned())
    .collect()
}

pub async fn create_identity_provider(
    w: Arc<Ward>,
    c: Caller,
    req: v1::CreateIdentityProviderRequest,
) -> Result<v1::IdentityProvider> {
    let p = w
        .create_identity_provider(
            &c,
            v2::CreateIdentityProviderRequest {
                parent: req.parent_id,
                identity_provider: req.identity_provider.map(identity_provider_in),
            },
        )
        .await;
    let p = v1_named(
        p,
        &[
            ("parent", "parent_id"),
            ("identity_provider.uid", "identity_provider.id"),
        ],
    )?;
    Ok(identity_provider_out(p))
}

pub async fn update_identity_provider(
    w: Arc<Ward>,
    c: Caller,
    req: v1::IdentityProvider,
) -> Result<v1::IdentityProvider> {
    let given = identity_provider_in(req);
    let current = w
        .get_identity_provider(&c, v2::GetIdentityProviderRequest { uid: given.uid.clone() })
        .await?;
    let mask = identity_provider_mask(&given, &current);
    let p = w.update_identity_provider(&c, given, UpdateMask::Paths(mask)).await?;
    Ok(identity_provider_out(p))
}

pub async fn list_identity_providers(
    w: Arc<Ward>,
    c: Caller,
    f: v1::IdentityProviderFilter,
) -> Result<v1::IdentityProviderList> {
    let Some(uidp) = narrow_to_id(f.uidp, &f.id)? else {
        return Ok(Default::default());
    };
    let (w, c) = (&*w, &c);
    let items = collect_all("/iam/v2/identityProviders", move |page_token| {
        w.list_identity_providers(
            c,
            v2::ListIdentityProvidersRequest {
                uidp: uidp.clone(),
                name: f.name.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;
    Ok(v1::IdentityProviderList {
        items: items.into_iter().map(identity_provider_out).collect(),
    })
}

pub async fn delete_identity_provider(w: Arc<Ward>, c: Caller, req: v1::DeleteIdentityProviderRequest) -> Result<()> {
    v1_named(
        w.delete_identity_provider(&c, v2::DeleteIdentityProviderRequest { uid: req.id })
            .await,
        ID,
    )
}

// ---------------------------------------------------------------- account associations

/// v1's `AccountAssociations` (keyed by `group`) as v2's `AccountAssociation`
/// (whose uid is the group's). The sections have the same shape.
pub fn account_associations_in(a: v1::AccountAssociations) -> v2::AccountAssociation {
    use v1::account_associations as a1;
    use v2::account_association as a2;
    v2::AccountAssociation {
        uid: a.group,
        name: a.name,
        description: a.description,
        amazon: a.amazon.map(|x| a2::Amazon { account: x.account }),
        google: a.google.map(|x| a2::Google {
            project_id: x.project_id,
            project_number: x.project_number,
        }),
        chainguard: a.chainguard.map(|x| a2::Chainguard {
            service_bindings: x.service_bindings,
        }),
        azure: a.azure.map(|x| a2::Azure {
            tenant_id: x.tenant_id,
            client_ids: x.client_ids,
        }),
        create_time: None,
        update_time: None,
        github: a.github.map(|x| a2::GitHub {
            app_installations: x
                .app_installations
                .into_iter()
                .map(|(app, i)| {
                    let installations = i
                        .installations
                        .into_iter()
                        .map(
                            |a1::git_hub::Installation { installation_id, name }| a2::git_hub::Installation {
                                installation_id,
                                name,
                            },
                        )
                        .collect();
                    (app, a2::git_hub::Installations { installations })
                })
                .collect(),
        }),
    }
}

pub fn account_associations_out(a: v2::AccountAssociation) -> v1::AccountAssociations {
    use v1::account_associations as a1;
    use v2::account_association as a2;
    v1::AccountAssociations {
        group: a.uid,
        amazon: a.amazon.map(|x| a1::Amazon { account: x.account }),
        google: a.google.map(|x| a1::Google {
            project_id: x.project_id,
            project_number: x.project_number,
        }),
        name: a.name,
        description: a.description,
        chainguard: a.chainguard.map(|x| a1::Chainguard {
            service_bindings: x.service_bindings,
        }),
        azure: a.azure.map(|x| a1::Azure {
            tenant_id: x.tenant_id,
            client_ids: x.client_ids,
        }),
        github: a.github.map(|x| a1::GitHub {
            app_installations: x
                .app_installations
                .into_iter()
                .map(|(app, i)| {
                    let installations = i
                        .installations
                        .into_iter()
                        .map(
                            |a2::git_hub::Installation { installation_id, name }| a1::git_hub::Installation {
                                installation_id,
                                name,
                            },
                        )
                        .collect();
                    (app, a1::git_hub::Installations { installations })
                })
                .collect(),
        }),
    }
}

/// v1's account type as v2's provider type (same meaning and numbers; an
/// unknown number is passed on for v2 to refuse).
pub fn account_type_in(t: i32) -> i32 {
    use v1::account_associations_check_request::AccountType as A;
    use v2::AccountProviderType as B;
    match A::try_from(t) {
        Ok(A::Unknown) => B::Unspecified as i32,
        Ok(A::Google) => B::Google as i32,
        Ok(A::Amazon) => B::Amazon as i32,
        Ok(A::Azure) => B::Azure as i32,
        Err(_) => t,
    }
}

/// v2's check result as v1's status (whose enum is spelled `Ready`/`NotReady`).
pub fn check_out(r: v2::CheckAccountAssociationResponse) -> v1::AccountAssociationsStatus {
    use v1::account_associations_status::State as A;
    use v2::check_account_association_response::CheckStatus as B;
    let ready = match B::try_from(r.status) {
        Ok(B::Ready) => A::Ready,
        Ok(B::NotReady) => A::NotReady,
        Ok(B::Unspecified) | Err(_) => A::Unknown,
    };
    v1::AccountAssociationsStatus {
        ready: ready as i32,
        reason: r.reason,
        message: r.message,
    }
}

pub async fn create_account_associations(
    w: Arc<Ward>,
    c: Caller,
    req: v1::AccountAssociations,
) -> Result<v1::AccountAssociations> {
    let parent = req.group.clone();
    let a = w
        .create_account_association(
            &c,
            v2::CreateAccountAssociationRequest {
                parent,
                account_association: Some(account_associations_in(req)),
            },
        )
        .await?;
    Ok(account_associations_out(a))
}

/// Full replacement: every field v2 lets you update is in the mask, so an
/// omitted section is removed and an omitted description cleared.
pub async fn update_account_associations(
    w: Arc<Ward>,
    c: Caller,
    req: v1::AccountAssociations,
) -> Result<v1::AccountAssociations> {
    let mask = ASSOCIATION_FIELDS.mutable.iter().map(|p| (*p).to_owned()).collect();
    let a = w
        .update_account_association(&c, account_associations_in(req), UpdateMask::Paths(mask))
        .await?;
    Ok(account_associations_out(a))
}

pub async fn list_account_associations(
    w: Arc<Ward>,
    c: Caller,
    f: v1::AccountAssociationsFilter,
) -> Result<v1::AccountAssociationsList> {
    // An association's uid is its group's: the group filter is an id filter.
    let Some(uidp) = narrow_to_id(None, &f.group)? else {
        return Ok(Default::default());
    };
    let (w, c) = (&*w, &c);
    let items = collect_all("/iam/v2/accountAssociations", move |page_token| {
        w.list_account_associations(
            c,
            v2::ListAccountAssociationsRequest {
                uidp: uidp.clone(),
                name: f.name.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;
    Ok(v1::AccountAssociationsList {
        items: items.into_iter().map(account_associations_out).collect(),
    })
}

pub async fn delete_account_associations(
    w: Arc<Ward>,
    c: Caller,
    req: v1::DeleteAccountAssociationsRequest,
) -> Result<()> {
    w.delete_account_association(&c, v2::DeleteAccountAssociationRequest { uid: req.group })
        .await
}

pub async fn check_account_associations(
    w: Arc<Ward>,
    c: Caller,
    req: v1::AccountAssociationsCheckRequest,
) -> Result<v1::AccountAssociationsStatus> {
    let r = w
        .check_account_association(
            &c,
            v2::CheckAccountAssociationRequest {
                uid: req.group,
                provider_type: account_type_in(req.account_type),
            },
        )
        .await?;
    Ok(check_out(r))
}

// ---------------------------------------------------------------- group invites

/// An invite's hydrated role as the full v1 `Role` (dotted capability
/// names), by the roles translation.
fn invite_role_out(r: v2::GroupInviteRole) -> v1::Role {
    role_out(v2::Role {
        uid: r.uid,
        name: r.name,
        description: r.description,
        capabilities: r.capabilities,
        create_time: None,
        update_time: None,
    })
}

pub fn group_invite_request_in(r: v1::GroupInviteRequest) -> v2::CreateGroupInviteRequest {
    v2::CreateGroupInviteRequest {
        parent: r.group,
        group_invite: Some(v2::GroupInvite {
            role_uid: r.role,
            email: r.email,
            ttl: r.ttl,
            single_use: r.single_use,
            ..Default::default()
        }),
    }
}

/// The invite as Create returns it: the one reply that carries the code.
pub fn group_invite_out(i: v2::GroupInvite) -> v1::GroupInvite {
    v1::GroupInvite {
        id: i.uid,
        expiration: i.expiration_time,
        key_id: i.key_id,
        role: i.role.map(invite_role_out),
        code: i.code,
    }
}

/// The invite as listed; `StoredGroupInvite` has no code field at all.
pub fn stored_group_invite_out(i: v2::GroupInvite) -> v1::StoredGroupInvite {
    v1::StoredGroupInvite {
        id: i.uid,
        expiration: i.expiration_time,
        key_id: i.key_id,
        role: i.role.map(invite_role_out),
        email: i.email,
        created_at: i.create_time,
        single_use: i.single_use,
    }
}

/// The v1 filter's uidp part: `group` is the invites directly in it, `id`
/// one invite. `None`: nothing can match.
pub fn group_invite_filter_uidp(f: &v1::GroupInviteFilter) -> Result<Option<Option<UidpFilter>>> {
    let uidp = (!f.group.is_empty()).then(|| UidpFilter {
        children_of: f.group.clone(),
        ..Default::default()
    });
    narrow_to_id(uidp, &f.id)
}

pub async fn create_group_invite(w: Arc<Ward>, c: Caller, req: v1::GroupInviteRequest) -> Result<v1::GroupInvite> {
    let i = w.create_group_invite(&c, group_invite_request_in(req)).await?;
    Ok(group_invite_out(i))
}

pub async fn list_group_invites(w: Arc<Ward>, c: Caller, f: v1::GroupInviteFilter) -> Result<v1::GroupInviteList> {
    let Some(uidp) = group_invite_filter_uidp(&f)? else {
        return Ok(Default::default());
    };
    let (w, c) = (&*w, &c);
    let items = collect_all("/iam/v2/groupInvites", move |page_token| {
        w.list_group_invites(
            c,
            v2::ListGroupInvitesRequest {
                uidp: uidp.clone(),
                key_id: f.key_id.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;
    Ok(v1::GroupInviteList {
        items: items.into_iter().map(stored_group_invite_out).collect(),
    })
}

pub async fn delete_group_invite(w: Arc<Ward>, c: Caller, req: v1::DeleteGroupInviteRequest) -> Result<()> {
    v1_named(
        w.delete_group_invite(&c, v2::DeleteGroupInviteRequest { uid: req.id })
            .await,
        ID,
    )
}

// ---------------------------------------------------------------- external group role mappings

/// A v1 mapping as v2's (output-only fields are ignored by v2 on create).
pub fn mapping_in(m: v1::ExternalGroupRoleMapping) -> v2::ExternalGroupRoleMapping {
    v2::ExternalGroupRoleMapping {
        uid: m.id,
        identity_provider_uid: m.identity_provider_uidp,
        external_group_id: m.external_group_id,
        role_uid: m.role_uidp,
        scope: m.scope,
        create_time: m.created_at,
    }
}

pub fn mapping_out(m: v2::ExternalGroupRoleMapping) -> v1::ExternalGroupRoleMapping {
    v1::ExternalGroupRoleMapping {
        id: m.uid,
        identity_provider_uidp: m.identity_provider_uid,
        external_group_id: m.external_group_id,
        role_uidp: m.role_uid,
        scope: m.scope,
        created_at: m.create_time,
    }
}

pub async fn create_external_group_role_mapping(
    w: Arc<Ward>,
    c: Caller,
    req: v1::CreateExternalGroupRoleMappingRequest,
) -> Result<v1::ExternalGroupRoleMapping> {
    let m = w
        .create_external_group_role_mapping(
            &c,
            v2::CreateExternalGroupRoleMappingRequest {
                parent: req.parent_id,
                external_group_role_mapping: req.mapping.map(mapping_in),
            },
        )
        .await;
    let m = v1_named(
        m,
        &[
            ("parent", "parent_id"),
            (
                "external_group_role_mapping.identity_provider_uid",
                "mapping.identity_provider_uidp",
            ),
            ("external_group_role_mapping.role_uid", "mapping.role_uidp"),
            ("external_group_role_mapping.uid", "mapping.id"),
            ("external_group_role_mapping.", "mapping."),
        ],
    )?;
    Ok(mapping_out(m))
}

pub async fn get_external_group_role_mapping(
    w: Arc<Ward>,
    c: Caller,
    req: v1::GetExternalGroupRoleMappingRequest,
) -> Result<v1::ExternalGroupRoleMapping> {
    let m = w
        .get_external_group_role_mapping(&c, v2::GetExternalGroupRoleMappingRequest { uid: req.uid })
        .await?;
    Ok(mapping_out(m))
}

pub async fn list_external_group_role_mappings(
    w: Arc<Ward>,
    c: Caller,
    f: v1::ExternalGroupRoleMappingFilter,
) -> Result<v1::ExternalGroupRoleMappingList> {
    let (w, c) = (&*w, &c);
    let items = collect_all("/iam/v2/externalGroupRoleMappings", move |page_token| {
        w.list_external_group_role_mappings(
            c,
            v2::ListExternalGroupRoleMappingsRequest {
                uidp: f.uidp.clone(),
                identity_provider_uid: f.identity_provider_uidp.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await?;
    Ok(v1::ExternalGroupRoleMappingList {
        items: items.into_iter().map(mapping_out).collect(),
    })
}

pub async fn delete_external_group_role_mapping(
    w: Arc<Ward>,
    c: Caller,
    req: v1::DeleteExternalGroupRoleMappingRequest,
) -> Result<()> {
    v1_named(
        w.delete_external_group_role_mapping(&c, v2::DeleteExternalGroupRoleMappingRequest { uid: req.id })
            .await,
        ID,
    )
}

/// All or none (v2's rule); the reply echoes the parent and lists the
/// mappings deleted.
pub async fn batch_delete_external_group_role_mappings(
    w: Arc<Ward>,
    c: Caller,
    req: v1::BatchDeleteExternalGroupRoleMappingsRequest,
) -> Result<v1::BatchDeleteExternalGroupRoleMappingsResponse> {
    let r = w
        .batch_delete_external_group_role_mappings(
            &c,
            v2::BatchDeleteExternalGroupRoleMappingsRequest {
                parent: req.parent_id.clone(),
                names: req.ids,
            },
        )
        .await?;
    Ok(v1::BatchDeleteExternalGroupRoleMappingsResponse {
        parent_id: req.parent_id,
        items: r.external_group_role_mappings.into_iter().map(mapping_out).collect(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use ward_core::capability::Capability;
    use ward_proto::Timestamp;

    use super::*;
    use crate::services::people::providers::PROVIDER_FIELDS;

    fn ts(ms: i64) -> Option<Timestamp> {
        Some(Timestamp::from_millis(ms))
    }

    fn v1_oidc() -> v1::identity_provider::Oidc {
        v1::identity_provider::Oidc {
            issuer: "https://idp.example.com".into(),
            client_id: "client".into(),
            client_secret: "s3cret".into(),
            additional_scopes: vec!["groups".into()],
            groups_claim: "groups".into(),
            correlation_rule: v1::identity_provider::CorrelationRule::OidEqualsExternalId as i32,
            pkce_enabled: true,
        }
    }

    fn v1_provider() -> v1::IdentityProvider {
        v1::IdentityProvider {
            id: "org/idp".into(),
            name: "corp".into(),
            description: "the corporate IdP".into(),
            default_role: "role".into(),
            configuration: Some(v1::identity_provider::Configuration::Oidc(v1_oidc())),
            scim: Some(Default::default()),
        }
    }

    #[test]
    fn identity_provider_in_carries_every_field_and_drops_scim() {
        let p = identity_provider_in(v1_provider());
        assert_eq!(p.uid, "org/idp");
        assert_eq!(p.name, "corp");
        assert_eq!(p.description, "the corporate IdP");
        assert_eq!(p.default_role, "role");
        assert!(p.scim.is_none());
        let o = oidc_of(&p);
        assert_eq!(o.issuer, "https://idp.example.com");
        assert_eq!(o.client_id, "client");
        assert_eq!(o.client_secret, "s3cret", "the secret is written through");
        assert_eq!(o.additional_scopes, vec!["groups".to_owned()]);
        assert_eq!(o.groups_claim, "groups");
        assert_eq!(
            o.correlation_rule,
            v2::identity_provider::CorrelationRule::OidEqualsExternalId as i32
        );
        assert!(o.pkce_enabled);
    }

    #[test]
    fn identity_provider_out_never_returns_the_secret() {
        let mut p = identity_provider_in(v1_provider());
        p.create_time = ts(1);
        let out = identity_provider_out(p);
        let Some(v1::identity_provider::Configuration::Oidc(o)) = out.configuration else {
            panic!("oidc configuration expected");
        };
        assert!(o.client_secret.is_empty());
        assert_eq!(o.client_id, "client");
        assert_eq!(out.id, "org/idp");
        assert!(out.scim.is_none());
    }

    #[test]
    fn identity_provider_round_trips_apart_from_the_secret() {
        let mut want = v1_provider();
        want.scim = None;
        if let Some(v1::identity_provider::Configuration::Oidc(o)) = &mut want.configuration {
            o.client_secret.clear();
        }
        assert_eq!(identity_provider_out(identity_provider_in(want.clone())), want);
    }

    #[test]
    fn scim_state_is_carried_out() {
        let mut p = identity_provider_in(v1_provider());
        p.scim = Some(v2::identity_provider::Scim {
            enabled: true,
            endpoint_url: "https://ward/scim".into(),
            credential_state: v2::identity_provider::CredentialState::Live as i32,
            etag: "e".into(),
            ..Default::default()
        });
        let s = identity_provider_out(p).scim.unwrap_or_default();
        assert!(s.enabled);
        assert_eq!(s.endpoint_url, "https://ward/scim");
        assert_eq!(s.credential_state, v1::identity_provider::CredentialState::Live as i32);
        assert_eq!(s.etag, "e");
    }

    #[test]
    fn writing_back_a_listed_provider_changes_nothing() {
        // What List returned (no secret), written back unchanged.
        let current = identity_provider_in(v1_provider());
        let mut listed = identity_provider_out(current.clone());
        listed.scim = None;
        let given = identity_provider_in(listed);
        assert!(identity_provider_mask(&given, &current).is_empty());
    }

    #[test]
    fn omitted_fields_reset_and_a_new_secret_is_written() {
        let current = identity_provider_in(v1_provider());
        let given = identity_provider_in(v1::IdentityProvider {
            id: "org/idp".into(),
            name: "corp".into(),
            configuration: Some(v1::identity_provider::Configuration::Oidc(
                v1::identity_provider::Oidc {
                    issuer: "https://idp.example.com/".into(),
                    client_id: "client".into(),
                    client_secret: "new".into(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        });
        let mask = identity_provider_mask(&given, &current);
        assert_eq!(
            mask,
            [
                "description",
                "default_role",
                "oidc.client_secret",
                "oidc.additional_scopes",
                "oidc.groups_claim",
                "oidc.correlation_rule",
                "oidc.pkce_enabled",
            ]
        );
    }

    #[test]
    fn the_mask_names_only_fields_v2_knows() {
        let given = v2::IdentityProvider {
            name: "x".into(),
            description: "x".into(),
            default_role: "x".into(),
            configuration: Some(v2::identity_provider::Configuration::Oidc(
                v2::identity_provider::Oidc {
                    issuer: "x".into(),
                    client_id: "x".into(),
                    client_secret: "x".into(),
                    additional_scopes: vec!["x".into()],
                    groups_claim: "x".into(),
                    correlation_rule: 1,
                    pkce_enabled: true,
                },
            )),
            ..Default::default()
        };
        let mask = identity_provider_mask(&given, &v2::IdentityProvider::default());
        for p in &mask {
            assert!(
                PROVIDER_FIELDS.mutable.contains(&p.as_str()) || PROVIDER_FIELDS.immutable.contains(&p.as_str()),
                "{p} is not a v2 identity provider field"
            );
        }
        // Every mutable v2 field can be reached from v1.
        for p in PROVIDER_FIELDS.mutable {
            assert!(mask.iter().any(|m| m == p), "{p} is never updated by v1");
        }
    }

    fn v1_association() -> v1::AccountAssociations {
        use v1::account_associations as a1;
        v1::AccountAssociations {
            group: "org".into(),
            amazon: Some(a1::Amazon {
                account: "123456789012".into(),
            }),
            google: Some(a1::Google {
                project_id: "p".into(),
                project_number: "1".into(),
            }),
            name: "assoc".into(),
            description: "d".into(),
            chainguard: Some(a1::Chainguard {
                service_bindings: HashMap::from([("CATALOG_SYNCER".to_owned(), "org/id".to_owned())]),
            }),
            azure: Some(a1::Azure {
                tenant_id: "t".into(),
                client_ids: HashMap::from([("app".to_owned(), "c".to_owned())]),
            }),
            github: Some(a1::GitHub {
                app_installations: HashMap::from([(
                    42,
                    a1::git_hub::Installations {
                        installations: vec![a1::git_hub::Installation {
                            installation_id: 7,
                            name: "acme".into(),
                        }],
                    },
                )]),
            }),
        }
    }

    #[test]
    fn account_associations_are_keyed_by_group() {
        let a = account_associations_in(v1_association());
        assert_eq!(a.uid, "org");
        assert_eq!(a.name, "assoc");
        assert_eq!(a.amazon.as_ref().map(|x| x.account.as_str()), Some("123456789012"));
        assert_eq!(a.google.as_ref().map(|x| x.project_number.as_str()), Some("1"));
        assert_eq!(
            a.chainguard
                .as_ref()
                .and_then(|x| x.service_bindings.get("CATALOG_SYNCER")),
            Some(&"org/id".to_owned())
        );
        assert_eq!(a.azure.as_ref().map(|x| x.tenant_id.as_str()), Some("t"));
        let gh = a.github.as_ref().and_then(|x| x.app_installations.get(&42));
        assert_eq!(gh.map(|i| i.installations[0].installation_id), Some(7));
    }

    #[test]
    fn account_associations_round_trip() {
        let want = v1_association();
        let mut v2 = account_associations_in(want.clone());
        v2.create_time = ts(1);
        v2.update_time = ts(2);
        assert_eq!(account_associations_out(v2), want);
        let empty = v1::AccountAssociations {
            group: "org".into(),
            name: "n".into(),
            ..Default::default()
        };
        assert_eq!(account_associations_out(account_associations_in(empty.clone())), empty);
    }

    #[test]
    fn account_types_and_check_states_translate() {
        use v1::account_associations_check_request::AccountType as A;
        use v1::account_associations_status::State as S;
        use v2::AccountProviderType as B;
        use v2::check_account_association_response::CheckStatus as C;
        assert_eq!(account_type_in(A::Google as i32), B::Google as i32);
        assert_eq!(account_type_in(A::Amazon as i32), B::Amazon as i32);
        assert_eq!(account_type_in(A::Azure as i32), B::Azure as i32);
        assert_eq!(account_type_in(A::Unknown as i32), B::Unspecified as i32);
        assert_eq!(account_type_in(99), 99, "unknown numbers are left for v2 to refuse");
        let status = |s: C| {
            check_out(v2::CheckAccountAssociationResponse {
                status: s as i32,
                reason: "not checked".into(),
                message: "m".into(),
            })
        };
        assert_eq!(status(C::Ready).ready, S::Ready as i32);
        assert_eq!(status(C::NotReady).ready, S::NotReady as i32);
        assert_eq!(status(C::Unspecified).ready, S::Unknown as i32);
        assert_eq!(status(C::NotReady).reason, "not checked");
        assert_eq!(status(C::NotReady).message, "m");
    }

    #[test]
    fn account_association_status_uses_mixed_case_names_in_json() {
        let s = check_out(v2::CheckAccountAssociationResponse {
            status: 2,
            ..Default::default()
        });
        let json = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(json["ready"], "NotReady");
    }

    fn v2_invite() -> v2::GroupInvite {
        v2::GroupInvite {
            uid: "grp/inv".into(),
            role_uid: "role".into(),
            email: "a@example.com".into(),
            ttl: None,
            expiration_time: ts(2_000),
            single_use: true,
            code: "the-code".into(),
            key_id: "kid".into(),
            create_time: ts(1_000),
            role: Some(v2::GroupInviteRole {
                uid: "role".into(),
                name: "viewer".into(),
                description: "reads".into(),
                capabilities: vec![Capability::IamGroupsList as i32, Capability::IamRolesList as i32],
            }),
        }
    }

    #[test]
    fn invite_request_in() {
        let r = group_invite_request_in(v1::GroupInviteRequest {
            group: "grp".into(),
            ttl: Some(pbjson_types::Duration {
                seconds: 604_800,
                nanos: 0,
            }),
            role: "role".into(),
            email: "a@example.com".into(),
            single_use: true,
        });
        assert_eq!(r.parent, "grp");
        let i = r.group_invite.unwrap_or_default();
        assert_eq!(i.role_uid, "role");
        assert_eq!(i.email, "a@example.com");
        assert_eq!(i.ttl.map(|d| d.seconds), Some(604_800));
        assert!(i.single_use);
    }

    #[test]
    fn created_invite_carries_the_code_and_full_role() {
        let i = group_invite_out(v2_invite());
        assert_eq!(i.id, "grp/inv");
        assert_eq!(i.code, "the-code");
        assert_eq!(i.key_id, "kid");
        assert_eq!(i.expiration, ts(2_000));
        let role = i.role.unwrap_or_default();
        assert_eq!(role.id, "role");
        assert_eq!(role.name, "viewer");
        assert_eq!(role.description, "reads");
        assert_eq!(role.capabilities, ["groups.list", "roles.list"]);
    }

    #[test]
    fn listed_invite_has_no_code() {
        let i = stored_group_invite_out(v2_invite());
        assert_eq!(i.id, "grp/inv");
        assert_eq!(i.email, "a@example.com");
        assert_eq!(i.created_at, ts(1_000));
        assert_eq!(i.expiration, ts(2_000));
        assert!(i.single_use);
        assert_eq!(i.role.map(|r| r.name), Some("viewer".into()));
        let json = serde_json::to_value(stored_group_invite_out(v2_invite())).unwrap_or_default();
        assert!(json.get("code").is_none());
    }

    #[test]
    fn invite_without_role_has_none() {
        let mut inv = v2_invite();
        inv.role = None;
        assert!(group_invite_out(inv.clone()).role.is_none());
        assert!(stored_group_invite_out(inv).role.is_none());
    }

    #[test]
    fn invite_filter() {
        let f = |group: &str, id: &str| v1::GroupInviteFilter {
            group: group.into(),
            id: id.into(),
            key_id: String::new(),
        };
        let grp = "a".repeat(40);
        let inv = format!("{grp}/{}", "b".repeat(16));
        assert_eq!(group_invite_filter_uidp(&f("", "")).unwrap(), Some(None));
        let by_group = group_invite_filter_uidp(&f(&grp, ""))
            .unwrap()
            .flatten()
            .unwrap_or_default();
        assert_eq!(by_group.children_of, grp);
        assert!(by_group.ids.is_empty());
        let both = group_invite_filter_uidp(&f(&grp, &inv))
            .unwrap()
            .flatten()
            .unwrap_or_default();
        assert_eq!(both.children_of, grp);
        assert_eq!(both.ids, [inv]);
        assert!(group_invite_filter_uidp(&f("grp", "")).is_err());
    }

    #[test]
    fn mappings_translate_both_ways() {
        let v2m = v2::ExternalGroupRoleMapping {
            uid: "org/idp/m".into(),
            identity_provider_uid: "org/idp".into(),
            external_group_id: "Engineering".into(),
            role_uid: "role".into(),
            scope: "org".into(),
            create_time: ts(5),
        };
        let m = mapping_out(v2m.clone());
        assert_eq!(m.id, "org/idp/m");
        assert_eq!(m.identity_provider_uidp, "org/idp");
        assert_eq!(m.external_group_id, "Engineering");
        assert_eq!(m.role_uidp, "role");
        assert_eq!(m.scope, "org");
        assert_eq!(m.created_at, ts(5));
        assert_eq!(mapping_in(m), v2m);
    }

    #[test]
    fn v1_json_names() {
        let m = mapping_out(v2::ExternalGroupRoleMapping {
            create_time: ts(1),
            ..Default::default()
        });
        let m = serde_json::to_value(m).unwrap_or_default();
        for k in [
            "id",
            "identityProviderUidp",
            "externalGroupId",
            "roleUidp",
            "scope",
            "createdAt",
        ] {
            assert!(m.get(k).is_some(), "mapping JSON lacks {k}");
        }
        let i = serde_json::to_value(group_invite_out(v2_invite())).unwrap_or_default();
        for k in ["id", "expiration", "keyId", "role", "code"] {
            assert!(i.get(k).is_some(), "invite JSON lacks {k}");
        }
    }
}
