//! Capabilities (reference §5.4) and the built-in roles (§5.3).
//!
//! Every value of the reference's capability enum is listed, with its enum
//! number, both names, its `bit` in the compact token encoding (§5.5) and its
//! flags, so that roles and tokens stay compatible with existing clients. A
//! custom role may hold any of them; a capability of a feature Ward does not
//! serve yet grants nothing until that feature exists. The built-in roles carry
//! the reference's full bundles.
//!
//! A [`CapSet`] is a fixed-size bitset indexed by the reference's `bit`, so
//! membership is O(1) and a set is `Copy`. Its storage form is the
//! comma-separated enum numbers, as before.

use std::fmt;

use sha2::{Digest, Sha256};

/// Flag bits of [`Capability::flags`].
const DEPRECATED: u8 = 1;
const INTERNAL_ONLY: u8 = 2;

macro_rules! flag {
    (deprecated) => {
        DEPRECATED
    };
    (internal_only) => {
        INTERNAL_ONLY
    };
}

macro_rules! capabilities {
    ($($variant:ident = $num:literal, $enum_name:literal, $dotted:literal, $bit:literal $(, $flag:ident)?;)*) => {
        /// A capability, by its reference enum number.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Capability {
            $($variant = $num,)*
        }

        impl Capability {
            /// Every capability, in enum-number order.
            pub const ALL: &'static [Capability] = &[$(Capability::$variant,)*];

            /// The enum value name used in v2 JSON (`CAP_IAM_GROUPS_LIST`).
            pub const fn enum_name(self) -> &'static str {
                match self { $(Capability::$variant => $enum_name,)* }
            }

            /// The dotted name used by v1 and tooling (`groups.list`).
            pub const fn dotted_name(self) -> &'static str {
                match self { $(Capability::$variant => $dotted,)* }
            }

            /// The reference's `bit`: this capability's position in the
            /// compact encoding of tokens (§5.5) and in a [`CapSet`].
            pub const fn bit(self) -> u32 {
                match self { $(Capability::$variant => $bit,)* }
            }

            const fn flags(self) -> u8 {
                match self { $(Capability::$variant => 0 $(| flag!($flag))?,)* }
            }

            /// The capability with this enum number, if the reference has one.
            pub const fn from_number(n: i32) -> Option<Self> {
                match n {
                    $($num => Some(Capability::$variant),)*
                    _ => None,
                }
            }

            /// By enum name (`CAP_IAM_GROUPS_LIST`) or dotted name (`groups.list`).
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($enum_name | $dotted => Some(Capability::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

// The reference's table (§5.4), in enum-number order: variant = number, enum
// name, dotted name, bit, and `deprecated` or `internal_only` where it says so.
// Variant names are the enum names without `CAP_`, in CamelCase.
capabilities! {
    Internal = 2, "CAP_INTERNAL", "internal", 95;
    IamGroupsCreate = 101, "CAP_IAM_GROUPS_CREATE", "groups.create", 1;
    IamGroupsUpdate = 102, "CAP_IAM_GROUPS_UPDATE", "groups.update", 2;
    IamGroupsList = 103, "CAP_IAM_GROUPS_LIST", "groups.list", 3;
    IamGroupsDelete = 104, "CAP_IAM_GROUPS_DELETE", "groups.delete", 4;
    IamGroupInvitesCreate = 201, "CAP_IAM_GROUP_INVITES_CREATE", "group_invites.create", 5;
    IamGroupInvitesList = 203, "CAP_IAM_GROUP_INVITES_LIST", "group_invites.list", 6;
    IamGroupInvitesDelete = 204, "CAP_IAM_GROUP_INVITES_DELETE", "group_invites.delete", 7;
    IamRolesCreate = 301, "CAP_IAM_ROLES_CREATE", "roles.create", 8;
    IamRolesUpdate = 302, "CAP_IAM_ROLES_UPDATE", "roles.update", 9;
    IamRolesList = 303, "CAP_IAM_ROLES_LIST", "roles.list", 10;
    IamRolesDelete = 304, "CAP_IAM_ROLES_DELETE", "roles.delete", 11;
    IamRoleBindingsCreate = 401, "CAP_IAM_ROLE_BINDINGS_CREATE", "role_bindings.create", 12;
    IamRoleBindingsUpdate = 402, "CAP_IAM_ROLE_BINDINGS_UPDATE", "role_bindings.update", 13;
    IamRoleBindingsList = 403, "CAP_IAM_ROLE_BINDINGS_LIST", "role_bindings.list", 14;
    IamRoleBindingsDelete = 404, "CAP_IAM_ROLE_BINDINGS_DELETE", "role_bindings.delete", 15;
    TenantClustersCreate = 501, "CAP_TENANT_CLUSTERS_CREATE", "clusters.create", 16, deprecated;
    TenantClustersUpdate = 502, "CAP_TENANT_CLUSTERS_UPDATE", "clusters.update", 17, deprecated;
    TenantClustersList = 503, "CAP_TENANT_CLUSTERS_LIST", "clusters.list", 18, deprecated;
    TenantClustersDelete = 504, "CAP_TENANT_CLUSTERS_DELETE", "clusters.delete", 19, deprecated;
    TenantClustersDiscover = 505, "CAP_TENANT_CLUSTERS_DISCOVER", "clusters.discover", 51, deprecated;
    TenantRecordsList = 603, "CAP_TENANT_RECORDS_LIST", "records.list", 20, deprecated;
    TenantRecordContextsList = 613, "CAP_TENANT_RECORD_CONTEXTS_LIST", "record_contexts.list", 48, deprecated;
    TenantRecordSignaturesList = 623, "CAP_TENANT_RECORD_SIGNATURES_LIST", "record_signatures.list", 49;
    TenantRecordPolicyResultsList = 633, "CAP_TENANT_RECORD_POLICY_RESULTS_LIST", "record_policy_results.list", 50, deprecated;
    TenantRisksList = 640, "CAP_TENANT_RISKS_LIST", "risks.list", 68, deprecated;
    TenantSbomsList = 650, "CAP_TENANT_SBOMS_LIST", "sboms.list", 69;
    TenantVulnReportsList = 660, "CAP_TENANT_VULN_REPORTS_LIST", "vuln_reports.list", 70;
    TenantAttestationsList = 670, "CAP_TENANT_ATTESTATIONS_LIST", "attestations.list", 71;
    IamAccountAssociationsCreate = 701, "CAP_IAM_ACCOUNT_ASSOCIATIONS_CREATE", "account_associations.create", 21;
    IamAccountAssociationsUpdate = 702, "CAP_IAM_ACCOUNT_ASSOCIATIONS_UPDATE", "account_associations.update", 22;
    IamAccountAssociationsList = 703, "CAP_IAM_ACCOUNT_ASSOCIATIONS_LIST", "account_associations.list", 23;
    IamAccountAssociationsDelete = 704, "CAP_IAM_ACCOUNT_ASSOCIATIONS_DELETE", "account_associations.delete", 24;
    IamPolicyCreate = 801, "CAP_IAM_POLICY_CREATE", "policy.create", 25, deprecated;
    IamPolicyUpdate = 802, "CAP_IAM_POLICY_UPDATE", "policy.update", 26, deprecated;
    IamPolicyList = 803, "CAP_IAM_POLICY_LIST", "policy.list", 27, deprecated;
    IamPolicyDelete = 804, "CAP_IAM_POLICY_DELETE", "policy.delete", 28, deprecated;
    IamIdentityCreate = 901, "CAP_IAM_IDENTITY_CREATE", "identity.create", 29;
    IamIdentityUpdate = 902, "CAP_IAM_IDENTITY_UPDATE", "identity.update", 30;
    IamIdentityList = 903, "CAP_IAM_IDENTITY_LIST", "identity.list", 31;
    IamIdentityDelete = 904, "CAP_IAM_IDENTITY_DELETE", "identity.delete", 32;
    TenantNodesList = 1003, "CAP_TENANT_NODES_LIST", "nodes.list", 33, deprecated;
    TenantNamespacesList = 1103, "CAP_TENANT_NAMESPACES_LIST", "namespaces.list", 34, deprecated;
    TenantWorkloadsList = 1203, "CAP_TENANT_WORKLOADS_LIST", "workloads.list", 35, deprecated;
    IamIdentityProvidersCreate = 1301, "CAP_IAM_IDENTITY_PROVIDERS_CREATE", "identity_providers.create", 52;
    IamIdentityProvidersUpdate = 1302, "CAP_IAM_IDENTITY_PROVIDERS_UPDATE", "identity_providers.update", 53;
    IamIdentityProvidersList = 1303, "CAP_IAM_IDENTITY_PROVIDERS_LIST", "identity_providers.list", 54;
    IamIdentityProvidersDelete = 1304, "CAP_IAM_IDENTITY_PROVIDERS_DELETE", "identity_providers.delete", 55;
    IamScimManage = 1305, "CAP_IAM_SCIM_MANAGE", "identity_providers.scim.manage", 191;
    EventsSubscriptionCreate = 1501, "CAP_EVENTS_SUBSCRIPTION_CREATE", "subscriptions.create", 36;
    EventsSubscriptionUpdate = 1502, "CAP_EVENTS_SUBSCRIPTION_UPDATE", "subscriptions.update", 37;
    EventsSubscriptionList = 1503, "CAP_EVENTS_SUBSCRIPTION_LIST", "subscriptions.list", 38;
    EventsSubscriptionDelete = 1504, "CAP_EVENTS_SUBSCRIPTION_DELETE", "subscriptions.delete", 39;
    RepoBlobsGet = 1600, "CAP_REPO_BLOBS_GET", "repo.blobs.get", 107;
    RepoCreate = 1603, "CAP_REPO_CREATE", "repo.create", 56;
    RepoUpdate = 1604, "CAP_REPO_UPDATE", "repo.update", 57;
    RepoList = 1605, "CAP_REPO_LIST", "repo.list", 58;
    RepoDelete = 1606, "CAP_REPO_DELETE", "repo.delete", 59;
    ManifestCreate = 1607, "CAP_MANIFEST_CREATE", "manifest.create", 60;
    ManifestUpdate = 1608, "CAP_MANIFEST_UPDATE", "manifest.update", 61;
    ManifestList = 1609, "CAP_MANIFEST_LIST", "manifest.list", 62;
    ManifestDelete = 1610, "CAP_MANIFEST_DELETE", "manifest.delete", 63;
    TagCreate = 1611, "CAP_TAG_CREATE", "tag.create", 64;
    TagUpdate = 1612, "CAP_TAG_UPDATE", "tag.update", 65;
    TagList = 1613, "CAP_TAG_LIST", "tag.list", 66;
    TagDelete = 1614, "CAP_TAG_DELETE", "tag.delete", 67;
    ManifestMetadataList = 1615, "CAP_MANIFEST_METADATA_LIST", "manifest.metadata.list", 72;
    ReferrersList = 1616, "CAP_REFERRERS_LIST", "referrers.list", 124;
    RepoInternalAdmin = 1617, "CAP_REPO_INTERNAL_ADMIN", "repo.internal.admin", 168, internal_only;
    ApkCreate = 1650, "CAP_APK_CREATE", "apk.create", 73;
    ApkUpdate = 1651, "CAP_APK_UPDATE", "apk.update", 74;
    ApkList = 1652, "CAP_APK_LIST", "apk.list", 75;
    ApkDelete = 1653, "CAP_APK_DELETE", "apk.delete", 76;
    VersionList = 1654, "CAP_VERSION_LIST", "version.list", 77;
    ApkBlobsGet = 1655, "CAP_APK_BLOBS_GET", "apk.blobs.get", 108;
    VulnReportCreate = 1660, "CAP_VULN_REPORT_CREATE", "vuln_report.create", 78;
    VulnReportList = 1661, "CAP_VULN_REPORT_LIST", "vuln_report.list", 79;
    VulnCreate = 1662, "CAP_VULN_CREATE", "vuln.create", 80;
    BuildReportList = 1670, "CAP_BUILD_REPORT_LIST", "build_report.list", 81;
    RegistryEntitlementsList = 1680, "CAP_REGISTRY_ENTITLEMENTS_LIST", "registry.entitlements.list", 87;
    RegistryEntitlementsCreate = 1681, "CAP_REGISTRY_ENTITLEMENTS_CREATE", "registry.entitlements.create", 96;
    RegistryEntitlementsDelete = 1682, "CAP_REGISTRY_ENTITLEMENTS_DELETE", "registry.entitlements.delete", 97;
    RegistrySettingsList = 1683, "CAP_REGISTRY_SETTINGS_LIST", "registry.settings.list", 101;
    RegistrySettingsUpdate = 1684, "CAP_REGISTRY_SETTINGS_UPDATE", "registry.settings.update", 102;
    RegistryEntitlementsImagesAdd = 1685, "CAP_REGISTRY_ENTITLEMENTS_IMAGES_ADD", "registry.entitlements.images.add", 133;
    RegistryEntitlementsImagesRemove = 1686, "CAP_REGISTRY_ENTITLEMENTS_IMAGES_REMOVE", "registry.entitlements.images.remove", 169;
    RegistryEntitlementsImagesSwap = 1687, "CAP_REGISTRY_ENTITLEMENTS_IMAGES_SWAP", "registry.entitlements.images.swap", 202;
    RegistryOverlaysList = 1688, "CAP_REGISTRY_OVERLAYS_LIST", "registry.overlays.list", 207;
    RegistryOverlaysEdit = 1689, "CAP_REGISTRY_OVERLAYS_EDIT", "registry.overlays.edit", 208;
    SigstoreCreate = 1701, "CAP_SIGSTORE_CREATE", "sigstore.create", 42, deprecated;
    SigstoreUpdate = 1702, "CAP_SIGSTORE_UPDATE", "sigstore.update", 43, deprecated;
    SigstoreList = 1703, "CAP_SIGSTORE_LIST", "sigstore.list", 44, deprecated;
    SigstoreDelete = 1704, "CAP_SIGSTORE_DELETE", "sigstore.delete", 45, deprecated;
    SigstoreCertificateCreate = 1705, "CAP_SIGSTORE_CERTIFICATE_CREATE", "sigstore.certificate.create", 46, deprecated;
    LibrariesEntitlementsCreate = 1800, "CAP_LIBRARIES_ENTITLEMENTS_CREATE", "libraries.entitlements.create", 82;
    LibrariesEntitlementsList = 1801, "CAP_LIBRARIES_ENTITLEMENTS_LIST", "libraries.entitlements.list", 83;
    LibrariesEntitlementsDelete = 1802, "CAP_LIBRARIES_ENTITLEMENTS_DELETE", "libraries.entitlements.delete", 84;
    LibrariesArtifactsList = 1803, "CAP_LIBRARIES_ARTIFACTS_LIST", "libraries.artifacts.list", 94;
    LibrariesPythonList = 1810, "CAP_LIBRARIES_PYTHON_LIST", "libraries.python.list", 85;
    LibrariesPythonCreate = 1811, "CAP_LIBRARIES_PYTHON_CREATE", "libraries.python.create", 111;
    LibrariesJavaList = 1820, "CAP_LIBRARIES_JAVA_LIST", "libraries.java.list", 86;
    LibrariesJavaCreate = 1821, "CAP_LIBRARIES_JAVA_CREATE", "libraries.java.create", 110;
    LibrariesJavascriptList = 1830, "CAP_LIBRARIES_JAVASCRIPT_LIST", "libraries.javascript.list", 88;
    LibrariesJavascriptCreate = 1831, "CAP_LIBRARIES_JAVASCRIPT_CREATE", "libraries.javascript.create", 109;
    LibrariesDotnetList = 1832, "CAP_LIBRARIES_DOTNET_LIST", "libraries.dotnet.list", 196;
    LibrariesDotnetCreate = 1833, "CAP_LIBRARIES_DOTNET_CREATE", "libraries.dotnet.create", 197;
    LibrariesGoList = 1834, "CAP_LIBRARIES_GO_LIST", "libraries.go.list", 205;
    LibrariesGoCreate = 1835, "CAP_LIBRARIES_GO_CREATE", "libraries.go.create", 206;
    LibrariesRebuilderRequestsCreate = 1840, "CAP_LIBRARIES_REBUILDER_REQUESTS_CREATE", "libraries.rebuilder.requests.create", 103, internal_only;
    LibrariesRebuilderRequestsList = 1841, "CAP_LIBRARIES_REBUILDER_REQUESTS_LIST", "libraries.rebuilder.requests.list", 104, internal_only;
    LibrariesRebuilderRequestsCancel = 1842, "CAP_LIBRARIES_REBUILDER_REQUESTS_CANCEL", "libraries.rebuilder.requests.cancel", 105, internal_only;
    LibrariesRebuilderRequestsGroupUpdate = 1843, "CAP_LIBRARIES_REBUILDER_REQUESTS_GROUP_UPDATE", "libraries.rebuilder.requests.group.update", 121, internal_only;
    LibrariesRebuilderArtifactsInvalidate = 1850, "CAP_LIBRARIES_REBUILDER_ARTIFACTS_INVALIDATE", "libraries.rebuilder.artifacts.invalidate", 106, internal_only;
    LibrariesRebuilderExclusionsManage = 1851, "CAP_LIBRARIES_REBUILDER_EXCLUSIONS_MANAGE", "libraries.rebuilder.exclusions.manage", 112, internal_only;
    LibrariesRebuilderBuildsRead = 1852, "CAP_LIBRARIES_REBUILDER_BUILDS_READ", "libraries.rebuilder.builds.read", 122, internal_only;
    LibrariesRebuilderBuildsTokensFetch = 1853, "CAP_LIBRARIES_REBUILDER_BUILDS_TOKENS_FETCH", "libraries.rebuilder.builds.tokens.fetch", 130, internal_only;
    LibrariesRebuilderBuildsUntrusted = 1854, "CAP_LIBRARIES_REBUILDER_BUILDS_UNTRUSTED", "libraries.rebuilder.builds.untrusted", 131, internal_only;
    LibrariesRebuilderRemediatedArtifactsRead = 1855, "CAP_LIBRARIES_REBUILDER_REMEDIATED_ARTIFACTS_READ", "libraries.rebuilder.remediated_artifacts.read", 132, internal_only;
    LibrariesRebuilderNewVersionsRead = 1856, "CAP_LIBRARIES_REBUILDER_NEW_VERSIONS_READ", "libraries.rebuilder.new_versions.read", 141, internal_only;
    LibrariesRebuilderNewVersionsRefresh = 1857, "CAP_LIBRARIES_REBUILDER_NEW_VERSIONS_REFRESH", "libraries.rebuilder.new_versions.refresh", 142, internal_only;
    LibrariesRebuilderMalwareStatusRead = 1858, "CAP_LIBRARIES_REBUILDER_MALWARE_STATUS_READ", "libraries.rebuilder.malware.status.read", 157, internal_only;
    LibrariesRebuilderCveRemediationsList = 1859, "CAP_LIBRARIES_REBUILDER_CVE_REMEDIATIONS_LIST", "libraries.rebuilder.cve_remediations.list", 177, internal_only;
    LibrariesCacheInvalidate = 1860, "CAP_LIBRARIES_CACHE_INVALIDATE", "libraries.cache.invalidate", 129;
    LibrariesRebuilderCveRemediationsUpdate = 1861, "CAP_LIBRARIES_REBUILDER_CVE_REMEDIATIONS_UPDATE", "libraries.rebuilder.cve_remediations.update", 178, internal_only;
    LibrariesCacheList = 1862, "CAP_LIBRARIES_CACHE_LIST", "libraries.cache.list", 192;
    LibrariesRebuilderSourceCoordinatesWrite = 1863, "CAP_LIBRARIES_REBUILDER_SOURCE_COORDINATES_WRITE", "libraries.rebuilder.source_coordinates.write", 200, internal_only;
    LibrariesRebuilderSourceCoordinatesResolve = 1864, "CAP_LIBRARIES_REBUILDER_SOURCE_COORDINATES_RESOLVE", "libraries.rebuilder.source_coordinates.resolve", 201, internal_only;
    LibrariesAwsMarketplaceSubscriptionsCreate = 1870, "CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_CREATE", "libraries.aws_marketplace.subscriptions.create", 165;
    LibrariesAwsMarketplaceSubscriptionsUpdate = 1871, "CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_UPDATE", "libraries.aws_marketplace.subscriptions.update", 166;
    LibrariesAwsMarketplaceSubscriptionsList = 1872, "CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_LIST", "libraries.aws_marketplace.subscriptions.list", 167;
    LibrariesRequestGroupsCreate = 1874, "CAP_LIBRARIES_REQUEST_GROUPS_CREATE", "libraries.request_groups.create", 209;
    LibrariesRequestGroupsList = 1875, "CAP_LIBRARIES_REQUEST_GROUPS_LIST", "libraries.request_groups.list", 210;
    LibrariesRequestGroupsUpdate = 1876, "CAP_LIBRARIES_REQUEST_GROUPS_UPDATE", "libraries.request_groups.update", 211;
    LibrariesRequestGroupsDelete = 1877, "CAP_LIBRARIES_REQUEST_GROUPS_DELETE", "libraries.request_groups.delete", 212;
    LibrariesRequestGroupsSubmit = 1878, "CAP_LIBRARIES_REQUEST_GROUPS_SUBMIT", "libraries.request_groups.submit", 213;
    LibrariesRequestGroupsItemsUpdate = 1879, "CAP_LIBRARIES_REQUEST_GROUPS_ITEMS_UPDATE", "libraries.request_groups.items.update", 214;
    LibrariesRequestGroupsRefreshCoverage = 1880, "CAP_LIBRARIES_REQUEST_GROUPS_REFRESH_COVERAGE", "libraries.request_groups.refresh_coverage", 215, internal_only;
    LibrariesRequestGroupsDeleteSubmitted = 1881, "CAP_LIBRARIES_REQUEST_GROUPS_DELETE_SUBMITTED", "libraries.request_groups.delete_submitted", 216, internal_only;
    LibrariesRemoteRegistriesCreate = 1882, "CAP_LIBRARIES_REMOTE_REGISTRIES_CREATE", "libraries.remote_registries.create", 219;
    LibrariesRemoteRegistriesList = 1883, "CAP_LIBRARIES_REMOTE_REGISTRIES_LIST", "libraries.remote_registries.list", 220;
    LibrariesRemoteRegistriesDelete = 1884, "CAP_LIBRARIES_REMOTE_REGISTRIES_DELETE", "libraries.remote_registries.delete", 221;
    AdvisoriesCreate = 1900, "CAP_ADVISORIES_CREATE", "advisories.create", 89;
    AdvisoriesUpdate = 1901, "CAP_ADVISORIES_UPDATE", "advisories.update", 90;
    AdvisoriesList = 1902, "CAP_ADVISORIES_LIST", "advisories.list", 91;
    AdvisoriesDelete = 1903, "CAP_ADVISORIES_DELETE", "advisories.delete", 92;
    AdvisoriesApprove = 1904, "CAP_ADVISORIES_APPROVE", "advisories.approve", 93;
    RegistryDeploymentsCreate = 1950, "CAP_REGISTRY_DEPLOYMENTS_CREATE", "registry.deployments.create", 98;
    RegistryDeploymentsUpdate = 1951, "CAP_REGISTRY_DEPLOYMENTS_UPDATE", "registry.deployments.update", 99, internal_only;
    RegistryDeploymentsList = 1952, "CAP_REGISTRY_DEPLOYMENTS_LIST", "registry.deployments.list", 100;
    PoliciesPolicyCreate = 2001, "CAP_POLICIES_POLICY_CREATE", "policies.policy.create", 113;
    PoliciesPolicyUpdate = 2002, "CAP_POLICIES_POLICY_UPDATE", "policies.policy.update", 114;
    PoliciesPolicyList = 2003, "CAP_POLICIES_POLICY_LIST", "policies.policy.list", 115;
    PoliciesPolicyDelete = 2004, "CAP_POLICIES_POLICY_DELETE", "policies.policy.delete", 116;
    PoliciesBindingCreate = 2011, "CAP_POLICIES_BINDING_CREATE", "policies.binding.create", 117;
    PoliciesBindingUpdate = 2012, "CAP_POLICIES_BINDING_UPDATE", "policies.binding.update", 118;
    PoliciesBindingList = 2013, "CAP_POLICIES_BINDING_LIST", "policies.binding.list", 119;
    PoliciesBindingDelete = 2014, "CAP_POLICIES_BINDING_DELETE", "policies.binding.delete", 120;
    PoliciesDecisionList = 2015, "CAP_POLICIES_DECISION_LIST", "policies.decision.list", 173;
    PoliciesOverrideCreate = 2016, "CAP_POLICIES_OVERRIDE_CREATE", "policies.override.create", 174;
    PoliciesOverrideList = 2017, "CAP_POLICIES_OVERRIDE_LIST", "policies.override.list", 175;
    PoliciesOverrideDelete = 2018, "CAP_POLICIES_OVERRIDE_DELETE", "policies.override.delete", 176;
    RepoCheckPolicies = 2020, "CAP_REPO_CHECK_POLICIES", "repo.check_policies", 134;
    PackagesEntitlementsList = 2100, "CAP_PACKAGES_ENTITLEMENTS_LIST", "packages.entitlements.list", 123;
    TermsAccept = 2201, "CAP_TERMS_ACCEPT", "terms.accept", 125;
    TermsList = 2202, "CAP_TERMS_LIST", "terms.list", 126;
    GuardenerDfcConvert = 2301, "CAP_GUARDENER_DFC_CONVERT", "guardener.dfc.convert", 127;
    GuardenerAssociationManage = 2302, "CAP_GUARDENER_ASSOCIATION_MANAGE", "guardener.association.manage", 170;
    GuardenerAssociationList = 2303, "CAP_GUARDENER_ASSOCIATION_LIST", "guardener.association.list", 181;
    GuardenerEntitlementManage = 2304, "CAP_GUARDENER_ENTITLEMENT_MANAGE", "guardener.entitlement.manage", 185, internal_only;
    GuardenerEntitlementList = 2305, "CAP_GUARDENER_ENTITLEMENT_LIST", "guardener.entitlement.list", 186;
    GuardenerActionsMigrate = 2306, "CAP_GUARDENER_ACTIONS_MIGRATE", "guardener.actions.migrate", 188;
    GuardenerScanList = 2307, "CAP_GUARDENER_SCAN_LIST", "guardener.scan.list", 217;
    GuardenerScanGet = 2308, "CAP_GUARDENER_SCAN_GET", "guardener.scan.get", 218;
    McpToolCall = 2401, "CAP_MCP_TOOL_CALL", "mcp.tool.call", 128;
    SkillsPublish = 2501, "CAP_SKILLS_PUBLISH", "skills.publish", 137;
    SkillsEntitlementsCreate = 2502, "CAP_SKILLS_ENTITLEMENTS_CREATE", "skills.entitlements.create", 138;
    SkillsEntitlementsList = 2503, "CAP_SKILLS_ENTITLEMENTS_LIST", "skills.entitlements.list", 139;
    SkillsEntitlementsDelete = 2504, "CAP_SKILLS_ENTITLEMENTS_DELETE", "skills.entitlements.delete", 140;
    SkillsWrite = 2505, "CAP_SKILLS_WRITE", "skills.write", 193, internal_only;
    SkillsDelete = 2506, "CAP_SKILLS_DELETE", "skills.delete", 194, internal_only;
    SkillsList = 2507, "CAP_SKILLS_LIST", "skills.list", 195;
    SkillsHardenRead = 2508, "CAP_SKILLS_HARDEN_READ", "skills.harden.read", 199;
    SkillsHardenWrite = 2509, "CAP_SKILLS_HARDEN_WRITE", "skills.harden.write", 203;
    SkillsHardenCancel = 2510, "CAP_SKILLS_HARDEN_CANCEL", "skills.harden.cancel", 204;
    ArgosDocumentsCreate = 2601, "CAP_ARGOS_DOCUMENTS_CREATE", "argos.documents.create", 144;
    ArgosDocumentsList = 2602, "CAP_ARGOS_DOCUMENTS_LIST", "argos.documents.list", 145;
    ArgosDocumentsDelete = 2603, "CAP_ARGOS_DOCUMENTS_DELETE", "argos.documents.delete", 146;
    ArgosOsvRead = 2604, "CAP_ARGOS_OSV_READ", "argos.osv.read", 147;
    LibrariesPolicyCreate = 2605, "CAP_LIBRARIES_POLICY_CREATE", "libraries.policy.create", 148;
    LibrariesPolicyUpdate = 2606, "CAP_LIBRARIES_POLICY_UPDATE", "libraries.policy.update", 149;
    LibrariesPolicyList = 2607, "CAP_LIBRARIES_POLICY_LIST", "libraries.policy.list", 150;
    LibrariesPolicyDelete = 2608, "CAP_LIBRARIES_POLICY_DELETE", "libraries.policy.delete", 151;
    LibrariesPolicyBindingCreate = 2609, "CAP_LIBRARIES_POLICY_BINDING_CREATE", "libraries.policy.binding.create", 152;
    LibrariesPolicyBindingUpdate = 2610, "CAP_LIBRARIES_POLICY_BINDING_UPDATE", "libraries.policy.binding.update", 153;
    LibrariesPolicyBindingList = 2611, "CAP_LIBRARIES_POLICY_BINDING_LIST", "libraries.policy.binding.list", 154;
    LibrariesPolicyBindingDelete = 2612, "CAP_LIBRARIES_POLICY_BINDING_DELETE", "libraries.policy.binding.delete", 155;
    LibrariesPolicyBlockEventList = 2613, "CAP_LIBRARIES_POLICY_BLOCK_EVENT_LIST", "libraries.policy.block_event.list", 156;
    ArgosOsvDump = 2614, "CAP_ARGOS_OSV_DUMP", "argos.osv.dump", 198;
    ActionsList = 2700, "CAP_ACTIONS_LIST", "actions.list", 164;
    BuildapiBuildCreate = 2701, "CAP_BUILDAPI_BUILD_CREATE", "buildapi.build.create", 158, internal_only;
    BuildapiBuildList = 2702, "CAP_BUILDAPI_BUILD_LIST", "buildapi.build.list", 159, internal_only;
    BuildapiWorkerSync = 2703, "CAP_BUILDAPI_WORKER_SYNC", "buildapi.worker.sync", 162, internal_only;
    BuildapiBuildCancel = 2704, "CAP_BUILDAPI_BUILD_CANCEL", "buildapi.build.cancel", 163, internal_only;
    RexExecutionsCreate = 2705, "CAP_REX_EXECUTIONS_CREATE", "rex.executions.create", 182, internal_only;
    RexExecutionsList = 2706, "CAP_REX_EXECUTIONS_LIST", "rex.executions.list", 183, internal_only;
    RexWorkersConnect = 2707, "CAP_REX_WORKERS_CONNECT", "rex.workers.connect", 184, internal_only;
    RexClassUse = 2708, "CAP_REX_CLASS_USE", "rex.class.use", 189, internal_only;
    RexClassServe = 2709, "CAP_REX_CLASS_SERVE", "rex.class.serve", 190, internal_only;
    CassieCasRead = 2801, "CAP_CASSIE_CAS_READ", "cassie.cas.read", 160, internal_only;
    CassieCasWrite = 2802, "CAP_CASSIE_CAS_WRITE", "cassie.cas.write", 161, internal_only;
    CassieAcWrite = 2803, "CAP_CASSIE_AC_WRITE", "cassie.ac.write", 171, internal_only;
    CassieAcRead = 2804, "CAP_CASSIE_AC_READ", "cassie.ac.read", 172, internal_only;
    LoggieLogsRead = 2901, "CAP_LOGGIE_LOGS_READ", "loggie.logs.read", 179, internal_only;
    LoggieLogsWrite = 2902, "CAP_LOGGIE_LOGS_WRITE", "loggie.logs.write", 180, internal_only;
    LoggieLogsCreate = 2903, "CAP_LOGGIE_LOGS_CREATE", "loggie.logs.create", 187, internal_only;
    Gulfstream = 10000, "CAP_GULFSTREAM", "gulfstream", 47;
}

impl Capability {
    /// Deprecated in the reference: still a valid value, granted by no
    /// built-in role.
    pub const fn is_deprecated(self) -> bool {
        self.flags() & DEPRECATED != 0
    }

    /// Internal-only in the reference (§5.2): never part of a built-in role.
    pub const fn is_internal_only(self) -> bool {
        self.flags() & INTERNAL_ONLY != 0
    }
}

/// Words in a [`CapSet`].
const WORDS: usize = 4;

// Checked when compiling: `ALL` is in enum-number order, every bit fits in a
// `CapSet`, and no two capabilities share a bit.
const _: () = {
    let all = Capability::ALL;
    let mut i = 0;
    while i < all.len() {
        assert!(
            all[i].bit() < CapSet::BITS,
            "a capability's bit does not fit in a CapSet"
        );
        assert!(
            i == 0 || (all[i - 1] as i32) < (all[i] as i32),
            "ALL is not in enum-number order"
        );
        let mut j = i + 1;
        while j < all.len() {
            assert!(all[i].bit() != all[j].bit(), "two capabilities share a bit");
            j += 1;
        }
        i += 1;
    }
};

/// A set of capabilities: a bitset indexed by [`Capability::bit`].
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CapSet([u64; WORDS]);

impl CapSet {
    /// How many bits a set has room for.
    pub const BITS: u32 = 64 * WORDS as u32;

    pub const EMPTY: CapSet = CapSet([0; WORDS]);

    const ALL_SET: CapSet = CapSet::of(Capability::ALL);

    /// The set of `caps`.
    pub const fn of(caps: &[Capability]) -> CapSet {
        let mut s = CapSet::EMPTY;
        let mut i = 0;
        while i < caps.len() {
            s.insert(caps[i]);
            i += 1;
        }
        s
    }

    /// Every capability of the reference.
    pub const fn all() -> Self {
        Self::ALL_SET
    }

    /// The word and the mask of `c`'s bit.
    const fn slot(c: Capability) -> (usize, u64) {
        let bit = c.bit();
        ((bit / 64) as usize, 1 << (bit % 64))
    }

    pub const fn contains(self, c: Capability) -> bool {
        let (word, mask) = Self::slot(c);
        self.0[word] & mask != 0
    }

    pub const fn insert(&mut self, c: Capability) {
        let (word, mask) = Self::slot(c);
        self.0[word] |= mask;
    }

    pub const fn union(self, other: CapSet) -> CapSet {
        let mut out = self;
        let mut i = 0;
        while i < WORDS {
            out.0[i] |= other.0[i];
            i += 1;
        }
        out
    }

    pub const fn intersection(self, other: CapSet) -> CapSet {
        let mut out = self;
        let mut i = 0;
        while i < WORDS {
            out.0[i] &= other.0[i];
            i += 1;
        }
        out
    }

    pub const fn is_subset(self, other: CapSet) -> bool {
        let mut i = 0;
        while i < WORDS {
            if self.0[i] & !other.0[i] != 0 {
                return false;
            }
            i += 1;
        }
        true
    }

    pub const fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The number of members.
    pub const fn len(self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < WORDS {
            n += self.0[i].count_ones() as usize;
            i += 1;
        }
        n
    }

    /// Members in enum-number order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.iter().copied().filter(move |c| self.contains(*c))
    }

    /// Comma-separated enum numbers: the storage form.
    pub fn to_storage(self) -> String {
        self.iter()
            .map(|c| (c as i32).to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Parses the storage form; numbers that are not capabilities are skipped.
    pub fn from_storage(s: &str) -> Self {
        s.split(',')
            .filter_map(|n| n.trim().parse().ok())
            .filter_map(Capability::from_number)
            .collect()
    }
}

/// The members by dotted name.
impl fmt::Debug for CapSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(Capability::dotted_name)).finish()
    }
}

