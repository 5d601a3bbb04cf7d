//! `chainguard.platform.oidc.SecurityTokenService` over gRPC: the identity
//! token comes in the `authorization` metadata, as SDK clients send it.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::oidc::{ExchangeRequest, RawToken, security_token_service_server::SecurityTokenService};

use super::reply;
use crate::ward::Ward;

#[derive(Clone)]
pub struct Sts(pub Arc<Ward>);

#[tonic::async_trait]
impl SecurityTokenService for Sts {
    async fn exchange(&self, req: Request<ExchangeRequest>) -> Result<Response<RawToken>, Status> {
        let authorization = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        reply(self.0.exchange_token(authorization.as_deref(), req.into_inner()).await)
    }
}
