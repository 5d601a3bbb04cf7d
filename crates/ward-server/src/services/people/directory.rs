//! An organization's directory: terms acceptances, and people finding and
//! asking to join the verified organization of their email domain.
//!
//! An organization is verified, with its email domains, by the server admin
//! (`ward admin verify-org`). A person whose login gave a verified email at
//! such a domain can look the organization up, check they may ask to join,
//! and ask; those who may bind roles there list the requests and grant them
//! with a role binding.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::{
    AcceptTermsRequest, AcceptTermsResponse, CheckEligibilityRequest, CheckEligibilityResponse, GroupAccessRequest,
    ListGroupAccessRequestsRequest, ListGroupAccessRequestsResponse, ListTermsAcceptancesRequest,
    ListTermsAcceptancesResponse, LookupGroupRequest, LookupGroupResponse, RequestGroupAccessRequest,
    RequestGroupAccessResponse, TermsAcceptance,
};
use ward_store::GROUP_TYPE;
use ward_store::people::AccessRequestRecord;

use crate::authz::Caller;
use crate::services::events;
use crate::ward::Ward;

/// Most documents one AcceptTerms names.
pub const MAX_DOCUMENTS: usize = 16;
/// Longest document id.
pub const MAX_DOCUMENT_ID_LEN: usize = 128;

/// An email domain as Ward keeps it: lowercase letters, digits, dots and
/// hyphens, with at least one dot.
pub fn normalize_domain(raw: &str) -> Option<String> {
    let d = raw.trim().trim_end_matches('.').to_ascii_lowercase();
    let ok = !d.is_empty()
        && d.len() <= 253
        && d.contains('.')
        && d.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && d.split('.').all(|label| !label.is_empty() && label.len() <= 63);
    ok.then_some(d)
}

/// Where a listing of terms acceptances continues: an offset, opaque.
fn offset_token(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("terms:{offset}"))
}

fn parse_offset_token(token: &str) -> Result<usize> {
    if token.is_empty() {
        return Ok(0);
    }
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("terms:").and_then(|n| n.parse().ok()))
        .ok_or_else(|| Error::invalid("page_token", "page_token is not valid"))
}

impl Ward {
    /// NOT_FOUND unless the group exists (authorization at an ancestor
    /// covers uids that name nothing).
    async fn existing_group(&self, group: &Uidp) -> Result<()> {
        match self.store.get_group(group).await? {
            Some(_) => Ok(()),
            None => Err(Error::not_found(GROUP_TYPE, group.as_str())),
        }
    }