impl FromIterator<Capability> for CapSet {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        let mut s = CapSet::EMPTY;
        for c in iter {
            s.insert(c);
        }
        s
    }
}

/// A built-in role: root-level, the same uid on every installation.
pub struct BuiltinRole {
    pub name: &'static str,
    pub description: &'static str,
    /// In enum-number order.
    pub capabilities: &'static [Capability],
}

impl BuiltinRole {
    /// A stable 40-hex uid derived from the name.
    pub fn uid(&self) -> String {
        hex::encode(&Sha256::digest(format!("ward built-in role {}", self.name))[..20])
    }

    pub fn caps(&self) -> CapSet {
        self.capabilities.iter().copied().collect()
    }
}

// ---------------------------------------------------------------------------
// The reference's bundles (§5.3, the SDK's `roles.go`), composed as there.
// ---------------------------------------------------------------------------

use Capability::*;

/// `RegistryPullCaps`.
const REGISTRY_PULL: CapSet = CapSet::of(&[
    RepoBlobsGet,
    IamGroupsList,
    RepoList,
    ManifestList,
    ReferrersList,
    TagList,
    ManifestMetadataList,
    TenantRecordSignaturesList,
    TenantSbomsList,
    TenantVulnReportsList,
]);

/// `RegistryPushCaps`: pull, plus writing repositories, manifests and tags,
/// and creating groups ("to create nested groups as needed on push").
const REGISTRY_PUSH: CapSet = REGISTRY_PULL.union(CapSet::of(&[
    RepoCreate,
    RepoUpdate,
    RepoDelete,
    ManifestCreate,
    ManifestUpdate,
    ManifestDelete,
    TagCreate,
    TagUpdate,
    TagDelete,
    IamGroupsCreate,
]));

