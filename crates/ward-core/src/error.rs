//! The one domain error type. Transports map it to `google.rpc.Status`
//! (AIP-193) over REST and gRPC; see `ward-server`'s `status` module.

use std::fmt;

/// Canonical gRPC status codes that Ward produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    InvalidArgument = 3,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Internal = 13,
    Unavailable = 14,
    Unauthenticated = 16,
}

impl Code {
    /// The canonical name, used as `ErrorInfo.reason`.
    pub fn name(self) -> &'static str {
        match self {
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The phrase that starts every message of this code ("Invalid argument: …").
    fn phrase(self) -> &'static str {
        match self {
            Code::InvalidArgument => "Invalid argument",
            Code::NotFound => "Not found",
            Code::AlreadyExists => "Already exists",
            Code::PermissionDenied => "Permission denied",
            Code::ResourceExhausted => "Resource exhausted",
            Code::FailedPrecondition => "Precondition failed",
            Code::Internal => "Internal error",
            Code::Unavailable => "Unavailable",
            Code::Unauthenticated => "Unauthenticated",
        }
    }

    /// HTTP status per grpc-gateway's mapping (FAILED_PRECONDITION is 400, not 412).
    pub fn http_status(self) -> u16 {
        match self {
            Code::InvalidArgument | Code::FailedPrecondition => 400,
            Code::NotFound => 404,
            Code::AlreadyExists => 409,
            Code::PermissionDenied => 403,
            Code::ResourceExhausted => 429,
            Code::Internal => 500,
            Code::Unavailable => 503,
            Code::Unauthenticated => 401,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldViolation {
    pub field: String,
    pub description: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreconditionViolation {
    /// e.g. `RESOURCE_NOT_EMPTY`.
    pub kind: String,
    pub subject: String,
    pub description: String,
}

/// A domain error. Every variant carries what its AIP-193 details need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// One violation per failing field (BadRequest).
    InvalidArgument(Vec<FieldViolation>),
    /// The resource does not exist, or the caller may not see it (ResourceInfo).
    NotFound {
        resource_type: &'static str,
        name: String,
    },
    AlreadyExists {
        resource_type: &'static str,
        name: String,
    },
    /// PreconditionFailure violations.
    FailedPrecondition(Vec<PreconditionViolation>),
    PermissionDenied(String),
    Unauthenticated(String),
    ResourceExhausted(String),
    Unavailable(String),
    /// Details are for the log only; clients see a generic message.
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Most violations one error reports; the rest are counted.
pub const MAX_VIOLATIONS: usize = 20;
/// Longest field name (or echoed value) an error repeats, in bytes.
pub const MAX_ECHO: usize = 128;
/// Longest violation description, in bytes.
pub const MAX_DESCRIPTION: usize = 512;

impl Error {
    /// A single-field INVALID_ARGUMENT.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        Error::InvalidArgument(vec![FieldViolation {
            field: field.into(),
            description: description.into(),
        }])
    }

    pub fn not_found(resource_type: &'static str, name: impl Into<String>) -> Self {
        Error::NotFound {
            resource_type,
            name: name.into(),
        }
    }

    /// A RESOURCE_NOT_EMPTY precondition failure.
    pub fn not_empty(subject: impl Into<String>, description: impl Into<String>) -> Self {
        Error::FailedPrecondition(vec![PreconditionViolation {
            kind: "RESOURCE_NOT_EMPTY".into(),
            subject: subject.into(),
            description: description.into(),
        }])
    }

    /// A single PreconditionFailure violation of `kind` (e.g. `REVIEW_FINAL`).
    pub fn precondition(kind: &str, subject: impl Into<String>, description: impl Into<String>) -> Self {
        Error::FailedPrecondition(vec![PreconditionViolation {
            kind: kind.into(),
            subject: subject.into(),
            description: description.into(),
        }])
    }

    pub fn internal(context: impl fmt::Display) -> Self {
        Error::Internal(context.to_string())
    }

