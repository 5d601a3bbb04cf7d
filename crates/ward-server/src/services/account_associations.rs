//! Account associations: a group's accounts at cloud providers (AWS, Google
//! Cloud, Azure), its GitHub App installations and its Chainguard service
//! bindings. A group has at most one, and its uid is the group's.
//!
//! Ward stores and validates them; it does not reach the providers, so
//! `CheckAccountAssociation` reports a configured provider as not checked.

use serde::{Deserialize, Serialize};
use ward_core::error::FieldViolation;
use ward_core::fieldmask::{FieldMask, Updatable};
use ward_core::names::{check_description, check_name, check_text, echo};
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::Timestamp;
use ward_proto::iam::v2::account_association::{Amazon, Azure, Chainguard, GitHub, Google};
use ward_proto::iam::v2::check_account_association_response::CheckStatus;
use ward_proto::iam::v2::{
    AccountAssociation, AccountProviderType, CheckAccountAssociationRequest, CheckAccountAssociationResponse,
    CreateAccountAssociationRequest, DeleteAccountAssociationRequest, GetAccountAssociationRequest,
    ListAccountAssociationsRequest, ListAccountAssociationsResponse, ServicePrincipal,
};
use ward_store::account_associations::{ACCOUNT_ASSOCIATION_TYPE, AccountAssociationPatch, AccountAssociationRecord};

use super::UpdateMask;
use super::list::ListParams;
use crate::authz::Caller;
use crate::services::events;
use crate::ward::Ward;

const COLLECTION: &str = "account_associations";

/// Updates replace whole provider sections; a section in the mask but absent
/// from the request is removed.
pub const ASSOCIATION_FIELDS: Updatable = Updatable {
    mutable: &[
        "name",
        "description",
        "amazon",
        "google",
        "chainguard",
        "azure",
        "github",
    ],
    output_only: &["uid", "create_time", "update_time"],
    immutable: &[],
};

/// Most service bindings, Azure client ids and GitHub Apps one association holds.
pub const MAX_SERVICE_BINDINGS: usize = 16;
pub const MAX_CLIENT_IDS: usize = 16;
pub const MAX_CLIENT_ID_NAME_LEN: usize = 64;
pub const MAX_GITHUB_APPS: usize = 16;
/// Most installations of one GitHub App, and the longest installation name.
pub const MAX_INSTALLATIONS: usize = 100;
pub const MAX_INSTALLATION_NAME_LEN: usize = 100;

/// The service principal names a binding may use: `ServicePrincipal` values
/// without their `SERVICE_PRINCIPAL_` prefix.
const SERVICE_PRINCIPAL_PREFIX: &str = "SERVICE_PRINCIPAL_";

/// The stored provider parts (the `config` column), as proto3 JSON.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    amazon: Option<Amazon>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    google: Option<Google>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chainguard: Option<Chainguard>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    azure: Option<Azure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    github: Option<GitHub>,
}

impl Config {
    fn of(a: &AccountAssociation) -> Self {
        Config {
            amazon: a.amazon.clone(),
            google: a.google.clone(),
            chainguard: a.chainguard.clone(),
            azure: a.azure.clone(),
            github: a.github.clone(),
        }
    }

    fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::internal(format_args!("encode account association: {e}")))
    }

    fn stored(r: &AccountAssociationRecord) -> Result<Self> {
        serde_json::from_str(&r.config)
            .map_err(|e| Error::internal(format_args!("stored account association {}: {e}", r.uid)))
    }
}

fn to_proto(r: AccountAssociationRecord) -> Result<AccountAssociation> {
    let config = Config::stored(&r)?;
    Ok(AccountAssociation {
        uid: r.uid,
        name: r.name,
        description: r.description,
        amazon: config.amazon,
        google: config.google,
        chainguard: config.chainguard,
        azure: config.azure,
        create_time: Some(Timestamp::from_millis(r.create_time)),
        update_time: Some(Timestamp::from_millis(r.update_time)),
        github: config.github,
    })
}

