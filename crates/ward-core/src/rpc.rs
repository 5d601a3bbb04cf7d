//! The per-RPC authorization table (reference §3.6), as data.
//!
//! Every IAM RPC names the capability it requires and where that capability
//! must hold: at the parent group (creates), at the resource itself (get,
//! update, delete), or nowhere in particular (lists, which return only what the
//! caller may list). The service layer authorizes through these rules and the
//! authorization tests derive their expectations from them.

use crate::capability::Capability::{self, *};

/// The resource an RPC acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Group,
    Identity,
    Role,
    RoleBinding,
    Repo,
    Tag,
    Advisory,
    AdvisoryEvent,
    IdentityProvider,
    GroupMapping,
    GroupInvite,
    AccountAssociation,
    Subscription,
}

impl Kind {
    /// The resource type named in NOT_FOUND details.
    pub const fn type_name(self) -> &'static str {
        match self {
            Kind::Group => "iam.chainguard.dev/Group",
            Kind::Identity => "iam.chainguard.dev/Identity",
            Kind::Role => "iam.chainguard.dev/Role",
            Kind::RoleBinding => "iam.chainguard.dev/RoleBinding",
            Kind::Repo => "registry.chainguard.dev/Repo",
            Kind::Tag => "registry.chainguard.dev/Tag",
            Kind::Advisory => "vulnerabilities.chainguard.dev/Advisory",
            Kind::AdvisoryEvent => "vulnerabilities.chainguard.dev/AdvisoryEvent",
            Kind::IdentityProvider => "iam.chainguard.dev/IdentityProvider",
            Kind::GroupMapping => "iam.chainguard.dev/ExternalGroupRoleMapping",
            Kind::GroupInvite => "iam.chainguard.dev/GroupInvite",
            Kind::AccountAssociation => "iam.chainguard.dev/AccountAssociation",
            Kind::Subscription => "events.chainguard.dev/Subscription",
        }
    }

    /// The capability that makes a resource of this kind visible.
    pub const fn list_capability(self) -> Capability {
        match self {
            Kind::Group => IamGroupsList,
            Kind::Identity => IamIdentityList,
            Kind::Role => IamRolesList,
            Kind::RoleBinding => IamRoleBindingsList,
            Kind::Repo => RepoList,
            Kind::Tag => TagList,
            Kind::Advisory | Kind::AdvisoryEvent => AdvisoriesList,
            Kind::IdentityProvider | Kind::GroupMapping => IamIdentityProvidersList,
            Kind::GroupInvite => IamGroupInvitesList,
            Kind::AccountAssociation => IamAccountAssociationsList,
            Kind::Subscription => EventsSubscriptionList,
        }
    }
}

/// Where an RPC's capability must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// At the parent group named in the request (creates).
    Parent,
    /// At the resource's own uid (get, update, delete).
    Resource,
    /// Nowhere in particular: results are filtered to where it holds (lists).
    Unscoped,
}

#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// `Service.Method`, as in the reference.
    pub rpc: &'static str,
    pub kind: Kind,
    pub capability: Capability,
    pub scope: Scope,
}

impl Rule {
    /// The capability that makes the thing at the rule's scope visible, and the
    /// type to name when it is not.
    pub const fn seen_with(&self) -> (Capability, &'static str) {
        match self.scope {
            // Tags are created in a repo; everything else in a group.
            Scope::Parent if matches!(self.kind, Kind::Tag) => (RepoList, Kind::Repo.type_name()),
            // Events are created in an advisory.
            Scope::Parent if matches!(self.kind, Kind::AdvisoryEvent) => (AdvisoriesList, Kind::Advisory.type_name()),
            // Mappings are created in an identity provider.
            Scope::Parent if matches!(self.kind, Kind::GroupMapping) => {
                (IamIdentityProvidersList, Kind::IdentityProvider.type_name())
            }
            Scope::Parent => (IamGroupsList, Kind::Group.type_name()),
            Scope::Resource | Scope::Unscoped => (self.kind.list_capability(), self.kind.type_name()),
        }
    }
}

