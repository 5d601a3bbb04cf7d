//! An organization's directory: `ward admin verify-org`, people finding and
//! asking to join the verified organization of their email domain
//! (LookupGroup, CheckEligibility, RequestGroupAccess and the Ward listing of
//! requests), terms acceptances with their ancestors, and the ping that needs
//! no token. Over REST and gRPC, on every backend.

mod common;

use common::people::role_uid;
use common::{Bearer, TestServer, assert_error, person, uid};
use reqwest::{Method, StatusCode};
use serde_json::json;
use tonic::transport::Channel;
use ward_proto::iam::v2::groups_service_client::GroupsServiceClient;
use ward_proto::iam::v2::terms_service_client::TermsServiceClient;
use ward_proto::iam::v2::{CheckEligibilityRequest, ListTermsAcceptancesRequest, LookupGroupRequest};
use ward_store::people::PersonRecord;

/// A person who logged in with `email` (verified or not) through `idp`: a
/// root identity with the login's record, made in the store. Their (uid,
/// token).
async fn person_with_email(s: &TestServer, name: &str, email: &str, verified: bool) -> (String, String) {
    person_via(s, name, email, verified, "none").await
}

async fn person_via(s: &TestServer, name: &str, email: &str, verified: bool, idp: &str) -> (String, String) {
    let (id, token) = person(s, name, &[]).await;
    let identity = s
        .ward()
        .store
        .get_identity(&ward_core::uidp::Uidp::parse("id", &id).unwrap())
        .await
        .unwrap()
        .unwrap();
    let record = PersonRecord {
        identity_uid: id.clone(),
        identity_provider_uid: idp.into(),
        email: email.into(),
        email_verified: verified,
        display_name: name.into(),
    };
    s.ward()
        .store
        .record_login(&identity, &record, None, 0)
        .await
        .expect("record the login");
    (id, token)
}

