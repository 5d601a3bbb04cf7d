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

use super::table::{Endpoint, Raw, Routes};
use super::{MAX_BODY_BYTES, Params, raw};
use crate::services::people::login::{Callback, LoginStart};

/// RFC 8628's grant type.
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
use crate::ward::Ward;

pub fn routes(issuer_path: &str) -> Routes {
    Routes::new()
        .route(&format!("{issuer_path}/oauth"), get(start))
        .route(&format!("{issuer_path}/oauth/callback"), get(callback))
        .route(&format!("{issuer_path}/oauth/token"), post(token))
        .route(&format!("{issuer_path}/oauth/device/code"), post(device_code))
        .route(
            &format!("{issuer_path}/oauth/device"),
            get(device_page).post(device_confirm),
        )
}

pub fn endpoints(issuer_path: &str) -> Vec<Endpoint> {
    use http::Method;
    const FORM: Option<&str> = Some("application/x-www-form-urlencoded");
    // What a login's errors map to (as HTML pages or as OAuth JSON).
    const ERRORS: &[u16] = &[400, 401, 404, 409, 429, 500, 503];
    let path = |p: &str| format!("{issuer_path}{p}");
    vec![
        Endpoint::Raw(Raw {
            query: &[
                (
                    "idp_id",
                    "The identity provider: its UIDP, or a verified organization's name.",
                    true,
                ),
                (
                    "redirect",
                    "Where the login's code goes: an http URL on the loopback.",
                    true,
                ),
                ("state", "Opaque CLI state, returned with the code.", true),
                (
                    "code_challenge",
                    "PKCE: base64url(SHA-256(code_verifier)), 43 characters.",
                    true,
                ),
                ("code_challenge_method", "S256 (the default).", false),
                ("exit", "Accepted and ignored.", false),
                ("audience", "Accepted and ignored.", false),
                ("client_id", "Accepted and ignored.", false),
                ("connection", "Accepted and ignored.", false),
                ("skip_registration", "Accepted and ignored.", false),
                ("create_refresh_token", "Accepted and ignored.", false),
                ("screen_hint", "Accepted and ignored.", false),
                ("scope", "Accepted and ignored.", false),
                ("identity", "Accepted and ignored.", false),
            ],
            success: (302, ""),
            errors: ERRORS,
            ..raw(
                Method::GET,
                path("/oauth"),
                "Browser login, step 1: redirects to the identity provider's authorization endpoint; \
                 errors are HTML pages.",
            )
        }),
        Endpoint::Raw(Raw {
            query: &[
                ("code", "The provider's authorization code.", false),
                ("state", "The state Ward sent to the provider.", true),
                ("error", "The provider's error, if it refused.", false),
                ("error_description", "Accepted and ignored.", false),
                ("error_uri", "Accepted and ignored.", false),
                ("session_state", "Accepted and ignored.", false),
                ("iss", "Accepted and ignored.", false),
                ("scope", "Accepted and ignored.", false),
                ("authuser", "Accepted and ignored.", false),
                ("prompt", "Accepted and ignored.", false),
                ("hd", "Accepted and ignored.", false),
            ],
            success: (302, ""),
            // 200: an HTML page when the login was a headless (device) one.
            errors: &[200, 400, 401, 404, 409, 429, 500, 503],
            ..raw(
                Method::GET,
                path("/oauth/callback"),
                "Browser login, step 2 (the identity provider's redirect): redirects to the CLI's loopback \
                 with a handoff code, or, for a headless login, answers an HTML page (200); errors are HTML pages.",
            )
        }),
        Endpoint::Raw(Raw {
            request: FORM,
            errors: ERRORS,
            ..raw(
                Method::POST,
                path("/oauth/token"),
                "Browser login, step 3: form fields `grant_type` (`authorization_code` with `code`, or \
                 `urn:ietf:params:oauth:grant-type:device_code` with `device_code`) and `code_verifier` \
                 give `{token, expiry, identity, token_type}`; errors are OAuth JSON `{error, \
                 error_description}` (`authorization_pending` while a headless login is unfinished).",
            )
        }),
        Endpoint::Raw(Raw {
            request: FORM,
            errors: &[400, 404, 429, 500, 503],
            ..raw(
                Method::POST,
                path("/oauth/device/code"),
                "Headless login start: form fields `idp_id`, `code_challenge`, `code_challenge_method` \
                 (S256) give a device code, a user code and the page to type it at; errors are OAuth JSON.",
            )
        }),
        Endpoint::Raw(Raw {
            query: &[(
                "user_code",
                "A code to confirm; the form to type one when absent.",
                false,
            )],
            success: (200, "text/html"),
            errors: &[400],
            ..raw(
                Method::GET,
                path("/oauth/device"),
                "Headless login: an HTML page to type the terminal's code, or to confirm a typed one.",
            )
        }),
        Endpoint::Raw(Raw {
            request: FORM,
            success: (302, ""),
            errors: &[400, 403],
            ..raw(
                Method::POST,
                path("/oauth/device"),
                "Headless login: the page's form (field `user_code`); redirects to the identity provider. \
                 Cross-site posts are refused (403); errors are HTML pages.",
            )
        }),
    ]
}

