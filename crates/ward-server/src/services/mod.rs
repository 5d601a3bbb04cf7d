//! The service layer: one module per resource. Methods take an authenticated
//! [`crate::authz::Caller`] and proto request messages, and return proto
//! responses or a domain error. Transports only decode, authenticate, call and
//! encode.

pub mod account_associations;
pub mod advisories;
pub mod events;
pub mod groups;
pub mod identities;
mod list;
pub mod people;
pub mod registry;
pub mod role_bindings;
pub mod roles;
pub mod sts;
pub mod v1;
pub mod vulns;

use ward_core::error::FieldViolation;
use ward_core::fieldmask::{FieldMask, Updatable};
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

/// Parses a UIDP request field, recording a violation instead of failing, so
/// one response can name every bad field.
pub(crate) fn parse_uidp(field: &str, raw: &str, bad: &mut Vec<FieldViolation>) -> Option<Uidp> {
    match Uidp::parse(field, raw) {
        Ok(u) => Some(u),
        Err(Error::InvalidArgument(v)) => {
            bad.extend(v);
            None
        }
        Err(_) => None,
    }
}

/// A delete refused because role bindings still use the resource names up to
/// five of them; bindings may lie outside the caller's view (an org-level
/// binding of a team's identity), so only the server admin gets the names.
/// Others are pointed at the list, which shows what they may see.
pub(crate) fn hide_bindings(caller: &crate::authz::Caller, e: Error, filter: &str) -> Error {
    match e {
        Error::FailedPrecondition(v) if !caller.is_admin => Error::FailedPrecondition(
            v.into_iter()
                .map(|mut p| {
                    if p.kind == "RESOURCE_IN_USE" {
                        p.description = format!(
                            "cannot delete it while role bindings use it; \
                             see GET /iam/v2/roleBindings?{filter}={}",
                            p.subject
                        );
                    }
                    p
                })
                .collect(),
        ),
        other => other,
    }
}

/// How an update names the fields it changes (AIP-134).
pub enum UpdateMask {
    /// An explicit `update_mask` from the client (comma-separated paths).
    Paths(Vec<String>),
    /// No mask over REST: the keys present in the JSON body.
    BodyKeys(Vec<String>),
    /// No mask over gRPC: every field set to a non-default value.
    Populated,
}

impl UpdateMask {
    /// A gRPC request's mask: its paths, or the populated fields without one.
    pub fn from_field_mask(m: Option<pbjson_types::FieldMask>) -> Self {
        match m {
            Some(m) if !m.paths.is_empty() => UpdateMask::Paths(m.paths),
            _ => UpdateMask::Populated,
        }
    }

    /// The fields to change. `populated` says which mutable fields the request
    /// message sets to a non-default value (used over gRPC without a mask).
    pub(crate) fn resolve(self, fields: &Updatable, populated: &[(&'static str, bool)]) -> Result<FieldMask> {
        Ok(match self {
            UpdateMask::Paths(paths) => FieldMask::parse(&paths.join(","), fields)?,
            UpdateMask::BodyKeys(keys) => FieldMask::from_body_keys(keys.iter().map(String::as_str), fields),
            UpdateMask::Populated => FieldMask::of(populated.iter().filter(|(_, set)| *set).map(|(f, _)| *f).collect()),
        })
    }
}
