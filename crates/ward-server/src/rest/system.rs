//! Unauthenticated endpoints: health, readiness, OIDC discovery and JWKS.

use std::sync::Arc;

use super::Json;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use super::table::{Endpoint, Raw, Routes};
use super::{Reply, raw, rpc};
use crate::ward::Ward;

/// `issuer_path` is the path part of the issuer URL ("" for a bare host), under
/// which discovery documents are served.
pub fn routes(issuer_path: &str) -> Routes {
    Routes::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(
            &format!("{issuer_path}/.well-known/openid-configuration"),
            get(discovery),
        )
        .route(&format!("{issuer_path}/.well-known/jwks.json"), get(jwks))
        .route("/ping/v2/ping", get(ping))
        .route("/ping/v2beta1/ping", get(ping))
}

pub fn endpoints(issuer_path: &str) -> Vec<Endpoint> {
    use http::Method;
    vec![
        Endpoint::Raw(raw(
            Method::GET,
            "/healthz".into(),
            "Liveness: `{\"status\": \"ok\"}` while the process serves requests.",
        )),
        Endpoint::Raw(Raw {
            errors: &[503],
            ..raw(
                Method::GET,
                "/readyz".into(),
                "Readiness: `{\"status\": \"ready\"}` once the database answers; an error status otherwise.",
            )
        }),
        Endpoint::Raw(raw(
            Method::GET,
            format!("{issuer_path}/.well-known/openid-configuration"),
            "OpenID Connect discovery document of the token issuer (issuer, jwks_uri, EdDSA signing).",
        )),
        Endpoint::Raw(raw(
            Method::GET,
            format!("{issuer_path}/.well-known/jwks.json"),
            "The issuer's public signing keys (JWK set) for verifying Ward tokens.",
        )),
        rpc(
            Method::GET,
            "/ping/v2/ping",
            "",
            "chainguard.platform.ping.v2.PingService.Ping",
            false,
        ),
        rpc(
            Method::GET,
            "/ping/v2beta1/ping",
            "",
            "chainguard.platform.ping.v2beta1.PingService.Ping",
            false,
        ),
    ]
}

/// `PingService.Ping`: no authentication.
async fn ping() -> Json<Value> {
    Json(json!({"response": "pong"}))
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(w): State<Arc<Ward>>) -> Reply<Value> {
    w.store.ping().await?;
    Ok(Json(json!({"status": "ready"})))
}

async fn discovery(State(w): State<Arc<Ward>>) -> Json<Value> {
    let iss = w.tokens.issuer();
    Json(json!({
        "issuer": iss,
        "jwks_uri": format!("{iss}/.well-known/jwks.json"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["EdDSA"],
        "claims_supported": ["iss", "sub", "aud", "iat", "exp"],
    }))
}

async fn jwks(State(w): State<Arc<Ward>>) -> Json<Value> {
    Json(w.tokens.jwks())
}
