//! Browser login over HTTP: `/oauth` (start), `/oauth/callback` (the identity
//! provider's answer) and `/oauth/token` (the CLI redeems its handoff code).
//! The first two are seen by a person in a browser: errors are small HTML
//! pages. The token endpoint answers OAuth-style JSON.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use ward_core::Error;

use super::{MAX_BODY_BYTES, Params};
use crate::services::people::login::LoginStart;
use crate::ward::Ward;

pub fn routes(issuer_path: &str) -> axum::Router<Arc<Ward>> {
    axum::Router::new()
        .route(&format!("{issuer_path}/oauth"), get(start))
        .route(&format!("{issuer_path}/oauth/callback"), get(callback))
        .route(&format!("{issuer_path}/oauth/token"), post(token))
}

/// Parameters other Chainguard-style clients send that Ward does not use.
const IGNORED: &[&str] = &[
    "exit",
    "audience",
    "client_id",
    "connection",
    "skip_registration",
    "create_refresh_token",
    "screen_hint",
    "scope",
    "identity",
];

fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '&' => "&amp;".into(),
            '"' => "&quot;".into(),
            '\'' => "&#39;".into(),
            c => c.to_string(),
        })
        .collect()
}

/// A login error as a page for the person in the browser.
fn error_page(e: &Error) -> Response {
    let status = http::StatusCode::from_u16(e.code().http_status()).unwrap_or(http::StatusCode::BAD_REQUEST);
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Login failed</title></head>\
         <body><h1>Login failed</h1><p>{}</p><p>Return to your terminal and run <code>ward auth login</code> again.</p></body></html>",
        escape(&e.message())
    );
    let mut resp = (status, Html(page)).into_response();
    resp.headers_mut()
        .insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    resp
}

/// 302 Found, as OAuth redirects are.
fn redirect(to: &str) -> Response {
    match http::HeaderValue::from_str(to) {
        Ok(location) => (
            http::StatusCode::FOUND,
            [
                (http::header::LOCATION, location),
                (http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store")),
            ],
        )
            .into_response(),
        Err(_) => error_page(&Error::internal("a redirect target is not a valid header")),
    }
}

async fn start(State(w): State<Arc<Ward>>, mut q: Params) -> Response {
    let req = LoginStart {
        idp_id: q.string("idp_id"),
        redirect: q.string("redirect"),
        state: q.string("state"),
        code_challenge: q.string("code_challenge"),
        code_challenge_method: q.string("code_challenge_method"),
    };
    for name in IGNORED {
        q.string(name);
    }
    if let Err(e) = q.finish() {
        return error_page(&e);
    }
    match w.login_start(req).await {
        Ok(to) => redirect(&to),
        Err(e) => error_page(&e),
    }
}

async fn callback(State(w): State<Arc<Ward>>, mut q: Params) -> Response {
    let code = q.string("code");
    let state = q.string("state");
    let error = q.string("error");
    for name in [
        "error_description",
        "error_uri",
        "session_state",
        "iss",
        "scope",
        "authuser",
        "prompt",
        "hd",
    ] {
        q.string(name);
    }
    if let Err(e) = q.finish() {
        return error_page(&e);
    }
    let error = (!error.is_empty()).then_some(error.as_str());
    match w.login_callback(&code, &state, error).await {
        Ok(to) => redirect(&to),
        Err(e) => {
            tracing::info!(error = %e.message(), "login refused");
            error_page(&e)
        }
    }
}

fn oauth_error(status: http::StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        axum::Json(json!({ "error": error, "error_description": description })),
    )
        .into_response()
}

async fn token(State(w): State<Arc<Ward>>, req: Request) -> Response {
    let body = match axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return oauth_error(
                http::StatusCode::BAD_REQUEST,
                "invalid_request",
                "the body is too large",
            );
        }
    };
    let mut code = String::new();
    let mut verifier = String::new();
    let mut grant_type = String::new();
    for (k, v) in form_urlencoded::parse(&body) {
        match &*k {
            "code" => code = v.into_owned(),
            "code_verifier" => verifier = v.into_owned(),
            "grant_type" => grant_type = v.into_owned(),
            _ => {}
        }
    }
    if grant_type != "authorization_code" {
        return oauth_error(
            http::StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "grant_type must be authorization_code",
        );
    }
    match w.login_token(&code, &verifier).await {
        Ok(t) => {
            let expiry = serde_json::to_value(ward_proto::Timestamp {
                seconds: t.expiry_secs,
                nanos: 0,
            })
            .unwrap_or_default();
            let mut resp = axum::Json(json!({
                "token": t.token,
                "expiry": expiry,
                "identity": t.identity,
                "token_type": "Bearer",
            }))
            .into_response();
            resp.headers_mut()
                .insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
            resp
        }
        Err(Error::InvalidArgument(v)) => oauth_error(
            http::StatusCode::BAD_REQUEST,
            "invalid_grant",
            &v.first().map(|f| f.description.clone()).unwrap_or_default(),
        ),
        Err(e) => {
            let status =
                http::StatusCode::from_u16(e.code().http_status()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
            oauth_error(status, "server_error", &e.message())
        }
    }
}