/// `RegistryEditorCaps` (= `RegistryRepoAdminCaps`).
const REGISTRY_EDITOR: CapSet = REGISTRY_PULL.union(CapSet::of(&[
    RepoCreate,
    RepoUpdate,
    RepoDelete,
    RegistryOverlaysList,
    RegistryOverlaysEdit,
]));

/// `PullTokenCreatorCaps`: deliberately without `identity.list` (§5.2).
const PULL_TOKEN_CREATOR: CapSet = CapSet::of(&[IamRoleBindingsCreate, IamIdentityCreate, IamRolesList, IamGroupsList]);

/// `APKPullCaps`.
const APK_PULL: CapSet = CapSet::of(&[ApkBlobsGet, IamGroupsList, ApkList]);

/// `APKPushCaps`.
const APK_PUSH: CapSet = APK_PULL.union(CapSet::of(&[ApkCreate, ApkDelete]));

/// `RegistryPullTokenCreatorCaps`.
const REGISTRY_PULL_TOKEN_CREATOR: CapSet = PULL_TOKEN_CREATOR.union(REGISTRY_PULL).union(APK_PULL);

/// `Libraries<X>PullCaps`, for the language whose list capability is `list`.
const fn libraries_pull(list: Capability) -> CapSet {
    CapSet::of(&[LibrariesEntitlementsList, list])
}

