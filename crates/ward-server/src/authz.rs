//! Authentication and the one authorization function every call goes through.
//!
//! In this version the server admin is the only identity with grants; role
//! bindings plug in here without touching the services or transports.

use ward_core::capability::Capability;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};

use crate::ward::Ward;

/// Who is calling, as established from a verified token.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The identity UIDP (`sub`).
    pub subject: String,
    pub is_admin: bool,
}

impl Ward {
    /// Verifies the `Authorization` header value and returns the caller.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Caller> {
        let header = authorization.ok_or_else(|| {
            Error::Unauthenticated(
                "a bearer token is required (Authorization: Bearer <token>)".into(),
            )
        })?;
        let token = ward_auth::bearer(header).ok_or_else(|| {
            Error::Unauthenticated("the Authorization header must be \"Bearer <token>\"".into())
        })?;
        let claims = self.tokens.verify(token).await?;
        Ok(Caller {
            is_admin: claims.sub == self.admin.as_str(),
            subject: claims.sub.clone(),
        })
    }

    /// Whether `caller` holds `cap` at `scope`. A resource the caller cannot see
    /// is NOT_FOUND (`resource_type` names it); one it can see but not change is
    /// PERMISSION_DENIED.
    pub fn authorize(
        &self,
        caller: &Caller,
        cap: Capability,
        scope: &Uidp,
        resource_type: &'static str,
    ) -> Result<()> {
        if caller.is_admin {
            return Ok(());
        }
        tracing::debug!(
            subject = caller.subject,
            cap = cap.dotted_name(),
            "denied: no grants"
        );
        Err(Error::not_found(resource_type, scope.as_str()))
    }

    /// Authorization for calls with no scope (creating an organization).
    pub fn authorize_unscoped(&self, caller: &Caller, cap: Capability) -> Result<()> {
        if caller.is_admin {
            return Ok(());
        }
        Err(Error::PermissionDenied(format!(
            "{} requires the server admin",
            cap.dotted_name()
        )))
    }

    /// The scopes in which `caller` may list with `cap`: `None` means everywhere.
    pub fn visible_scopes(&self, caller: &Caller, _cap: Capability) -> Option<Vec<Uidp>> {
        if caller.is_admin {
            None
        } else {
            Some(Vec::new())
        }
    }
}