fn violation(field: impl Into<String>, description: impl Into<String>) -> FieldViolation {
    FieldViolation {
        field: field.into(),
        description: description.into(),
    }
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `8-4-4-4-12` hexadecimal digits (either case).
fn is_guid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `^[a-z][a-z0-9-]{4,28}[a-z0-9]$`
fn is_project_id(s: &str) -> bool {
    let b = s.as_bytes();
    let middle = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    (6..=30).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b[1..b.len() - 1].iter().all(middle)
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
}

fn check_amazon(a: &Amazon, bad: &mut Vec<FieldViolation>) {
    if !(a.account.len() == 12 && all_digits(&a.account)) {
        bad.push(violation(
            "amazon.account",
            "amazon.account must be a 12-digit AWS account id (^[0-9]{12}$)",
        ));
    }
}

fn check_google(g: &Google, bad: &mut Vec<FieldViolation>) {
    if g.project_id.is_empty() {
        bad.push(violation("google.project_id", "google.project_id is required"));
    } else if !is_project_id(&g.project_id) {
        bad.push(violation(
            "google.project_id",
            "google.project_id must match ^[a-z][a-z0-9-]{4,28}[a-z0-9]$",
        ));
    }
    if g.project_number.is_empty() {
        bad.push(violation("google.project_number", "google.project_number is required"));
    } else if !(g.project_number.len() <= 20 && all_digits(&g.project_number)) {
        bad.push(violation(
            "google.project_number",
            "google.project_number must be 1 to 20 digits",
        ));
    }
}

fn check_azure(a: &Azure, bad: &mut Vec<FieldViolation>) {
    if a.tenant_id.is_empty() {
        bad.push(violation("azure.tenant_id", "azure.tenant_id is required"));
    } else if !is_guid(&a.tenant_id) {
        bad.push(violation(
            "azure.tenant_id",
            "azure.tenant_id must be a GUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
        ));
    }
    if a.client_ids.len() > MAX_CLIENT_IDS {
        bad.push(violation(
            "azure.client_ids",
            format!("azure.client_ids holds at most {MAX_CLIENT_IDS} entries"),
        ));
        return;
    }
    let mut names: Vec<&String> = a.client_ids.keys().collect();
    names.sort();
    for name in names {
        let field = format!("azure.client_ids[{}]", echo(name));
        if name.is_empty() || name.chars().count() > MAX_CLIENT_ID_NAME_LEN {
            bad.push(violation(
                field.clone(),
                format!("an azure.client_ids key is 1 to {MAX_CLIENT_ID_NAME_LEN} characters"),
            ));
        } else {
            check_text(&field, name, MAX_CLIENT_ID_NAME_LEN * 4, bad);
        }
        if !is_guid(&a.client_ids[name]) {
            bad.push(violation(
                field,
                "an azure.client_ids value must be a GUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
            ));
        }
    }
}

fn check_github(g: &GitHub, bad: &mut Vec<FieldViolation>) {
    if g.app_installations.len() > MAX_GITHUB_APPS {
        bad.push(violation(
            "github.app_installations",
            format!("github.app_installations holds at most {MAX_GITHUB_APPS} apps"),
        ));
        return;
    }
    let mut apps: Vec<&i64> = g.app_installations.keys().collect();
    apps.sort();
    for app in apps {
        let field = format!("github.app_installations[{app}]");
        if *app <= 0 {
            bad.push(violation(field.clone(), "a GitHub App id must be positive"));
        }
        let installations = &g.app_installations[app].installations;
        if installations.len() > MAX_INSTALLATIONS {
            bad.push(violation(
                field,
                format!("a GitHub App has at most {MAX_INSTALLATIONS} installations here"),
            ));
            continue;
        }
        for (i, inst) in installations.iter().enumerate() {
            let at = format!("{field}.installations[{i}]");
            if inst.installation_id <= 0 {
                bad.push(violation(
                    format!("{at}.installation_id"),
                    "an installation id must be positive",
                ));
            }
            if inst.name.chars().count() > MAX_INSTALLATION_NAME_LEN {
                bad.push(violation(
                    format!("{at}.name"),
                    format!("an installation name is at most {MAX_INSTALLATION_NAME_LEN} characters"),
                ));
            } else {
                check_text(&format!("{at}.name"), &inst.name, MAX_INSTALLATION_NAME_LEN * 4, bad);
            }
        }
    }
}

/// Checks the shape of the service bindings; returns (field, identity) of
/// each well-formed one, for [`Ward::check_service_bindings`].
fn check_chainguard(c: &Chainguard, bad: &mut Vec<FieldViolation>) -> Vec<(String, Uidp)> {
    let mut out = Vec::new();
    if c.service_bindings.len() > MAX_SERVICE_BINDINGS {
        bad.push(violation(
            "chainguard.service_bindings",
            format!("chainguard.service_bindings holds at most {MAX_SERVICE_BINDINGS} entries"),
        ));
        return out;
    }
    let mut names: Vec<&String> = c.service_bindings.keys().collect();
    names.sort();
    for name in names {
        let field = format!("chainguard.service_bindings[{}]", echo(name));
        let known = !name.starts_with(SERVICE_PRINCIPAL_PREFIX)
            && ServicePrincipal::from_str_name(&format!("{SERVICE_PRINCIPAL_PREFIX}{name}"))
                .is_some_and(|p| p != ServicePrincipal::Unspecified);
        if !known {
            bad.push(violation(
                field.clone(),
                format!(
                    "\"{}\" is not a service principal (use a name such as CATALOG_SYNCER)",
                    echo(name)
                ),
            ));
            continue;
        }
        match Uidp::parse(&field, &c.service_bindings[name]) {
            Ok(uid) => out.push((field, uid)),
            Err(Error::InvalidArgument(v)) => bad.extend(v),
            Err(_) => {}
        }
    }
    out
}

/// The sections of a request, checked (all but the service bindings' targets).
fn check_sections(
    a: &AccountAssociation,
    mask: Option<&FieldMask>,
    bad: &mut Vec<FieldViolation>,
) -> Vec<(String, Uidp)> {
    let wanted = |f: &str| mask.is_none_or(|m| m.contains(f));
    if wanted("amazon")
        && let Some(x) = &a.amazon
    {
        check_amazon(x, bad);
    }
    if wanted("google")
        && let Some(x) = &a.google
    {
        check_google(x, bad);
    }
    if wanted("azure")
        && let Some(x) = &a.azure
    {
        check_azure(x, bad);
    }
    if wanted("github")
        && let Some(x) = &a.github
    {
        check_github(x, bad);
    }
    match &a.chainguard {
        Some(x) if wanted("chainguard") => check_chainguard(x, bad),
        _ => Vec::new(),
    }
}

impl Ward {
    /// An account association the caller may see; NOT_FOUND otherwise.
    async fn visible_association(&self, caller: &Caller, uid: &Uidp) -> Result<AccountAssociationRecord> {
        if !self
            .caps_at(caller, uid)
            .contains(rpc::GET_ACCOUNT_ASSOCIATION.capability)
        {
            return Err(Error::not_found(ACCOUNT_ASSOCIATION_TYPE, uid.as_str()));
        }
        self.store
            .get_account_association(uid)
            .await?
            .ok_or_else(|| Error::not_found(ACCOUNT_ASSOCIATION_TYPE, uid.as_str()))
    }

    /// Each bound identity must be directly in `group`, exist, and be visible
    /// to the caller. (Ward creates no service-principal identities, so any
    /// identity of the group may stand for a service.)
    async fn check_service_bindings(
        &self,
        caller: &Caller,
        group: &Uidp,
        bindings: Vec<(String, Uidp)>,
        bad: &mut Vec<FieldViolation>,
    ) -> Result<()> {
        for (field, identity) in bindings {
            if identity.parent().as_ref() != Some(group) {
                bad.push(violation(
                    field,
                    format!("{identity} is not an identity directly in group {group}"),
                ));
                continue;
            }
            let visible = self.caps_at(caller, &identity).contains(rpc::GET_IDENTITY.capability);
            let found = visible && self.store.get_identity(&identity).await?.is_some();
            if !found {
                bad.push(violation(field, format!("identity {identity} not found")));
            }
        }
        Ok(())
    }

    pub async fn create_account_association(
        &self,
        caller: &Caller,
        req: CreateAccountAssociationRequest,
    ) -> Result<AccountAssociation> {
        let a = req.account_association.unwrap_or_default();
        let mut bad = Vec::new();
        let parent = crate::services::parse_uidp("parent", &req.parent, &mut bad);
        check_name("name", &a.name, &mut bad);
        check_description("description", &a.description, &mut bad);
        let bindings = check_sections(&a, None, &mut bad);
        let Some(group) = parent else {
            return Err(Error::InvalidArgument(bad));
        };
        self.authorize(caller, &rpc::CREATE_ACCOUNT_ASSOCIATION, &group)?;
        self.check_service_bindings(caller, &group, bindings, &mut bad).await?;
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let now = self.clock.now_millis();
        let record = AccountAssociationRecord {
            uid: group.as_str().to_owned(),
            parent_uid: group.as_str().to_owned(),
            name: a.name.clone(),
            description: a.description.clone(),
            config: Config::of(&a).to_json()?,
            create_time: now,
            update_time: now,
        };
        let reply = to_proto(record.clone())?;
        let emit = self.created(
            caller,
            events::types::ACCOUNT_ASSOCIATION_CREATED,
            &record.uid,
            &record.parent_uid,
            &reply,
        );
        self.store.create_account_association(&record, emit).await?;
        tracing::info!(uid = %record.uid, "account association created");
        Ok(reply)
    }

    pub async fn get_account_association(
        &self,
        caller: &Caller,
        req: GetAccountAssociationRequest,
    ) -> Result<AccountAssociation> {
        let uid = Uidp::parse("uid", &req.uid)?;
        to_proto(self.visible_association(caller, &uid).await?)
    }

    pub async fn list_account_associations(
        &self,
        caller: &Caller,
        req: ListAccountAssociationsRequest,
    ) -> Result<ListAccountAssociationsResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_ACCOUNT_ASSOCIATIONS.capability);
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: &req.name,
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters: Vec::new(),
        };
        let (q, skipped) = self.list_query(COLLECTION, params, visible)?;
        let page = self.store.list_account_associations(&q).await?;
        Ok(ListAccountAssociationsResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            account_associations: page.items.into_iter().map(to_proto).collect::<Result<_>>()?,
        })
    }

    pub async fn update_account_association(
        &self,
        caller: &Caller,
        a: AccountAssociation,
        mask: UpdateMask,
    ) -> Result<AccountAssociation> {
        let uid = Uidp::parse("account_association.uid", &a.uid)?;
        let mask = mask.resolve(
            &ASSOCIATION_FIELDS,
            &[
                ("name", !a.name.is_empty()),
                ("description", !a.description.is_empty()),
                ("amazon", a.amazon.is_some()),
                ("google", a.google.is_some()),
                ("chainguard", a.chainguard.is_some()),
                ("azure", a.azure.is_some()),
                ("github", a.github.is_some()),
            ],
        )?;
        let current = self.visible_association(caller, &uid).await?;
        self.authorize(caller, &rpc::UPDATE_ACCOUNT_ASSOCIATION, &uid)?;
        let mut bad = Vec::new();
        let mut patch = AccountAssociationPatch::default();
        // A field outside the mask is not written, but a value that breaks
        // its schema is still refused (a strict client expects the 400).
        if mask.contains("name") || !a.name.is_empty() {
            check_name("name", &a.name, &mut bad);
        }
        if mask.contains("name") {
            patch.name = Some(a.name.clone());
        }
        check_description("description", &a.description, &mut bad);
        if mask.contains("description") {
            patch.description = Some(a.description.clone());
        }
        let bindings = check_sections(&a, Some(&mask), &mut bad);
        self.check_service_bindings(caller, &uid, bindings, &mut bad).await?;
        if !bad.is_empty() {
            return Err(Error::InvalidArgument(bad));
        }
        let mut config = Config::stored(&current)?;
        let mut config_changed = false;
        if mask.contains("amazon") {
            config.amazon = a.amazon.clone();
            config_changed = true;
        }
        if mask.contains("google") {
            config.google = a.google.clone();
            config_changed = true;
        }
        if mask.contains("chainguard") {
            config.chainguard = a.chainguard.clone();
            config_changed = true;
        }
        if mask.contains("azure") {
            config.azure = a.azure.clone();
            config_changed = true;
        }
        if mask.contains("github") {
            config.github = a.github.clone();
            config_changed = true;
        }
        if config_changed {
            patch.config = Some(config.to_json()?);
        }
        if mask.is_empty() {
            return to_proto(current);
        }
        let emit = self.updated(
            caller,
            events::types::ACCOUNT_ASSOCIATION_UPDATED,
            uid.as_str(),
            uid.as_str(),
            |r| to_proto(r).unwrap_or_default(),
        );
        let record = self
            .store
            .update_account_association(&uid, &patch, self.clock.now_millis(), emit)
            .await?;
        to_proto(record)
    }

    pub async fn delete_account_association(
        &self,
        caller: &Caller,
        req: DeleteAccountAssociationRequest,
    ) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        self.authorize(caller, &rpc::DELETE_ACCOUNT_ASSOCIATION, &uid)?;
        // Idempotent like every other delete: one already gone is success.
        let emit = self.deleted(
            caller,
            events::types::ACCOUNT_ASSOCIATION_DELETED,
            uid.as_str(),
            uid.as_str(),
        );
        match self.store.delete_account_association(&uid, emit).await {
            Err(Error::NotFound { .. }) => Ok(()),
            r => r,
        }
    }

    /// Whether the association with one provider works. Ward does not call
    /// out to the providers: a configured provider is NOT_READY, "not checked".
    pub async fn check_account_association(
        &self,
        caller: &Caller,
        req: CheckAccountAssociationRequest,
    ) -> Result<CheckAccountAssociationResponse> {
        let uid = Uidp::parse("uid", &req.uid)?;
        let provider = match AccountProviderType::try_from(req.provider_type) {
            Ok(p @ (AccountProviderType::Google | AccountProviderType::Amazon | AccountProviderType::Azure)) => p,
            Ok(AccountProviderType::Unspecified) | Err(_) => {
                return Err(Error::invalid(
                    "provider_type",
                    "provider_type must be ACCOUNT_PROVIDER_TYPE_GOOGLE, ACCOUNT_PROVIDER_TYPE_AMAZON \
                     or ACCOUNT_PROVIDER_TYPE_AZURE",
                ));
            }
        };
        self.authorize(caller, &rpc::CHECK_ACCOUNT_ASSOCIATION, &uid)?;
        let record = self
            .store
            .get_account_association(&uid)
            .await?
            .ok_or_else(|| Error::not_found(ACCOUNT_ASSOCIATION_TYPE, uid.as_str()))?;
        let config = Config::stored(&record)?;
        let (configured, section, name) = match provider {
            AccountProviderType::Amazon => (config.amazon.is_some(), "amazon", "AWS"),
            AccountProviderType::Google => (config.google.is_some(), "google", "Google Cloud"),
            _ => (config.azure.is_some(), "azure", "Azure"),
        };
        let (reason, message) = if configured {
            (
                "not checked",
                format!("this server does not reach {name} to exchange credentials; the configuration is well-formed"),
            )
        } else {
            (
                "not configured",
                format!("the account association has no {section} section; add one with UpdateAccountAssociation"),
            )
        };
        Ok(CheckAccountAssociationResponse {
            status: CheckStatus::NotReady as i32,
            reason: reason.to_owned(),
            message,
        })
    }
}