/// `Libraries<X>PushCaps`.
const fn libraries_push(list: Capability, create: Capability) -> CapSet {
    libraries_pull(list).union(CapSet::of(&[create]))
}

const LIBRARIES_JAVA_PULL: CapSet = libraries_pull(LibrariesJavaList);
const LIBRARIES_PYTHON_PULL: CapSet = libraries_pull(LibrariesPythonList);
const LIBRARIES_JAVASCRIPT_PULL: CapSet = libraries_pull(LibrariesJavascriptList);

/// Push (and so pull) for every library language: java, python, javascript,
/// dotnet, go.
const LIBRARIES_PUSH_ALL: CapSet = libraries_push(LibrariesJavaList, LibrariesJavaCreate)
    .union(libraries_push(LibrariesPythonList, LibrariesPythonCreate))
    .union(libraries_push(LibrariesJavascriptList, LibrariesJavascriptCreate))
    .union(libraries_push(LibrariesDotnetList, LibrariesDotnetCreate))
    .union(libraries_push(LibrariesGoList, LibrariesGoCreate));

/// `ActionsViewerCaps`.
const ACTIONS_VIEWER: CapSet = CapSet::of(&[ActionsList]);

/// `GuardenerUserCaps`.
const GUARDENER_USER: CapSet = REGISTRY_PULL.union(CapSet::of(&[
    GuardenerDfcConvert,
    GuardenerAssociationList,
    GuardenerActionsMigrate,
    GuardenerScanList,
    GuardenerScanGet,
    TermsList,
]));

