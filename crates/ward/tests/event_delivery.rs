//! Event subscriptions and delivery through the real server, as a receiver
//! sees them: a loopback receiver (the Python `cloudevents` package parses
//! every delivery) gets each write's event in CloudEvents binary mode, with a
//! bearer JWT that verifies against the server's JWKS (audience `customer`,
//! subject `webhook:<group>`, the body's digest); a sink answering 500 is
//! retried with the same `Ce-Id`; one refusing is kept as failed and retried
//! on demand; the audit trail reads the same log. Every test runs once per
//! storage backend.

mod common;

use std::time::Duration;

use common::receiver::Receiver;
use common::{TestServer, person};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A server that may deliver to loopback over plain http (`--dev`).
async fn dev_servers() -> Vec<TestServer> {
    let mut v = Vec::new();
    for db in ward_store::testing::backends().await {
        v.push(TestServer::start_with(db, |c| c.dev = true).await);
    }
    v
}

/// Verifies a delivery as a receiver does with the server's JWKS alone:
/// signature, issuer, audience `customer`, subject `webhook:<group>`, and
/// the body's digest.
async fn verify_token(s: &TestServer, delivery: &Value, group: &str) {
    let b = s.backend;
    let auth = delivery["headers"]["authorization"]
        .as_str()
        .expect("an Authorization header");
    let token = auth.strip_prefix("Bearer ").expect("a bearer token");
    let header = jsonwebtoken::decode_header(token).expect("a JWT");
    let jwks: Value = s
        .http
        .get(format!("{}/.well-known/jwks.json", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"].as_str() == header.kid.as_deref())
        .unwrap_or_else(|| panic!("[{b}] the token's kid is in the JWKS"));
    let key = DecodingKey::from_ed_components(jwk["x"].as_str().unwrap()).unwrap();
    let mut v = Validation::new(Algorithm::EdDSA);
    v.set_audience(&["customer"]);
    v.set_issuer(&[&s.base]);
    let claims = jsonwebtoken::decode::<Value>(token, &key, &v)
        .unwrap_or_else(|e| panic!("[{b}] the delivery token verifies: {e}"))
        .claims;
    assert_eq!(claims["sub"], format!("webhook:{group}"), "[{b}] {claims}");
    let body = delivery["body"].as_str().unwrap();
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(body.as_bytes())));
    assert_eq!(claims["webhook"]["digest"], digest, "[{b}] {claims}");
}