macro_rules! rules {
    ($(#[$doc:meta])* $table:ident { $($name:ident = $rpc:literal, $kind:ident, $cap:ident, $scope:ident;)* }) => {
        $(pub const $name: Rule = Rule { rpc: $rpc, kind: Kind::$kind, capability: $cap, scope: Scope::$scope };)*
        $(#[$doc])*
        pub const $table: &[Rule] = &[$($name,)*];
    };
}

rules! {
    /// Every IAM rule, in reference order.
    RULES {
    CREATE_GROUP = "GroupsService.CreateGroup", Group, IamGroupsCreate, Parent;
    GET_GROUP = "GroupsService.GetGroup", Group, IamGroupsList, Resource;
    LIST_GROUPS = "GroupsService.ListGroups", Group, IamGroupsList, Unscoped;
    UPDATE_GROUP = "GroupsService.UpdateGroup", Group, IamGroupsUpdate, Resource;
    DELETE_GROUP = "GroupsService.DeleteGroup", Group, IamGroupsDelete, Resource;
    CREATE_IDENTITY = "IdentitiesService.CreateIdentity", Identity, IamIdentityCreate, Parent;
    GET_IDENTITY = "IdentitiesService.GetIdentity", Identity, IamIdentityList, Resource;
    LIST_IDENTITIES = "IdentitiesService.ListIdentities", Identity, IamIdentityList, Unscoped;
    UPDATE_IDENTITY = "IdentitiesService.UpdateIdentity", Identity, IamIdentityUpdate, Resource;
    DELETE_IDENTITY = "IdentitiesService.DeleteIdentity", Identity, IamIdentityDelete, Resource;
    CREATE_ROLE = "RolesService.CreateRole", Role, IamRolesCreate, Parent;
    GET_ROLE = "RolesService.GetRole", Role, IamRolesList, Resource;
    LIST_ROLES = "RolesService.ListRoles", Role, IamRolesList, Unscoped;
    UPDATE_ROLE = "RolesService.UpdateRole", Role, IamRolesUpdate, Resource;
    DELETE_ROLE = "RolesService.DeleteRole", Role, IamRolesDelete, Resource;
    CREATE_ROLE_BINDING = "RoleBindingsService.CreateRoleBinding", RoleBinding, IamRoleBindingsCreate, Parent;
    GET_ROLE_BINDING = "RoleBindingsService.GetRoleBinding", RoleBinding, IamRoleBindingsList, Resource;
    LIST_ROLE_BINDINGS = "RoleBindingsService.ListRoleBindings", RoleBinding, IamRoleBindingsList, Unscoped;
    UPDATE_ROLE_BINDING = "RoleBindingsService.UpdateRoleBinding", RoleBinding, IamRoleBindingsUpdate, Resource;
    DELETE_ROLE_BINDING = "RoleBindingsService.DeleteRoleBinding", RoleBinding, IamRoleBindingsDelete, Resource;
}
}

rules! {
    /// Every registry API rule, in reference order. Images RPCs act on a
    /// repo's manifests and need `manifest.metadata.list` there. Updating a
    /// readme needs `repo.update` (the hosted service also wants an internal
    /// capability no customer holds; a self-hosted owner administers its own).
    REGISTRY_RULES {
    GET_ARCHITECTURES = "ImagesService.GetArchitectures", Repo, ManifestMetadataList, Resource;
    GET_SIZE = "ImagesService.GetSize", Repo, ManifestMetadataList, Resource;
    GET_REPO = "ReposService.GetRepo", Repo, RepoList, Resource;
    CREATE_REPO = "ReposService.CreateRepo", Repo, RepoCreate, Parent;
    UPDATE_REPO = "ReposService.UpdateRepo", Repo, RepoUpdate, Resource;
    DELETE_REPO = "ReposService.DeleteRepo", Repo, RepoDelete, Resource;
    LIST_REPOS = "ReposService.ListRepos", Repo, RepoList, Unscoped;
    GET_REPO_README = "ReposService.GetRepoReadme", Repo, RepoList, Resource;
    UPDATE_REPO_README = "ReposService.UpdateRepoReadme", Repo, RepoUpdate, Resource;
    GET_TAG = "TagsService.GetTag", Tag, TagList, Resource;
    LIST_TAGS = "TagsService.ListTags", Tag, TagList, Unscoped;
    CREATE_TAG = "TagsService.CreateTag", Tag, TagCreate, Parent;
    DELETE_TAG = "TagsService.DeleteTag", Tag, TagDelete, Resource;
}
}

rules! {
    /// Every advisories rule. Reads are v2 (`AdvisoriesService`), writes v1
    /// (`Advisories`). Reviewing an event (approve, reject, request changes)
    /// needs `advisories.approve`; importing needs create and update.
    ADVISORY_RULES {
    GET_ADVISORY = "AdvisoriesService.GetAdvisory", Advisory, AdvisoriesList, Resource;
    LIST_ADVISORIES = "AdvisoriesService.ListAdvisories", Advisory, AdvisoriesList, Unscoped;
    CREATE_ADVISORY = "Advisories.Create", Advisory, AdvisoriesCreate, Parent;
    UPDATE_ADVISORY = "Advisories.Update", Advisory, AdvisoriesUpdate, Resource;
    DELETE_ADVISORY = "Advisories.Delete", Advisory, AdvisoriesDelete, Resource;
    CREATE_ADVISORY_EVENT = "Advisories.CreateAdvisoryEvent", AdvisoryEvent, AdvisoriesCreate, Parent;
    LIST_ADVISORY_EVENTS = "Advisories.ListAdvisoryEvents", AdvisoryEvent, AdvisoriesList, Parent;
    UPDATE_ADVISORY_EVENT = "Advisories.UpdateAdvisoryEvent", AdvisoryEvent, AdvisoriesUpdate, Resource;
    REVIEW_ADVISORY_EVENT = "Advisories.UpdateAdvisoryEvent (review)", AdvisoryEvent, AdvisoriesApprove, Resource;
    IMPORT_ADVISORIES = "Advisories.Import", Advisory, AdvisoriesCreate, Parent;
    IMPORT_ADVISORIES_UPDATE = "Advisories.Import (update)", Advisory, AdvisoriesUpdate, Parent;
    IMPORT_REVIEWED_UPSTREAM = "Advisories.Import (reviewed upstream)", AdvisoryEvent, AdvisoriesApprove, Parent;
    IMPORT_OSV = "Advisories.ImportOsv", Advisory, AdvisoriesCreate, Parent;
    IMPORT_OSV_UPDATE = "Advisories.ImportOsv (update)", Advisory, AdvisoriesUpdate, Parent;
    GET_ADVISORY_FLAGS = "Advisories.GetAdvisoryFlags", Advisory, AdvisoriesList, Resource;
}
}

rules! {
    /// Every vulnerability-report rule. Per-image reads are scoped to the
    /// repo (pull tokens hold `vuln_reports.list` and `sboms.list`); the
    /// cross-repo listings need `vuln_report.list` and answer only about
    /// repos where the caller holds it.
    VULN_RULES {
    GET_VULN_REPORT = "Registry.GetVulnReport", Repo, TenantVulnReportsList, Resource;
    GET_SBOM = "Registry.GetSbom", Repo, TenantSbomsList, Resource;
    GET_RAW_SBOM = "Registry.GetRawSbom", Repo, TenantSbomsList, Resource;
    GET_IMAGE_CONFIG = "Registry.GetImageConfig", Repo, ManifestMetadataList, Resource;
    LIST_VULN_REPORTS = "Vulnerabilities.ListVulnReports", Repo, VulnReportList, Unscoped;
    GET_RAW_VULN_REPORT = "Vulnerabilities.GetRawVulnReport", Repo, VulnReportList, Unscoped;
        LIST_AFFECTED_IMAGES = "Vulnerabilities.ListAffectedImages", Repo, VulnReportList, Unscoped;
    EXPORT_VEX = "Vulnerabilities.ExportVex", Group, VulnReportList, Resource;
    LIST_VULN_COUNTS = "Vulnerabilities.ListVulnCountReports", Repo, VulnReportList, Unscoped;
    LIST_RESOLVED_VULNS = "SecurityAdvisoryService.ListResolvedVulnsReports", Repo, ManifestMetadataList, Unscoped;
}
}

rules! {
    /// Every rule for people: identity providers, their group mappings and
    /// group invites. Creating (or updating) an identity provider, a mapping
    /// or an invite also needs `role_bindings.create` where its role applies,
    /// checked with [`CREATE_ROLE_BINDING`].
    PEOPLE_RULES {
    CREATE_IDENTITY_PROVIDER = "IdentityProvidersService.CreateIdentityProvider", IdentityProvider, IamIdentityProvidersCreate, Parent;
    GET_IDENTITY_PROVIDER = "IdentityProvidersService.GetIdentityProvider", IdentityProvider, IamIdentityProvidersList, Resource;
    LIST_IDENTITY_PROVIDERS = "IdentityProvidersService.ListIdentityProviders", IdentityProvider, IamIdentityProvidersList, Unscoped;
    UPDATE_IDENTITY_PROVIDER = "IdentityProvidersService.UpdateIdentityProvider", IdentityProvider, IamIdentityProvidersUpdate, Resource;
    DELETE_IDENTITY_PROVIDER = "IdentityProvidersService.DeleteIdentityProvider", IdentityProvider, IamIdentityProvidersDelete, Resource;
    CREATE_GROUP_MAPPING = "ExternalGroupRoleMappingsService.CreateExternalGroupRoleMapping", GroupMapping, IamIdentityProvidersCreate, Parent;
    GET_GROUP_MAPPING = "ExternalGroupRoleMappingsService.GetExternalGroupRoleMapping", GroupMapping, IamIdentityProvidersList, Resource;
    LIST_GROUP_MAPPINGS = "ExternalGroupRoleMappingsService.ListExternalGroupRoleMappings", GroupMapping, IamIdentityProvidersList, Unscoped;
    DELETE_GROUP_MAPPING = "ExternalGroupRoleMappingsService.DeleteExternalGroupRoleMapping", GroupMapping, IamIdentityProvidersDelete, Resource;
    BATCH_DELETE_GROUP_MAPPINGS = "ExternalGroupRoleMappingsService.BatchDeleteExternalGroupRoleMappings", GroupMapping, IamIdentityProvidersDelete, Parent;
    CREATE_GROUP_INVITE = "GroupInvitesService.CreateGroupInvite", GroupInvite, IamGroupInvitesCreate, Parent;
    GET_GROUP_INVITE = "GroupInvitesService.GetGroupInvite", GroupInvite, IamGroupInvitesList, Resource;
    LIST_GROUP_INVITES = "GroupInvitesService.ListGroupInvites", GroupInvite, IamGroupInvitesList, Unscoped;
    DELETE_GROUP_INVITE = "GroupInvitesService.DeleteGroupInvite", GroupInvite, IamGroupInvitesDelete, Resource;
}
}

rules! {
    /// Terms acceptances and requests to join, at a group. LookupGroup,
    /// CheckEligibility and RequestGroupAccess need authentication only.
    DIRECTORY_RULES {
    ACCEPT_TERMS = "TermsService.AcceptTerms", Group, TermsAccept, Resource;
    LIST_TERMS_ACCEPTANCES = "TermsService.ListTermsAcceptances", Group, TermsList, Resource;
    LIST_GROUP_ACCESS_REQUESTS = "GroupsService.ListGroupAccessRequests", Group, IamRoleBindingsCreate, Resource;
}
}

rules! {
    /// Account associations: one per group (its uid is the group's). Check
    /// needs only the list capability.
    ACCOUNT_ASSOCIATION_RULES {
    CREATE_ACCOUNT_ASSOCIATION = "AccountAssociationsService.CreateAccountAssociation", AccountAssociation, IamAccountAssociationsCreate, Parent;
    GET_ACCOUNT_ASSOCIATION = "AccountAssociationsService.GetAccountAssociation", AccountAssociation, IamAccountAssociationsList, Resource;
    LIST_ACCOUNT_ASSOCIATIONS = "AccountAssociationsService.ListAccountAssociations", AccountAssociation, IamAccountAssociationsList, Unscoped;
    UPDATE_ACCOUNT_ASSOCIATION = "AccountAssociationsService.UpdateAccountAssociation", AccountAssociation, IamAccountAssociationsUpdate, Resource;
    DELETE_ACCOUNT_ASSOCIATION = "AccountAssociationsService.DeleteAccountAssociation", AccountAssociation, IamAccountAssociationsDelete, Resource;
    CHECK_ACCOUNT_ASSOCIATION = "AccountAssociationsService.CheckAccountAssociation", AccountAssociation, IamAccountAssociationsList, Resource;
}
}

rules! {
    /// Every events rule: subscriptions (v1, v2beta1, v2), and Ward's event
    /// log. Reading the audit trail needs `loggie.logs.read` at the group
    /// (the owner role and Ward's `auditor` role hold it); a subscription's
    /// deliveries are read with `subscriptions.list` and retried with
    /// `subscriptions.update`.
    EVENTS_RULES {
    CREATE_SUBSCRIPTION = "SubscriptionsService.CreateSubscription", Subscription, EventsSubscriptionCreate, Parent;
    GET_SUBSCRIPTION = "SubscriptionsService.GetSubscription", Subscription, EventsSubscriptionList, Resource;
    LIST_SUBSCRIPTIONS = "SubscriptionsService.ListSubscriptions", Subscription, EventsSubscriptionList, Unscoped;
    DELETE_SUBSCRIPTION = "SubscriptionsService.DeleteSubscription", Subscription, EventsSubscriptionDelete, Resource;
    GET_DELIVERIES = "EventLog.GetDeliveries", Subscription, EventsSubscriptionList, Resource;
    RETRY_DELIVERY = "EventLog.RetryDelivery", Subscription, EventsSubscriptionUpdate, Resource;
    LIST_EVENTS = "EventLog.ListEvents", Group, LoggieLogsRead, Resource;
}
}
