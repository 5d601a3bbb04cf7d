//! v1 event subscriptions (`chainguard.platform.events.Subscriptions`) as a
//! translation onto the v2 service, and the bindings of every events RPC
//! (v2beta1, v2 and Ward's event log), which take and return the service
//! layer's own messages.

use std::sync::Arc;

use ward_core::Result;
use ward_proto::common::UidpFilter;
use ward_proto::events as v1;
use ward_proto::events::v2;

use super::{ID, V1_PAGE, collect_all, narrow_to_id, v1_named};
use crate::authz::Caller;
use crate::ward::Ward;

fn out(s: v2::Subscription) -> v1::Subscription {
    v1::Subscription {
        id: s.uid,
        sink: s.sink,
    }
}

pub async fn create(w: Arc<Ward>, c: Caller, req: v1::CreateSubscriptionRequest) -> Result<v1::Subscription> {
    let req = v2::CreateSubscriptionRequest {
        parent: req.parent_id,
        subscription: req.subscription.map(|s| v2::Subscription {
            uid: String::new(),
            sink: s.sink,
        }),
    };
    v1_named(w.create_subscription(&c, req).await, &[("parent", "parent_id")]).map(out)
}

pub async fn list(w: Arc<Ward>, c: Caller, req: v1::SubscriptionFilter) -> Result<v1::SubscriptionList> {
    let Some(uidp) = narrow_to_id(req.uidp, &req.id)? else {
        return Ok(v1::SubscriptionList::default());
    };
    let all = all_subscriptions(&w, &c, uidp).await?;
    Ok(v1::SubscriptionList {
        items: all.into_iter().map(out).collect(),
    })
}

async fn all_subscriptions(w: &Ward, c: &Caller, uidp: Option<UidpFilter>) -> Result<Vec<v2::Subscription>> {
    collect_all("/events/v2/subscriptions", move |page_token| {
        w.list_subscriptions(
            c,
            v2::ListSubscriptionsRequest {
                uidp: uidp.clone(),
                page_size: V1_PAGE,
                page_token,
                ..Default::default()
            },
        )
    })
    .await
}

pub async fn delete(w: Arc<Ward>, c: Caller, req: v1::DeleteSubscriptionRequest) -> Result<()> {
    v1_named(
        w.delete_subscription(&c, v2::DeleteSubscriptionRequest { uid: req.id })
            .await,
        ID,
    )
}

/// Calls of the service layer that take and return its own messages.
macro_rules! direct {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        $(pub async fn $name(w: Arc<Ward>, c: Caller, req: $req) -> Result<$resp> {
            w.$name(&c, req).await
        })*
    };
}

direct! {
    create_subscription(v2::CreateSubscriptionRequest) -> v2::Subscription;
    get_subscription(v2::GetSubscriptionRequest) -> v2::Subscription;
    list_subscriptions(v2::ListSubscriptionsRequest) -> v2::ListSubscriptionsResponse;
    delete_subscription(v2::DeleteSubscriptionRequest) -> ();
    list_events(v1::ListEventsRequest) -> v1::EventList;
    get_deliveries(v1::GetDeliveriesRequest) -> v1::DeliveryStatus;
    retry_delivery(v1::RetryDeliveryRequest) -> v1::DeliveryStatus;
}
