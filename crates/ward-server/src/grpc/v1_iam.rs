//! The v1 IAM core services over gRPC (`chainguard.platform.iam`): groups,
//! identities, roles, role bindings and terms. Each method authenticates and
//! calls the same v1 translation the REST bindings use.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::iam::groups_server::Groups;
use ward_proto::iam::identities_server::Identities;
use ward_proto::iam::role_bindings_server::RoleBindings;
use ward_proto::iam::roles_server::Roles;
use ward_proto::iam::terms_server::Terms;
use ward_proto::iam::*;

use super::{caller, reply};
use crate::services::v1::iam as v1;
use crate::ward::Ward;

#[derive(Clone)]
pub struct V1Iam(pub Arc<Ward>);

/// `impl $service for $server`: every method authenticates by `$auth`
/// (`caller`, or `maybe_caller` for the public services) and answers with
/// its v1 translation `$f`. Shared by all the v1 gRPC services.
macro_rules! v1_service {
    (impl $service:ident for $server:ident by $auth:ident { $($method:ident($req:ty) -> $resp:ty = $f:path;)* }) => {
        #[tonic::async_trait]
        impl $service for $server {
            $(
                async fn $method(&self, req: Request<$req>) -> Result<Response<$resp>, Status> {
                    let c = $auth(&self.0, &req).await?;
                    reply($f(self.0.clone(), c, req.into_inner()).await)
                }
            )*
        }
    };
}
pub(super) use v1_service;

v1_service!(impl Groups for V1Iam by caller {
    create(CreateGroupRequest) -> Group = v1::create_group;
    update(Group) -> Group = v1::update_group;
    list(GroupFilter) -> GroupList = v1::list_groups;
    delete(DeleteGroupRequest) -> () = v1::delete_group;
    lookup_group(LookupGroupRequest) -> LookupGroupResponse = v1::lookup_group;
    request_group_access(RequestGroupAccessRequest) -> RequestGroupAccessResponse = v1::request_group_access;
    check_eligibility(CheckEligibilityRequest) -> CheckEligibilityResponse = v1::check_eligibility;
});

v1_service!(impl Identities for V1Iam by caller {
    create(CreateIdentityRequest) -> Identity = v1::create_identity;
    update(Identity) -> Identity = v1::update_identity;
    list(IdentityFilter) -> IdentityList = v1::list_identities;
    lookup(LookupRequest) -> Identity = v1::lookup_identity;
    delete(DeleteIdentityRequest) -> () = v1::delete_identity;
});

v1_service!(impl Roles for V1Iam by caller {
    create(CreateRoleRequest) -> Role = v1::create_role;
    update(Role) -> Role = v1::update_role;
    list(RoleFilter) -> RoleList = v1::list_roles;
    delete(DeleteRoleRequest) -> () = v1::delete_role;
});

v1_service!(impl RoleBindings for V1Iam by caller {
    create(CreateRoleBindingRequest) -> RoleBinding = v1::create_role_binding;
    create_batch(CreateRoleBindingBatchRequest) -> RoleBindingBatch = v1::create_role_binding_batch;
    update(RoleBinding) -> RoleBinding = v1::update_role_binding;
    list(RoleBindingFilter) -> RoleBindingList = v1::list_role_bindings;
    delete(DeleteRoleBindingRequest) -> () = v1::delete_role_binding;
});

v1_service!(impl Terms for V1Iam by caller {
    accept_terms(AcceptTermsRequest) -> AcceptTermsResponse = v1::accept_terms;
    list_accepted(TermsFilter) -> TermsList = v1::list_accepted_terms;
});
