//! gRPC transport: tonic services over the same service layer as REST, served on
//! the same port. Status details travel in `grpc-status-details-bin`.

use std::sync::Arc;

use tonic::server::NamedService;
use ward_core::Result;

use crate::authz::Caller;
use crate::rest::MAX_BODY_BYTES;
use crate::status::{IAM_DOMAIN, grpc_status};
use crate::ward::Ward;

mod account_associations;
mod advisories;
mod events;
mod iam;
mod registry;
mod sts;
mod v1_iam;
mod v1_people;
mod v1_registry;

/// Authenticates a gRPC request from its `authorization` metadata.
async fn caller<T>(ward: &Ward, req: &tonic::Request<T>) -> std::result::Result<Caller, tonic::Status> {
    let header = match req.metadata().get("authorization") {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| {
            grpc_status(
                ward_core::Error::Unauthenticated("the authorization metadata is not text".into()),
                IAM_DOMAIN,
            )
        })?),
    };
    ward.authenticate(header).await.map_err(|e| grpc_status(e, IAM_DOMAIN))
}

/// AIP-134 over gRPC: an explicit non-empty mask, else the populated fields.
fn mask(m: Option<pbjson_types::FieldMask>) -> crate::services::UpdateMask {
    crate::services::UpdateMask::from_field_mask(m)
}

/// Maps a service result to a gRPC response.
fn reply<T>(r: Result<T>) -> std::result::Result<tonic::Response<T>, tonic::Status> {
    r.map(tonic::Response::new).map_err(|e| grpc_status(e, IAM_DOMAIN))
}

