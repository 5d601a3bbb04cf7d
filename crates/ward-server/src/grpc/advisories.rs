//! The advisories gRPC services: `chainguard.platform.vulnerabilities.v2`
//! (and v2beta1) `AdvisoriesService` for reads, `…v1.Advisories` for writes,
//! and the public `chainguard.platform.advisory.v2.SecurityAdvisoryService`
//! (a token is optional there).

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::advisory::v2 as feed;
use ward_proto::vulnerabilities::{v1, v2};

use super::{caller, reply};
use crate::services::advisories::v1 as tr;
use crate::ward::Ward;

#[derive(Clone)]
pub struct Advisories(pub Arc<Ward>);

macro_rules! reads {
    ($($version:ident),*) => {$(
        #[tonic::async_trait]
        impl ward_proto::vulnerabilities::$version::advisories_service_server::AdvisoriesService for Advisories {
            async fn get_advisory(&self, req: Request<v2::GetAdvisoryRequest>) -> Result<Response<v2::Advisory>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.get_advisory(&c, req.into_inner()).await)
            }

            async fn list_advisories(
                &self,
                req: Request<v2::ListAdvisoriesRequest>,
            ) -> Result<Response<v2::ListAdvisoriesResponse>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.list_advisories(&c, req.into_inner()).await)
            }
        }
    )*};
}

reads!(v2, v2beta1);

#[tonic::async_trait]
impl v1::advisories_server::Advisories for Advisories {
    async fn create(&self, req: Request<v1::CreateAdvisoryRequest>) -> Result<Response<v1::Advisory>, Status> {
        let c = caller(&self.0, &req).await?;
        let r = req.into_inner();
        let out = async {
            let a = tr::advisory_in(r.advisory.unwrap_or_default())?;
            self.0.create_advisory(&c, &r.parent_id, a).await.map(tr::advisory_out)
        };
        reply(out.await)
    }

    async fn list(&self, req: Request<v1::AdvisoryFilter>) -> Result<Response<v1::AdvisoriesList>, Status> {
        let c = caller(&self.0, &req).await?;
        let f = req.into_inner();
        let parent = f.id.clone();
        let out = async {
            let resp = self.0.list_advisories(&c, tr::filter_in(f)?).await?;
            Ok(v1::AdvisoriesList {
                id: parent,
                items: resp.advisories.into_iter().map(tr::advisory_out).collect(),
                next_page_token: resp.next_page_token,
                total_count: resp.total_count,
            })
        };
        reply(out.await)
    }

    async fn update(&self, req: Request<v1::Advisory>) -> Result<Response<v1::Advisory>, Status> {
        let c = caller(&self.0, &req).await?;
        let mut a = req.into_inner();
        a.events.clear();
        let out = async {
            self.0
                .update_advisory(&c, tr::advisory_in(a)?)
                .await
                .map(tr::advisory_out)
        };
        reply(out.await)
    }

    async fn delete(&self, req: Request<v1::DeleteAdvisoryRequest>) -> Result<Response<()>, Status> {
        let c = caller(&self.0, &req).await?;
        reply(self.0.delete_advisory(&c, &req.into_inner().id).await)
    }

    async fn create_advisory_event(
        &self,
        req: Request<v1::CreateAdvisoryEventRequest>,
    ) -> Result<Response<v1::AdvisoryEvent>, Status> {
        let c = caller(&self.0, &req).await?;
        let r = req.into_inner();
        let out = async {
            let e = tr::event_in(r.advisory_event.unwrap_or_default())?;
            self.0
                .create_advisory_event(&c, &r.parent_id, e)
                .await
                .map(tr::event_out)
        };
        reply(out.await)
    }

    async fn list_advisory_events(
        &self,
        req: Request<v1::AdvisoryEventFilter>,
    ) -> Result<Response<v1::AdvisoryEventList>, Status> {
        let c = caller(&self.0, &req).await?;
        let parent = req.into_inner().parent_id;
        let out = self
            .0
            .list_advisory_events(&c, &parent)
            .await
            .map(|items| v1::AdvisoryEventList {
                parent_id: parent.clone(),
                items: items.into_iter().map(tr::event_out).collect(),
            });
        reply(out)
    }

    async fn update_advisory_event(
        &self,
        req: Request<v1::AdvisoryEvent>,
    ) -> Result<Response<v1::AdvisoryEvent>, Status> {
        let c = caller(&self.0, &req).await?;
        let e = req.into_inner();
        let uid = e.id.clone();
        let out = async {
            let change = tr::event_change(e)?;
            self.0.update_advisory_event(&c, &uid, change).await.map(tr::event_out)
        };
        reply(out.await)
    }

    async fn import(&self, req: Request<v1::ImportRequest>) -> Result<Response<v1::ImportResponse>, Status> {
        let c = caller(&self.0, &req).await?;
        reply(self.0.import_advisories(&c, req.into_inner()).await)
    }

    async fn get_advisory_flags(
        &self,
        req: Request<v1::GetAdvisoryFlagsRequest>,
    ) -> Result<Response<v1::AdvisoryFlags>, Status> {
        let c = caller(&self.0, &req).await?;
        reply(self.0.get_advisory_flags(&c, req.into_inner()).await)
    }

    async fn import_osv(&self, req: Request<v1::ImportOsvRequest>) -> Result<Response<v1::ImportResponse>, Status> {
        let c = caller(&self.0, &req).await?;
        reply(self.0.import_osv(&c, req.into_inner()).await)
    }
}

/// The caller when the request carries a token; anonymous otherwise.
async fn maybe_caller<T>(ward: &Ward, req: &Request<T>) -> Result<Option<crate::authz::Caller>, Status> {
    if req.metadata().contains_key("authorization") {
        Ok(Some(caller(ward, req).await?))
    } else {
        Ok(None)
    }
}

/// The public feed, at v2 and v2beta1 (the same messages).
macro_rules! feed {
    ($($v:ident),*) => {$(
        #[tonic::async_trait]
        impl ward_proto::advisory::$v::security_advisory_service_server::SecurityAdvisoryService for Advisories {
            async fn list_documents(
                &self,
                req: Request<feed::ListDocumentsRequest>,
            ) -> Result<Response<feed::ListDocumentsResponse>, Status> {
                let c = maybe_caller(&self.0, &req).await?;
                reply(self.0.list_documents(c.as_ref(), req.into_inner()).await)
            }

            async fn list_vulnerability_metadata(
                &self,
                req: Request<feed::ListVulnerabilityMetadataRequest>,
            ) -> Result<Response<feed::ListVulnerabilityMetadataResponse>, Status> {
                let c = maybe_caller(&self.0, &req).await?;
                reply(self.0.list_vulnerability_metadata(c.as_ref(), req.into_inner()).await)
            }

            async fn list_resolved_vulns_reports(
                &self,
                req: Request<feed::ListResolvedVulnsReportsRequest>,
            ) -> Result<Response<feed::ListResolvedVulnsReportsResponse>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.list_resolved_vulns_reports(&c, req.into_inner()).await)
            }
        }
    )*};
}

feed!(v2, v2beta1);
