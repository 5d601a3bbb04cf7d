//! Event subscriptions: a sink (an https URL) under a group receives the
//! customer events of that group and of every group below it.

use std::net::IpAddr;

use ward_auth::upstream::FetchPolicy;
use ward_core::error::FieldViolation;
use ward_core::listing::SortField;
use ward_core::rpc;
use ward_core::uidp::Uidp;
use ward_core::{Error, Result};
use ward_proto::events::v2::{
    CreateSubscriptionRequest, DeleteSubscriptionRequest, GetSubscriptionRequest, ListSubscriptionsRequest,
    ListSubscriptionsResponse, Subscription,
};
use ward_store::events::{SUBSCRIPTION_TYPE, SubscriptionRecord};

use super::types;
use crate::authz::Caller;
use crate::services::list::ListParams;
use crate::services::parse_uidp;
use crate::ward::Ward;

const COLLECTION: &str = "subscriptions";

/// Longest sink URL accepted.
pub const MAX_SINK_LEN: usize = 2048;

pub(crate) fn to_proto(r: &SubscriptionRecord) -> Subscription {
    Subscription {
        uid: r.uid.clone(),
        sink: r.sink.clone(),
    }
}

/// Checks a sink as written: an absolute https URL (http only where the
/// policy allows it: `--dev` for loopback, `--allow-insecure-sinks` for
/// any), no credentials or fragment, and an IP-literal host the policy
/// allows. A host name is resolved at each delivery, and the address
/// connected to is checked then.
pub(crate) fn check_sink(sink: &str, policy: FetchPolicy) -> std::result::Result<(), String> {
    if sink.is_empty() || sink.len() > MAX_SINK_LEN {
        return Err(format!("must be a URL of 1 to {MAX_SINK_LEN} bytes"));
    }
    // What the URL parser would forgive (surrounding spaces, control,
    // bidirectional-override or zero-width characters) is refused: the sink
    // is stored and shown as written, and must read as what was checked.
    if sink
        .chars()
        .any(|c| c.is_whitespace() || ward_core::names::is_forbidden_char(c))
    {
        return Err("holds spaces, control, bidirectional-override or zero-width characters".into());
    }
    let url = url::Url::parse(sink).map_err(|e| format!("is not an absolute URL ({e})"))?;
    if url.port() == Some(0) {
        return Err("names port 0".into());
    }
    let host = match url.host() {
        Some(h) => h,
        None => return Err("has no host".into()),
    };
    let ip: Option<IpAddr> = match host {
        url::Host::Ipv4(a) => Some(a.into()),
        url::Host::Ipv6(a) => Some(a.into()),
        url::Host::Domain(_) => None,
    };
    // `localhost` and every name below it are loopback (RFC 6761).
    let loopback_name = matches!(host, url::Host::Domain(d) if {
        let d = d.trim_end_matches('.').to_ascii_lowercase();
        d == "localhost" || d.ends_with(".localhost")
    });
    let loopback = loopback_name || ip.is_some_and(|a| a.is_loopback());
    match url.scheme() {
        "https" => {}
        "http" if policy.allow_insecure || (policy.allow_loopback_http && loopback) => {}
        "http" => {
            return Err("must be https (plain http needs --allow-insecure-sinks, or --dev for loopback)".into());
        }
        other => return Err(format!("must be https, not {other}")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials (a receiver verifies the delivery's bearer token)".into());
    }
    if url.fragment().is_some() {
        return Err("must not have a fragment".into());
    }
    let allowed = match ip {
        Some(a) => policy.allows(a),
        None => !loopback_name || policy.allow_loopback_http || policy.allow_insecure,
    };
    if !allowed {
        return Err(
            "names a private, loopback or link-local address (allowed only with --allow-insecure-sinks)".into(),
        );
    }
    Ok(())
}

impl Ward {
    /// A subscription the caller may see (`subscriptions.list` at it), else
    /// NOT_FOUND.
    pub(crate) async fn visible_subscription(&self, caller: &Caller, uid: &Uidp) -> Result<SubscriptionRecord> {
        let record = self.store.get_subscription(uid).await?;
        match record {
            Some(r) if self.caps_at(caller, uid).contains(rpc::GET_SUBSCRIPTION.capability) => Ok(r),
            _ => Err(Error::not_found(SUBSCRIPTION_TYPE, uid.as_str())),
        }
    }

    pub async fn create_subscription(&self, caller: &Caller, req: CreateSubscriptionRequest) -> Result<Subscription> {
        let sub = req.subscription.unwrap_or_default();
        let mut bad = Vec::new();
        let parent = parse_uidp("parent", &req.parent, &mut bad);
        if let Err(why) = check_sink(&sub.sink, self.sink_policy) {
            bad.push(FieldViolation {
                field: "subscription.sink".into(),
                description: format!("subscription.sink {why}"),
            });
        }
        let (Some(parent), true) = (parent, bad.is_empty()) else {
            return Err(Error::InvalidArgument(bad));
        };
        self.authorize(caller, &rpc::CREATE_SUBSCRIPTION, &parent)?;
        let record = SubscriptionRecord {
            uid: parent.new_child().into(),
            parent_uid: parent.into(),
            sink: sub.sink,
            create_time: self.clock.now_millis(),
            delivered: 0,
            last_success_time: 0,
            last_failure_time: 0,
            last_failure_status: 0,
            last_failure_error: String::new(),
        };
        let reply = to_proto(&record);
        let emit = self.created(
            caller,
            types::SUBSCRIPTION_CREATED,
            &record.uid,
            &record.parent_uid,
            &reply,
        );
        self.store.create_subscription(&record, emit).await?;
        Ok(reply)
    }

    pub async fn get_subscription(&self, caller: &Caller, req: GetSubscriptionRequest) -> Result<Subscription> {
        let uid = Uidp::parse("uid", &req.uid)?;
        Ok(to_proto(&self.visible_subscription(caller, &uid).await?))
    }

    pub async fn list_subscriptions(
        &self,
        caller: &Caller,
        req: ListSubscriptionsRequest,
    ) -> Result<ListSubscriptionsResponse> {
        let visible = self.visible_scopes(caller, rpc::LIST_SUBSCRIPTIONS.capability);
        let params = ListParams {
            uidp: req.uidp.as_ref(),
            name: "",
            page_size: req.page_size,
            page_token: &req.page_token,
            order_by: &req.order_by,
            skip: req.skip,
            filters: Vec::new(),
        };
        let order_error = || {
            Error::InvalidArgument(vec![FieldViolation {
                field: "order_by".into(),
                description: format!(
                    "order_by {:?} is not supported: subscriptions are ordered by uid or create_time, \
                     optionally followed by desc",
                    ward_core::names::echo(&req.order_by)
                ),
            }])
        };
        let (q, skipped) = match self.list_query(COLLECTION, params, visible) {
            Err(Error::InvalidArgument(v)) if v.iter().any(|f| f.field == "order_by") => return Err(order_error()),
            r => r?,
        };
        if matches!(q.order.field, SortField::Name | SortField::UpdateTime) {
            return Err(order_error());
        }
        let page = self.store.list_subscriptions(&q).await?;
        Ok(ListSubscriptionsResponse {
            next_page_token: self.next_page_token(COLLECTION, &q, skipped, &page),
            total_count: Some(page.total_count),
            skipped,
            subscriptions: page.items.iter().map(to_proto).collect(),
        })
    }

    pub async fn delete_subscription(&self, caller: &Caller, req: DeleteSubscriptionRequest) -> Result<()> {
        let uid = Uidp::parse("uid", &req.uid)?;
        let current = self.visible_subscription(caller, &uid).await?;
        self.authorize(caller, &rpc::DELETE_SUBSCRIPTION, &uid)?;
        let emit = self.deleted(caller, types::SUBSCRIPTION_DELETED, uid.as_str(), &current.parent_uid);
        self.store.delete_subscription(&uid, emit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: FetchPolicy = FetchPolicy {
        allow_loopback_http: false,
        allow_insecure: false,
    };
    const DEV: FetchPolicy = FetchPolicy {
        allow_loopback_http: true,
        allow_insecure: false,
    };

    #[test]
    fn sinks_are_https_to_public_hosts_unless_allowed() {
        assert!(check_sink("https://hooks.example.com/ward", STRICT).is_ok());
        assert!(check_sink("https://93.184.216.34/x", STRICT).is_ok());
        for bad in [
            "",
            "hooks.example.com",
            "http://hooks.example.com/",
            "ftp://hooks.example.com/",
            "https://user:pw@hooks.example.com/",
            "https://hooks.example.com/#frag",
            "https://127.0.0.1/",
            "https://10.0.0.1/",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]/",
            "https://[fe80::1]/",
            "https://[::ffff:10.0.0.1]/",
            "https://localhost/",
            "https://localhost./",
            "https://hooks.localhost/",
            "http://127.0.0.1:8080/",
            "\u{1}https://hooks.example.com/",
            "https://hooks.example.com/\r\n",
            " https://hooks.example.com/",
            "https://hooks.example.com/\u{1b}[2J",
            "https://hooks.example.com/\u{202e}gnp.exe",
            "https://hooks.example.com/a\u{200b}b",
            "https://hooks.example.com:0/",
        ] {
            assert!(check_sink(bad, STRICT).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_SINK_LEN));
        assert!(check_sink(&long, STRICT).is_err());
        // --dev: loopback over plain http, nothing else private.
        assert!(check_sink("http://127.0.0.1:8080/", DEV).is_ok());
        assert!(check_sink("http://localhost:8080/", DEV).is_ok());
        assert!(check_sink("http://10.0.0.1/", DEV).is_err());
        assert!(check_sink("http://hooks.example.com/", DEV).is_err());
    }
}
