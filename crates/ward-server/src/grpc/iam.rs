//! The IAM gRPC services, for both `chainguard.platform.iam.v2` and `…v2beta1`.
//! Their messages are the same Rust types, so one macro body serves every
//! (service, version) pair: authenticate, call the service layer, map errors.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::iam::v2::*;

use super::{caller, mask, reply};
use crate::ward::Ward;

#[derive(Clone)]
pub struct Iam(pub Arc<Ward>);

macro_rules! crud_service {
    ($server:path, $msg:ty, $resource:ident,
     $create:ident($create_req:ty), $get:ident($get_req:ty), $list:ident($list_req:ty) -> $list_resp:ty,
     $update:ident($update_req:ty), $delete:ident($delete_req:ty)
     $(; $extra:ident($extra_req:ty) -> $extra_resp:ty)*) => {
        #[tonic::async_trait]
        impl $server for Iam {
            async fn $create(&self, req: Request<$create_req>) -> Result<Response<$msg>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.$create(&c, req.into_inner()).await)
            }

            async fn $get(&self, req: Request<$get_req>) -> Result<Response<$msg>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.$get(&c, req.into_inner()).await)
            }

            async fn $list(&self, req: Request<$list_req>) -> Result<Response<$list_resp>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.$list(&c, req.into_inner()).await)
            }

            async fn $update(&self, req: Request<$update_req>) -> Result<Response<$msg>, Status> {
                let c = caller(&self.0, &req).await?;
                let r = req.into_inner();
                reply(
                    self.0
                        .$update(&c, r.$resource.unwrap_or_default(), mask(r.update_mask))
                        .await,
                )
            }

            async fn $delete(&self, req: Request<$delete_req>) -> Result<Response<()>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.$delete(&c, req.into_inner()).await)
            }

            $(
                async fn $extra(&self, req: Request<$extra_req>) -> Result<Response<$extra_resp>, Status> {
                    let c = caller(&self.0, &req).await?;
                    reply(self.0.$extra(&c, req.into_inner()).await)
                }
            )*
        }
    };
}

/// A service whose every method is: authenticate, call the same-named service
/// method with the request, map errors.
macro_rules! plain_service {
    ($server:path { $($method:ident($req:ty) -> $resp:ty;)* }) => {
        #[tonic::async_trait]
        impl $server for Iam {
            $(
                async fn $method(&self, req: Request<$req>) -> Result<Response<$resp>, Status> {
                    let c = caller(&self.0, &req).await?;
                    reply(self.0.$method(&c, req.into_inner()).await)
                }
            )*
        }
    };
}

macro_rules! iam_services {
    ($($version:ident),*) => {$(
        crud_service!(ward_proto::iam::$version::groups_service_server::GroupsService, Group, group,
            create_group(CreateGroupRequest), get_group(GetGroupRequest),
            list_groups(ListGroupsRequest) -> ListGroupsResponse,
            update_group(UpdateGroupRequest), delete_group(DeleteGroupRequest);
            lookup_group(LookupGroupRequest) -> LookupGroupResponse;
            check_eligibility(CheckEligibilityRequest) -> CheckEligibilityResponse;
            request_group_access(RequestGroupAccessRequest) -> RequestGroupAccessResponse;
            list_group_access_requests(ListGroupAccessRequestsRequest) -> ListGroupAccessRequestsResponse);
        crud_service!(ward_proto::iam::$version::identities_service_server::IdentitiesService, Identity, identity,
            create_identity(CreateIdentityRequest), get_identity(GetIdentityRequest),
            list_identities(ListIdentitiesRequest) -> ListIdentitiesResponse,
            update_identity(UpdateIdentityRequest), delete_identity(DeleteIdentityRequest);
            lookup_identity(LookupIdentityRequest) -> LookupIdentityResponse;
            update_identity_metadata(UpdateIdentityMetadataRequest) -> IdentityMetadata);
        crud_service!(ward_proto::iam::$version::roles_service_server::RolesService, Role, role,
            create_role(CreateRoleRequest), get_role(GetRoleRequest),
            list_roles(ListRolesRequest) -> ListRolesResponse,
            update_role(UpdateRoleRequest), delete_role(DeleteRoleRequest));
        crud_service!(ward_proto::iam::$version::role_bindings_service_server::RoleBindingsService, RoleBinding, role_binding,
            create_role_binding(CreateRoleBindingRequest), get_role_binding(GetRoleBindingRequest),
            list_role_bindings(ListRoleBindingsRequest) -> ListRoleBindingsResponse,
            update_role_binding(UpdateRoleBindingRequest), delete_role_binding(DeleteRoleBindingRequest);
            batch_create_role_bindings(BatchCreateRoleBindingsRequest) -> BatchCreateRoleBindingsResponse);
        crud_service!(ward_proto::iam::$version::identity_providers_service_server::IdentityProvidersService,
            IdentityProvider, identity_provider,
            create_identity_provider(CreateIdentityProviderRequest), get_identity_provider(GetIdentityProviderRequest),
            list_identity_providers(ListIdentityProvidersRequest) -> ListIdentityProvidersResponse,
            update_identity_provider(UpdateIdentityProviderRequest), delete_identity_provider(DeleteIdentityProviderRequest));
        plain_service!(ward_proto::iam::$version::external_group_role_mappings_service_server::ExternalGroupRoleMappingsService {
            create_external_group_role_mapping(CreateExternalGroupRoleMappingRequest) -> ExternalGroupRoleMapping;
            get_external_group_role_mapping(GetExternalGroupRoleMappingRequest) -> ExternalGroupRoleMapping;
            list_external_group_role_mappings(ListExternalGroupRoleMappingsRequest) -> ListExternalGroupRoleMappingsResponse;
            delete_external_group_role_mapping(DeleteExternalGroupRoleMappingRequest) -> ();
            batch_delete_external_group_role_mappings(BatchDeleteExternalGroupRoleMappingsRequest)
                -> BatchDeleteExternalGroupRoleMappingsResponse;
        });
        plain_service!(ward_proto::iam::$version::terms_service_server::TermsService {
            accept_terms(AcceptTermsRequest) -> AcceptTermsResponse;
            list_terms_acceptances(ListTermsAcceptancesRequest) -> ListTermsAcceptancesResponse;
        });
        plain_service!(ward_proto::iam::$version::group_invites_service_server::GroupInvitesService {
            create_group_invite(CreateGroupInviteRequest) -> GroupInvite;
            get_group_invite(GetGroupInviteRequest) -> GroupInvite;
            list_group_invites(ListGroupInvitesRequest) -> ListGroupInvitesResponse;
            delete_group_invite(DeleteGroupInviteRequest) -> ();
        });
    )*};
}

iam_services!(v2, v2beta1);

plain_service!(ward_proto::auth::auth_server::Auth {
    register(ward_proto::auth::RegistrationRequest) -> ward_proto::auth::Session;
    validate(()) -> ward_proto::auth::WhoAmI;
});

/// `PingService`: no authentication.
#[derive(Clone)]
pub struct Ping;

macro_rules! ping {
    ($($v:ident),*) => {$(
        #[tonic::async_trait]
        impl ward_proto::ping::$v::ping_service_server::PingService for Ping {
            async fn ping(
                &self,
                _req: Request<ward_proto::ping::v2::PingRequest>,
            ) -> Result<Response<ward_proto::ping::v2::PingResponse>, Status> {
                Ok(Response::new(ward_proto::ping::v2::PingResponse {
                    response: "pong".into(),
                }))
            }
        }
    )*};
}

ping!(v2, v2beta1);
