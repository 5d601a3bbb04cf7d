//! Registry credentials, as registry clients send them:
//! - `Authorization: Bearer <Ward token>` (API tokens, or registry tokens
//!   from the token endpoint);
//! - Basic `_token:<Ward token>`;
//! - Basic `<identity uid>:<identity token>`: a pull token, exchanged exactly
//!   as `/sts/exchange` would (and remembered for a minute).
//!
//! A token must carry the registry's audience. `GET <issuer>/token` (the
//! Docker token protocol) turns any of these into a registry token limited
//! to the repositories and actions asked for and allowed.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::HeaderMap;
use sha2::Digest as _;
use ward_auth::{Claims, Grant, RegistryAccess};
use ward_core::capability::Capability;

use super::{OciFailure, challenge};
use crate::authz::Caller;
use crate::rest::raw;
use crate::rest::table::{Endpoint, Raw, Routes};
use crate::services::registry::oci::{OciError, OciResult};
use crate::services::sts::ExchangeRequest;
use crate::ward::Ward;

fn unauthorized(msg: &str) -> OciError {
    OciError::new(401, "UNAUTHORIZED", msg)
}

/// The caller of a registry request (or of the token endpoint).
pub(crate) async fn caller(ward: &Ward, headers: &HeaderMap) -> OciResult<Caller> {
    let Some(raw) = headers.get(http::header::AUTHORIZATION) else {
        return Err(unauthorized("authentication required"));
    };
    let raw = raw
        .to_str()
        .map_err(|_| unauthorized("the Authorization header is not text"))?;
    let claims = if let Some(token) = ward_auth::bearer(raw) {
        verify(ward, token).await?
    } else if let Some(b64) = raw.strip_prefix("Basic ").or_else(|| raw.strip_prefix("basic ")) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| unauthorized("the Basic credentials do not decode"))?;
        let (user, pass) = decoded
            .split_once(':')
            .ok_or_else(|| unauthorized("the Basic credentials have no password"))?;
        if user == "_token" {
            verify(ward, pass).await?
        } else {
            pull_token(ward, user, pass).await?
        }
    } else {
        return Err(unauthorized("use a Bearer token or Basic credentials"));
    };
    ward.caller_of(claims).await.map_err(OciError::from)
}

/// A Ward token good for the registry.
async fn verify(ward: &Ward, token: &str) -> OciResult<Arc<Claims>> {
    let claims = ward
        .tokens
        .verify(token)
        .await
        .map_err(|e| unauthorized(&e.message()))?;
    if !claims.aud.contains(ward.tokens.registry_audience()) {
        return Err(unauthorized("the token's audience is not this registry"));
    }
    Ok(claims)
}

/// Exchanges pull-token credentials (identity uid, identity token).
async fn pull_token(ward: &Ward, user: &str, pass: &str) -> OciResult<Arc<Claims>> {
    let key: [u8; 32] = {
        let mut h = sha2::Sha256::new();
        h.update(user.as_bytes());
        h.update([0]);
        h.update(pass.as_bytes());
        h.finalize().into()
    };
    let now = ward.clock.now_secs();
    if let Some(c) = ward.registry_logins.get(&key)
        && c.exp > now
    {
        return Ok(c);
    }
    let epoch = ward.access_epoch();
    let req = ExchangeRequest {
        audiences: vec![ward.tokens.registry_audience().to_owned()],
        identity: Some(user.to_owned()),
        ..ExchangeRequest::default()
    };
    let exchanged = ward
        .exchange(Some(&format!("Bearer {pass}")), req)
        .await
        .map_err(|e| unauthorized(&format!("the credentials were refused: {}", e.message())))?;
    let claims = verify(ward, &exchanged.token).await?;
    if ward.still_epoch(epoch) {
        ward.registry_logins.insert(key, claims.clone());
    }
    Ok(claims)
}

/// Most scopes one token request may name.
const MAX_TOKEN_SCOPES: usize = 16;

/// `GET|POST <issuer path>/token`.
pub fn token_routes(issuer_path: &str) -> Routes {
    Routes::new().route(&format!("{issuer_path}/token"), axum::routing::get(token).post(token))
}

