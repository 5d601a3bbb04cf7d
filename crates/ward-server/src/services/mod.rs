//! The service layer: one module per resource. Methods take an authenticated
//! [`crate::authz::Caller`] and proto request messages, and return proto
//! responses or a domain error. Transports only decode, authenticate, call and
//! encode.

pub mod groups;
pub mod identities;
mod list;
pub mod role_bindings;
pub mod roles;

/// How an update names the fields it changes (AIP-134).
pub enum UpdateMask {
    /// An explicit `update_mask` from the client (comma-separated paths).
    Paths(Vec<String>),
    /// No mask over REST: the keys present in the JSON body.
    BodyKeys(Vec<String>),
    /// No mask over gRPC: every field set to a non-default value.
    Populated,
}
