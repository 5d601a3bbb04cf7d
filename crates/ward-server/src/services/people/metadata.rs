//! UpdateIdentityMetadata: the caller's own profile details. Any
//! authenticated identity may set its own; nobody else's.

use ward_core::fieldmask::Updatable;
use ward_core::names::check_text;
use ward_core::{Error, Result};
use ward_proto::iam::v2::{IdentityMetadata, UpdateIdentityMetadataRequest};

use ward_store::events::INTERNAL;

use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::services::events::types;
use crate::ward::Ward;

pub const METADATA_FIELDS: Updatable = Updatable {
    mutable: &[
        "company",
        "updates_opt_in",
        "product",
        "job_title",
        "utm_campaign",
        "utm_content",
        "utm_medium",
        "utm_source",
        "utm_term",
        "latest_form_submit_url",
        "latest_internal_referring_url",
        "hubspot_utk",
        "self_serve",
    ],
    output_only: &["uid", "name", "given_name", "family_name"],
    immutable: &[],
};

/// Longest text field; URLs may be longer.
pub const MAX_FIELD_LEN: usize = 512;
pub const MAX_URL_LEN: usize = 2048;

impl Ward {
    /// The RPC: the request's mask, or the populated fields without one.
    pub async fn update_identity_metadata(
        &self,
        caller: &Caller,
        req: UpdateIdentityMetadataRequest,
    ) -> Result<IdentityMetadata> {
        let mask = UpdateMask::from_field_mask(req.update_mask);
        self.update_own_metadata(caller, req.identity_metadata.unwrap_or_default(), mask)
            .await
    }

    pub async fn update_own_metadata(
        &self,
        caller: &Caller,
        given: IdentityMetadata,
        mask: UpdateMask,
    ) -> Result<IdentityMetadata> {
        if caller.is_admin {
            return Err(Error::PermissionDenied("the server admin has no profile".into()));
        }
        let mask = mask.resolve(
            &METADATA_FIELDS,
            &[
                ("company", !given.company.is_empty()),
                ("updates_opt_in", given.updates_opt_in),
                ("product", !given.product.is_empty()),
                ("job_title", !given.job_title.is_empty()),
                ("utm_campaign", !given.utm_campaign.is_empty()),
                ("utm_content", !given.utm_content.is_empty()),
                ("utm_medium", !given.utm_medium.is_empty()),
                ("utm_source", !given.utm_source.is_empty()),
                ("utm_term", !given.utm_term.is_empty()),
                ("latest_form_submit_url", !given.latest_form_submit_url.is_empty()),
                (
                    "latest_internal_referring_url",
                    !given.latest_internal_referring_url.is_empty(),
                ),
                ("hubspot_utk", !given.hubspot_utk.is_empty()),
                ("self_serve", given.self_serve),
            ],
        )?;
        let mut bad = Vec::new();
        for (field, value, max) in [
            ("company", &given.company, MAX_FIELD_LEN),
            ("product", &given.product, MAX_FIELD_LEN),
            ("job_title", &given.job_title, MAX_FIELD_LEN),
            ("utm_campaign", &given.utm_campaign, MAX_FIELD_LEN),
            ("utm_content", &given.utm_content, MAX_FIELD_LEN),
            ("utm_medium", &given.utm_medium, MAX_FIELD_LEN),
            ("utm_source", &given.utm_source, MAX_FIELD_LEN),
            ("utm_term", &given.utm_term, MAX_FIELD_LEN),
            ("latest_form_submit_url", &given.latest_form_submit_url, MAX_URL_LEN),
            (
                "latest_internal_referring_url",
                &given.latest_internal_referring_url,
                MAX_URL_LEN,
            ),
            ("hubspot_utk", &given.hubspot_utk, MAX_FIELD_LEN),
        ] {
            if mask.contains(field) && !value.is_empty() {
                check_text(field, value, max, &mut bad);
            }
        }
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let mut current: IdentityMetadata = match self.store.identity_metadata(&caller.subject).await? {
            Some(json) => serde_json::from_str(&json).unwrap_or_default(),
            None => IdentityMetadata::default(),
        };
        macro_rules! apply {
            ($($f:ident),*) => {$(
                if mask.contains(stringify!($f)) {
                    current.$f = given.$f.clone();
                }
            )*};
        }
        apply!(
            company,
            updates_opt_in,
            product,
            job_title,
            utm_campaign,
            utm_content,
            utm_medium,
            utm_source,
            utm_term,
            latest_form_submit_url,
            latest_internal_referring_url,
            self_serve
        );
        // Output-only fields are derived, and the tracking cookie is never kept.
        current.uid = String::new();
        current.name = String::new();
        current.given_name = String::new();
        current.family_name = String::new();
        current.hubspot_utk = String::new();
        let json =
            serde_json::to_string(&current).map_err(|e| Error::internal(format_args!("encode metadata: {e}")))?;
        let person = self.store.get_person(&caller.subject).await?;
        let name = person.map(|p| p.display_name).unwrap_or_default();
        let mut parts = name.splitn(2, ' ');
        current.given_name = parts.next().unwrap_or_default().to_owned();
        current.family_name = parts.next().unwrap_or_default().to_owned();
        current.name = name;
        current.uid = caller.subject.clone();
        if !mask.is_empty() {
            // The contract gives this event no audience: internal, so it is
            // in the audit trail and never delivered to a subscription.
            let emit = self
                .created(
                    caller,
                    types::IDENTITY_METADATA_UPDATED,
                    &caller.subject,
                    &Ward::event_group(&caller.subject),
                    &current,
                )
                .audience(INTERNAL);
            self.store.set_identity_metadata(&caller.subject, &json, emit).await?;
        }
        Ok(current)
    }
}
