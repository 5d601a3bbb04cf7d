//! v1 REST bindings of the IAM people services: identity providers, account
//! associations, group invites and external group role mappings (reference
//! §4.2). The SCIM token RPCs and `GroupInvites.CreateWithGroup` are not
//! served.

use http::Method;

use crate::rest::transcode::{Rpc, rpc};
use crate::services::v1::people as v1;

pub fn rpcs() -> Vec<Rpc> {
    vec![
        // IdentityProviders
        rpc(
            Method::POST,
            "/iam/v1/identityProviders/{parent_id=**}",
            "identity_provider",
            "chainguard.platform.iam.IdentityProviders.Create",
            v1::create_identity_provider,
        ),
        rpc(
            Method::PUT,
            "/iam/v1/identityProviders/{id=**}",
            "*",
            "chainguard.platform.iam.IdentityProviders.Update",
            v1::update_identity_provider,
        ),
        rpc(
            Method::GET,
            "/iam/v1/identityProviders",
            "",
            "chainguard.platform.iam.IdentityProviders.List",
            v1::list_identity_providers,
        ),
        rpc(
            Method::DELETE,
            "/iam/v1/identityProviders/{id=**}",
            "",
            "chainguard.platform.iam.IdentityProviders.Delete",
            v1::delete_identity_provider,
        ),
        // GroupAccountAssociations (`:check` listed before the plain POST)
        rpc(
            Method::POST,
            "/iam/v1/account_associations/{group=**}:check",
            "*",
            "chainguard.platform.iam.GroupAccountAssociations.Check",
            v1::check_account_associations,
        ),
        rpc(
            Method::POST,
            "/iam/v1/account_associations/{group=**}",
            "*",
            "chainguard.platform.iam.GroupAccountAssociations.Create",
            v1::create_account_associations,
        ),
        rpc(
            Method::PUT,
            "/iam/v1/account_associations/{group=**}",
            "*",
            "chainguard.platform.iam.GroupAccountAssociations.Update",
            v1::update_account_associations,
        ),
        rpc(
            Method::GET,
            "/iam/v1/account_associations",
            "",
            "chainguard.platform.iam.GroupAccountAssociations.List",
            v1::list_account_associations,
        ),
        rpc(
            Method::DELETE,
            "/iam/v1/account_associations/{group=**}",
            "",
            "chainguard.platform.iam.GroupAccountAssociations.Delete",
            v1::delete_account_associations,
        ),
        // GroupInvites
        rpc(
            Method::POST,
            "/iam/v1/group_invites/{group=**}",
            "*",
            "chainguard.platform.iam.GroupInvites.Create",
            v1::create_group_invite,
        ),
        rpc(
            Method::GET,
            "/iam/v1/group_invites",
            "",
            "chainguard.platform.iam.GroupInvites.List",
            v1::list_group_invites,
        ),
        rpc(
            Method::DELETE,
            "/iam/v1/group_invites/{id=**}",
            "",
            "chainguard.platform.iam.GroupInvites.Delete",
            v1::delete_group_invite,
        ),
        // ExternalGroupRoleMappings
        rpc(
            Method::POST,
            "/iam/v1/externalGroupRoleMappings:batchDelete",
            "*",
            "chainguard.platform.iam.ExternalGroupRoleMappings.BatchDelete",
            v1::batch_delete_external_group_role_mappings,
        ),
        rpc(
            Method::POST,
            "/iam/v1/externalGroupRoleMappings/{parent_id=**}",
            "mapping",
            "chainguard.platform.iam.ExternalGroupRoleMappings.Create",
            v1::create_external_group_role_mapping,
        ),
        rpc(
            Method::GET,
            "/iam/v1/externalGroupRoleMappings/{uid=**}",
            "",
            "chainguard.platform.iam.ExternalGroupRoleMappings.Get",
            v1::get_external_group_role_mapping,
        ),
        rpc(
            Method::GET,
            "/iam/v1/externalGroupRoleMappings",
            "",
            "chainguard.platform.iam.ExternalGroupRoleMappings.List",
            v1::list_external_group_role_mappings,
        ),
        rpc(
            Method::DELETE,
            "/iam/v1/externalGroupRoleMappings/{id=**}",
            "",
            "chainguard.platform.iam.ExternalGroupRoleMappings.Delete",
            v1::delete_external_group_role_mapping,
        ),
    ]
}
