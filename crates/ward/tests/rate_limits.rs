//! Rate limits through the real server: a burst beyond an identity's limit
//! gets 429 with Retry-After and a RESOURCE_EXHAUSTED status with RetryInfo,
//! then succeeds once that time has passed; another identity is not
//! affected; gRPC and REST share the bucket and agree; anonymous requests
//! are limited per client address, which only a configured trusted-proxy
//! header can change.

mod common;

use common::{TestServer, uid};
use reqwest::StatusCode;
use serde_json::Value;
use tonic_types::StatusExt as _;
use ward_proto::iam::v2::GetGroupRequest;
use ward_proto::iam::v2::groups_service_client::GroupsServiceClient;

/// Identities: 2 per second, bursts of 3. Clients without a token: 2 per
/// second, bursts of 2.
fn limited(c: &mut ward_server::ServerConfig) {
    c.rate_limit_identity = 2;
    c.rate_limit_identity_burst = 3;
    c.rate_limit_client = 2;
    c.rate_limit_client_burst = 2;
}

async fn get(s: &TestServer, token: &str, path: &str) -> reqwest::Response {
    s.http
        .get(format!("{}{path}", s.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("sent")
}

/// Checks a REST 429 and returns its Retry-After.
async fn assert_limited(ctx: &str, r: reqwest::Response) -> u64 {
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{ctx}");
    let retry: u64 = r.headers()["retry-after"].to_str().unwrap().parse().expect("seconds");
    assert!((1..=2).contains(&retry), "{ctx}: Retry-After {retry}");
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["code"], 8, "{ctx}: {body}");
    let details = body["details"].as_array().expect("details");
    let retry_info = details
        .iter()
        .find(|d| d["@type"] == "type.googleapis.com/google.rpc.RetryInfo")
        .unwrap_or_else(|| panic!("{ctx}: no RetryInfo in {body}"));
    let delay = retry_info["retryDelay"].as_str().expect("a Duration in JSON");
    assert!(delay.ends_with('s'), "{ctx}: {delay}");
    retry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_are_limited_alone_and_both_transports_agree() {
    for db in ward_store::testing::backends().await {
        let s = TestServer::start_with(db, limited).await;
        let b = s.backend;
        // The admin is an identity like any other here.
        let org = uid(&s.create_group(None, "limited").await);
        let path = format!("/iam/v2/groups/{org}");
        let (alice, alice_token) = common::person(&s, "alice", &[(&org, "viewer")]).await;
        let (_, bob_token) = common::person(&s, "bob", &[(&org, "viewer")]).await;
        let _ = alice;
        // Alice's burst, then her limit.
        for i in 0..3 {
            assert_eq!(
                get(&s, &alice_token, &path).await.status(),
                StatusCode::OK,
                "[{b}] alice {i}"
            );
        }
        let retry = assert_limited(
            &format!("[{b}] alice over her limit"),
            get(&s, &alice_token, &path).await,
        )
        .await;
        // Bob is not affected.
        assert_eq!(get(&s, &bob_token, &path).await.status(), StatusCode::OK, "[{b}] bob");
        // gRPC shares Alice's bucket and says the same.
        let channel = tonic::transport::Channel::from_shared(s.base.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut alice_grpc =
            GroupsServiceClient::with_interceptor(channel.clone(), common::Bearer(alice_token.clone()));
        let status = alice_grpc
            .get_group(GetGroupRequest { uid: org.clone() })
            .await
            .expect_err("alice is over her limit over gRPC too");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "[{b}] {status:?}");
        let info = status.get_details_retry_info().expect("a RetryInfo detail");
        assert!(
            info.retry_delay.is_some_and(|d| d <= std::time::Duration::from_secs(2)),
            "[{b}] {info:?}"
        );
        // After Retry-After, she succeeds again, over both.
        tokio::time::sleep(std::time::Duration::from_secs(retry)).await;
        assert_eq!(
            get(&s, &alice_token, &path).await.status(),
            StatusCode::OK,
            "[{b}] alice after waiting"
        );
        alice_grpc
            .get_group(GetGroupRequest { uid: org.clone() })
            .await
            .expect("alice after waiting, over gRPC");
        // Bob's own burst runs out over gRPC; REST agrees at once.
        let mut bob_grpc = GroupsServiceClient::with_interceptor(channel, common::Bearer(bob_token.clone()));
        let mut refused = None;
        for _ in 0..4 {
            if let Err(e) = bob_grpc.get_group(GetGroupRequest { uid: org.clone() }).await {
                refused = Some(e);
                break;
            }
        }
        assert_eq!(
            refused.expect("bob's burst ends").code(),
            tonic::Code::ResourceExhausted,
            "[{b}]"
        );
        assert_limited(&format!("[{b}] bob over REST"), get(&s, &bob_token, &path).await).await;
    }
}

#[tokio::test]
async fn anonymous_requests_are_limited_per_client_address() {
    let db = ward_store::testing::sqlite();
    let s = TestServer::start_with(db, limited).await;
    let exchange = |forwarded: Option<&'static str>| {
        let mut req = s
            .http
            .get(format!("{}/sts/exchange?aud={}", s.base, s.base))
            .bearer_auth("not.a.token");
        if let Some(f) = forwarded {
            req = req.header("x-forwarded-for", f);
        }
        req.send()
    };
    for i in 0..2 {
        assert_eq!(exchange(None).await.unwrap().status(), StatusCode::UNAUTHORIZED, "{i}");
    }
    assert_limited("the token exchange", exchange(None).await.unwrap()).await;
    // Without a configured proxy header, a client cannot pick another address.
    assert_limited(
        "a forged X-Forwarded-For",
        exchange(Some("198.51.100.7")).await.unwrap(),
    )
    .await;
    // The registry answers in its own error format.
    let r = s.http.get(format!("{}/v2/", s.base)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["errors"][0]["code"], "TOOMANYREQUESTS", "{body}");

    // Behind a proxy that sets X-Forwarded-For: each client has its own bucket.
    let s = TestServer::start_with(ward_store::testing::sqlite(), |c| {
        limited(c);
        c.client_address_header = Some("X-Forwarded-For".into());
    })
    .await;
    let exchange = |forwarded: &'static str| {
        s.http
            .get(format!("{}/sts/exchange?aud={}", s.base, s.base))
            .bearer_auth("not.a.token")
            .header("x-forwarded-for", forwarded)
            .send()
    };
    // The right-most address is the one the proxy appended.
    for _ in 0..2 {
        exchange("10.9.9.9, 198.51.100.1").await.unwrap();
    }
    assert_limited("client 198.51.100.1", exchange("198.51.100.1").await.unwrap()).await;
    assert_eq!(
        exchange("198.51.100.1, 198.51.100.2").await.unwrap().status(),
        StatusCode::UNAUTHORIZED,
        "another client is not limited"
    );
}