    /// The error as clients may see it: at most [`MAX_VIOLATIONS`] violations
    /// and every string cut to a bound, so no input can make an error larger
    /// than a few kilobytes however much of itself it would echo.
    pub fn bounded(self) -> Self {
        fn cut(s: String, max: usize) -> String {
            if s.len() <= max {
                return s;
            }
            let mut end = max;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}…", &s[..end])
        }
        fn cut_all<T>(v: Vec<T>, more: impl FnOnce(usize) -> T) -> Vec<T> {
            let n = v.len();
            let mut v: Vec<T> = v.into_iter().take(MAX_VIOLATIONS).collect();
            if n > MAX_VIOLATIONS {
                v.push(more(n - MAX_VIOLATIONS));
            }
            v
        }
        match self {
            Error::InvalidArgument(v) => Error::InvalidArgument(
                cut_all(v, |n| FieldViolation {
                    field: "request".into(),
                    description: format!("and {n} more violations"),
                })
                .into_iter()
                .map(|f| FieldViolation {
                    field: cut(f.field, MAX_ECHO),
                    description: cut(f.description, MAX_DESCRIPTION),
                })
                .collect(),
            ),
            Error::FailedPrecondition(v) => Error::FailedPrecondition(
                cut_all(v, |n| PreconditionViolation {
                    kind: "MORE".into(),
                    subject: String::new(),
                    description: format!("and {n} more violations"),
                })
                .into_iter()
                .map(|p| PreconditionViolation {
                    kind: cut(p.kind, MAX_ECHO),
                    subject: cut(p.subject, MAX_ECHO * 8),
                    description: cut(p.description, MAX_DESCRIPTION),
                })
                .collect(),
            ),
            Error::NotFound { resource_type, name } => Error::NotFound {
                resource_type,
                name: cut(name, MAX_ECHO * 8),
            },
            Error::AlreadyExists { resource_type, name } => Error::AlreadyExists {
                resource_type,
                name: cut(name, MAX_ECHO * 8),
            },
            Error::PermissionDenied(m) => Error::PermissionDenied(cut(m, MAX_DESCRIPTION * 2)),
            Error::Unauthenticated(m) => Error::Unauthenticated(cut(m, MAX_DESCRIPTION * 2)),
            Error::ResourceExhausted(m) => Error::ResourceExhausted(cut(m, MAX_DESCRIPTION * 2)),
            Error::Unavailable(m) => Error::Unavailable(cut(m, MAX_DESCRIPTION * 2)),
            internal @ Error::Internal(_) => internal,
        }
    }

    pub fn code(&self) -> Code {
        match self {
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::NotFound { .. } => Code::NotFound,
            Error::AlreadyExists { .. } => Code::AlreadyExists,
            Error::FailedPrecondition(_) => Code::FailedPrecondition,
            Error::PermissionDenied(_) => Code::PermissionDenied,
            Error::Unauthenticated(_) => Code::Unauthenticated,
            Error::ResourceExhausted(_) => Code::ResourceExhausted,
            Error::Unavailable(_) => Code::Unavailable,
            Error::Internal(_) => Code::Internal,
        }
    }

    /// The client-facing message: `"<Code phrase>: <detail>"`.
    pub fn message(&self) -> String {
        let detail = match self {
            Error::InvalidArgument(v) => v
                .iter()
                .map(|f| format!("{}: {}", f.field, f.description))
                .collect::<Vec<_>>()
                .join("; "),
            Error::NotFound { resource_type, name } => format!("{} \"{name}\" not found", short_type(resource_type)),
            Error::AlreadyExists { resource_type, name } => {
                format!("{} \"{name}\" already exists", short_type(resource_type))
            }
            Error::FailedPrecondition(v) => v.iter().map(|p| p.description.as_str()).collect::<Vec<_>>().join("; "),
            Error::PermissionDenied(m)
            | Error::Unauthenticated(m)
            | Error::ResourceExhausted(m)
            | Error::Unavailable(m) => m.clone(),
            Error::Internal(_) => "the server could not complete the request".into(),
        };
        format!("{}: {detail}", self.code().phrase())
    }
}

/// `iam.chainguard.dev/Group` → `group`.
fn short_type(t: &str) -> String {
    t.rsplit('/').next().unwrap_or(t).to_lowercase()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Internal(ctx) => write!(f, "internal: {ctx}"),
            other => f.write_str(&other.message()),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_errors_stay_small() {
        let huge = "x".repeat(300_000);
        let many: Vec<FieldViolation> = (0..10_000)
            .map(|i| FieldViolation {
                field: format!("uidp.ids[{i}]{huge}"),
                description: huge.clone(),
            })
            .collect();
        let e = Error::InvalidArgument(many).bounded();
        assert!(e.message().len() < 20_000, "{}", e.message().len());
        let Error::InvalidArgument(v) = &e else { panic!() };
        assert_eq!(v.len(), MAX_VIOLATIONS + 1);
        assert!(v[MAX_VIOLATIONS].description.contains("9980 more"));
        let e = Error::not_found("iam.chainguard.dev/Group", "é".repeat(100_000)).bounded();
        assert!(e.message().len() < 2_000);
        let small = Error::invalid("name", "bad");
        assert_eq!(small.clone().bounded(), small);
    }

    #[test]
    fn messages_follow_aip193_examples() {
        let e = Error::invalid("name", "name must match \"^[a-z0-9 ._-]{1,}$\"");
        assert_eq!(
            e.message(),
            "Invalid argument: name: name must match \"^[a-z0-9 ._-]{1,}$\""
        );
        let e = Error::not_empty("g", "cannot delete group with child groups");
        assert_eq!(
            e.message(),
            "Precondition failed: cannot delete group with child groups"
        );
        assert_eq!(e.code().http_status(), 400);
        let e = Error::not_found("iam.chainguard.dev/Group", "abc");
        assert_eq!(e.message(), "Not found: group \"abc\" not found");
        assert_eq!(
            Error::internal("db down").message(),
            "Internal error: the server could not complete the request"
        );
    }
}