/// A page for the person in the browser.
fn page(status: http::StatusCode, title: &str, body_html: &str) -> Response {
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head><body><h1>{title}</h1>{body_html}</body></html>"
    );
    let mut resp = (status, Html(page)).into_response();
    let headers = resp.headers_mut();
    headers.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    // Never framed: a hidden frame cannot make a person confirm a code.
    headers.insert("x-frame-options", http::HeaderValue::from_static("DENY"));
    headers.insert(
        "content-security-policy",
        http::HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    resp
}

/// The form a person types the terminal's code into.
fn code_form(message: &str) -> String {
    format!(
        "<p>{}</p><form method=\"post\" action=\"\"><label>Code <input name=\"user_code\" id=\"user_code\" \
         autocomplete=\"off\" placeholder=\"XXXX-XXXX\"></label> <button type=\"submit\" id=\"confirm\">Continue</button></form>",
        escape(message)
    )
}

/// `GET /oauth/device[?user_code=]`: the code form, or, for a code in
/// progress, what it will log in to and a button to go on.
async fn device_page(State(w): State<Arc<Ward>>, mut q: Params) -> Response {
    let typed = q.string("user_code");
    if typed.is_empty() {
        return page(
            http::StatusCode::OK,
            "Log in a terminal",
            &code_form("Enter the code your terminal shows."),
        );
    }
    match w.device_pending(&typed).await {
        Ok((login, idp)) => page(
            http::StatusCode::OK,
            "Log in a terminal",
            &format!(
                "<p>Continue only if you started <code>ward auth login --headless</code> yourself and it shows \
                 <b>{}</b>. You will log in at <b>{}</b> ({}).</p>\
                 <form method=\"post\" action=\"\"><input type=\"hidden\" name=\"user_code\" value=\"{}\">\
                 <button type=\"submit\" id=\"confirm\">Continue</button></form>",
                escape(&login.user_code),
                escape(&idp.name),
                escape(&idp.issuer),
                escape(&login.user_code)
            ),
        ),
        Err(e) => page(
            http::StatusCode::BAD_REQUEST,
            "Log in a terminal",
            &code_form(&e.message()),
        ),
    }
}