/// `GuardenerAdminCaps`.
const GUARDENER_ADMIN: CapSet = GUARDENER_USER.union(CapSet::of(&[TermsAccept, GuardenerAssociationManage]));

/// `SkillsPublishCaps`.
const SKILLS_PUBLISH: CapSet = CapSet::of(&[
    SkillsPublish,
    SkillsEntitlementsList,
    SkillsHardenRead,
    SkillsHardenWrite,
    SkillsHardenCancel,
    TermsList,
]);

/// `MCPToolUserCaps`.
const MCP_TOOL_USER: CapSet = CapSet::of(&[McpToolCall]);

/// `ArgosOSVReaderCaps`.
const ARGOS_OSV_READER: CapSet = CapSet::of(&[ArgosOsvRead]);

/// `AdvisoriesViewerCaps`, `…CreatorCaps`, `…ApproverCaps`, `…AdminCaps`:
/// each the one before plus its own.
const ADVISORIES_VIEWER: CapSet = CapSet::of(&[AdvisoriesList]);
const ADVISORIES_CREATOR: CapSet = ADVISORIES_VIEWER.union(CapSet::of(&[AdvisoriesCreate, AdvisoriesUpdate]));
const ADVISORIES_APPROVER: CapSet = ADVISORIES_CREATOR.union(CapSet::of(&[AdvisoriesApprove]));
const ADVISORIES_ADMIN: CapSet = ADVISORIES_APPROVER.union(CapSet::of(&[AdvisoriesDelete]));

