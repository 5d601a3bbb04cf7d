//! What Ward does not serve answers 501 UNIMPLEMENTED (code 12), never a
//! misleading 400 from a route it resembles or a 404: the public API's RPCs
//! Ward has no route for (by their contract bindings), and custom verbs
//! (`…:verb`) it does not implement.

use std::sync::LazyLock;

use axum::extract::Request;
use axum::response::Response;

use super::transcode::Template;

/// HTTP bindings of public-API RPCs Ward does not serve: `(method, path
/// template, RPC)`. A request for one answers 501, code 12 UNIMPLEMENTED,
/// naming the RPC, before any route that merely resembles it (a catch-all
/// uid route would read `…/repos/{id}/deployment` as a strange uid). A test
/// holds this table to the contract: exactly its bindings of RPCs Ward has
/// no route for.
pub const UNSERVED: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/apko/v1/build/{repo_uidp=**}",
        "chainguard.platform.registry.Apko.BuildImage",
    ),
    (
        "POST",
        "/apko/v1/resolve/{repo_uidp=**}",
        "chainguard.platform.registry.Apko.ResolveConfig",
    ),
    (
        "DELETE",
        "/auth/v1/delete/{id=*}",
        "chainguard.platform.auth.Auth.Delete",
    ),
    (
        "POST",
        "/iam/v1/identities",
        "chainguard.platform.events.Identities.Create",
    ),
    (
        "PATCH",
        "/iam/v1/identities/metadata",
        "chainguard.platform.events.Identities.UpdateMetadata",
    ),
    (
        "POST",
        "/iam/v1/identityProviders/{identity_provider_id=**}:generateScimToken",
        "chainguard.platform.iam.IdentityProviders.GenerateScimToken",
    ),
    (
        "POST",
        "/iam/v1/identityProviders/{identity_provider_id=**}:regenerateScimToken",
        "chainguard.platform.iam.IdentityProviders.RegenerateScimToken",
    ),
    (
        "POST",
        "/iam/v1/identityProviders/{identity_provider_id=**}:revokeScimToken",
        "chainguard.platform.iam.IdentityProviders.RevokeScimToken",
    ),
    (
        "POST",
        "/iam/v1/identityProviders/{identity_provider_id=**}:setScimEnabled",
        "chainguard.platform.iam.IdentityProviders.SetScimEnabled",
    ),
    (
        "POST",
        "/iam/v2/identityProviders/{identity_provider_uid=**}:generateScimToken",
        "chainguard.platform.iam.v2.IdentityProvidersService.GenerateScimToken",
    ),
    (
        "POST",
        "/iam/v2/identityProviders/{identity_provider_uid=**}:regenerateScimToken",
        "chainguard.platform.iam.v2.IdentityProvidersService.RegenerateScimToken",
    ),
    (
        "POST",
        "/iam/v2/identityProviders/{identity_provider_uid=**}:revokeScimToken",
        "chainguard.platform.iam.v2.IdentityProvidersService.RevokeScimToken",
    ),
    (
        "POST",
        "/iam/v2/identityProviders/{identity_provider_uid=**}:setScimEnabled",
        "chainguard.platform.iam.v2.IdentityProvidersService.SetScimEnabled",
    ),
    (
        "POST",
        "/iam/v2beta1/identityProviders/{identity_provider_uid=**}:generateScimToken",
        "chainguard.platform.iam.v2beta1.IdentityProvidersService.GenerateScimToken",
    ),
    (
        "POST",
        "/iam/v2beta1/identityProviders/{identity_provider_uid=**}:regenerateScimToken",
        "chainguard.platform.iam.v2beta1.IdentityProvidersService.RegenerateScimToken",
    ),
    (
        "POST",
        "/iam/v2beta1/identityProviders/{identity_provider_uid=**}:revokeScimToken",
        "chainguard.platform.iam.v2beta1.IdentityProvidersService.RevokeScimToken",
    ),
    (
        "POST",
        "/iam/v2beta1/identityProviders/{identity_provider_uid=**}:setScimEnabled",
        "chainguard.platform.iam.v2beta1.IdentityProvidersService.SetScimEnabled",
    ),
    (
        "GET",
        "/registry/v1/buildreports",
        "chainguard.platform.registry.Registry.ListBuildReports",
    ),
    (
        "GET",
        "/registry/v1/buildstatus",
        "chainguard.platform.registry.Registry.GetBuildStatus",
    ),
    (
        "GET",
        "/registry/v1/charts:find",
        "chainguard.platform.registry.Charts.FindChart",
    ),
    (
        "GET",
        "/registry/v1/digestcount/{parent_id=**}",
        "chainguard.platform.registry.Registry.GetManifestDigestCount",
    ),
    (
        "DELETE",
        "/registry/v1/entitlements/{id=**}",
        "chainguard.platform.registry.Entitlements.DeleteEntitlement",
    ),
    (
        "GET",
        "/registry/v1/entitlements/{parent=**}",
        "chainguard.platform.registry.Entitlements.ListEntitlements",
    ),
    (
        "POST",
        "/registry/v1/entitlements/{parent=**}",
        "chainguard.platform.registry.Entitlements.CreateEntitlement",
    ),
    (
        "GET",
        "/registry/v1/entitlements/{parent=**}/catalog-images",
        "chainguard.platform.registry.Entitlements.ListEntitlementCatalogImages",
    ),
    (
        "GET",
        "/registry/v1/entitlements/{parent=**}/images",
        "chainguard.platform.registry.Entitlements.ListEntitlementImages",
    ),
    (
        "POST",
        "/registry/v1/entitlements/{parent=**}:addImages",
        "chainguard.platform.registry.Entitlements.AddEntitlementImages",
    ),
    (
        "GET",
        "/registry/v1/entitlements/{parent=**}:effective",
        "chainguard.platform.registry.Entitlements.GetEffectiveEntitlements",
    ),
    (
        "GET",
        "/registry/v1/entitlements/{parent=**}:features",
        "chainguard.platform.registry.Entitlements.GetFeatures",
    ),
    (
        "POST",
        "/registry/v1/entitlements/{parent=**}:removeImages",
        "chainguard.platform.registry.Entitlements.RemoveEntitlementImages",
    ),
    (
        "GET",
        "/registry/v1/entitlements/{parent=**}:summary",
        "chainguard.platform.registry.Entitlements.Summary",
    ),
    (
        "POST",
        "/registry/v1/entitlements/{parent=**}:swapImages",
        "chainguard.platform.registry.Entitlements.SwapEntitlementImages",
    ),
    (
        "POST",
        "/registry/v1/repos/{parent_id=**}/deployment",
        "chainguard.platform.registry.Registry.CreateDeployment",
    ),
    (
        "POST",
        "/registry/v1/repos/{parent_id=**}:addChart",
        "chainguard.platform.registry.Charts.AddChart",
    ),
    (
        "GET",
        "/registry/v1/repos/{repo_id=**}/chart-image-bindings",
        "chainguard.platform.registry.Registry.ListChartsByImageRepo",
    ),
    (
        "GET",
        "/registry/v1/repos/{repo_id=**}/deployment",
        "chainguard.platform.registry.Registry.GetDeployment",
    ),
    (
        "PUT",
        "/registry/v1/repos/{repo_id=**}/deployment",
        "chainguard.platform.registry.Registry.UpdateDeployment",
    ),
    (
        "GET",
        "/registry/v1/repos/{repo_id=**}/digests/{digest=*}/chart",
        "chainguard.platform.registry.Registry.GetChart",
    ),
    (
        "GET",
        "/registry/v1/repos/{repo_id=**}/digests/{digest=*}/helm",
        "chainguard.platform.registry.Registry.GetHelm",
    ),
    (
        "GET",
        "/registry/v1/repos/{repo_id=**}/manifestmetdata",
        "chainguard.platform.registry.Registry.ListManifestMetadata",
    ),
    (
        "POST",
        "/registry/v1/repos/{repo_id=**}:checkPolicies",
        "chainguard.platform.registry.Policies.CheckPolicies",
    ),
    (
        "GET",
        "/registry/v1/repos/{repo_id=**}:syncstatus",
        "chainguard.platform.registry.Registry.GetSyncStatus",
    ),
    (
        "GET",
        "/registry/v1/repos/{repo_id=**}:updatestatus",
        "chainguard.platform.registry.Registry.GetUpdateStatus",
    ),
    (
        "GET",
        "/registry/v1/settings/{registry_id=**}",
        "chainguard.platform.registry.Registry.GetRegistrySettings",
    ),
    (
        "PUT",
        "/registry/v1/settings/{registry_id=**}",
        "chainguard.platform.registry.Registry.UpdateRegistrySettings",
    ),
    (
        "GET",
        "/registry/v1/syncstatuses",
        "chainguard.platform.registry.Registry.ListSyncStatuses",
    ),
    (
        "GET",
        "/registry/v1/versions/{package=**}",
        "chainguard.platform.registry.Registry.GetPackageVersionMetadata",
    ),
    (
        "GET",
        "/registry/v2beta1/overlayBindings",
        "chainguard.platform.registry.v2beta1.OverlayBindingsService.ListOverlayBindings",
    ),
    (
        "POST",
        "/registry/v2beta1/overlayBindings/{parent=**}",
        "chainguard.platform.registry.v2beta1.OverlayBindingsService.CreateOverlayBinding",
    ),
    (
        "DELETE",
        "/registry/v2beta1/overlayBindings/{uid=**}",
        "chainguard.platform.registry.v2beta1.OverlayBindingsService.DeleteOverlayBinding",
    ),
    (
        "GET",
        "/registry/v2beta1/overlayBindings/{uid=**}",
        "chainguard.platform.registry.v2beta1.OverlayBindingsService.GetOverlayBinding",
    ),
    (
        "GET",
        "/registry/v2beta1/overlays",
        "chainguard.platform.registry.v2beta1.OverlaysService.ListOverlays",
    ),
    (
        "POST",
        "/registry/v2beta1/overlays/{parent=**}",
        "chainguard.platform.registry.v2beta1.OverlaysService.CreateOverlay",
    ),
    (
        "DELETE",
        "/registry/v2beta1/overlays/{uid=**}",
        "chainguard.platform.registry.v2beta1.OverlaysService.DeleteOverlay",
    ),
    (
        "GET",
        "/registry/v2beta1/overlays/{uid=**}",
        "chainguard.platform.registry.v2beta1.OverlaysService.GetOverlay",
    ),
    (
        "POST",
        "/sts/exchange_refresh_token",
        "chainguard.platform.oidc.SecurityTokenService.ExchangeRefreshToken",
    ),
    (
        "GET",
        "/sts/headless_sessions",
        "chainguard.platform.auth.Auth.GetHeadlessSession",
    ),
];

