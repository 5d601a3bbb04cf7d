//! The token exchange and who-am-I over REST.
//!
//! `/sts/exchange` takes its parameters from the query string, and for POST
//! also from an `application/x-www-form-urlencoded` body (what SDK clients
//! send). Repeated parameters may also be comma-separated.

use std::sync::Arc;

use super::Json;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::routing::get;

use super::table::{Endpoint, Raw, Routes};
use super::{Auth, MAX_BODY_BYTES, Params, Reply, raw};
use crate::ward::Ward;

pub fn routes(issuer_path: &str) -> Routes {
    Routes::new()
        .route(&format!("{issuer_path}/sts/exchange"), get(exchange).post(exchange))
        .route("/auth/v1/ok", get(who_am_i))
}

/// `/sts/exchange`'s parameters (repeatable ones may also be comma-separated).
const EXCHANGE_QUERY: &[(&str, &str, bool)] = &[
    (
        "aud",
        "Audience of the new token (repeatable); the API URL when absent.",
        false,
    ),
    ("scope", "Group UIDP to restrict the new token to (repeatable).", false),
    ("scopes", "Same as scope (repeatable).", false),
    (
        "identity_provider",
        "Not supported (people log in through the browser flow); a non-empty value is refused.",
        false,
    ),
    (
        "identity",
        "UIDP of the identity the token is for; when absent, the registered root-level identity of the \
         bearer token's issuer and subject.",
        false,
    ),
    (
        "cap",
        "Capability (enum or dotted name) to restrict the new token to (repeatable).",
        false,
    ),
];

pub fn endpoints(issuer_path: &str) -> Vec<Endpoint> {
    use http::Method;
    let exchange = |method: Method, request: Option<&'static str>, summary: &'static str| {
        Endpoint::Raw(Raw {
            authenticated: true,
            query: EXCHANGE_QUERY,
            request,
            errors: &[400, 401, 403, 404, 408, 413, 429, 500, 503],
            ..raw(method, format!("{issuer_path}/sts/exchange"), summary)
        })
    };
    vec![
        exchange(
            Method::GET,
            None,
            "Token exchange: the bearer token (an OIDC token of a trusted issuer, or a Ward token) becomes a \
             Ward token, `{\"token\", \"refreshToken\": \"\", \"expiry\"}` (the SDK's `RawToken`; Ward issues no refresh tokens).",
        ),
        exchange(
            Method::POST,
            Some("application/x-www-form-urlencoded"),
            "Token exchange: as GET; the parameters may also come in a form-encoded body.",
        ),
        Endpoint::Raw(Raw {
            authenticated: true,
            errors: &[400, 401],
            ..raw(
                Method::GET,
                "/auth/v1/ok".into(),
                "Who the caller is: issuer, subject, audience, expiry, issuedAt, serverAdmin, and its \
                 capabilities per group.",
            )
        }),
    ]
}

async fn exchange(
    State(w): State<Arc<Ward>>,
    headers: HeaderMap,
    mut q: Params,
    req: Request,
) -> Reply<ward_proto::oidc::RawToken> {
    // No token, nothing to exchange: say so before looking at the parameters.
    if !headers.contains_key(http::header::AUTHORIZATION) {
        return Err(ward_core::Error::Unauthenticated(
            "an identity token is required (Authorization: Bearer <token>)".into(),
        )
        .into());
    }
    let is_form = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/x-www-form-urlencoded"));
    if is_form {
        let body = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(super::body_error)?;
        q.extend_form(&body);
    }
    let mut scopes = q.list("scopes")?;
    scopes.extend(q.list("scope")?);
    let mut identity_provider = q.string("identity_provider");
    if identity_provider.is_empty() {
        identity_provider = q.string("identityProvider");
    }
    let req = ward_proto::oidc::ExchangeRequest {
        aud: q.list("aud")?,
        identity: q.string("identity"),
        scopes,
        cap: q.list("cap")?,
        identity_provider,
        ..Default::default()
    };
    q.finish()?;
    let authorization = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    Ok(Json(w.exchange_token(authorization, req).await?))
}

/// Who the caller is, until when, and what it may do where.
async fn who_am_i(State(w): State<Arc<Ward>>, Auth(c): Auth, q: Params) -> Reply<ward_proto::auth::WhoAmI> {
    q.finish()?;
    Ok(Json(w.validate(&c, ()).await?))
}