/// A subscription's delivery status once `done` holds of it (or after 30 s).
async fn status_when(s: &TestServer, sub: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut status = Value::Null;
    for _ in 0..300 {
        status = s.get(&format!("/events/v1/deliveries/{sub}")).await.1;
        if done(&status) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    status
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_are_delivered_signed_and_retried_with_the_same_id() {
    for s in dev_servers().await {
        let b = s.backend;
        let Some(mut rx) = Receiver::start("500,500").await else {
            return;
        };
        let org = common::uid(&s.create_group(None, "deliveries").await);
        let other = common::uid(&s.create_group(None, "elsewhere").await);
        let (st, sub) = s
            .post(&format!("/events/v2/subscriptions/{org}"), json!({"sink": rx.url}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {sub}");
        let sub_uid = sub["uid"].as_str().unwrap().to_owned();
        assert!(sub_uid.starts_with(&format!("{org}/")), "[{b}] {sub}");
        assert_eq!(sub["sink"], rx.url, "[{b}]");

        // The subscription's own creation is its first event: answered 500,
        // 500, then 200, with one Ce-Id throughout.
        let first: Vec<Value> = vec![rx.next().await, rx.next().await, rx.next().await];
        let ids: Vec<&Value> = first.iter().map(|d| &d["headers"]["ce-id"]).collect();
        assert!(
            ids.iter().all(|i| *i == ids[0]),
            "[{b}] one Ce-Id across retries: {ids:?}"
        );
        let answered: Vec<i64> = first.iter().map(|d| d["answered"].as_i64().unwrap()).collect();
        assert_eq!(answered, [500, 500, 200], "[{b}]");
        assert_eq!(
            first[2]["headers"]["ce-type"], "dev.chainguard.api.events.subscription.created.v1",
            "[{b}]"
        );

        // A write in the group and one below it, and one elsewhere.
        let team = common::uid(&s.create_group(Some(&org), "team").await);
        let _ = s.create_group(Some(&other), "not-ours").await;
        let (st, role) = s
            .post(
                &format!("/iam/v2/roles/{team}"),
                json!({"name": "reader", "capabilities": ["CAP_IAM_GROUPS_LIST"]}),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {role}");
        let got = rx
            .until(&[
                "dev.chainguard.api.iam.group.created.v1",
                "dev.chainguard.api.iam.roles.created.v1",
            ])
            .await;
        let group_event = got
            .iter()
            .find(|d| d["headers"]["ce-type"] == "dev.chainguard.api.iam.group.created.v1")
            .unwrap_or_else(|| panic!("[{b}] the team's creation was delivered: {got:?}"));
        let role_event = got
            .iter()
            .find(|d| d["headers"]["ce-type"] == "dev.chainguard.api.iam.roles.created.v1")
            .unwrap();
        for (d, subject, group, body) in [
            // A group's events belong to the group itself.
            (group_event, team.as_str(), team.as_str(), "team"),
            (role_event, role["uid"].as_str().unwrap(), team.as_str(), "reader"),
        ] {
            assert_eq!(d["error"], Value::Null, "[{b}] cloudevents parsed it: {d}");
            let h = &d["headers"];
            assert_eq!(h["ce-specversion"], "1.0", "[{b}] {h}");
            assert_eq!(h["ce-subject"], subject, "[{b}] {h}");
            assert_eq!(h["ce-group"], group, "[{b}] {h}");
            assert_eq!(h["ce-audience"], "customer", "[{b}] {h}");
            assert_eq!(h["ce-source"], s.base, "[{b}] {h}");
            assert!(h["ce-time"].as_str().is_some_and(|t| t.ends_with('Z')), "[{b}] {h}");
            assert_eq!(h["content-type"], "application/json", "[{b}] {h}");
            let e = &d["event"];
            assert_eq!(e["id"], h["ce-id"], "[{b}] {e}");
            assert_eq!(e["data"]["actor"]["subject"], common::admin_uid(&s), "[{b}] {e}");
            assert_eq!(e["data"]["body"]["name"], body, "[{b}] {e}");
            verify_token(&s, d, &org).await;
        }
        assert!(
            got.iter()
                .all(|d| d["headers"]["ce-group"].as_str().is_some_and(|g| g.starts_with(&org))),
            "[{b}] nothing from another organization: {got:?}"
        );

        // The status says what happened.
        let (st, status) = s.get(&format!("/events/v1/deliveries/{sub_uid}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}] {status}");
        assert_eq!(status["lastFailureStatus"], 500, "[{b}] {status}");
        assert!(status["lastSuccessTime"].is_string(), "[{b}] {status}");
        assert_eq!(status["failed"], json!([]), "[{b}] {status}");

        // Deleted: the next write is not delivered (its own deletion event
        // is the last one it could have seen, and it is gone with it).
        let (st, _) = s.delete(&format!("/events/v2/subscriptions/{sub_uid}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
        let (st, gone) = s.get(&format!("/events/v2/subscriptions/{sub_uid}")).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "[{b}] {gone}");
        // Its tail is still held by this server (until the next renewal),
        // and reads nothing written after the deletion.
        for drained in 0.. {
            assert!(drained < 1_000, "[{b}] deliveries never stop");
            if rx.next_within(Duration::from_millis(300)).await.is_none() {
                break;
            }
        }
        s.create_group(Some(&org), "after-the-deletion").await;
        let late = rx.next_within(Duration::from_millis(1_500)).await;
        assert!(late.is_none(), "[{b}] delivered after its deletion: {late:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_delivery_is_kept_and_retried_on_demand() {
    for s in dev_servers().await {
        let b = s.backend;
        let Some(mut rx) = Receiver::start("400").await else {
            return;
        };
        let org = common::uid(&s.create_group(None, "refused").await);
        let (st, sub) = s
            .post(&format!("/events/v1/subscriptions/{org}"), json!({"sink": rx.url}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] v1 create: {sub}");
        let sub_uid = common::v1_id(&sub);
        let refused = rx.next().await;
        assert_eq!(refused["answered"], 400, "[{b}]");
        // A 400 is not retried: the delivery is kept as failed.
        let status = status_when(&s, &sub_uid, |st| {
            st["failed"].as_array().is_some_and(|f| !f.is_empty())
        })
        .await;
        let failed = &status["failed"][0];
        assert_eq!(failed["status"], 400, "[{b}] {status}");
        assert_eq!(failed["eventId"], refused["headers"]["ce-id"], "[{b}] {status}");
        assert_eq!(
            failed["eventType"], "dev.chainguard.api.events.subscription.created.v1",
            "[{b}]"
        );

        let (st, after) = s
            .post("/events/v1/deliveries/retry", json!({"subscription": sub_uid}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {after}");
        let again = rx.next().await;
        assert_eq!(again["headers"]["ce-id"], refused["headers"]["ce-id"], "[{b}]");
        assert_eq!(again["answered"], 200, "[{b}]");
        let delivered = status_when(&s, &sub_uid, |st| st["delivered"] == "1").await;
        assert_eq!(delivered["delivered"], "1", "[{b}] {delivered}");
        assert_eq!(delivered["failed"], json!([]), "[{b}] {delivered}");

        // v1 lists it; v1 deletes it.
        let (st, list) = s
            .get(&format!("/events/v1/subscriptions?uidp.descendantsOf={org}"))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {list}");
        assert_eq!(list["items"][0]["id"], sub_uid, "[{b}] {list}");
        let (st, _) = s.delete(&format!("/events/v1/subscriptions/{sub_uid}")).await;
        assert_eq!(st, StatusCode::OK, "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sinks_are_checked_and_bounded() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "sinks").await);
        for bad in [
            "http://hooks.example.com/",
            "https://127.0.0.1/hook",
            "https://169.254.169.254/latest",
            "https://[::1]/",
            "https://user:pw@hooks.example.com/",
            "not a url",
            "",
        ] {
            let (st, body) = s
                .post(&format!("/events/v2/subscriptions/{org}"), json!({"sink": bad}))
                .await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {bad}: {body}");
        }
        // A parent left out (grpc-gateway's `{parent=**}` matches no
        // segment) is the request's error, named as each version names it,
        // not a 405 from the List on the same path.
        let fields =
            |body: &Value| -> Vec<String> { common::field_violations(body).into_iter().map(|(f, _)| f).collect() };
        for (path, field) in [
            ("/events/v1/subscriptions", "parent_id"),
            ("/events/v1/subscriptions/", "parent_id"),
            ("/events/v1/subscriptions/not-a-uidp", "parent_id"),
            ("/events/v2beta1/subscriptions", "parent"),
            ("/events/v2/subscriptions", "parent"),
            ("/events/v2/subscriptions/", "parent"),
        ] {
            let (st, body) = s.post(path, json!({"sink": "https://hooks.example.com/"})).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {path}: {body}");
            assert_eq!(fields(&body), [field], "[{b}] {path}: {body}");
        }
        // v1 deletes name the v1 request's field.
        for path in ["/events/v1/subscriptions/not-a-uidp", "/iam/v1/groups/not-a-uidp"] {
            let (st, body) = s.delete(path).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {path}: {body}");
            assert_eq!(fields(&body), ["id"], "[{b}] {path}: {body}");
        }
        let (st, body) = s
            .call(Method::PUT, "/iam/v1/groups/not-a-uidp", Some(json!({"name": "abc"})))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {body}");
        assert_eq!(
            fields(&body),
            ["id"],
            "[{b}] a v1 update's request is the bare group: {body}"
        );
        let (st, body) = s.get("/events/v2/subscriptions?orderBy=sink").await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {body}");
        assert!(
            body.to_string().contains("ordered by uid or create_time"),
            "[{b}] the error names what subscriptions order by: {body}"
        );
        for i in 0..16 {
            let (st, body) = s
                .post(
                    &format!("/events/v2/subscriptions/{org}"),
                    json!({"sink": format!("https://hooks.example.com/{i}")}),
                )
                .await;
            assert_eq!(st, StatusCode::OK, "[{b}] {body}");
        }
        let (st, body) = s
            .post(
                &format!("/events/v2/subscriptions/{org}"),
                json!({"sink": "https://hooks.example.com/17"}),
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] the 17th: {body}");
        assert!(body.to_string().contains("TOO_MANY_SUBSCRIPTIONS"), "[{b}] {body}");
        let (st, page) = s
            .get(&format!("/events/v2/subscriptions?uidp.childrenOf={org}&pageSize=10"))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {page}");
        assert_eq!(page["subscriptions"].as_array().unwrap().len(), 10, "[{b}] {page}");
        assert_eq!(common::total_count(&page), 16, "[{b}]");
        // A name that resolves to loopback passes the check of what was
        // written, and is refused where it counts: at the address connected to.
        let host = std::process::Command::new("hostname")
            .output()
            .expect("hostname")
            .stdout;
        let host = String::from_utf8_lossy(&host).trim().to_owned();
        let loopback = tokio::net::lookup_host((host.as_str(), 443))
            .await
            .is_ok_and(|mut a| a.all(|a| a.ip().is_loopback()));
        if loopback {
            let (st, sub) = s
                .post(
                    &format!(
                        "/events/v2/subscriptions/{}",
                        common::uid(&s.create_group(None, "rebind").await)
                    ),
                    json!({"sink": format!("https://{host}/hook")}),
                )
                .await;
            assert_eq!(st, StatusCode::OK, "[{b}] {sub}");
            let uid = sub["uid"].as_str().unwrap();
            let status = status_when(&s, uid, |st| {
                st["lastFailureError"].as_str().is_some_and(|e| !e.is_empty())
            })
            .await;
            let error = status["lastFailureError"].as_str().unwrap_or_default();
            assert!(error.contains("may not be fetched"), "[{b}] {status}");
            assert_eq!(
                status["lastFailureStatus"],
                json!(0),
                "[{b}] no request was sent: {status}"
            );
        }
        // A group holding subscriptions cannot be deleted.
        let (st, body) = s.delete(&format!("/iam/v2/groups/{org}")).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {body}");

        // Someone without a grant there sees none of it.
        let (_, outsider) = person(&s, "outsider", &[]).await;
        let (st, body) = s
            .call_as(
                &outsider,
                Method::GET,
                &format!("/events/v2/subscriptions?uidp.childrenOf={org}"),
                None,
            )
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {body}");
        assert_eq!(body["subscriptions"], json!([]), "[{b}] {body}");
        let uid = page["subscriptions"][0]["uid"].as_str().unwrap();
        for (m, path) in [
            (Method::GET, format!("/events/v2/subscriptions/{uid}")),
            (Method::DELETE, format!("/events/v2/subscriptions/{uid}")),
            (Method::GET, format!("/events/v1/deliveries/{uid}")),
        ] {
            let (st, body) = s.call_as(&outsider, m.clone(), &path, None).await;
            assert_eq!(st, StatusCode::NOT_FOUND, "[{b}] {m} {path}: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_trail_lists_a_groups_events_for_those_allowed() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "audited").await);
        let team = common::uid(&s.create_group(Some(&org), "team").await);
        let _ = s.create_group(Some(&team), "squad").await;
        let (st, _) = s
            .patch(&format!("/iam/v2/groups/{team}"), json!({"name": "renamed"}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}]");

        let (st, page) = s.get(&format!("/events/v1/events?group={org}&pageSize=2")).await;
        assert_eq!(st, StatusCode::OK, "[{b}] {page}");
        let events = page["events"].as_array().unwrap();
        assert_eq!(events.len(), 2, "[{b}] {page}");
        assert_eq!(
            events[0]["type"], "dev.chainguard.api.iam.group.updated.v1",
            "[{b}] newest first"
        );
        assert_eq!(events[0]["actor"]["subject"], common::admin_uid(&s), "[{b}]");
        let body: Value = serde_json::from_str(events[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["name"], "renamed", "[{b}]");
        let token = page["nextPageToken"].as_str().unwrap();
        let (st, rest) = s
            .get(&format!("/events/v1/events?group={org}&pageSize=10&pageToken={token}"))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {rest}");
        let types: Vec<&str> = rest["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "dev.chainguard.api.iam.group.created.v1",
                "dev.chainguard.api.iam.group.created.v1"
            ],
            "[{b}] {rest}"
        );
        let (st, only) = s
            .get(&format!(
                "/events/v1/events?group={team}&types=dev.chainguard.api.iam.group.updated.v1"
            ))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {only}");
        assert_eq!(only["events"].as_array().unwrap().len(), 1, "[{b}] {only}");
        // A time that is not one names its parameter.
        for bad in ["since=yesterday", "until=2026-13-01T00:00:00Z"] {
            let (st, body) = s.get(&format!("/events/v1/events?group={org}&{bad}")).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {bad}: {body}");
            let field = bad.split('=').next().unwrap();
            assert!(
                common::field_violations(&body).iter().any(|(f, _)| f == field),
                "[{b}] {bad}: {body}"
            );
        }

        // A viewer may see the group but not its audit trail; an outsider
        // does not see the group; an auditor reads it.
        let (_, viewer) = person(&s, "viewer", &[(&org, "viewer")]).await;
        let (st, body) = s
            .call_as(&viewer, Method::GET, &format!("/events/v1/events?group={org}"), None)
            .await;
        assert_eq!(st, StatusCode::FORBIDDEN, "[{b}] {body}");
        let (_, outsider) = person(&s, "outsider", &[]).await;
        let (st, body) = s
            .call_as(&outsider, Method::GET, &format!("/events/v1/events?group={org}"), None)
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "[{b}] {body}");
        let (_, auditor) = person(&s, "auditor", &[(&team, "auditor")]).await;
        let (st, body) = s
            .call_as(&auditor, Method::GET, &format!("/events/v1/events?group={team}"), None)
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {body}");
        let types: Vec<&str> = body["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "dev.chainguard.api.iam.rolebindings.created.v1",
                "dev.chainguard.api.iam.group.updated.v1",
                "dev.chainguard.api.iam.group.created.v1",
                "dev.chainguard.api.iam.group.created.v1",
            ],
            "[{b}] the auditor's binding, the team's rename, its squad's and its own creation: {body}"
        );
        // The binding's event shows it as the API does (role and identity).
        let binding: Value = serde_json::from_str(body["events"][0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(binding["role"]["name"], "auditor", "[{b}] {binding}");
        assert_eq!(binding["group"]["uid"], team, "[{b}] {binding}");
        let (st, body) = s
            .call_as(&auditor, Method::GET, &format!("/events/v1/events?group={org}"), None)
            .await;
        assert_eq!(st, StatusCode::NOT_FOUND, "[{b}] not above the binding: {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_manages_subscriptions_and_reads_the_trail() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "cli-events").await);
        let created = common::ward_run(
            &s,
            &s.token,
            &[
                "events",
                "subscriptions",
                "create",
                "--parent",
                "cli-events",
                "https://hooks.example.com/ward",
                "-o",
                "json",
            ],
        )
        .await
        .json("subscriptions create");
        let uid = created["uid"].as_str().unwrap().to_owned();
        assert!(uid.starts_with(&org), "[{b}] {created}");
        let list = common::ward_run(&s, &s.token, &["events", "subscriptions", "list", "--parent", &org]).await;
        assert!(
            list.ok("subscriptions list").contains("https://hooks.example.com/ward"),
            "[{b}]"
        );
        let status = common::ward_run(&s, &s.token, &["events", "deliveries", &uid, "-o", "json"])
            .await
            .json("deliveries");
        assert_eq!(status["subscription"], uid, "[{b}] {status}");
        let trail = common::ward_run(
            &s,
            &s.token,
            &[
                "events",
                "list",
                "--group",
                &org,
                "--type",
                "dev.chainguard.api.events.subscription.created.v1",
            ],
        )
        .await;
        let out = trail.ok("events list");
        assert!(
            out.contains("dev.chainguard.api.events.subscription.created.v1"),
            "[{b}] {out}"
        );
        assert!(out.contains(&uid), "[{b}] {out}");
        let deleted = common::ward_run(&s, &s.token, &["events", "subscriptions", "delete", &uid]).await;
        deleted.ok("subscriptions delete");
        let gone = common::ward_run(&s, &s.token, &["events", "subscriptions", "describe", &uid]).await;
        assert!(
            gone.failed("describe a deleted subscription").contains("404"),
            "[{b}] {gone:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_server_takes_its_tails_back_at_once() {
    for mut s in dev_servers().await {
        let b = s.backend;
        let Some(mut rx) = Receiver::start("").await else {
            return;
        };
        let org = common::uid(&s.create_group(None, "restarted").await);
        let (st, sub) = s
            .post(&format!("/events/v2/subscriptions/{org}"), json!({"sink": rx.url}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {sub}");
        assert_eq!(
            rx.next().await["headers"]["ce-type"],
            "dev.chainguard.api.events.subscription.created.v1",
            "[{b}]"
        );
        // Counted once its tail moved past it (a stop before that delivers
        // it again: at least once).
        let sub_uid = sub["uid"].as_str().unwrap().to_owned();
        status_when(&s, &sub_uid, |st| st["delivered"] == "1").await;
        // The subscription's tail is leased to this server for 30 s. The
        // server comes back under the same name (kept in its data
        // directory), so a write after the restart is delivered at once,
        // not once the old lease has run out.
        s.restart().await;
        let _ = s.create_group(Some(&org), "after").await;
        let d = rx
            .next_within(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("[{b}] delivered after the restart"));
        assert_eq!(
            d["headers"]["ce-type"], "dev.chainguard.api.iam.group.created.v1",
            "[{b}]"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_deliver_each_event_exactly_once() {
    for s in dev_servers().await {
        // Replicas share a PostgreSQL database; SQLite is one server's.
        if s.backend != "postgres" {
            continue;
        }
        let b = s.backend;
        let r = s.replica_with(|c| c.dev = true).await;
        let Some(mut rx) = Receiver::start("").await else {
            return;
        };
        let org = common::uid(&s.create_group(None, "replicated").await);
        let (st, sub) = s
            .post(&format!("/events/v2/subscriptions/{org}"), json!({"sink": rx.url}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {sub}");
        for i in 0..20 {
            s.create_group(Some(&org), &format!("on-first-{i}")).await;
            r.create_group(Some(&org), &format!("on-second-{i}")).await;
        }
        // The subscription's creation and 40 groups: 41 events, each once.
        let mut ids = std::collections::BTreeMap::<String, usize>::new();
        while let Some(d) = rx.next_within(Duration::from_secs(10)).await {
            *ids.entry(d["headers"]["ce-id"].as_str().unwrap().to_owned())
                .or_default() += 1;
            if ids.len() == 41 {
                // Anything delivered twice would follow within the poll.
                while let Some(d) = rx.next_within(Duration::from_secs(2)).await {
                    *ids.entry(d["headers"]["ce-id"].as_str().unwrap().to_owned())
                        .or_default() += 1;
                }
                break;
            }
        }
        assert_eq!(ids.len(), 41, "[{b}] every event delivered");
        assert!(ids.values().all(|n| *n == 1), "[{b}] none twice: {ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn subscriptions_and_the_audit_trail_follow_their_capabilities() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "matrix").await);
        let (_, sub) = s
            .post(
                &format!("/events/v2/subscriptions/{org}"),
                json!({"sink": "https://hooks.example.com/matrix"}),
            )
            .await;
        let sub = sub["uid"].as_str().unwrap().to_owned();
        // (role, list+get, create+delete, retry, audit): 200, 403 or 404.
        let rows: [(&str, u16, u16, u16, u16); 5] = [
            ("viewer", 200, 403, 403, 403),
            ("editor", 200, 200, 200, 403),
            ("auditor", 200, 403, 403, 200),
            ("owner", 200, 200, 200, 200),
            ("", 404, 404, 404, 404),
        ];
        for (role, read, write, retry, audit) in rows {
            let grants: Vec<(&str, &str)> = if role.is_empty() { vec![] } else { vec![(&org, role)] };
            let (_, token) = person(
                &s,
                &format!("as-{}", if role.is_empty() { "none" } else { role }),
                &grants,
            )
            .await;
            let call = |m: Method, path: String, body: Option<Value>| {
                let (s, token) = (&s, &token);
                async move { s.call_as(token, m, &path, body).await }
            };
            let ctx = format!("[{b}] {}", if role.is_empty() { "no role" } else { role });
            let (st, body) = call(Method::GET, format!("/events/v2/subscriptions/{sub}"), None).await;
            assert_eq!(st.as_u16(), read, "{ctx} get: {body}");
            let (st, body) = call(Method::GET, format!("/events/v1/deliveries/{sub}"), None).await;
            assert_eq!(st.as_u16(), read, "{ctx} deliveries: {body}");
            let (st, body) = call(
                Method::POST,
                format!("/events/v2/subscriptions/{org}"),
                Some(json!({"sink": format!("https://hooks.example.com/{role}")})),
            )
            .await;
            assert_eq!(st.as_u16(), write, "{ctx} create: {body}");
            if st == StatusCode::OK {
                let own = body["uid"].as_str().unwrap().to_owned();
                let (st, body) = call(Method::DELETE, format!("/events/v2/subscriptions/{own}"), None).await;
                assert_eq!(st.as_u16(), write, "{ctx} delete: {body}");
            } else {
                let (st, body) = call(Method::DELETE, format!("/events/v2/subscriptions/{sub}"), None).await;
                assert_eq!(st.as_u16(), write, "{ctx} delete: {body}");
            }
            let (st, body) = call(
                Method::POST,
                "/events/v1/deliveries/retry".into(),
                Some(json!({"subscription": sub})),
            )
            .await;
            assert_eq!(st.as_u16(), retry, "{ctx} retry: {body}");
            let (st, body) = call(Method::GET, format!("/events/v1/events?group={org}"), None).await;
            assert_eq!(st.as_u16(), audit, "{ctx} audit: {body}");
            // A listing shows only what the caller may list.
            let (st, list) = call(
                Method::GET,
                format!("/events/v2/subscriptions?uidp.childrenOf={org}"),
                None,
            )
            .await;
            assert_eq!(st, StatusCode::OK, "{ctx} list: {list}");
            let n = list["subscriptions"].as_array().map_or(0, Vec::len);
            assert_eq!(n > 0, read == 200, "{ctx} list: {list}");
        }
        // A private sink is refused with a field violation naming the sink.
        let (st, body) = s
            .post(
                &format!("/events/v2/subscriptions/{org}"),
                json!({"sink": "https://10.1.2.3/hook"}),
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "[{b}] {body}");
        let fields = common::field_violations(&body);
        assert!(fields.iter().any(|(f, _)| f == "subscription.sink"), "[{b}] {fields:?}");
    }
}

/// The README's receiver, pasted as a user would and run with the venv's
/// PyJWT and cloudevents: it verifies a real delivery with Ward's JWKS
/// alone, and refuses a genuine Ward token of another kind.
#[tokio::test(flavor = "multi_thread")]
async fn the_readmes_receiver_verifies_deliveries() {
    use tokio::io::AsyncBufReadExt as _;
    let Some(python) = common::venv_python(
        "jwt.algorithms, cryptography, cloudevents.core.bindings.http",
        "'pyjwt[crypto]==2.*' 'cloudevents==2.2.0'",
    ) else {
        return;
    };
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README");
    let snippet = &readme[readme.find("# A Ward event receiver").expect("the README's receiver")..];
    let snippet = &snippet[..snippet.find("```").expect("the end of its block")];
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("receiver.py");
    std::fs::write(&script, snippet).expect("write the receiver");
    for s in dev_servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "readme").await);
        let mut child = tokio::process::Command::new(&python)
            .arg(&script)
            .env("WARD_ISSUER", &s.base)
            .env("WARD_GROUP", &org)
            .env("PORT", "0")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the README's receiver");
        let mut printed = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        // It says where it listens (PORT=0: a port of the system's choice).
        let first = tokio::time::timeout(Duration::from_secs(30), printed.next_line())
            .await
            .unwrap_or_else(|_| panic!("[{b}] the receiver starts"))
            .expect("read")
            .expect("the receiver runs");
        let port = first
            .strip_prefix("listening on port ")
            .unwrap_or_else(|| panic!("[{b}] {first}"));
        let sink = format!("http://127.0.0.1:{port}/");
        // Ward's own admin token is signed by the same key, but is no
        // delivery's: another audience and subject, no digest.
        let forged = s
            .http
            .post(&sink)
            .bearer_auth(&s.token)
            .header("ce-id", "forged")
            .header("ce-source", "https://example.com")
            .header("ce-specversion", "1.0")
            .header("ce-type", "dev.chainguard.api.iam.group.created.v1")
            .header("content-type", "application/json")
            .body("{\"actor\":{},\"body\":{}}")
            .send()
            .await
            .expect("post to the receiver");
        assert_eq!(forged.status(), StatusCode::FORBIDDEN, "[{b}] a forged delivery");

        let (st, sub) = s
            .post(&format!("/events/v2/subscriptions/{org}"), json!({"sink": sink}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {sub}");
        let team = common::uid(&s.create_group(Some(&org), "team").await);
        // Both events, verified and printed (in either order: deliveries run
        // side by side).
        let wanted = [
            format!(
                "dev.chainguard.api.events.subscription.created.v1 {} ",
                common::uid(&sub)
            ),
            format!("dev.chainguard.api.iam.group.created.v1 {team} "),
        ];
        let mut lines = Vec::new();
        while !wanted.iter().all(|w| lines.iter().any(|l: &String| l.starts_with(w))) {
            let line = tokio::time::timeout(Duration::from_secs(60), printed.next_line())
                .await
                .unwrap_or_else(|_| panic!("[{b}] the receiver printed the group's event: {lines:?}"))
                .expect("read")
                .expect("the receiver runs");
            lines.push(line);
        }

        // A real delivery (caught by the fixture receiver, subscribed to the
        // same group), replayed: as sent it is accepted; with its body changed
        // under the same token it is refused (the digest claim).
        let Some(mut rx) = Receiver::start("").await else {
            return;
        };
        let (st, caught) = s
            .post(&format!("/events/v2/subscriptions/{org}"), json!({"sink": rx.url}))
            .await;
        assert_eq!(st, StatusCode::OK, "[{b}] {caught}");
        let real = rx.next().await;
        let replay = |body: String| {
            let mut req = s.http.post(&sink).body(body);
            for (k, v) in real["headers"].as_object().expect("headers") {
                if k.starts_with("ce-") || k == "authorization" || k == "content-type" {
                    req = req.header(k.as_str(), v.as_str().expect("a header value"));
                }
            }
            req.send()
        };
        let body = real["body"].as_str().expect("the body").to_owned();
        let tampered = body.replacen("\"body\":{", "\"body\":{\"tampered\":true,", 1);
        assert_ne!(tampered, body, "[{b}] {body}");
        let refused = replay(tampered).await.expect("replay");
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "[{b}] a changed body");
        let accepted = replay(body).await.expect("replay");
        assert_eq!(accepted.status(), StatusCode::OK, "[{b}] the delivery as sent");
    }
}