/// Whether a form POST comes from Ward's own page: browsers say where a
/// request comes from (`Sec-Fetch-Site`, `Origin`); a cross-site one is
/// refused, so another site cannot submit a code on a person's behalf.
fn same_origin(w: &Ward, headers: &http::HeaderMap) -> bool {
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if site.is_some_and(|s| s != "same-origin" && s != "none") {
        return false;
    }
    let Some(origin) = headers.get(http::header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let issuer = w.tokens.issuer();
    let issuer_origin = url::Url::parse(issuer).map(|u| u.origin().ascii_serialization());
    issuer_origin.is_ok_and(|o| o == origin)
}

/// `POST /oauth/device` (the form): starts the login at the provider.
async fn device_confirm(State(w): State<Arc<Ward>>, headers: http::HeaderMap, req: Request) -> Response {
    if !same_origin(&w, &headers) {
        return page(
            http::StatusCode::FORBIDDEN,
            "Log in a terminal",
            "<p>This form must be sent from this server's own page.</p>",
        );
    }
    let body = axum::body::to_bytes(req.into_body(), 4096).await.unwrap_or_default();
    let typed = form_urlencoded::parse(&body)
        .find(|(k, _)| k == "user_code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    match w.device_confirm(&typed).await {
        Ok(to) => redirect(&to),
        Err(e) => page(
            http::StatusCode::BAD_REQUEST,
            "Log in a terminal",
            &code_form(&e.message()),
        ),
    }
}

/// `POST /oauth/device/code` (the CLI): a headless login's codes.
async fn device_code(State(w): State<Arc<Ward>>, req: Request) -> Response {
    let client = req
        .extensions()
        .get::<crate::serve::ClientAddr>()
        .map(|c| c.key().to_string())
        .unwrap_or_default();
    let Ok(body) = axum::body::to_bytes(req.into_body(), 4096).await else {
        return oauth_error(
            http::StatusCode::BAD_REQUEST,
            "invalid_request",
            "the body is too large",
        );
    };
    let (mut idp, mut challenge, mut method) = (String::new(), String::new(), String::new());
    for (k, v) in form_urlencoded::parse(&body) {
        match &*k {
            "idp_id" => idp = v.into_owned(),
            "code_challenge" => challenge = v.into_owned(),
            "code_challenge_method" => method = v.into_owned(),
            _ => {}
        }
    }
    if !matches!(method.as_str(), "" | "S256") {
        return oauth_error(
            http::StatusCode::BAD_REQUEST,
            "invalid_request",
            "code_challenge_method must be S256",
        );
    }
    match w.device_start(&idp, &challenge, &client).await {
        Ok(start) => {
            let mut resp = axum::Json(start).into_response();
            resp.headers_mut()
                .insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
            resp
        }
        Err(e) => {
            let status = http::StatusCode::from_u16(e.code().http_status()).unwrap_or(http::StatusCode::BAD_REQUEST);
            let kind = if status == http::StatusCode::TOO_MANY_REQUESTS {
                "temporarily_unavailable"
            } else {
                "invalid_request"
            };
            oauth_error(status, kind, &e.message())
        }
    }
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
        Ok(Callback::Redirect(to)) => redirect(&to),
        Ok(Callback::DeviceDone) => page(
            http::StatusCode::OK,
            "Logged in",
            "<p>You are logged in. Return to your terminal; you can close this window.</p>",
        ),
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
    let mut device_code = String::new();
    for (k, v) in form_urlencoded::parse(&body) {
        match &*k {
            "code" => code = v.into_owned(),
            "code_verifier" => verifier = v.into_owned(),
            "grant_type" => grant_type = v.into_owned(),
            "device_code" => device_code = v.into_owned(),
            _ => {}
        }
    }
    let result = match grant_type.as_str() {
        "authorization_code" => w.login_token(&code, &verifier).await.map(Some),
        DEVICE_GRANT => w.device_token(&device_code, &verifier).await,
        _ => {
            return oauth_error(
                http::StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "grant_type must be authorization_code or urn:ietf:params:oauth:grant-type:device_code",
            );
        }
    };
    match result {
        Ok(None) => oauth_error(
            http::StatusCode::BAD_REQUEST,
            "authorization_pending",
            "the person has not finished logging in yet",
        ),
        Ok(Some(t)) => {
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