pub fn token_endpoints(issuer_path: &str) -> Vec<Endpoint> {
    [http::Method::GET, http::Method::POST]
        .into_iter()
        .map(|method| {
            Endpoint::Raw(Raw {
                authenticated: true,
                query: &[(
                    "scope",
                    "`repository:<name>:<actions>` (repeatable; one value may hold several, space-separated; \
                     at most 16). Actions not allowed are left out of the token.",
                    false,
                )],
                errors: &[400, 401, 500, 503],
                ..raw(
                    method,
                    format!("{issuer_path}/token"),
                    "Docker registry token: the credentials (Bearer Ward token, Basic `_token:<token>`, or Basic \
                     `<identity uid>:<token>` exchanged as /sts/exchange does) become a registry token limited \
                     to the scopes asked for and allowed: `{token, access_token, expires_in, issued_at}`. \
                     POST reads the query string too; a request body is not read.",
                )
            })
        })
        .collect()
}

/// The capabilities a registry token may carry for `actions`.
fn caps_for(actions: &[String]) -> Vec<Capability> {
    use Capability::*;
    let mut caps = vec![
        RepoList,
        RepoBlobsGet,
        ManifestList,
        ManifestMetadataList,
        TagList,
        ReferrersList,
        IamGroupsList,
    ];
    if actions.iter().any(|a| a == "push") {
        caps.extend([RepoCreate, ManifestCreate, ManifestUpdate, TagCreate, TagUpdate]);
    }
    if actions.iter().any(|a| a == "delete") {
        caps.extend([ManifestDelete, TagDelete]);
    }
    caps
}

async fn token(State(ward): State<Arc<Ward>>, req: Request) -> Response {
    let q = super::query(&req);
    let fail = |e: OciError| {
        OciFailure {
            error: e,
            head: false,
            challenge: Some(challenge(&ward, None)),
        }
        .into_response()
    };
    let caller = match caller(&ward, req.headers()).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // `scope` may repeat, and one value may hold several space-separated scopes.
    let scopes: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == "scope")
        .flat_map(|(_, v)| v.split(' '))
        .filter(|s| !s.is_empty())
        .collect();
    if scopes.len() > MAX_TOKEN_SCOPES {
        return fail(OciError::new(
            400,
            "UNSUPPORTED",
            format!("a registry token names at most {MAX_TOKEN_SCOPES} scopes"),
        ));
    }
    let mut access = Vec::new();
    for scope in scopes {
        // The catalog lists only what the caller may see: any caller may
        // have it.
        if scope == "registry:catalog:*" {
            if !access.iter().any(|a: &RegistryAccess| a.kind == "registry") {
                access.push(RegistryAccess {
                    kind: "registry".into(),
                    name: "catalog".into(),
                    actions: vec!["*".into()],
                });
            }
            continue;
        }
        let mut parts = scope.splitn(3, ':');
        let (Some("repository"), Some(name), Some(actions)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Ok(t) = ward.oci_target(&caller, name).await else {
            continue;
        };
        let granted = ward.oci_grantable(&caller, &t, actions);
        if !granted.is_empty() {
            access.push(RegistryAccess {
                kind: "repository".into(),
                name: t.full,
                actions: granted,
            });
        }
    }
    let all_actions: Vec<String> = access.iter().flat_map(|a| a.actions.clone()).collect();
    let mut cap: Vec<String> = caps_for(&all_actions)
        .into_iter()
        .map(|c| c.dotted_name().to_owned())
        .collect();
    if let Some(own) = &caller.claims.cap {
        cap.retain(|c| own.contains(c));
    }
    let grant = Grant {
        subject: caller.subject.clone(),
        audiences: vec![ward.tokens.registry_audience().to_owned()],
        expires_at: Some(caller.claims.exp),
        act: caller.claims.act.clone(),
        scopes: caller.claims.scopes.clone(),
        cap: Some(cap),
        access: Some(access),
        // A person's session roles (mapped from their identity provider's
        // groups) are part of what they hold: the registry token keeps them,
        // or a push right that comes from a mapping would be lost here.
        roles: caller.claims.roles.clone(),
    };
    let now = ward.clock.now_secs();
    match ward.tokens.mint_grant(&grant) {
        // Never hand out a token the registry would itself refuse.
        Ok((token, _)) if token.len() > ward_auth::MAX_TOKEN_BYTES => fail(OciError::new(
            400,
            "UNSUPPORTED",
            "the requested scopes make a token too large; ask for fewer repositories",
        )),
        Ok((token, exp)) => Json(serde_json::json!({
            "token": token,
            "access_token": token,
            "expires_in": (exp - now).max(0),
            "issued_at": ward_proto::Timestamp::from_millis(now.saturating_mul(1000)),
        }))
        .into_response(),
        Err(e) => fail(e.into()),
    }
}
