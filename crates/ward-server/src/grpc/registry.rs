//! The registry gRPC services, for `chainguard.platform.registry.v2` and
//! `…v2beta1` (the same Rust message types).

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::registry::v2::*;

use super::{caller, mask, reply};
use crate::ward::Ward;

#[derive(Clone)]
pub struct Registry(pub Arc<Ward>);

/// An impl of `$server` whose unary RPCs authenticate and call the service
/// method of the same name; `$extra` methods are written out.
macro_rules! service {
    ($server:path { $($name:ident($req:ty) -> $resp:ty;)* } $($extra:tt)*) => {
        #[tonic::async_trait]
        impl $server for Registry {
            $(
                async fn $name(&self, req: Request<$req>) -> Result<Response<$resp>, Status> {
                    let c = caller(&self.0, &req).await?;
                    reply(self.0.$name(&c, req.into_inner()).await)
                }
            )*
            $($extra)*
        }
    };
}

macro_rules! registry_services {
    ($($version:ident),*) => {$(
        service! {
            ward_proto::registry::$version::repos_service_server::ReposService {
                create_repo(CreateRepoRequest) -> Repo;
                get_repo(GetRepoRequest) -> Repo;
                list_repos(ListReposRequest) -> ListReposResponse;
                delete_repo(DeleteRepoRequest) -> ();
                get_repo_readme(GetRepoReadmeRequest) -> RepoReadme;
            }

            async fn update_repo(&self, req: Request<UpdateRepoRequest>) -> Result<Response<Repo>, Status> {
                let c = caller(&self.0, &req).await?;
                let r = req.into_inner();
                reply(self.0.update_repo(&c, r.repo.unwrap_or_default(), mask(r.update_mask)).await)
            }

            async fn update_repo_readme(
                &self,
                req: Request<UpdateRepoReadmeRequest>,
            ) -> Result<Response<RepoReadme>, Status> {
                let c = caller(&self.0, &req).await?;
                let r = req.into_inner();
                reply(self.0.update_repo_readme(&c, r.repo_readme.unwrap_or_default(), mask(r.update_mask)).await)
            }
        }
        service! {
            ward_proto::registry::$version::tags_service_server::TagsService {
                create_tag(CreateTagRequest) -> Tag;
                get_tag(GetTagRequest) -> Tag;
                list_tags(ListTagsRequest) -> ListTagsResponse;
                delete_tag(DeleteTagRequest) -> ();
            }
        }
        service! {
            ward_proto::registry::$version::images_service_server::ImagesService {
                get_architectures(GetArchitecturesRequest) -> Architectures;
                get_size(GetSizeRequest) -> Size;
            }
        }
    )*};
}

registry_services!(v2, v2beta1);
