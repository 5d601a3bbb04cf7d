//! The v1 IAM people services over gRPC (`chainguard.platform.iam`):
//! identity providers, account associations, group invites and external
//! group role mappings. Each method authenticates and calls the same v1
//! translation the REST bindings use.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::iam::external_group_role_mappings_server::ExternalGroupRoleMappings;
use ward_proto::iam::group_account_associations_server::GroupAccountAssociations;
use ward_proto::iam::group_invites_server::GroupInvites;
use ward_proto::iam::identity_providers_server::IdentityProviders;
use ward_proto::iam::*;

use super::v1_iam::v1_service;
use super::{caller, reply};
use crate::services::v1::people as v1;
use crate::ward::Ward;

#[derive(Clone)]
pub struct V1People(pub Arc<Ward>);

v1_service!(impl IdentityProviders for V1People by caller {
    create(CreateIdentityProviderRequest) -> IdentityProvider = v1::create_identity_provider;
    update(IdentityProvider) -> IdentityProvider = v1::update_identity_provider;
    list(IdentityProviderFilter) -> IdentityProviderList = v1::list_identity_providers;
    delete(DeleteIdentityProviderRequest) -> () = v1::delete_identity_provider;
});

v1_service!(impl GroupAccountAssociations for V1People by caller {
    create(AccountAssociations) -> AccountAssociations = v1::create_account_associations;
    update(AccountAssociations) -> AccountAssociations = v1::update_account_associations;
    list(AccountAssociationsFilter) -> AccountAssociationsList = v1::list_account_associations;
    delete(DeleteAccountAssociationsRequest) -> () = v1::delete_account_associations;
    check(AccountAssociationsCheckRequest) -> AccountAssociationsStatus = v1::check_account_associations;
});

v1_service!(impl GroupInvites for V1People by caller {
    create(GroupInviteRequest) -> GroupInvite = v1::create_group_invite;
    list(GroupInviteFilter) -> GroupInviteList = v1::list_group_invites;
    delete(DeleteGroupInviteRequest) -> () = v1::delete_group_invite;
});

v1_service!(impl ExternalGroupRoleMappings for V1People by caller {
    create(CreateExternalGroupRoleMappingRequest) -> ExternalGroupRoleMapping = v1::create_external_group_role_mapping;
    get(GetExternalGroupRoleMappingRequest) -> ExternalGroupRoleMapping = v1::get_external_group_role_mapping;
    list(ExternalGroupRoleMappingFilter) -> ExternalGroupRoleMappingList = v1::list_external_group_role_mappings;
    delete(DeleteExternalGroupRoleMappingRequest) -> () = v1::delete_external_group_role_mapping;
    batch_delete(BatchDeleteExternalGroupRoleMappingsRequest) -> BatchDeleteExternalGroupRoleMappingsResponse =
        v1::batch_delete_external_group_role_mappings;
});
