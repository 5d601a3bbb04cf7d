//! The events bindings: v1 subscriptions (`/events/v1/subscriptions`), the
//! v2beta1 and v2 `SubscriptionsService`, and Ward's event log
//! (`/events/v1/events`, `/events/v1/deliveries/…`). Paths are the
//! contract's templates verbatim.

use http::Method;

use crate::rest::transcode::{Rpc, rpc};
use crate::services::v1::events as e;

/// The v2beta1 and v2 bindings of one `SubscriptionsService` RPC.
macro_rules! both_versions {
    ($method:ident, $path:literal, $body:literal, $rpc:literal, $f:expr) => {
        [
            rpc(
                Method::$method,
                concat!("/events/v2beta1", $path),
                $body,
                concat!("chainguard.platform.events.v2beta1.SubscriptionsService.", $rpc),
                $f,
            ),
            rpc(
                Method::$method,
                concat!("/events/v2", $path),
                $body,
                concat!("chainguard.platform.events.v2.SubscriptionsService.", $rpc),
                $f,
            ),
        ]
    };
}

pub fn rpcs() -> Vec<Rpc> {
    let mut all = vec![
        rpc(
            Method::POST,
            "/events/v1/subscriptions/{parent_id=**}",
            "subscription",
            "chainguard.platform.events.Subscriptions.Create",
            e::create,
        ),
        // The contract's `{parent_id=**}` with no segment at all (as
        // grpc-gateway matches it): the RPC names the parent left out,
        // instead of a 405 from the List on the same path.
        rpc(
            Method::POST,
            "/events/v1/subscriptions",
            "subscription",
            "chainguard.platform.events.Subscriptions.Create",
            e::create,
        ),
        rpc(
            Method::GET,
            "/events/v1/subscriptions",
            "",
            "chainguard.platform.events.Subscriptions.List",
            e::list,
        ),
        rpc(
            Method::DELETE,
            "/events/v1/subscriptions/{id=**}",
            "",
            "chainguard.platform.events.Subscriptions.Delete",
            e::delete,
        ),
        rpc(
            Method::GET,
            "/events/v1/events",
            "",
            "chainguard.platform.events.EventLog.ListEvents",
            e::list_events,
        ),
        rpc(
            Method::GET,
            "/events/v1/deliveries/{subscription=**}",
            "",
            "chainguard.platform.events.EventLog.GetDeliveries",
            e::get_deliveries,
        ),
        rpc(
            Method::POST,
            "/events/v1/deliveries/retry",
            "*",
            "chainguard.platform.events.EventLog.RetryDelivery",
            e::retry_delivery,
        ),
    ];
    all.extend(both_versions!(
        POST,
        "/subscriptions/{parent=**}",
        "subscription",
        "CreateSubscription",
        e::create_subscription
    ));
    all.extend(both_versions!(
        POST,
        "/subscriptions",
        "subscription",
        "CreateSubscription",
        e::create_subscription
    ));
    all.extend(both_versions!(
        GET,
        "/subscriptions/{uid=**}",
        "",
        "GetSubscription",
        e::get_subscription
    ));
    all.extend(both_versions!(
        GET,
        "/subscriptions",
        "",
        "ListSubscriptions",
        e::list_subscriptions
    ));
    all.extend(both_versions!(
        DELETE,
        "/subscriptions/{uid=**}",
        "",
        "DeleteSubscription",
        e::delete_subscription
    ));
    all
}
