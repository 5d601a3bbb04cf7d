//! People: identity providers and their group mappings, group invites, and
//! the browser login that turns a person at an identity provider into a Ward
//! identity with a token.

pub mod directory;
pub mod invites;
pub mod login;
pub mod mappings;
pub mod metadata;
pub mod providers;

use ward_core::capability::{CapSet, Capability};
use ward_core::error::FieldViolation;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::iam::v2::GetRoleRequest;

use crate::authz::Caller;
use crate::ward::Ward;

fn violation(field: &str, description: impl Into<String>) -> FieldViolation {
    FieldViolation {
        field: field.into(),
        description: description.into(),
    }
}

impl Ward {
    /// A role that may be granted at `group`: built in, or defined at `group`
    /// or one of its ancestors, and visible to the caller. Returns its uid
    /// and capabilities. A role the caller cannot see is NOT_FOUND.
    pub(crate) async fn grantable_role(
        &self,
        caller: &Caller,
        field: &str,
        raw: &str,
        group: &Uidp,
    ) -> Result<(Uidp, CapSet)> {
        if raw.is_empty() {
            return Err(Error::invalid(field, format!("{field} is required")));
        }
        let uid = Uidp::parse(field, raw)?;
        let role = self
            .get_role(
                caller,
                GetRoleRequest {
                    uid: uid.as_str().into(),
                },
            )
            .await?;
        let applies = uid
            .parent()
            .is_none_or(|p| group.self_and_ancestor_strs().any(|a| a == p.as_str()));
        if !applies {
            return Err(Error::invalid(
                field,
                format!("{field}: role {uid} is defined in another group and cannot be granted here"),
            ));
        }
        let caps = role
            .capabilities
            .iter()
            .filter_map(|n| Capability::from_number(*n))
            .collect();
        Ok((uid, caps))
    }
}