/// Whether a request is gRPC (its content type), for the layers that answer
/// or label gRPC and REST differently.
pub(crate) fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// Adds `svc` to `router` at its gRPC path prefix.
fn route<S>(router: axum::Router, svc: S) -> axum::Router
where
    S: NamedService
        + tower::Service<
            http::Request<axum::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let svc = tower::ServiceBuilder::new()
        .map_response(malformed_is_invalid::<tonic::body::Body>)
        .service(svc);
    // tonic answers a method its service lacks with UNIMPLEMENTED and no
    // message; name the method, as for a service Ward lacks.
    let named = tower::service_fn(move |req: http::Request<axum::body::Body>| {
        let path: String = req.uri().path().chars().take(200).collect();
        let mut svc = svc.clone();
        async move {
            let mut resp = tower::Service::call(&mut svc, req).await?;
            let h = resp.headers_mut();
            if h.get("grpc-status").is_some_and(|v| v == "12") && !h.contains_key("grpc-message") {
                let msg = format!("this server does not implement {path}");
                let encoded: String = percent_encoding::utf8_percent_encode(&msg, GRPC_MESSAGE).to_string();
                if let Ok(v) = http::HeaderValue::from_str(&encoded) {
                    h.insert("grpc-message", v);
                }
            }
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    router.route_service(&format!("/{}/{{*method}}", S::NAME), named)
}

/// What gRPC percent-encodes in `grpc-message`: everything outside
/// printable ASCII, and `%` itself.
const GRPC_MESSAGE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');

/// Every gRPC service (both IAM versions), plus server reflection (v1 and v1alpha).
pub fn add_services(router: axum::Router, ward: Arc<Ward>) -> axum::Router {
    use ward_proto::iam::{v2, v2beta1};
    use ward_proto::registry::{v2 as r2, v2beta1 as r2beta1};
    let iam = iam::Iam(ward.clone());
    let registry = registry::Registry(ward.clone());
    let v1_registry = v1_registry::V1Registry(ward.clone());
    let v1_people = v1_people::V1People(ward.clone());
    let v1_iam = v1_iam::V1Iam(ward.clone());
    let sts = sts::Sts(ward.clone());
    let events = events::Events(ward.clone());
    let advisories = advisories::Advisories(ward);
    macro_rules! add {
        ($router:expr, $state:expr, $($server:path),*) => {{
            let mut r = $router;
            $(r = route(r, <$server>::new($state.clone())
                .max_decoding_message_size(MAX_BODY_BYTES)
                .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
                .send_compressed(tonic::codec::CompressionEncoding::Gzip));)*
            r
        }};
    }
    let router = add!(
        router,
        iam,
        v2::groups_service_server::GroupsServiceServer<iam::Iam>,
        v2::identities_service_server::IdentitiesServiceServer<iam::Iam>,
        v2::roles_service_server::RolesServiceServer<iam::Iam>,
        v2::role_bindings_service_server::RoleBindingsServiceServer<iam::Iam>,
        v2::identity_providers_service_server::IdentityProvidersServiceServer<iam::Iam>,
        v2::external_group_role_mappings_service_server::ExternalGroupRoleMappingsServiceServer<iam::Iam>,
        v2::group_invites_service_server::GroupInvitesServiceServer<iam::Iam>,
        v2::terms_service_server::TermsServiceServer<iam::Iam>,
        v2::account_associations_service_server::AccountAssociationsServiceServer<iam::Iam>,
        v2beta1::account_associations_service_server::AccountAssociationsServiceServer<iam::Iam>,
        v2beta1::terms_service_server::TermsServiceServer<iam::Iam>,
        v2beta1::identity_providers_service_server::IdentityProvidersServiceServer<iam::Iam>,
        v2beta1::external_group_role_mappings_service_server::ExternalGroupRoleMappingsServiceServer<iam::Iam>,
        v2beta1::group_invites_service_server::GroupInvitesServiceServer<iam::Iam>,
        ward_proto::auth::auth_server::AuthServer<iam::Iam>,
        v2beta1::groups_service_server::GroupsServiceServer<iam::Iam>,
        v2beta1::identities_service_server::IdentitiesServiceServer<iam::Iam>,
        v2beta1::roles_service_server::RolesServiceServer<iam::Iam>,
        v2beta1::role_bindings_service_server::RoleBindingsServiceServer<iam::Iam>
    );
    let router = add!(
        router,
        iam::Ping,
        ward_proto::ping::v2::ping_service_server::PingServiceServer<iam::Ping>,
        ward_proto::ping::v2beta1::ping_service_server::PingServiceServer<iam::Ping>
    );
    let router = add!(
        router,
        sts,
        ward_proto::oidc::security_token_service_server::SecurityTokenServiceServer<sts::Sts>
    );
    let router = add!(
        router,
        registry,
        r2::repos_service_server::ReposServiceServer<registry::Registry>,
        r2::tags_service_server::TagsServiceServer<registry::Registry>,
        r2::images_service_server::ImagesServiceServer<registry::Registry>,
        r2beta1::repos_service_server::ReposServiceServer<registry::Registry>,
        r2beta1::tags_service_server::TagsServiceServer<registry::Registry>,
        r2beta1::images_service_server::ImagesServiceServer<registry::Registry>
    );
    let router = add!(
        router,
        advisories,
        ward_proto::vulnerabilities::v2::advisories_service_server::AdvisoriesServiceServer<advisories::Advisories>,
        ward_proto::vulnerabilities::v2beta1::advisories_service_server::AdvisoriesServiceServer<
            advisories::Advisories,
        >,
        ward_proto::vulnerabilities::v1::advisories_server::AdvisoriesServer<advisories::Advisories>,
        ward_proto::advisory::v2::security_advisory_service_server::SecurityAdvisoryServiceServer<
            advisories::Advisories,
        >,
        ward_proto::advisory::v2beta1::security_advisory_service_server::SecurityAdvisoryServiceServer<
            advisories::Advisories,
        >
    );
    let router = add!(
        router,
        v1_registry,
        ward_proto::registry::registry_server::RegistryServer<v1_registry::V1Registry>,
        ward_proto::registry::vulnerabilities_server::VulnerabilitiesServer<v1_registry::V1Registry>,
        ward_proto::advisory::security_advisory_server::SecurityAdvisoryServer<v1_registry::V1Registry>,
        ward_proto::ping::ping_service_server::PingServiceServer<v1_registry::V1Registry>
    );
    let router = add!(
        router,
        v1_iam,
        ward_proto::iam::groups_server::GroupsServer<v1_iam::V1Iam>,
        ward_proto::iam::identities_server::IdentitiesServer<v1_iam::V1Iam>,
        ward_proto::iam::roles_server::RolesServer<v1_iam::V1Iam>,
        ward_proto::iam::role_bindings_server::RoleBindingsServer<v1_iam::V1Iam>,
        ward_proto::iam::terms_server::TermsServer<v1_iam::V1Iam>
    );
    let router = add!(
        router,
        v1_people,
        ward_proto::iam::identity_providers_server::IdentityProvidersServer<v1_people::V1People>,
        ward_proto::iam::group_account_associations_server::GroupAccountAssociationsServer<v1_people::V1People>,
        ward_proto::iam::group_invites_server::GroupInvitesServer<v1_people::V1People>,
        ward_proto::iam::external_group_role_mappings_server::ExternalGroupRoleMappingsServer<v1_people::V1People>
    );
    let router = add!(
        router,
        events,
        ward_proto::events::subscriptions_server::SubscriptionsServer<events::Events>,
        ward_proto::events::event_log_server::EventLogServer<events::Events>,
        ward_proto::events::v2::subscriptions_service_server::SubscriptionsServiceServer<events::Events>,
        ward_proto::events::v2beta1::subscriptions_service_server::SubscriptionsServiceServer<events::Events>
    );
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(ward_proto::FILE_DESCRIPTOR_SET)
    };
    let router = route(router, reflection().build_v1().expect("descriptor set is valid"));
    route(router, reflection().build_v1alpha().expect("descriptor set is valid"))
}

/// tonic reports a request it cannot decode as INTERNAL; it is the client's
/// malformed input, so it becomes INVALID_ARGUMENT (a trailers-only response
/// carries the status in its headers).
fn malformed_is_invalid<B>(mut resp: http::Response<B>) -> http::Response<B> {
    let h = resp.headers();
    let decode_failure = h.get("grpc-status").is_some_and(|v| v == "13")
        && h.get("grpc-message").and_then(|v| v.to_str().ok()).is_some_and(|m| {
            let m = m.to_ascii_lowercase();
            m.contains("decod")
                || m.contains("compress")
                || m.contains("missing%20request%20message")
                || m.contains("missing request message")
        });
    if decode_failure {
        resp.headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("3"));
    }
    resp
}
