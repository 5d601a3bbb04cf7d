//! The event log through the real server: each REST write of a group, role
//! or repo records its CloudEvent (the contract's type, the caller as actor,
//! the response as body), a refused write records none, and events past the
//! retention are pruned. Every test runs once per storage backend.

mod common;

use common::servers;
use reqwest::StatusCode;
use serde_json::{Value, json};
use ward_store::events::{EventQuery, EventRecord};

async fn log(s: &common::TestServer, scope: &str) -> Vec<EventRecord> {
    let q = EventQuery {
        scopes: vec![scope.to_owned()],
        limit: 100,
        ..EventQuery::default()
    };
    s.ward().store.list_events(&q).await.expect("list events")
}

fn body(e: &EventRecord) -> Value {
    serde_json::from_str(&e.body).unwrap_or_else(|err| panic!("{}: body is not JSON: {err}", e.event_type))
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_record_their_events_and_old_ones_are_pruned() {
    for s in servers().await {
        let b = s.backend;
        let (st, org) = s.post("/iam/v2/groups", json!({"name": "events-org"})).await;
        assert_eq!(st, StatusCode::OK, "{b}: {org}");
        let org_uid = org["uid"].as_str().unwrap().to_owned();
        let (st, team) = s
            .post(&format!("/iam/v2/groups/{org_uid}"), json!({"name": "team"}))
            .await;
        assert_eq!(st, StatusCode::OK, "{b}: {team}");
        let team_uid = team["uid"].as_str().unwrap().to_owned();
        let (st, renamed) = s
            .patch(&format!("/iam/v2/groups/{team_uid}"), json!({"name": "renamed"}))
            .await;
        assert_eq!(st, StatusCode::OK, "{b}: {renamed}");
        let (st, role) = s
            .post(
                &format!("/iam/v2/roles/{org_uid}"),
                json!({"name": "reader", "capabilities": ["CAP_IAM_GROUPS_LIST"]}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{b}: {role}");
        let (st, repo) = s
            .post(&format!("/registry/v2/repos/{org_uid}"), json!({"name": "app"}))
            .await;
        assert_eq!(st, StatusCode::OK, "{b}: {repo}");
        // Refused: a group that still has children.
        let (st, _) = s
            .call(reqwest::Method::DELETE, &format!("/iam/v2/groups/{org_uid}"), None)
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{b}");
        let (st, _) = s
            .call(reqwest::Method::DELETE, &format!("/iam/v2/groups/{team_uid}"), None)
            .await;
        assert_eq!(st, StatusCode::OK, "{b}");

        let events = log(&s, &org_uid).await;
        let types: Vec<&str> = events.iter().rev().map(|e| e.event_type.as_str()).collect();
        assert_eq!(
            types,
            [
                "dev.chainguard.api.iam.group.created.v1",
                "dev.chainguard.api.iam.group.created.v1",
                "dev.chainguard.api.iam.group.updated.v1",
                "dev.chainguard.api.iam.roles.created.v1",
                "dev.chainguard.api.platform.registry.repo.created.v1",
                "dev.chainguard.api.iam.group.deleted.v1",
            ],
            "{b}"
        );
        let admin = s.ward().admin.as_str().to_owned();
        for e in &events {
            assert_eq!(e.actor, admin, "{b}: {} actor", e.event_type);
            assert_eq!(e.audience, "customer", "{b}");
            assert_eq!(e.id.len(), 36, "{b}: a UUID id");
        }
        let chrono = |i: usize| &events[events.len() - 1 - i];
        // The body is the RPC's response, as the client got it.
        assert_eq!(body(chrono(0)), org, "{b}: created org");
        assert_eq!(
            (chrono(0).subject.as_str(), chrono(0).group_uid.as_str()),
            (org_uid.as_str(), org_uid.as_str())
        );
        assert_eq!(body(chrono(1)), team, "{b}: created team");
        assert_eq!(body(chrono(2)), renamed, "{b}: the updated group");
        assert_eq!(body(chrono(3)), role, "{b}: created role");
        assert_eq!(chrono(3).group_uid, org_uid, "{b}: a role's group is its parent");
        assert_eq!(body(chrono(4)), repo, "{b}: created repo");
        assert_eq!(chrono(5).subject, team_uid, "{b}");
        assert_eq!(body(chrono(5)), json!({}), "{b}: a delete's body is Empty");

        // Identities: create, update, delete, in the organization's log.
        let (st, id) = s
            .post(
                &format!("/iam/v2/identities/{org_uid}"),
                json!({
                    "name": "ci",
                    "claimMatch": {"issuer": "https://token.actions.githubusercontent.com", "subject": "repo:acme/app"},
                }),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{b}: {id}");
        let id_uid = id["uid"].as_str().unwrap().to_owned();
        let (st, id2) = s
            .patch(&format!("/iam/v2/identities/{id_uid}"), json!({"name": "ci-renamed"}))
            .await;
        assert_eq!(st, StatusCode::OK, "{b}: {id2}");
        let (st, _) = s
            .call(reqwest::Method::DELETE, &format!("/iam/v2/identities/{id_uid}"), None)
            .await;
        assert_eq!(st, StatusCode::OK, "{b}");
        let newest: Vec<EventRecord> = log(&s, &org_uid).await.into_iter().take(3).collect();
        let types: Vec<&str> = newest.iter().rev().map(|e| e.event_type.as_str()).collect();
        assert_eq!(
            types,
            [
                "dev.chainguard.api.iam.identity.created.v1",
                "dev.chainguard.api.iam.identity.updated.v1",
                "dev.chainguard.api.iam.identity.deleted.v1",
            ],
            "{b}"
        );
        assert_eq!(body(&newest[2]), id, "{b}: created identity");
        assert_eq!(body(&newest[1]), id2, "{b}: updated identity");
        assert!(
            newest.iter().all(|e| e.subject == id_uid && e.group_uid == org_uid),
            "{b}"
        );

        // Past the retention (400 days by default), the sweep prunes them.
        s.clock.advance_millis(401 * 24 * 60 * 60 * 1000);
        let pruned = s.ward().prune_events().await.expect("prune");
        assert!(pruned >= events.len() as u64 + 3, "{b}: pruned {pruned}");
        assert!(log(&s, &org_uid).await.is_empty(), "{b}");
    }
}
