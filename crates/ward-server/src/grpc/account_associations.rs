//! AccountAssociationsService over gRPC, for both `chainguard.platform.iam.v2`
//! and `…v2beta1` (the same Rust message types): authenticate, call the
//! service layer, map errors.

use tonic::{Request, Response, Status};
use ward_proto::iam::v2::{
    AccountAssociation, CheckAccountAssociationRequest, CheckAccountAssociationResponse,
    CreateAccountAssociationRequest, DeleteAccountAssociationRequest, GetAccountAssociationRequest,
    ListAccountAssociationsRequest, ListAccountAssociationsResponse, UpdateAccountAssociationRequest,
};

use super::iam::Iam;
use super::{caller, mask, reply};

macro_rules! account_associations_service {
    ($($version:ident),*) => {$(
        #[tonic::async_trait]
        impl ward_proto::iam::$version::account_associations_service_server::AccountAssociationsService for Iam {
            async fn create_account_association(
                &self,
                req: Request<CreateAccountAssociationRequest>,
            ) -> Result<Response<AccountAssociation>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.create_account_association(&c, req.into_inner()).await)
            }

            async fn get_account_association(
                &self,
                req: Request<GetAccountAssociationRequest>,
            ) -> Result<Response<AccountAssociation>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.get_account_association(&c, req.into_inner()).await)
            }

            async fn list_account_associations(
                &self,
                req: Request<ListAccountAssociationsRequest>,
            ) -> Result<Response<ListAccountAssociationsResponse>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.list_account_associations(&c, req.into_inner()).await)
            }

            async fn update_account_association(
                &self,
                req: Request<UpdateAccountAssociationRequest>,
            ) -> Result<Response<AccountAssociation>, Status> {
                let c = caller(&self.0, &req).await?;
                let r = req.into_inner();
                reply(
                    self.0
                        .update_account_association(&c, r.account_association.unwrap_or_default(), mask(r.update_mask))
                        .await,
                )
            }

            async fn delete_account_association(
                &self,
                req: Request<DeleteAccountAssociationRequest>,
            ) -> Result<Response<()>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.delete_account_association(&c, req.into_inner()).await)
            }

            async fn check_account_association(
                &self,
                req: Request<CheckAccountAssociationRequest>,
            ) -> Result<Response<CheckAccountAssociationResponse>, Status> {
                let c = caller(&self.0, &req).await?;
                reply(self.0.check_account_association(&c, req.into_inner()).await)
            }
        }
    )*};
}

account_associations_service!(v2, v2beta1);
