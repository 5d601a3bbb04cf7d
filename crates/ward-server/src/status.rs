//! Domain errors at the edge: `google.rpc.Status` (AIP-193) as JSON over REST
//! and as status + `grpc-status-details-bin` over gRPC. Details always include
//! ErrorInfo; BadRequest, PreconditionFailure and ResourceInfo as they fit.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tonic_types::{ErrorDetails, StatusExt};
use ward_core::Error;
use ward_core::error::Code;

/// The error domain of the IAM service.
pub const IAM_DOMAIN: &str = "iam.chainguard.dev";
const TYPE_PREFIX: &str = "type.googleapis.com/google.rpc.";

/// Logs an internal error once, where it is turned into a response.
fn log_internal(e: &Error) {
    if let Error::Internal(ctx) = e {
        tracing::error!(error = %ctx, "internal error");
    }
}

/// The AIP-193 JSON body for an error (pass it [`Error::bounded`] first).
pub fn json_body(e: &Error, domain: &str) -> Value {
    let code = e.code();
    let mut details = vec![json!({
        "@type": format!("{TYPE_PREFIX}ErrorInfo"),
        "reason": code.name(),
        "domain": domain,
        "metadata": {},
    })];
    match e {
        Error::InvalidArgument(v) => details.push(json!({
            "@type": format!("{TYPE_PREFIX}BadRequest"),
            "fieldViolations": v.iter().map(|f| json!({"field": f.field, "description": f.description})).collect::<Vec<_>>(),
        })),
        Error::FailedPrecondition(v) => details.push(json!({
            "@type": format!("{TYPE_PREFIX}PreconditionFailure"),
            "violations": v.iter().map(|p| json!({"type": p.kind, "subject": p.subject, "description": p.description})).collect::<Vec<_>>(),
        })),
        Error::NotFound { resource_type, name } | Error::AlreadyExists { resource_type, name } => details.push(json!({
            "@type": format!("{TYPE_PREFIX}ResourceInfo"),
            "resourceType": resource_type,
            "resourceName": name,
            "owner": "",
            "description": e.message(),
        })),
        _ => {}
    }
    json!({ "code": code as i32, "message": e.message(), "details": details })
}

/// An error as a REST response.
pub struct ApiError {
    pub error: Error,
    pub domain: &'static str,
    /// HTTP status to use instead of the code's mapping (e.g. 413, 415, 405).
    pub http_status: Option<u16>,
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        Self {
            error,
            domain: IAM_DOMAIN,
            http_status: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        log_internal(&self.error);
        let error = self.error.bounded();
        let status = http::StatusCode::from_u16(self.http_status.unwrap_or_else(|| error.code().http_status()))
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, axum::Json(json_body(&error, self.domain))).into_response();
        resp.extensions_mut().insert(FailureMessage(error.message()));
        if error.code() == Code::Unauthenticated {
            resp.headers_mut()
                .insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

/// A REST error's message, for the request log ([`log_failures`]).
#[derive(Clone)]
pub struct FailureMessage(pub String);

/// Logs every request that failed, with its status and the error's message
/// (the one the client got: user-facing, never a secret), so an operator
/// sees why a client's call was refused without turning on debug logs.
/// gRPC failures are read from `grpc-status`/`grpc-message` (errors are
/// trailers-only responses, so they are headers here); 5xx are WARN (the
/// cause of an internal error is logged where it happens).
pub async fn log_failures(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let method = req.method().clone();
    let path: String = req.uri().path().chars().take(200).collect();
    let resp = next.run(req).await;
    let status = resp.status();
    let grpc = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .filter(|v| *v != "0")
        .map(str::to_owned);
    if status.as_u16() < 400 && grpc.is_none() {
        return resp;
    }
    let message = match resp.extensions().get::<FailureMessage>() {
        Some(m) => m.0.clone(),
        None => resp
            .headers()
            .get("grpc-message")
            .map(|v| {
                percent_encoding::percent_decode(v.as_bytes())
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .unwrap_or_default(),
    };
    // Control characters are escaped: a message may echo request input,
    // which must not forge log lines.
    let message: String = message
        .chars()
        .take(500)
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    let grpc = grpc.unwrap_or_default();
    let probe = method == http::Method::HEAD && status == http::StatusCode::NOT_FOUND;
    if status == http::StatusCode::UNAUTHORIZED || grpc == "16" || probe {
        // Every registry client's first request, every token flow's, and
        // the existence checks clients make before pushing a blob.
        tracing::debug!(%method, %path, status = status.as_u16(), grpc_status = %grpc, %message, "request failed");
    } else if status.is_server_error() || ["2", "4", "13", "14", "15"].contains(&grpc.as_str()) {
        tracing::warn!(%method, %path, status = status.as_u16(), grpc_status = %grpc, %message, "request failed");
    } else {
        tracing::info!(%method, %path, status = status.as_u16(), grpc_status = %grpc, %message, "request failed");
    }
    resp
}

/// An error as a gRPC status with details.
pub fn grpc_status(e: Error, domain: &str) -> tonic::Status {
    log_internal(&e);
    let e = e.bounded();
    let code = tonic::Code::from_i32(e.code() as i32);
    let mut d = ErrorDetails::with_error_info(e.code().name(), domain, std::collections::HashMap::new());
    match &e {
        Error::InvalidArgument(v) => {
            for f in v {
                d.add_bad_request_violation(f.field.clone(), f.description.clone());
            }
        }
        Error::FailedPrecondition(v) => {
            for p in v {
                d.add_precondition_failure_violation(p.kind.clone(), p.subject.clone(), p.description.clone());
            }
        }
        Error::NotFound { resource_type, name } | Error::AlreadyExists { resource_type, name } => {
            d.set_resource_info(*resource_type, name.clone(), "", e.message());
        }
        _ => {}
    }
    tonic::Status::with_error_details(code, e.message(), d)
}
