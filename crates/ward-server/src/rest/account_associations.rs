//! Account associations over REST, with `POST …/{uid}:checkAccountAssociation`.

use std::sync::Arc;

use super::Json;
use axum::extract::State;
use axum::routing::get;
use ward_core::Result;
use ward_proto::iam::v2::{
    AccountAssociation, CheckAccountAssociationRequest, CreateAccountAssociationRequest,
    DeleteAccountAssociationRequest, GetAccountAssociationRequest, ListAccountAssociationsRequest,
    ListAccountAssociationsResponse,
};

use super::crud::{self, Resource};
use super::table::{Endpoint, Routes};
use super::{Auth, JsonBody, Params, Reply, versioned};
use crate::authz::Caller;
use crate::services::UpdateMask;
use crate::ward::Ward;

struct Associations;

impl Resource for Associations {
    type Msg = AccountAssociation;

    async fn create(w: &Ward, c: &Caller, parent: String, msg: AccountAssociation) -> Result<AccountAssociation> {
        let req = CreateAccountAssociationRequest {
            parent,
            account_association: Some(msg),
        };
        w.create_account_association(c, req).await
    }
    async fn get(w: &Ward, c: &Caller, uid: String) -> Result<AccountAssociation> {
        w.get_account_association(c, GetAccountAssociationRequest { uid }).await
    }
    async fn update(w: &Ward, c: &Caller, msg: AccountAssociation, mask: UpdateMask) -> Result<AccountAssociation> {
        w.update_account_association(c, msg, mask).await
    }
    async fn delete(w: &Ward, c: &Caller, uid: String) -> Result<()> {
        w.delete_account_association(c, DeleteAccountAssociationRequest { uid })
            .await
    }
    fn set_uid(msg: &mut AccountAssociation, uid: String) {
        msg.uid = uid;
    }
    /// `:checkAccountAssociation`: the body carries `providerType`.
    async fn verb(w: &Ward, c: &Caller, uid: String, verb: &str, body: JsonBody) -> Option<Result<serde_json::Value>> {
        match verb {
            "checkAccountAssociation" => Some(check(w, c, uid, body).await),
            _ => None,
        }
    }
}

async fn check(w: &Ward, c: &Caller, uid: String, body: JsonBody) -> Result<serde_json::Value> {
    let mut req: CheckAccountAssociationRequest = body.message()?;
    req.uid = uid;
    let resp = w.check_account_association(c, req).await?;
    serde_json::to_value(resp).map_err(|e| ward_core::Error::internal(format_args!("encode: {e}")))
}

pub fn routes() -> Routes {
    crud::routes::<Associations>("accountAssociations", get(list_associations), None)
}

pub fn endpoints() -> Vec<Endpoint> {
    let mut e = crud::endpoints! {
        Associations,
        "AccountAssociationsService",
        "accountAssociations",
        "account_association",
        "AccountAssociation",
        "AccountAssociations"
    };
    e.extend(versioned! {"iam", "AccountAssociationsService", [
        (POST, "/accountAssociations/{uid=**}:checkAccountAssociation", "*", "CheckAccountAssociation"),
    ]});
    e
}

async fn list_associations(
    State(w): State<Arc<Ward>>,
    Auth(c): Auth,
    mut q: Params,
) -> Reply<ListAccountAssociationsResponse> {
    let req = ListAccountAssociationsRequest {
        uidp: q.uidp()?,
        name: q.string("name"),
        page_size: q.int("page_size")?,
        page_token: q.string("page_token"),
        order_by: q.string("order_by"),
        skip: q.int("skip")?,
    };
    q.finish()?;
    Ok(Json(w.list_account_associations(&c, req).await?))
}
