//! The v1 registry gRPC service (`chainguard.platform.registry.Registry`)
//! and the public v1 advisory feed and ping, each method calling the same
//! translation (`services::v1`) the REST bindings call.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::advisory as adv;
use ward_proto::advisory::security_advisory_server::SecurityAdvisory;
use ward_proto::ping;
use ward_proto::registry::registry_server::Registry;
use ward_proto::registry::vulnerabilities_server::Vulnerabilities;
use ward_proto::registry::*;

use super::v1_iam::v1_service;
use super::{caller, reply};
use crate::services::v1::{feed, registry as v1};
use crate::ward::Ward;

#[derive(Clone)]
pub struct V1Registry(pub Arc<Ward>);

v1_service!(impl Registry for V1Registry by caller {
    create_repo(CreateRepoRequest) -> Repo = v1::create_repo;
    update_repo(Repo) -> Repo = v1::update_repo;
    list_repos(RepoFilter) -> RepoList = v1::list_repos;
    get_repo_count_by_source(GetRepoCountBySourceRequest) -> RepoCount = v1::get_repo_count_by_source;
    delete_repo(DeleteRepoRequest) -> () = v1::delete_repo;
    create_tag(CreateTagRequest) -> Tag = v1::create_tag;
    update_tag(Tag) -> Tag = v1::update_tag;
    delete_tag(DeleteTagRequest) -> () = v1::delete_tag;
    list_tags(TagFilter) -> TagList = v1::list_tags;
    get_repo_tags_summary(GetRepoTagsSummaryRequest) -> RepoTagsSummary = v1::get_repo_tags_summary;
    list_eol_tags(EolTagFilter) -> EolTagList = v1::list_eol_tags;
    list_tag_history(TagHistoryFilter) -> TagHistoryList = v1::list_tag_history;
    get_archs(ArchRequest) -> Archs = v1::get_archs;
    get_size(SizeRequest) -> Size = v1::get_size;
    get_vuln_report(VulnReportRequest) -> ward_proto::tenant::VulnReport = v1::get_vuln_report;
    get_sbom(SbomRequest) -> ward_proto::tenant::Sbom2 = v1::get_sbom;
    get_raw_sbom(RawSbomRequest) -> RawSbom = v1::get_raw_sbom;
    get_image_config(ImageConfigRequest) -> ImageConfig = v1::get_image_config;
});

v1_service!(impl Vulnerabilities for V1Registry by caller {
    list_vuln_reports(VulnReportFilter) -> VulnReportList = v1::list_vuln_reports;
    get_raw_vuln_report(GetRawVulnReportRequest) -> RawVulnReport = v1::get_raw_vuln_report;
        list_affected_images(AffectedImagesRequest) -> AffectedImageList = v1::list_affected_images;
    export_vex(ExportVexRequest) -> VexExport = v1::export_vex;
    list_vuln_count_reports(VulnCountReportFilter) -> VulnCountReportList = v1::list_vuln_count_reports;
    list_cumulative_vuln_count_reports(VulnCountReportFilter) -> VulnCountReportList =
        v1::list_cumulative_vuln_count_reports;
});

/// The public services: a token is optional, and used when given (the feed
/// then includes what its `advisories.list` may read). A token that does not
/// verify is refused, as over REST.
async fn maybe_caller<T>(ward: &Ward, req: &Request<T>) -> Result<Option<crate::authz::Caller>, Status> {
    if req.metadata().get("authorization").is_none() {
        return Ok(None);
    }
    caller(ward, req).await.map(Some)
}

#[tonic::async_trait]
impl SecurityAdvisory for V1Registry {
    async fn list_documents(&self, req: Request<adv::DocumentFilter>) -> Result<Response<adv::DocumentList>, Status> {
        let c = maybe_caller(&self.0, &req).await?;
        reply(feed::list_documents(self.0.clone(), c, req.into_inner()).await)
    }

    async fn list_vulnerability_metadata(
        &self,
        req: Request<adv::VulnerabilityMetadataFilter>,
    ) -> Result<Response<adv::VulnerabilityMetadataList>, Status> {
        let c = maybe_caller(&self.0, &req).await?;
        reply(feed::list_vulnerability_metadata(self.0.clone(), c, req.into_inner()).await)
    }

    /// Unlike the feed, needs a token.
    async fn list_resolved_vulns_reports(
        &self,
        req: Request<adv::ResolvedVulnsReportFilter>,
    ) -> Result<Response<adv::ResolvedVulnsReportList>, Status> {
        let c = caller(&self.0, &req).await?;
        reply(feed::list_resolved_vulns_reports(self.0.clone(), c, req.into_inner()).await)
    }
}

#[tonic::async_trait]
impl ping::ping_service_server::PingService for V1Registry {
    async fn ping(&self, req: Request<ping::PingRequest>) -> Result<Response<ping::Response>, Status> {
        reply(feed::ping(self.0.clone(), None, req.into_inner()).await)
    }
}
