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

/// The events of `group`'s subtree of type `t`, newest first, read through
/// the audit API (waiting up to 5 s for at least one: pull events are
/// written in batches).
async fn of_type(s: &common::TestServer, group: &str, t: &str) -> Vec<Value> {
    for _ in 0..50 {
        let (st, page) = s
            .get(&format!("/events/v1/events?group={group}&types={t}&pageSize=200"))
            .await;
        assert_eq!(st, StatusCode::OK, "[{}] {page}", s.backend);
        let events = page["events"].as_array().cloned().unwrap_or_default();
        if !events.is_empty() {
            return events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Vec::new()
}

fn event_body(e: &Value) -> Value {
    serde_json::from_str(e["body"].as_str().expect("a body")).expect("a JSON body")
}

#[tokio::test(flavor = "multi_thread")]
async fn bindings_tags_pushes_pulls_and_advisories_record_their_events() {
    for s in servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "regevents").await);

        // A push creates the repo and tags it; a second push moves the tag.
        let config = common::push_blob(&s, "regevents/app", b"{}").await;
        let manifest = |n: &str| {
            json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 2},
                "layers": [],
                "annotations": {"n": n},
            })
        };
        let oci = "application/vnd.oci.image.manifest.v1+json";
        let d1 = common::push_manifest(&s, "regevents/app", "v1", oci, &manifest("1")).await;
        let d2 = common::push_manifest(&s, "regevents/app", "v1", oci, &manifest("2")).await;
        let pushes = of_type(&s, &org, "dev.chainguard.registry.push.v1").await;
        assert_eq!(pushes.len(), 2, "[{b}] {pushes:?}");
        let last = event_body(&pushes[0]);
        assert_eq!(last["repository"], "regevents/app", "[{b}] {last}");
        assert_eq!(last["tag"], "v1", "[{b}] {last}");
        assert_eq!(last["digest"], d2, "[{b}] {last}");
        assert_eq!(last["tag_previous_digest"], d1, "[{b}] {last}");
        assert_eq!(last["type"], "manifest", "[{b}] {last}");
        assert_eq!(last["remote_address"], "127.0.0.1", "[{b}] {last}");
        let repo_uid = last["repo_id"].as_str().unwrap().to_owned();
        assert!(repo_uid.starts_with(&org), "[{b}] {last}");
        assert!(
            event_body(&pushes[1]).get("tag_previous_digest").is_none(),
            "[{b}] a new tag"
        );

        // A refused push is recorded with its error.
        let r = s
            .http
            .put(format!("{}/v2/regevents/app/manifests/v2", s.base))
            .bearer_auth(&s.token)
            .header("content-type", oci)
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "[{b}]");
        let refused = of_type(&s, &org, "dev.chainguard.registry.push.v1").await;
        let error = event_body(&refused[0]);
        assert_eq!(error["error"]["status"], 400, "[{b}] {error}");
        assert_eq!(error["tag"], "v2", "[{b}] {error}");

        // A pull, with its user agent.
        let r = s
            .http
            .get(format!("{}/v2/regevents/app/manifests/v1", s.base))
            .bearer_auth(&s.token)
            .header("accept", oci)
            .header("user-agent", "events-test/1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "[{b}]");
        let pulls = of_type(&s, &org, "dev.chainguard.registry.pull.v1").await;
        let pull = event_body(&pulls[0]);
        assert_eq!(pull["user_agent"], "events-test/1.0", "[{b}] {pull}");
        assert_eq!(pull["method"], "GET", "[{b}] {pull}");
        assert_eq!(pull["digest"], d2, "[{b}] {pull}");
        assert_eq!(pull["tag"], "v1", "[{b}] {pull}");

        // Tags through the API.
        let (st, tag) = s
            .post(
                &format!("/registry/v2/tags/{repo_uid}"),
                json!({"name": "stable", "digest": d1}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {tag}");
        let (st, _) = s
            .delete(&format!("/registry/v2/tags/{}", tag["uid"].as_str().unwrap()))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        let created = of_type(&s, &org, "dev.chainguard.api.platform.registry.tag.created.v1").await;
        assert_eq!(event_body(&created[0]), tag, "[{b}] the body is the response");
        let deleted = of_type(&s, &org, "dev.chainguard.api.platform.registry.tag.deleted.v1").await;
        assert_eq!(deleted[0]["subject"], tag["uid"], "[{b}]");

        // A role binding granting owner, then its removal.
        let (reviewer, reviewer_token) = common::person(&s, "reviewer", &[(&org, "advisories.approver")]).await;
        let bound = of_type(&s, &org, "dev.chainguard.api.iam.rolebindings.created.v1").await;
        let binding = event_body(&bound[0]);
        assert_eq!(binding["role"]["name"], "advisories.approver", "[{b}] {binding}");
        assert_eq!(binding["identity"]["uid"], reviewer, "[{b}] {binding}");

        // An advisory, an event, and a second person's review.
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let (st, adv) = s
            .post(
                "/vulnerabilities/v1/advisories",
                json!({"parentId": org, "advisory": {
                    "artifactName": "pkg", "artifactType": "apk", "componentName": "pkg", "componentType": "apk",
                    "events": [{"timestamp": now, "detection": {"manual": {}}}],
                }}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {adv}");
        let adv_id = adv["id"].as_str().unwrap().to_owned();
        let (st, ev) = s
            .post(
                &format!("/vulnerabilities/v1/advisories/{adv_id}/events"),
                json!({"advisoryEvent": {"timestamp": now, "fixed": {"fixedVersion": "1.2.3-r0"}}}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {ev}");
        let ev_id = ev["id"].as_str().unwrap().to_owned();
        let (st, reviewed) = s
            .call_as(
                &reviewer_token,
                reqwest::Method::PUT,
                &format!("/vulnerabilities/v1/advisory_events/{ev_id}"),
                Some(json!({"status": "APPROVED"})),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {reviewed}");
        let created = of_type(&s, &org, "dev.chainguard.api.vulnerabilities.advisory.created.v1").await;
        assert_eq!(event_body(&created[0])["id"], adv_id, "[{b}]");
        let added = of_type(&s, &org, "dev.chainguard.api.vulnerabilities.advisory_event.created.v1").await;
        assert_eq!(event_body(&added[0])["id"], ev_id, "[{b}]");
        // An import of an advisory-schema document, with the CLI.
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/advisories/pyrite.advisories.yaml"
        );
        common::ward_run(&s, &s.token, &["advisories", "import", "--group", &org, fixture])
            .await
            .ok("advisories import");
        let imported = of_type(&s, &org, "dev.chainguard.api.vulnerabilities.advisories.imported.v1").await;
        let results = event_body(&imported[0])["results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(!results.is_empty(), "[{b}] {imported:?}");
        assert!(results.iter().all(|r| r["outcome"] == "CREATED"), "[{b}] {results:?}");
        let review = of_type(
            &s,
            &org,
            "dev.chainguard.api.vulnerabilities.advisory_event.reviewed.v1",
        )
        .await;
        assert_eq!(
            review[0]["actor"]["subject"], reviewer,
            "[{b}] the reviewer is the actor"
        );
        assert_eq!(event_body(&review[0]), reviewed, "[{b}] the body is the response");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_providers_mappings_invites_and_terms_record_their_events() {
    use common::people::{create_mapping, create_test_idp, dev_servers, role_uid};
    let idp = common::idp::TestIdp::start().await;
    for s in dev_servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "people-events").await);
        let viewer = role_uid("viewer");
        let provider = create_test_idp(&s, &idp, &org, &viewer).await;
        let created = of_type(&s, &org, "dev.chainguard.api.iam.identity_providers.created.v1").await;
        let body = event_body(&created[0]);
        assert_eq!(body["uid"], provider, "[{b}] {body}");
        assert!(
            !created[0]["body"].as_str().unwrap().contains(&idp.client_secret),
            "[{b}] the client secret is never in an event"
        );
        let mapping = create_mapping(&s, &provider, json!({"externalGroupId": "eng", "roleUid": viewer})).await;
        let mapped = of_type(
            &s,
            &org,
            "dev.chainguard.api.iam.external_group_role_mappings.created.v1",
        )
        .await;
        assert_eq!(event_body(&mapped[0]), mapping, "[{b}]");
        let (st, _) = s
            .delete(&format!("/iam/v2/externalGroupRoleMappings/{}", common::uid(&mapping)))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        assert_eq!(
            of_type(
                &s,
                &org,
                "dev.chainguard.api.iam.external_group_role_mappings.deleted.v1"
            )
            .await
            .len(),
            1,
            "[{b}]"
        );
        let (st, _) = s.delete(&format!("/iam/v2/identityProviders/{provider}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        let gone = of_type(&s, &org, "dev.chainguard.api.iam.identity_providers.deleted.v1").await;
        assert_eq!(gone[0]["subject"], provider, "[{b}]");

        // An invite's event never carries its code.
        let (st, invite) = s
            .post(
                &format!("/iam/v2/groupInvites/{org}"),
                json!({"roleUid": viewer, "ttl": "3600s", "singleUse": true}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {invite}");
        let code = invite["code"].as_str().expect("the creator gets the code");
        let invited = of_type(&s, &org, "dev.chainguard.api.iam.group_invite.created.v1").await;
        let raw = invited[0]["body"].as_str().unwrap();
        assert!(!raw.contains(code), "[{b}] the code is not in the event: {raw}");
        assert_eq!(event_body(&invited[0])["uid"], invite["uid"], "[{b}]");
        // Joining with it is Auth.Register's event, the joiner its actor.
        let (joiner, joiner_token) = common::person(&s, "joiner", &[]).await;
        let (st, session) = s
            .call_as(
                &joiner_token,
                reqwest::Method::POST,
                "/auth/v1/register",
                Some(json!({"code": code})),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {session}");
        let joined = of_type(&s, &org, "dev.chainguard.api.auth.registered.v1").await;
        assert_eq!(joined[0]["actor"]["subject"], joiner, "[{b}]");
        assert_eq!(event_body(&joined[0]), session, "[{b}] the body is the response");
        // A profile update is audited, never delivered (the contract gives it
        // no audience).
        let (st, profile) = s
            .call_as(
                &joiner_token,
                reqwest::Method::PATCH,
                "/iam/v2/identities:updateIdentityMetadata",
                Some(json!({"identityMetadata": {"company": "Acme"}, "updateMask": "company"})),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {profile}");
        let updated = of_type(&s, &joiner, "dev.chainguard.api.iam.identity.metadata.updated.v1").await;
        assert_eq!(updated.len(), 1, "[{b}] {updated:?}");
        assert_eq!(updated[0]["audience"], "internal", "[{b}]");
        assert_eq!(updated[0]["actor"]["subject"], joiner, "[{b}]");
        assert_eq!(event_body(&updated[0]), profile, "[{b}] the body is the response");

        let (st, _) = s
            .post(&format!("/iam/v2/terms/{org}"), json!({"documentIds": ["tos.v1"]}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        let accepted = of_type(&s, &org, "dev.chainguard.api.iam.terms.accepted.v1").await;
        assert_eq!(event_body(&accepted[0])["documentIds"], json!(["tos.v1"]), "[{b}]");
    }
}