/// `ConsoleViewerCaps`: reading everything the console shows (45).
const CONSOLE_VIEWER: CapSet = CapSet::of(&[
    IamAccountAssociationsList,
    ActionsList,
    AdvisoriesList,
    ApkList,
    BuildReportList,
    IamGroupInvitesList,
    IamGroupsList,
    GuardenerEntitlementList,
    GuardenerScanGet,
    GuardenerScanList,
    IamIdentityList,
    IamIdentityProvidersList,
    LibrariesArtifactsList,
    LibrariesAwsMarketplaceSubscriptionsList,
    LibrariesCacheList,
    LibrariesEntitlementsList,
    LibrariesPolicyBindingList,
    LibrariesPolicyBlockEventList,
    LibrariesPolicyList,
    LibrariesRemoteRegistriesList,
    LibrariesRequestGroupsList,
    ManifestList,
    ManifestMetadataList,
    PackagesEntitlementsList,
    PoliciesBindingList,
    PoliciesDecisionList,
    PoliciesOverrideList,
    PoliciesPolicyList,
    TenantRecordSignaturesList,
    ReferrersList,
    RegistryDeploymentsList,
    RegistryEntitlementsList,
    RegistryOverlaysList,
    RegistrySettingsList,
    RepoList,
    IamRoleBindingsList,
    IamRolesList,
    TenantSbomsList,
    SkillsEntitlementsList,
    SkillsList,
    EventsSubscriptionList,
    TagList,
    VersionList,
    VulnReportList,
    TenantVulnReportsList,
]);

/// `ViewerCaps` (51).
const VIEWER: CapSet = CONSOLE_VIEWER
    .union(REGISTRY_PULL)
    .union(APK_PULL)
    .union(GUARDENER_USER);

/// `EditorCaps` (62): viewer, plus managing event subscriptions and library
/// request groups, and editing the registry.
const EDITOR: CapSet = VIEWER
    .union(CapSet::of(&[
        EventsSubscriptionCreate,
        EventsSubscriptionUpdate,
        EventsSubscriptionDelete,
        LibrariesRequestGroupsCreate,
        LibrariesRequestGroupsUpdate,
        LibrariesRequestGroupsDelete,
        LibrariesRequestGroupsItemsUpdate,
    ]))
    .union(REGISTRY_EDITOR);

/// "All IAM create/update/delete" of `OwnerCaps`: account associations, group
/// invites (which have no update), groups, identities, identity providers
/// (and managing their SCIM), role bindings and roles.
const IAM_ADMIN: CapSet = CapSet::of(&[
    IamAccountAssociationsCreate,
    IamAccountAssociationsUpdate,
    IamAccountAssociationsDelete,
    IamGroupInvitesCreate,
    IamGroupInvitesDelete,
    IamGroupsCreate,
    IamGroupsUpdate,
    IamGroupsDelete,
    IamIdentityCreate,
    IamIdentityUpdate,
    IamIdentityDelete,
    IamIdentityProvidersCreate,
    IamIdentityProvidersUpdate,
    IamIdentityProvidersDelete,
    IamScimManage,
    IamRoleBindingsCreate,
    IamRoleBindingsUpdate,
    IamRoleBindingsDelete,
    IamRolesCreate,
    IamRolesUpdate,
    IamRolesDelete,
]);

/// The rest of what `OwnerCaps` names one by one.
const OWNER_ADMIN: CapSet = CapSet::of(&[
    VulnCreate,
    VulnReportCreate,
    RegistryEntitlementsImagesAdd,
    RegistryEntitlementsImagesRemove,
    RegistryEntitlementsImagesSwap,
    LibrariesEntitlementsCreate,
    LibrariesEntitlementsDelete,
    SkillsEntitlementsCreate,
    SkillsEntitlementsDelete,
    LibrariesCacheInvalidate,
    RepoCheckPolicies,
    // policies.*: create/update/delete where they exist (overrides have no update).
    PoliciesPolicyCreate,
    PoliciesPolicyUpdate,
    PoliciesPolicyDelete,
    PoliciesBindingCreate,
    PoliciesBindingUpdate,
    PoliciesBindingDelete,
    PoliciesOverrideCreate,
    PoliciesOverrideDelete,
    // libraries.policy(.binding).*: the lists are already in the viewer.
    LibrariesPolicyCreate,
    LibrariesPolicyUpdate,
    LibrariesPolicyDelete,
    LibrariesPolicyBindingCreate,
    LibrariesPolicyBindingUpdate,
    LibrariesPolicyBindingDelete,
    LibrariesRemoteRegistriesCreate,
    LibrariesRemoteRegistriesDelete,
    TermsAccept,
    TermsList,
    LibrariesAwsMarketplaceSubscriptionsCreate,
    LibrariesAwsMarketplaceSubscriptionsUpdate,
    LibrariesRequestGroupsSubmit,
]);

/// `OwnerCaps` (138).
const OWNER: CapSet = EDITOR
    .union(IAM_ADMIN)
    .union(OWNER_ADMIN)
    .union(MCP_TOOL_USER)
    .union(REGISTRY_PUSH)
    .union(APK_PUSH)
    .union(LIBRARIES_PUSH_ALL)
    .union(SKILLS_PUBLISH)
    .union(GUARDENER_ADMIN);

/// Ward's `owner`: `OwnerCaps` plus the advisories bundle. The SDK's owner
/// bundle has no advisory writes, which would leave an organization's owner
/// unable to run its advisory review or to grant the advisory roles (no one
/// grants what they do not hold); "full control of the group" includes them.
///
/// It also reads the audit trail (`loggie.logs.read`, the reference's
/// capability for reading logs): an owner answers for who did what in their
/// organization, and grants the `auditor` role.
const OWNER_ROLE: CapSet = OWNER.union(ADVISORIES_ADMIN).union(CapSet::of(&[LoggieLogsRead]));

/// Ward's `auditor`: reads everything a viewer reads, and the audit trail.
const AUDITOR: CapSet = VIEWER.union(CapSet::of(&[LoggieLogsRead]));

