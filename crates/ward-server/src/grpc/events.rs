//! The events gRPC services: v1 `Subscriptions`, Ward's `EventLog`, and
//! `SubscriptionsService` under v2 and v2beta1 (one body, the same Rust
//! messages), each method calling what the REST bindings call.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use ward_proto::events::event_log_server::EventLog;
use ward_proto::events::subscriptions_server::Subscriptions;
use ward_proto::events::v2::*;
use ward_proto::events::{
    CreateSubscriptionRequest as V1Create, DeleteSubscriptionRequest as V1Delete, DeliveryStatus, EventList,
    GetDeliveriesRequest, ListEventsRequest, RetryDeliveryRequest, Subscription as V1Subscription, SubscriptionFilter,
    SubscriptionList,
};

use super::v1_iam::v1_service;
use super::{caller, reply};
use crate::services::v1::events as e;
use crate::ward::Ward;

#[derive(Clone)]
pub struct Events(pub Arc<Ward>);

v1_service!(impl Subscriptions for Events by caller {
    create(V1Create) -> V1Subscription = e::create;
    list(SubscriptionFilter) -> SubscriptionList = e::list;
    delete(V1Delete) -> () = e::delete;
});

v1_service!(impl EventLog for Events by caller {
    list_events(ListEventsRequest) -> EventList = e::list_events;
    get_deliveries(GetDeliveriesRequest) -> DeliveryStatus = e::get_deliveries;
    retry_delivery(RetryDeliveryRequest) -> DeliveryStatus = e::retry_delivery;
});

macro_rules! subscriptions_service {
    () => {
        v1_service!(impl SubscriptionsService for Events by caller {
            create_subscription(CreateSubscriptionRequest) -> Subscription = e::create_subscription;
            get_subscription(GetSubscriptionRequest) -> Subscription = e::get_subscription;
            list_subscriptions(ListSubscriptionsRequest) -> ListSubscriptionsResponse = e::list_subscriptions;
            delete_subscription(DeleteSubscriptionRequest) -> () = e::delete_subscription;
        });
    };
}

mod v2_service {
    use super::*;
    use ward_proto::events::v2::subscriptions_service_server::SubscriptionsService;
    subscriptions_service!();
}

mod v2beta1_service {
    use super::*;
    use ward_proto::events::v2beta1::subscriptions_service_server::SubscriptionsService;
    subscriptions_service!();
}
