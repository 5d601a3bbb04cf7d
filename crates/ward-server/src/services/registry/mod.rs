//! The registry's service layer: repos, tags and images for the API, and the
//! distribution operations (`oci`) the OCI transport calls. One source of
//! truth: a tag pushed through `/v2/` is the Tag the API lists, and a Tag
//! deleted through the API is no longer served at `/v2/`.

pub mod images;
pub mod oci;
pub mod readme;
pub mod repos;
pub mod tags;

use ward_core::Result;
use ward_core::rpc::Rule;
use ward_core::uidp::Uidp;
use ward_store::registry::{REPO_TYPE, RepoRecord};

use crate::authz::Caller;
use crate::ward::Ward;

/// A JSON array column as strings (empty on anything else).
pub(crate) fn json_list(raw: &str) -> Vec<String> {
    serde_json::from_str(raw).unwrap_or_default()
}

pub(crate) fn to_json_list(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

impl Ward {
    /// The repo at `uid` after checking `rule` there: NOT_FOUND when the
    /// caller may not see it, PERMISSION_DENIED when it may see but not act.
    pub(crate) async fn authorized_repo(&self, caller: &Caller, rule: &Rule, uid: &Uidp) -> Result<RepoRecord> {
        self.authorize(caller, rule, uid)?;
        self.store
            .get_repo(uid)
            .await?
            .ok_or_else(|| ward_core::Error::not_found(REPO_TYPE, uid.as_str()))
    }
}