/// Where the public API lives: only paths under these are checked.
const API_PREFIXES: &[&str] = &[
    "/iam/",
    "/registry/",
    "/vulnerabilities/",
    "/advisory/",
    "/events/",
    "/apko/",
    "/auth/",
    "/sts/",
];

/// Custom verbs that have routes of their own.
const IMPLEMENTED_VERBS: &[&str] = &[
    "lookupIdentity",
    "batchCreate",
    "batchDelete",
    "lookupGroup",
    "checkEligibility",
    "requestGroupAccess",
    "accessRequests",
    "checkAccountAssociation",
    "updateIdentityMetadata",
    "import",
    // v1 (`/iam/v1/account_associations/{group=**}:check`).
    "check",
];

static TEMPLATES: LazyLock<Vec<(http::Method, Template, &'static str)>> = LazyLock::new(|| {
    UNSERVED
        .iter()
        .map(|(m, p, rpc)| {
            let method = http::Method::from_bytes(m.as_bytes()).expect("a valid method");
            (method, Template::parse(p), *rpc)
        })
        .collect()
});

/// The middleware: answers 501 for an unserved RPC's binding or an
/// unimplemented custom verb; everything else goes on to the routes.
pub async fn unimplemented(req: Request, next: axum::middleware::Next) -> Response {
    let path = req.uri().path();
    if !API_PREFIXES.iter().any(|p| path.starts_with(p)) {
        return next.run(req).await;
    }
    // The most specific template decides, as in routing (a literal
    // outranks a variable: `…/{parent=**}/images` over `…/{parent=**}`).
    if let Some((_, _, rpc)) = TEMPLATES
        .iter()
        .filter(|(m, t, _)| *m == req.method() && t.matches(path).is_some())
        .max_by_key(|(_, t, _)| t.weight())
    {
        return super::unimplemented(
            http::StatusCode::NOT_IMPLEMENTED,
            format!("{rpc} is not implemented by this server"),
        );
    }
    let last = path.rsplit('/').next().unwrap_or("");
    if let Some((_, verb)) = last.rsplit_once(':')
        && !verb.is_empty()
        && verb.bytes().all(|b| b.is_ascii_alphabetic())
        && !IMPLEMENTED_VERBS.contains(&verb)
    {
        return super::unimplemented(
            http::StatusCode::NOT_IMPLEMENTED,
            format!("the custom method \":{verb}\" is not implemented by this server"),
        );
    }
    next.run(req).await
}