async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", s.addr()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_needs_no_token() {
    for s in common::servers().await {
        let resp = reqwest::get(format!("{}/ping/v2/ping", s.base)).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "[{}]", s.backend);
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["response"], "pong", "[{}]", s.backend);
        let mut client = ward_proto::ping::v2::ping_service_client::PingServiceClient::new(channel(&s).await);
        let got = client
            .ping(ward_proto::ping::v2::PingRequest {})
            .await
            .expect("gRPC ping without a token");
        assert_eq!(got.into_inner().response, "pong", "[{}]", s.backend);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verified_organizations_can_be_found_and_asked_to_join() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let other = uid(&s.create_group(None, "globex").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let (owner, owner_token) = person(&s, "owner", &[(&org, "owner")]).await;
        // Each organization's own provider (only their emails count).
        let provider = |org: String| {
            let s = &s;
            async move {
                let (status, idp) = s
                    .post(
                        &format!("/iam/v2/identityProviders/{org}"),
                        json!({"name": "sso", "defaultRole": role_uid("viewer"),
                               "oidc": {"issuer": format!("https://sso.{org}.example"), "clientId": "ward", "clientSecret": "s"}}),
                    )
                    .await;
                assert_eq!(status, StatusCode::OK, "{idp}");
                uid(&idp)
            }
        };
        let acme_idp = provider(org.clone()).await;
        let other_idp = provider(other.clone()).await;
        let (alice, alice_token) = person_via(&s, "alice", "alice@Acme.example", true, &acme_idp).await;
        let (_, mallory_token) = person_via(&s, "mallory", "mallory@acme.example", false, &acme_idp).await;
        let (_, bob_token) = person_via(&s, "bob", "bob@elsewhere.example", true, &acme_idp).await;
        // Another organization's provider vouching for an acme address.
        let (_, eve_token) = person_via(&s, "eve", "eve@acme.example", true, &other_idp).await;

        // Before verification nobody finds it.
        let (status, body) = s
            .call_as(&alice_token, Method::GET, "/iam/v2/groups:lookupGroup", None)
            .await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");

        let domains = ward_server::verify_org(&s.config, &org, &["ACME.example.".into()])
            .await
            .expect("verify-org");
        assert_eq!(domains, vec!["acme.example".to_owned()], "[{b}] domains are normalized");
        assert!(
            ward_server::verify_org(&s.config, &format!("{org}/0123456789abcdef"), &[])
                .await
                .is_err(),
            "[{b}] only organizations are verified"
        );
        assert!(
            ward_server::verify_org(&s.config, &other, &["not a domain".into()])
                .await
                .is_err(),
            "[{b}] domains are checked"
        );
        let (_, group) = s.get(&format!("/iam/v2/groups/{org}")).await;
        assert_eq!(group["verified"], true, "[{b}] {group}");

        // Alice (verified email at the domain, any case) finds it, is
        // eligible, asks; the owner sees the request and grants it.
        let (status, found) = s
            .call_as(&alice_token, Method::GET, "/iam/v2/groups:lookupGroup", None)
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {found}");
        assert_eq!(
            (found["group"]["uid"].as_str(), found["group"]["name"].as_str()),
            (Some(org.as_str()), Some("acme")),
            "[{b}] the SDK's shape: the organization as a Group: {found}"
        );
        let (_, elig) = s
            .call_as(&alice_token, Method::GET, "/iam/v2/groups:checkEligibility", None)
            .await;
        assert_eq!(elig, json!({"eligible": true}), "[{b}] only what the SDK defines");
        let path = format!("/iam/v2/groups/{org}:requestGroupAccess");
        let (status, asked) = s.call_as(&alice_token, Method::POST, &path, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {asked}");
        assert_eq!(asked, json!({}), "[{b}] the SDK's empty response");
        // Asking twice keeps one request.
        s.call_as(&alice_token, Method::POST, &path, Some(json!({}))).await;
        let list = format!("/iam/v2/groups:accessRequests?group_uid={org}");
        let (status, requests) = s.call_as(&owner_token, Method::GET, &list, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {requests}");
        let reqs = requests["requests"].as_array().unwrap();
        assert_eq!(reqs.len(), 1, "[{b}] {requests}");
        assert_eq!(reqs[0]["identityUid"], alice.as_str());
        assert_eq!(reqs[0]["email"], "alice@Acme.example");
        // Only those who may bind roles there list requests.
        let (status, body) = s.call_as(&alice_token, Method::GET, &list, None).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        common::bind_builtin(&s, &org, &alice, "viewer").await;
        let (_, elig) = s
            .call_as(&alice_token, Method::GET, "/iam/v2/groups:checkEligibility", None)
            .await;
        assert_eq!(elig["eligible"], false, "[{b}] a member is not eligible again: {elig}");
        let (status, body) = s.call_as(&mint_viewer(&s, &org).await, Method::GET, &list, None).await;
        assert_error(b, status, &body, 403, 7, "PERMISSION_DENIED");
        let _ = owner;

        // Unverified email, another domain, another group: nothing found,
        // not eligible, and a request to any group is NOT_FOUND.
        for (who, token) in [("mallory", &mallory_token), ("bob", &bob_token), ("eve", &eve_token)] {
            let (status, body) = s.call_as(token, Method::GET, "/iam/v2/groups:lookupGroup", None).await;
            assert_error(&format!("[{b}] {who}"), status, &body, 404, 5, "NOT_FOUND");
            let (_, elig) = s
                .call_as(token, Method::GET, "/iam/v2/groups:checkEligibility", None)
                .await;
            assert_eq!(elig["eligible"], false, "[{b}] {who}: {elig}");
            let (status, body) = s.call_as(token, Method::POST, &path, Some(json!({}))).await;
            assert_error(&format!("[{b}] {who}"), status, &body, 404, 5, "NOT_FOUND");
        }
        let (status, body) = s
            .call_as(
                &alice_token,
                Method::POST,
                &format!("/iam/v2/groups/{other}:requestGroupAccess"),
                Some(json!({})),
            )
            .await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        // A group in her organization: its owners see the request.
        let (status, asked) = s
            .call_as(
                &alice_token,
                Method::POST,
                &format!("/iam/v2/groups/{team}:requestGroupAccess"),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {asked}");
        let (_, requests) = s
            .call_as(
                &owner_token,
                Method::GET,
                &format!("/iam/v2/groups:accessRequests?group_uid={team}"),
                None,
            )
            .await;
        assert_eq!(
            requests["requests"].as_array().map(Vec::len),
            Some(1),
            "[{b}] {requests}"
        );
        let (status, body) = s
            .call_as(
                &alice_token,
                Method::POST,
                &format!("/iam/v2/groups/{team}/0123456789abcdef:requestGroupAccess"),
                Some(json!({})),
            )
            .await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        // Unauthenticated: 401.
        let resp = reqwest::get(format!("{}/iam/v2/groups:lookupGroup", s.base))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "[{b}]");

        // gRPC agrees.
        let ch = channel(&s).await;
        let mut groups = GroupsServiceClient::with_interceptor(ch.clone(), Bearer(alice_token.clone()));
        let found = groups.lookup_group(LookupGroupRequest {}).await.expect("gRPC lookup");
        assert_eq!(found.into_inner().group.map(|g| g.uid), Some(org.clone()), "[{b}]");
        let mut groups = GroupsServiceClient::with_interceptor(ch, Bearer(bob_token.clone()));
        let elig = groups.check_eligibility(CheckEligibilityRequest {}).await.unwrap();
        assert!(!elig.into_inner().eligible, "[{b}]");
    }
}

/// A viewer at `group`: may see it, may not bind roles there.
async fn mint_viewer(s: &TestServer, group: &str) -> String {
    person(s, "a-viewer", &[(group, "viewer")]).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terms_acceptances_include_ancestors() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let (owner, owner_token) = person(&s, "owner", &[(&org, "owner")]).await;
        let (_, viewer_token) = person(&s, "viewer", &[(&org, "viewer")]).await;
        let (_, stranger_token) = person(&s, "stranger", &[]).await;

        let accept = |group: &str| format!("/iam/v2/terms/{group}");
        let (status, body) = s
            .call_as(
                &owner_token,
                Method::POST,
                &accept(&org),
                Some(json!({"documentIds": ["guardener-tos.v1", "guardener-tos.v1"]})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["group"], org.as_str());
        let (status, _) = s
            .call_as(
                &owner_token,
                Method::POST,
                &accept(&team),
                Some(json!({"documentIds": ["team-tos.v2"]})),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        // At the team: its own and its organization's, newest first.
        let (status, page) = s.call_as(&viewer_token, Method::GET, &accept(&team), None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {page}");
        let docs: Vec<(&str, &str)> = page["termsAcceptances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["docId"].as_str().unwrap(), t["orgUid"].as_str().unwrap()))
            .collect();
        assert_eq!(docs.len(), 2, "[{b}] a repeated document is kept once: {page}");
        assert!(docs.contains(&("guardener-tos.v1", org.as_str())) && docs.contains(&("team-tos.v2", team.as_str())));
        assert_eq!(page["termsAcceptances"][0]["acceptedBy"], owner.as_str());
        assert_eq!(page["totalCount"], "2");
        // Paging.
        let (_, first) = s
            .call_as(
                &viewer_token,
                Method::GET,
                &format!("{}?page_size=1", accept(&team)),
                None,
            )
            .await;
        let next = first["nextPageToken"].as_str().unwrap().to_owned();
        assert!(!next.is_empty(), "[{b}] {first}");
        let (_, second) = s
            .call_as(
                &viewer_token,
                Method::GET,
                &format!("{}?page_size=1&page_token={}", accept(&team), common::enc(&next)),
                None,
            )
            .await;
        assert_eq!(second["termsAcceptances"].as_array().unwrap().len(), 1);
        assert_eq!(second["nextPageToken"], "", "[{b}] {second}");
        assert_ne!(first["termsAcceptances"][0], second["termsAcceptances"][0]);
        // At the organization: not the team's.
        let (_, page) = s.call_as(&viewer_token, Method::GET, &accept(&org), None).await;
        assert_eq!(page["totalCount"], "1", "[{b}] {page}");

        // A viewer may list but not accept; a stranger sees nothing.
        let body = Some(json!({"documentIds": ["x.v1"]}));
        let (status, resp) = s
            .call_as(&viewer_token, Method::POST, &accept(&org), body.clone())
            .await;
        assert_error(b, status, &resp, 403, 7, "PERMISSION_DENIED");
        let (status, resp) = s.call_as(&stranger_token, Method::POST, &accept(&org), body).await;
        assert_error(b, status, &resp, 404, 5, "NOT_FOUND");
        let (status, resp) = s.call_as(&stranger_token, Method::GET, &accept(&org), None).await;
        assert_error(b, status, &resp, 404, 5, "NOT_FOUND");
        // Bad input.
        for bad in [
            json!({"documentIds": []}),
            json!({"documentIds": ["has space"]}),
            json!({"documentIds": vec!["a"; 17]}),
        ] {
            let (status, resp) = s
                .call_as(&owner_token, Method::POST, &accept(&org), Some(bad.clone()))
                .await;
            assert_error(&format!("[{b}] {bad}"), status, &resp, 400, 3, "INVALID_ARGUMENT");
        }
        let (status, resp) = s
            .call_as(
                &viewer_token,
                Method::GET,
                &format!("{}?page_token=garbage", accept(&org)),
                None,
            )
            .await;
        assert_error(b, status, &resp, 400, 3, "INVALID_ARGUMENT");

        // gRPC agrees.
        let mut terms = TermsServiceClient::with_interceptor(channel(&s).await, Bearer(viewer_token.clone()));
        let page = terms
            .list_terms_acceptances(ListTermsAcceptancesRequest {
                group: team.clone(),
                ..Default::default()
            })
            .await
            .expect("gRPC list")
            .into_inner();
        assert_eq!(page.total_count, Some(2), "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_metadata_is_ones_own() {
    for s in common::servers().await {
        let b = s.backend;
        let (me, token) = person_with_email(&s, "dana", "dana@example.com", true).await;
        // A person's identity shows the email of their last login.
        let (_, id) = s.get(&format!("/iam/v2/identities/{me}")).await;
        assert_eq!(
            (id["email"].as_str(), id["emailUnverified"].as_str()),
            (Some("dana@example.com"), Some("")),
            "[{b}] {id}"
        );
        let (erin, _) = person_with_email(&s, "erin", "erin@example.com", false).await;
        let (_, id) = s.get(&format!("/iam/v2/identities/{erin}")).await;
        assert_eq!(
            (id["email"].as_str(), id["emailUnverified"].as_str()),
            (Some(""), Some("erin@example.com")),
            "[{b}] {id}"
        );
        let path = "/iam/v2/identities:updateIdentityMetadata";
        let (status, body) = s
            .call_as(
                &token,
                Method::PATCH,
                &format!("{path}?update_mask=company,job_title,hubspot_utk"),
                Some(json!({"company": "Acme", "jobTitle": "SRE", "hubspotUtk": "cookie", "product": "ignored"})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["uid"], me.as_str());
        assert_eq!(
            (body["company"].as_str(), body["jobTitle"].as_str()),
            (Some("Acme"), Some("SRE"))
        );
        assert_eq!(body["product"], "", "[{b}] outside the mask: {body}");
        assert_eq!(body["hubspotUtk"], "", "[{b}] never kept: {body}");
        assert_eq!(body["name"], "dana", "[{b}] from the login: {body}");
        // Without a mask: the body's keys; earlier fields stay.
        let (_, body) = s
            .call_as(&token, Method::PATCH, path, Some(json!({"product": "images"})))
            .await;
        assert_eq!(
            (body["company"].as_str(), body["product"].as_str()),
            (Some("Acme"), Some("images")),
            "[{b}] {body}"
        );
        // Bounds and refusals.
        let (status, resp) = s
            .call_as(&token, Method::PATCH, path, Some(json!({"company": "x".repeat(600)})))
            .await;
        assert_error(b, status, &resp, 400, 3, "INVALID_ARGUMENT");
        let (status, resp) = s
            .call_as(
                &token,
                Method::PATCH,
                &format!("{path}?update_mask=uid,nope"),
                Some(json!({})),
            )
            .await;
        assert_error(b, status, &resp, 400, 3, "INVALID_ARGUMENT");
        let (status, resp) = s.patch(path, json!({"company": "admin"})).await;
        assert_error(b, status, &resp, 403, 7, "PERMISSION_DENIED");
        let resp = reqwest::Client::new()
            .patch(format!("{}{path}", s.base))
            .json(&json!({"company": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "[{b}]");
        // gRPC.
        let mut ids = ward_proto::iam::v2::identities_service_client::IdentitiesServiceClient::with_interceptor(
            channel(&s).await,
            Bearer(token.clone()),
        );
        let got = ids
            .update_identity_metadata(ward_proto::iam::v2::UpdateIdentityMetadataRequest {
                identity_metadata: Some(ward_proto::iam::v2::IdentityMetadata {
                    self_serve: true,
                    ..Default::default()
                }),
                update_mask: None,
            })
            .await
            .expect("gRPC update")
            .into_inner();
        assert!(got.self_serve && got.company == "Acme", "[{b}] {got:?}");
    }
}