/// The members of `set`, `N` of them, in enum-number order.
const fn members<const N: usize>(set: CapSet) -> [Capability; N] {
    let mut out = [Internal; N];
    let mut n = 0;
    let mut i = 0;
    while i < Capability::ALL.len() {
        let c = Capability::ALL[i];
        if set.contains(c) {
            out[n] = c;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "members: wrong length");
    out
}

/// A built-in role holding the bundle `$caps` (a `CapSet` constant).
macro_rules! role {
    ($name:literal, $description:literal, $caps:ident) => {
        BuiltinRole {
            name: $name,
            description: $description,
            capabilities: &members::<{ $caps.len() }>($caps),
        }
    };
}

/// The built-in roles, with the reference's full bundles (§5.3).
///
/// The reference documents the role names and the SDK's bundles, but which
/// bundle backs which role is inferred from their names (the server-side table
/// is not public): every name-to-bundle mapping below is that inference. The
/// first six are Ward's original roles; the others are the further roles the
/// reference names whose bundle it gives in full. Left out: roles named
/// without a bundle (`limited_owner`, `libraries.*.pull_token_creator`), names
/// only implied (`libraries.dotnet.pull`, `libraries.go.pull`), and bundles
/// with no documented role name (`APKPushCaps`,
/// `SkillsPublishCaps`, `MCPToolUserCaps`, the other Argos bundles, and the
/// internal-only rebuilder bundles).
pub const BUILTIN_ROLES: &[BuiltinRole] = &[
    role!(
        "owner",
        "Owner Role (built-in): full control of the group and everything below it",
        OWNER_ROLE
    ),
    role!("editor", "Editor Role (built-in)", EDITOR),
    role!("viewer", "Viewer Role (built-in)", VIEWER),
    role!("registry.pull", "Registry Pull Role (built-in)", REGISTRY_PULL),
    role!("registry.push", "Registry Push Role (built-in)", REGISTRY_PUSH),
    role!(
        "registry.pull_token_creator",
        "Registry Pull Token Creator Role (built-in)",
        REGISTRY_PULL_TOKEN_CREATOR
    ),
    role!("console_viewer", "Console Viewer Role (built-in)", CONSOLE_VIEWER),
    role!("apk.pull", "APK Pull Role (built-in)", APK_PULL),
    role!(
        "libraries.java.pull",
        "Java Libraries Pull Role (built-in)",
        LIBRARIES_JAVA_PULL
    ),
    role!(
        "libraries.python.pull",
        "Python Libraries Pull Role (built-in)",
        LIBRARIES_PYTHON_PULL
    ),
    role!(
        "libraries.javascript.pull",
        "JavaScript Libraries Pull Role (built-in)",
        LIBRARIES_JAVASCRIPT_PULL
    ),
    role!("guardener.user", "Guardener User Role (built-in)", GUARDENER_USER),
    role!("guardener.admin", "Guardener Admin Role (built-in)", GUARDENER_ADMIN),
    role!("actions.viewer", "Actions Viewer Role (built-in)", ACTIONS_VIEWER),
    role!("argos.osv.reader", "Argos OSV Reader Role (built-in)", ARGOS_OSV_READER),
    role!(
        "advisories.viewer",
        "Advisories Viewer Role (built-in)",
        ADVISORIES_VIEWER
    ),
    role!(
        "advisories.creator",
        "Advisories Creator Role (built-in)",
        ADVISORIES_CREATOR
    ),
    role!(
        "advisories.approver",
        "Advisories Approver Role (built-in)",
        ADVISORIES_APPROVER
    ),
    role!("advisories.admin", "Advisories Admin Role (built-in)", ADVISORIES_ADMIN),
    role!(
        "auditor",
        "Auditor Role (built-in, Ward): reads what a viewer reads, and the audit trail",
        AUDITOR
    ),
];

pub fn builtin_role(name: &str) -> Option<&'static BuiltinRole> {
    BUILTIN_ROLES.iter().find(|r| r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str) -> CapSet {
        builtin_role(name).unwrap_or_else(|| panic!("no role {name}")).caps()
    }

    /// `CAP_IAM_GROUPS_LIST` -> `IamGroupsList`.
    fn camel(enum_name: &str) -> String {
        let rest = enum_name.strip_prefix("CAP_").expect("CAP_ prefix");
        rest.split('_')
            .map(|w| w[..1].to_owned() + &w[1..].to_lowercase())
            .collect()
    }

    #[test]
    fn the_whole_enum() {
        assert_eq!(Capability::ALL.len(), 216);
        assert_eq!(CapSet::all().len(), 216);
        let internal = Capability::ALL.iter().filter(|c| c.is_internal_only()).count();
        let deprecated = Capability::ALL.iter().filter(|c| c.is_deprecated()).count();
        assert_eq!((internal, deprecated), (40, 21));
        for &c in Capability::ALL {
            let n = c as i32;
            assert_eq!(Capability::from_number(n), Some(c), "{c:?}");
            assert_eq!(Capability::from_name(c.enum_name()), Some(c), "{c:?}");
            assert_eq!(Capability::from_name(c.dotted_name()), Some(c), "{c:?}");
            assert_eq!(
                format!("{c:?}"),
                camel(c.enum_name()),
                "variant names follow enum names"
            );
            assert!(c.enum_name().starts_with("CAP_") && !c.dotted_name().is_empty());
            assert!(!(c.is_internal_only() && c.is_deprecated()), "{c:?}");
        }
        let mut bits: Vec<u32> = Capability::ALL.iter().map(|c| c.bit()).collect();
        bits.sort();
        bits.dedup();
        assert_eq!(bits.len(), 216, "bits are unique");
        assert!(bits.iter().all(|b| *b < CapSet::BITS));
        let mut dotted: Vec<&str> = Capability::ALL.iter().map(|c| c.dotted_name()).collect();
        dotted.sort();
        dotted.dedup();
        assert_eq!(dotted.len(), 216, "dotted names are unique");
        // UNKNOWN and the reserved numbers are not capabilities.
        for n in [0, 1, 1601, 1602, 1873, -1, 999, 10001] {
            assert_eq!(Capability::from_number(n), None, "{n}");
        }
        for s in ["UNKNOWN", "", "CAP_REPO_LIST ", "Repo.List", "vuln.list"] {
            assert_eq!(Capability::from_name(s), None, "{s:?}");
        }
    }

    #[test]
    fn spot_checks_against_the_reference() {
        for (c, n, e, d, bit) in [
            (Internal, 2, "CAP_INTERNAL", "internal", 95),
            (IamGroupsCreate, 101, "CAP_IAM_GROUPS_CREATE", "groups.create", 1),
            (IamIdentityDelete, 904, "CAP_IAM_IDENTITY_DELETE", "identity.delete", 32),
            (
                IamScimManage,
                1305,
                "CAP_IAM_SCIM_MANAGE",
                "identity_providers.scim.manage",
                191,
            ),
            (RepoList, 1605, "CAP_REPO_LIST", "repo.list", 58),
            (AdvisoriesList, 1902, "CAP_ADVISORIES_LIST", "advisories.list", 91),
            (
                LibrariesRemoteRegistriesDelete,
                1884,
                "CAP_LIBRARIES_REMOTE_REGISTRIES_DELETE",
                "libraries.remote_registries.delete",
                221,
            ),
            (Gulfstream, 10000, "CAP_GULFSTREAM", "gulfstream", 47),
        ] {
            assert_eq!((c as i32, c.enum_name(), c.dotted_name(), c.bit()), (n, e, d, bit));
        }
        assert!(TenantClustersCreate.is_deprecated() && !TenantClustersCreate.is_internal_only());
        assert!(RepoInternalAdmin.is_internal_only() && !RepoInternalAdmin.is_deprecated());
        assert!(!Internal.is_internal_only() && !RepoList.is_deprecated());
    }

    /// The proto enum and this table agree, value for value.
    #[test]
    fn proto_matches() {
        let proto = include_str!("../../../proto/chainguard/capabilities/capabilities.proto");
        let mut seen = Vec::new();
        for line in proto.lines().map(str::trim).filter(|l| l.starts_with("CAP_")) {
            let (name, rest) = line.split_once(" = ").expect("NAME = number;");
            let n: i32 = rest.split(';').next().unwrap().parse().expect("number");
            let c = Capability::from_number(n).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(c.enum_name(), name, "{line}");
            assert!(
                line.contains(&format!("// {}, bit {}", c.dotted_name(), c.bit())),
                "{line}"
            );
            seen.push(c);
        }
        assert_eq!(seen, Capability::ALL);
        assert!(proto.contains("reserved 1, 1601, 1602, 1873;"));
    }

    #[test]
    fn sets_and_storage() {
        let s: CapSet = [IamGroupsList, IamRolesList].into_iter().collect();
        assert!(s.contains(IamGroupsList) && !s.contains(IamGroupsCreate));
        assert_eq!(CapSet::from_storage(&s.to_storage()), s);
        assert_eq!(s.to_storage(), "103,303");
        assert!(s.is_subset(CapSet::all()) && !CapSet::all().is_subset(s));
        assert_eq!(Capability::from_name("groups.list"), Some(IamGroupsList));
        assert_eq!(
            Capability::from_name("CAP_IAM_IDENTITY_DELETE"),
            Some(IamIdentityDelete)
        );
        assert_eq!(Capability::from_name("repo.list"), Some(RepoList));
        assert_eq!(Capability::from_name("CAP_REPO_LIST"), Some(RepoList));
        assert_eq!(Capability::from_number(904), Some(IamIdentityDelete));
        assert_eq!(CapSet::from_storage("103,99999"), [IamGroupsList].into_iter().collect());
        assert_eq!(CapSet::from_storage(""), CapSet::EMPTY);
        assert_eq!(CapSet::from_storage(" 1605 , x,1601"), CapSet::of(&[RepoList]));
        assert!(CapSet::EMPTY.is_empty() && CapSet::default().is_empty() && !s.is_empty());
        assert_eq!(CapSet::from_storage(&CapSet::all().to_storage()), CapSet::all());
        assert_eq!(format!("{s:?}"), r#"{"groups.list", "roles.list"}"#);
    }

    /// Bits in every word of the set, up to the highest (221).
    #[test]
    fn high_bits() {
        // Bits 1, 95, 191, 218, 221.
        let high = [
            IamGroupsCreate,
            Internal,
            IamScimManage,
            GuardenerScanGet,
            LibrariesRemoteRegistriesDelete,
        ];
        let mut s = CapSet::EMPTY;
        for (i, c) in high.into_iter().enumerate() {
            assert!(!s.contains(c));
            s.insert(c);
            assert!(s.contains(c) && s.len() == i + 1);
        }
        assert!(high[3].bit() > 128 && high[4].bit() > 192);
        // Members come out in enum-number order, whatever their bits.
        let by_number = [
            IamGroupsCreate,
            Internal,
            IamScimManage,
            GuardenerScanGet,
            LibrariesRemoteRegistriesDelete,
        ];
        let mut sorted = by_number;
        sorted.sort();
        assert_eq!(s.iter().collect::<Vec<_>>(), sorted);
        assert_eq!(s.to_storage(), "2,101,1305,1884,2308");
        assert_eq!(CapSet::from_storage(&s.to_storage()), s);
        // Nothing else is set: every other capability is absent.
        for &c in Capability::ALL {
            assert_eq!(s.contains(c), high.contains(&c), "{c:?}");
        }
        let t = CapSet::of(&[LibrariesRemoteRegistriesDelete, RepoList]);
        assert_eq!(s.intersection(t), CapSet::of(&[LibrariesRemoteRegistriesDelete]));
        assert_eq!(s.union(t).len(), 6);
        assert!(!t.is_subset(s) && CapSet::of(&[GuardenerScanGet]).is_subset(s));
        assert!(s.is_subset(s.union(t)) && s.intersection(t).is_subset(t));
    }

    #[test]
    fn builtin_uids_are_stable_and_distinct() {
        let viewer = builtin_role("viewer").unwrap();
        assert_eq!(viewer.uid(), builtin_role("viewer").unwrap().uid());
        assert!(crate::uidp::Uidp::is_valid(&viewer.uid()));
        let mut uids: Vec<String> = BUILTIN_ROLES.iter().map(BuiltinRole::uid).collect();
        uids.sort();
        uids.dedup();
        assert_eq!(uids.len(), BUILTIN_ROLES.len());
        // The derivation never changes: existing installations keep their uids.
        for (name, uid) in [
            ("owner", "2e70dce536f41f26190189603568266558ece332"),
            ("editor", "d66c469bcf67aae9af91dfbb4bb03403c3b90df1"),
            ("viewer", "b3a10b7ebdc894ec9224da1823ade6e39e42ebe6"),
            ("registry.pull", "0068ae34e7ba40a25c9b80597390d404167c6f7b"),
            ("registry.push", "9f2ff58cf04ef0ec89c928c3f388702cb9988304"),
            (
                "registry.pull_token_creator",
                "4fb2029bc6bef63d8e94da04e8ec9beabc1a4120",
            ),
        ] {
            assert_eq!(builtin_role(name).unwrap().uid(), uid, "{name}");
        }
        assert_eq!(
            BUILTIN_ROLES.iter().map(|r| r.name).take(6).collect::<Vec<_>>(),
            [
                "owner",
                "editor",
                "viewer",
                "registry.pull",
                "registry.push",
                "registry.pull_token_creator"
            ]
        );
    }

    #[test]
    fn builtin_bundles_nest() {
        let strict = |a: &str, b: &str| {
            assert!(role(a).is_subset(role(b)) && role(a) != role(b), "{a} ⊂ {b}");
        };
        strict("console_viewer", "viewer");
        strict("viewer", "editor");
        strict("editor", "owner");
        strict("registry.pull", "registry.push");
        strict("registry.pull", "registry.pull_token_creator");
        strict("apk.pull", "registry.pull_token_creator");
        strict("registry.pull", "guardener.user");
        strict("guardener.user", "guardener.admin");
        strict("guardener.admin", "owner");
        for r in [
            "registry.pull",
            "registry.push",
            "apk.pull",
            "libraries.java.pull",
            "libraries.python.pull",
            "libraries.javascript.pull",
            "guardener.user",
            "actions.viewer",
        ] {
            assert!(role(r).is_subset(role("owner")), "{r} ⊂ owner");
        }
        for r in ["registry.pull", "apk.pull", "guardener.user", "actions.viewer"] {
            assert!(role(r).is_subset(role("viewer")), "{r} ⊂ viewer");
        }
        // The sizes the reference gives.
        assert_eq!(role("console_viewer").len(), 45);
        assert_eq!(role("viewer").len(), 51);
        assert_eq!(role("editor").len(), 62);
        // OwnerCaps (138) plus the four advisory writes and the audit trail.
        assert_eq!(role("owner").len(), 143);
        assert_eq!(role("auditor"), role("viewer").union(CapSet::of(&[LoggieLogsRead])));
        assert!(OWNER.is_subset(role("owner")) && ADVISORIES_ADMIN.is_subset(role("owner")));
        assert_eq!(role("registry.pull").len(), 10);
        assert_eq!(role("registry.push").len(), 20);
        assert_eq!(role("registry.pull_token_creator").len(), 15);
        assert_eq!(role("apk.pull"), CapSet::of(&[ApkBlobsGet, IamGroupsList, ApkList]));
        assert_eq!(
            role("libraries.python.pull"),
            CapSet::of(&[LibrariesEntitlementsList, LibrariesPythonList])
        );
        assert_eq!(role("actions.viewer"), CapSet::of(&[ActionsList]));
        assert_eq!(role("argos.osv.reader"), CapSet::of(&[ArgosOsvRead]));
        // Viewer adds exactly these to the console viewer.
        let added: Vec<_> = role("viewer")
            .iter()
            .filter(|c| !role("console_viewer").contains(*c))
            .collect();
        assert_eq!(
            added,
            [
                RepoBlobsGet,
                ApkBlobsGet,
                TermsList,
                GuardenerDfcConvert,
                GuardenerAssociationList,
                GuardenerActionsMigrate
            ]
        );
        // Owner is not everything.
        assert_ne!(role("owner"), CapSet::all());
        let owner = role("owner");
        for c in [
            IamScimManage,
            IamGroupInvitesCreate,
            RepoCheckPolicies,
            LibrariesGoCreate,
            McpToolCall,
            SkillsHardenCancel,
            AdvisoriesCreate,
            AdvisoriesApprove,
        ] {
            assert!(owner.contains(c), "owner has {c:?}");
        }
        for c in [
            Internal,
            RegistryEntitlementsCreate,
            ApkUpdate,
            Gulfstream,
            ArgosOsvRead,
        ] {
            assert!(!owner.contains(c), "owner lacks {c:?}");
        }
        // Every IAM capability Ward serves is the owner's.
        for c in [
            IamGroupsCreate,
            IamGroupsUpdate,
            IamGroupsList,
            IamGroupsDelete,
            IamRolesCreate,
            IamRolesUpdate,
            IamRolesList,
            IamRolesDelete,
            IamRoleBindingsCreate,
            IamRoleBindingsUpdate,
            IamRoleBindingsList,
            IamRoleBindingsDelete,
            IamIdentityCreate,
            IamIdentityUpdate,
            IamIdentityList,
            IamIdentityDelete,
        ] {
            assert!(owner.contains(c), "{c:?}");
        }
        // Pull-token creators create identities but cannot list them (§5.2).
        let creator = role("registry.pull_token_creator");
        assert!(creator.contains(IamIdentityCreate) && !creator.contains(IamIdentityList));
    }

    #[test]
    fn builtin_roles_are_well_formed() {
        let mut names: Vec<&str> = BUILTIN_ROLES.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), BUILTIN_ROLES.len());
        for r in BUILTIN_ROLES {
            assert!(!r.capabilities.is_empty() && !r.description.is_empty(), "{}", r.name);
            // In enum-number order, without repeats.
            assert!(r.capabilities.windows(2).all(|w| w[0] < w[1]), "{}", r.name);
            assert_eq!(r.caps().len(), r.capabilities.len(), "{}", r.name);
            for c in r.capabilities {
                // Ward reads its audit trail with the reference's capability
                // for reading logs, internal to the hosted service.
                let audit = *c == LoggieLogsRead && matches!(r.name, "owner" | "auditor");
                assert!(!c.is_internal_only() || audit, "{} has internal-only {c:?}", r.name);
                assert!(!c.is_deprecated(), "{} has deprecated {c:?}", r.name);
            }
        }
    }
}