    /// The identity's email as Ward trusts it, with the organization that
    /// vouches for it: verified by the identity provider of their last login,
    /// at a domain the server admin verified for the organization that
    /// provider belongs to. Any organization may register a provider that
    /// claims any email, so an email from another organization's provider is
    /// never trusted. `Err` says why not.
    pub(crate) async fn trusted_email(
        &self,
        identity: &str,
    ) -> Result<std::result::Result<(String, String), &'static str>> {
        let Some(person) = self.store.get_person(identity).await? else {
            return Ok(Err("your identity has no email from a login"));
        };
        if !person.email_verified {
            return Ok(Err("your email is not verified by your identity provider"));
        }
        let Some(domain) = person.email.rsplit_once('@').and_then(|(_, d)| normalize_domain(d)) else {
            return Ok(Err("your email has no usable domain"));
        };
        let Some(org) = self.store.org_of_domain(&domain).await? else {
            return Ok(Err("no verified organization has your email's domain"));
        };
        let provider_org = Uidp::parse("idp", &person.identity_provider_uid).map(|u| u.root().to_owned());
        if provider_org.as_deref() != Ok(org.as_str()) {
            return Ok(Err(
                "your email's domain belongs to an organization whose identity provider you did not log in through",
            ));
        }
        Ok(Ok((person.email, org)))
    }

    /// The verified organization of the caller's trusted email, if any.
    async fn org_of_caller(&self, caller: &Caller) -> Result<std::result::Result<(String, String), &'static str>> {
        Ok(self
            .trusted_email(&caller.subject)
            .await?
            .map(|(email, org)| (org, email)))
    }

    pub async fn lookup_group(&self, caller: &Caller, _req: LookupGroupRequest) -> Result<LookupGroupResponse> {
        let org = match self.org_of_caller(caller).await? {
            Ok((org, _)) => org,
            Err(why) => return Err(Error::not_found(GROUP_TYPE, format!("(none: {why})"))),
        };
        let uid = Uidp::parse("group", &org)?;
        let group = self
            .store
            .get_group(&uid)
            .await?
            .ok_or_else(|| Error::not_found(GROUP_TYPE, org.clone()))?;
        Ok(LookupGroupResponse {
            group: Some(crate::services::groups::to_proto(group)),
        })
    }

    pub async fn check_eligibility(
        &self,
        caller: &Caller,
        _req: CheckEligibilityRequest,
    ) -> Result<CheckEligibilityResponse> {
        // Eligible: a trusted email names an organization the caller is
        // not yet a member of (LookupGroup says which).
        let eligible = match self.org_of_caller(caller).await? {
            Err(_) => false,
            Ok((org, _)) => !Uidp::parse("group", &org).is_ok_and(|u| !self.caps_at(caller, &u).is_empty()),
        };
        Ok(CheckEligibilityResponse { eligible })
    }

    /// Records the request, for the organization of the caller's trusted
    /// email or a group in it. Any other group is NOT_FOUND to them, whether
    /// or not it exists.
    pub async fn request_group_access(
        &self,
        caller: &Caller,
        req: RequestGroupAccessRequest,
    ) -> Result<RequestGroupAccessResponse> {
        let group = Uidp::parse("group_uid", &req.group_uid)?;
        let email = match self.org_of_caller(caller).await? {
            Ok((org, email)) if group.root() == org => email,
            _ => return Err(Error::not_found(GROUP_TYPE, group.as_str())),
        };
        self.existing_group(&group).await?;
        let now = self.clock.now_millis();
        self.store
            .request_access(&AccessRequestRecord {
                group_uid: group.as_str().into(),
                identity_uid: caller.subject.clone(),
                email,
                create_time: now,
            })
            .await?;
        Ok(RequestGroupAccessResponse {})
    }

    pub async fn list_group_access_requests(
        &self,
        caller: &Caller,
        req: ListGroupAccessRequestsRequest,
    ) -> Result<ListGroupAccessRequestsResponse> {
        let group = Uidp::parse("group_uid", &req.group_uid)?;
        self.authorize(caller, &rpc::LIST_GROUP_ACCESS_REQUESTS, &group)?;
        self.existing_group(&group).await?;
        let requests = self
            .store
            .access_requests(group.as_str())
            .await?
            .into_iter()
            .map(|r| GroupAccessRequest {
                identity_uid: r.identity_uid,
                email: r.email,
                create_time: Some(Timestamp::from_millis(r.create_time)),
            })
            .collect();
        Ok(ListGroupAccessRequestsResponse { requests })
    }

    pub async fn accept_terms(&self, caller: &Caller, req: AcceptTermsRequest) -> Result<AcceptTermsResponse> {
        let group = Uidp::parse("group", &req.group)?;
        if req.document_ids.is_empty() || req.document_ids.len() > MAX_DOCUMENTS {
            return Err(Error::invalid(
                "document_ids",
                format!("document_ids takes 1 to {MAX_DOCUMENTS} document ids"),
            ));
        }
        for d in &req.document_ids {
            let ok = !d.is_empty()
                && d.len() <= MAX_DOCUMENT_ID_LEN
                && d.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
            if !ok {
                return Err(Error::invalid(
                    "document_ids",
                    format!("a document id is 1 to {MAX_DOCUMENT_ID_LEN} letters, digits, '.', '-' or '_'"),
                ));
            }
        }
        self.authorize(caller, &rpc::ACCEPT_TERMS, &group)?;
        let reply = AcceptTermsResponse {
            group: group.as_str().to_owned(),
            document_ids: req.document_ids.clone(),
        };
        let emit = self.created(
            caller,
            events::types::TERMS_ACCEPTED,
            group.as_str(),
            group.as_str(),
            &reply,
        );
        self.store
            .accept_terms(
                &group,
                &req.document_ids,
                &caller.subject,
                self.clock.now_millis(),
                emit,
            )
            .await?;
        Ok(reply)
    }

    /// Acceptances at the group and at its ancestors, newest first.
    pub async fn list_terms_acceptances(
        &self,
        caller: &Caller,
        req: ListTermsAcceptancesRequest,
    ) -> Result<ListTermsAcceptancesResponse> {
        let group = Uidp::parse("group", &req.group)?;
        let page_size = ward_core::listing::page_size(req.page_size)? as usize;
        let skip = ward_core::listing::skip(req.skip)? as usize;
        let start = parse_offset_token(&req.page_token)?;
        if !matches!(req.order_by.as_str(), "" | "create_time desc" | "created_at desc") {
            return Err(Error::invalid(
                "order_by",
                "terms acceptances are listed newest first only",
            ));
        }
        self.authorize(caller, &rpc::LIST_TERMS_ACCEPTANCES, &group)?;
        self.existing_group(&group).await?;
        let scopes: Vec<String> = group.self_and_ancestor_strs().map(str::to_owned).collect();
        let rows = self.store.terms_acceptances(&scopes).await?;
        let total = rows.len();
        let from = start.saturating_add(skip).min(total);
        let to = from.saturating_add(page_size).min(total);
        Ok(ListTermsAcceptancesResponse {
            terms_acceptances: rows[from..to]
                .iter()
                .map(|r| TermsAcceptance {
                    doc_id: r.doc_id.clone(),
                    accepted_by: r.accepted_by.clone(),
                    org_uid: r.group_uid.clone(),
                    create_time: Some(Timestamp::from_millis(r.create_time)),
                })
                .collect(),
            next_page_token: if to < total { offset_token(to) } else { String::new() },
            total_count: Some(total as i64),
            skipped: i32::try_from(skip).unwrap_or(i32::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        assert_eq!(normalize_domain("Example.COM.").as_deref(), Some("example.com"));
        for bad in [
            "",
            "localhost",
            "a..b",
            "exa mple.com",
            "ex@mple.com",
            &"a".repeat(64).to_string(),
        ] {
            assert_eq!(normalize_domain(bad), None, "{bad}");
        }
    }

    #[test]
    fn offset_tokens_round_trip() {
        assert_eq!(parse_offset_token(&offset_token(42)).unwrap(), 42);
        assert_eq!(parse_offset_token("").unwrap(), 0);
        assert!(parse_offset_token("garbage!").is_err());
    }
}
