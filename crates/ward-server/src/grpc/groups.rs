//! GroupsService over gRPC, for both `chainguard.platform.iam.v2` and `…v2beta1`
//! (their messages are the same Rust types, so one body serves both traits).

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::iam::v2::{
    CreateGroupRequest, DeleteGroupRequest, GetGroupRequest, Group, ListGroupsRequest,
    ListGroupsResponse, UpdateGroupRequest,
};

use super::{caller, reply};
use crate::services::UpdateMask;
use crate::ward::Ward;

#[derive(Clone)]
pub struct GrpcGroups(pub Arc<Ward>);

impl GrpcGroups {
    async fn update(&self, req: Request<UpdateGroupRequest>) -> Result<Response<Group>, Status> {
        let c = caller(&self.0, &req).await?;
        let UpdateGroupRequest { group, update_mask } = req.into_inner();
        let mask = match update_mask {
            Some(m) if !m.paths.is_empty() => UpdateMask::Paths(m.paths),
            _ => UpdateMask::Populated,
        };
        reply(
            self.0
                .update_group(&c, group.unwrap_or_default(), mask)
                .await,
        )
    }
}

macro_rules! groups_service {
    ($server:path) => {
        #[tonic::async_trait]
        impl $server for GrpcGroups {
            async fn create_group(
                &self,
                req: Request<CreateGroupRequest>,
            ) -> Result<Response<Group>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.create_group(&c, req.into_inner()).await)
            }

            async fn get_group(
                &self,
                req: Request<GetGroupRequest>,
            ) -> Result<Response<Group>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.get_group(&c, req.into_inner()).await)
            }

            async fn list_groups(
                &self,
                req: Request<ListGroupsRequest>,
            ) -> Result<Response<ListGroupsResponse>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.list_groups(&c, req.into_inner()).await)
            }

            async fn update_group(
                &self,
                req: Request<UpdateGroupRequest>,
            ) -> Result<Response<Group>, Status> {
                self.update(req).await
            }

            async fn delete_group(
                &self,
                req: Request<DeleteGroupRequest>,
            ) -> Result<Response<()>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.delete_group(&c, req.into_inner()).await)
            }
        }
    };
}

groups_service!(ward_proto::iam::v2::groups_service_server::GroupsService);
groups_service!(ward_proto::iam::v2beta1::groups_service_server::GroupsService);
