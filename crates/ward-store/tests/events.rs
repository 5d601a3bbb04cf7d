//! The event log on both backends: a write's event commits with it and only
//! with it, and the audit read filters by scope, type, actor, time and page.

use ward_core::Error;
use ward_core::uidp::Uidp;
use ward_store::events::{CUSTOMER, Emit, EventQuery, EventRecord};
use ward_store::testing;
use ward_store::{GroupPatch, GroupRecord};

fn group(uid: &Uidp, name: &str) -> GroupRecord {
    GroupRecord {
        uid: uid.as_str().into(),
        parent_uid: uid.parent().map(String::from),
        name: name.into(),
        description: String::new(),
        verified: false,
        create_time: 1,
        update_time: 1,
        kind: 0,
    }
}

/// An event head; `id` is made unique by the caller.
fn head(id: &str, event_type: &str, group: &Uidp, actor: &str, time: i64) -> EventRecord {
    EventRecord {
        seq: 0,
        id: id.into(),
        event_type: event_type.into(),
        subject: group.as_str().into(),
        group_uid: group.as_str().into(),
        actor: actor.into(),
        act: "{}".into(),
        body: format!("{{\"uid\":\"{}\"}}", group.as_str()),
        audience: CUSTOMER.into(),
        time,
    }
}

/// A write's event with a body known before the write.
fn fixed<R>(id: &str, event_type: &str, group: &Uidp, actor: &str, time: i64) -> Emit<R> {
    Emit::fixed(head(id, event_type, group, actor, time))
}

fn all(scopes: &[&Uidp]) -> EventQuery {
    EventQuery {
        scopes: scopes.iter().map(|s| s.as_str().to_owned()).collect(),
        limit: 100,
        ..EventQuery::default()
    }
}

fn ids(events: &[EventRecord]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_commits_with_its_write_and_only_with_it() {
    for b in testing::stores().await {
        let s = &b.store;
        let name = b.name;
        let org = Uidp::new_root();
        let team = org.new_child();
        let other = Uidp::new_root();
        s.create_group(&group(&org, "org"), None, fixed("e1", "created", &org, "alice", 10))
            .await
            .unwrap();
        s.create_group(&group(&team, "team"), None, fixed("e2", "created", &team, "bob", 20))
            .await
            .unwrap();
        s.create_group(
            &group(&other, "other"),
            None,
            fixed("e3", "created", &other, "alice", 30),
        )
        .await
        .unwrap();

        // Refused writes leave no event: a missing parent, a group with
        // children, an update of a missing group.
        let orphan = Uidp::new_root().new_child();
        let refused = s
            .create_group(
                &group(&orphan, "orphan"),
                None,
                fixed("x1", "created", &orphan, "alice", 40),
            )
            .await;
        assert!(matches!(refused, Err(Error::NotFound { .. })), "{name}: {refused:?}");
        let refused = s.delete_group(&org, fixed("x2", "deleted", &org, "alice", 41)).await;
        assert!(
            matches!(refused, Err(Error::FailedPrecondition(_))),
            "{name}: {refused:?}"
        );
        let patch = GroupPatch {
            name: Some("renamed".into()),
            description: None,
        };
        let missing = org.new_child();
        let refused = s
            .update_group(
                &missing,
                &patch,
                42,
                Emit::new(head("x3", "updated", &missing, "alice", 42), |_| String::new()),
            )
            .await;
        assert!(matches!(refused, Err(Error::NotFound { .. })), "{name}: {refused:?}");

        // An update's body is rendered from the updated row.
        let updated = s
            .update_group(
                &team,
                &patch,
                50,
                Emit::new(head("e4", "updated", &team, "alice", 50), |g: &GroupRecord| {
                    format!("{{\"name\":\"{}\",\"updateTime\":{}}}", g.name, g.update_time)
                }),
            )
            .await
            .unwrap();
        s.delete_group(&team, fixed("e5", "deleted", &team, "bob", 60))
            .await
            .unwrap();

        // The org's log: its own events and its descendants', newest first;
        // never the other organization's, never a refused write's.
        let log = s.list_events(&all(&[&org])).await.unwrap();
        assert_eq!(ids(&log), ["e5", "e4", "e2", "e1"], "{name}");
        assert!(
            log.windows(2).all(|w| w[0].seq > w[1].seq),
            "{name}: seq orders the log"
        );
        let e4 = &log[1];
        assert_eq!(
            e4.body,
            format!("{{\"name\":\"renamed\",\"updateTime\":{}}}", updated.update_time),
            "{name}"
        );
        assert_eq!(e4.subject, team.as_str(), "{name}");
        assert_eq!(e4.event_type, "updated", "{name}");
        assert_eq!(ids(&s.list_events(&all(&[&other])).await.unwrap()), ["e3"], "{name}");
        assert_eq!(
            ids(&s.list_events(&all(&[&team])).await.unwrap()),
            ["e5", "e4", "e2"],
            "{name}"
        );
        assert!(
            s.list_events(&all(&[])).await.unwrap().is_empty(),
            "{name}: no scope, nothing"
        );

        // Filters: type, actor, time range, and pages by seq.
        let q = EventQuery {
            types: vec!["created".into(), "deleted".into()],
            ..all(&[&org, &other])
        };
        assert_eq!(
            ids(&s.list_events(&q).await.unwrap()),
            ["e5", "e3", "e2", "e1"],
            "{name}: types"
        );
        let q = EventQuery {
            actor: Some("bob".into()),
            ..all(&[&org, &other])
        };
        assert_eq!(ids(&s.list_events(&q).await.unwrap()), ["e5", "e2"], "{name}: actor");
        let q = EventQuery {
            since: Some(20),
            until: Some(50),
            ..all(&[&org, &other])
        };
        assert_eq!(
            ids(&s.list_events(&q).await.unwrap()),
            ["e4", "e3", "e2"],
            "{name}: time range"
        );
        let first = s
            .list_events(&EventQuery {
                limit: 2,
                ..all(&[&org, &other])
            })
            .await
            .unwrap();
        assert_eq!(ids(&first), ["e5", "e4"], "{name}: first page");
        let next = s
            .list_events(&EventQuery {
                limit: 2,
                before_seq: Some(first[1].seq),
                ..all(&[&org, &other])
            })
            .await
            .unwrap();
        assert_eq!(ids(&next), ["e3", "e2"], "{name}: next page");

        // Pruning takes the oldest first, at most `limit` at a time.
        assert_eq!(s.prune_events(35, 1).await.unwrap(), 1, "{name}");
        assert_eq!(s.prune_events(35, 10).await.unwrap(), 2, "{name}");
        assert_eq!(
            ids(&s.list_events(&all(&[&org, &other])).await.unwrap()),
            ["e5", "e4"],
            "{name}: pruned"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn role_writes_record_their_events() {
    for b in testing::stores().await {
        let s = &b.store;
        let name = b.name;
        let org = Uidp::new_root();
        s.create_group(&group(&org, "org"), None, fixed("g", "created", &org, "a", 1))
            .await
            .unwrap();
        let uid = org.new_child();
        let role = ward_store::RoleRecord {
            uid: uid.as_str().into(),
            parent_uid: Some(org.as_str().into()),
            name: "r".into(),
            description: String::new(),
            capabilities: String::new(),
            create_time: 1,
            update_time: 1,
        };
        s.create_role(&role, fixed("r1", "role.created", &org, "a", 2))
            .await
            .unwrap();
        let missing = Uidp::new_root();
        let orphan = ward_store::RoleRecord {
            uid: missing.new_child().as_str().into(),
            parent_uid: Some(missing.as_str().into()),
            ..role.clone()
        };
        assert!(
            s.create_role(&orphan, fixed("x", "role.created", &org, "a", 3))
                .await
                .is_err()
        );
        let patch = ward_store::RolePatch {
            name: Some("renamed".into()),
            ..Default::default()
        };
        s.update_role(
            &uid,
            &patch,
            4,
            Emit::new(
                head("r2", "role.updated", &org, "a", 4),
                |r: &ward_store::RoleRecord| r.name.clone(),
            ),
        )
        .await
        .unwrap();
        s.delete_role(&uid, fixed("r3", "role.deleted", &org, "a", 5))
            .await
            .unwrap();
        assert!(
            s.delete_role(&uid, fixed("y", "role.deleted", &org, "a", 6))
                .await
                .is_err()
        );
        let log = s.list_events(&all(&[&org])).await.unwrap();
        assert_eq!(ids(&log), ["r3", "r2", "r1", "g"], "{name}");
        assert_eq!(
            log[1].body, "renamed",
            "{name}: the body rendered from the updated role"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn repo_writes_record_their_events() {
    for b in testing::stores().await {
        let s = &b.store;
        let name = b.name;
        let org = Uidp::new_root();
        s.create_group(&group(&org, "org"), None, fixed("g", "created", &org, "a", 1))
            .await
            .unwrap();
        let uid = org.new_child();
        let repo = ward_store::registry::RepoRecord {
            uid: uid.as_str().into(),
            parent_uid: org.as_str().into(),
            org_uid: org.as_str().into(),
            name: "app".into(),
            description: String::new(),
            catalog_tier: 0,
            bundles: "[]".into(),
            aliases: "[]".into(),
            active_tags: "[]".into(),
            create_time: 1,
            update_time: 1,
        };
        s.create_repo(&repo, fixed("p1", "repo.created", &org, "a", 2))
            .await
            .unwrap();
        // A second repo of the same name is refused, and records nothing.
        let twin = ward_store::registry::RepoRecord {
            uid: org.new_child().as_str().into(),
            ..repo.clone()
        };
        assert!(
            s.create_repo(&twin, fixed("x1", "repo.created", &org, "a", 3))
                .await
                .is_err()
        );
        let patch = ward_store::registry::RepoPatch {
            description: Some("described".into()),
            ..Default::default()
        };
        s.update_repo(
            &uid,
            &patch,
            4,
            Emit::new(
                head("p2", "repo.updated", &org, "a", 4),
                |r: &ward_store::registry::RepoRecord| r.description.clone(),
            ),
        )
        .await
        .unwrap();
        s.delete_repo(&uid, fixed("p3", "repo.deleted", &org, "a", 5))
            .await
            .unwrap();
        assert!(
            s.delete_repo(&uid, fixed("x2", "repo.deleted", &org, "a", 6))
                .await
                .is_err()
        );
        let log = s.list_events(&all(&[&org])).await.unwrap();
        assert_eq!(ids(&log), ["p3", "p2", "p1", "g"], "{name}");
        assert_eq!(
            log[1].body, "described",
            "{name}: the body rendered from the updated repo"
        );
    }
}

fn subscription(parent: &Uidp, sink: &str) -> ward_store::events::SubscriptionRecord {
    ward_store::events::SubscriptionRecord {
        uid: parent.new_child().into(),
        parent_uid: parent.as_str().into(),
        sink: sink.into(),
        create_time: 1,
        delivered: 0,
        last_success_time: 0,
        last_failure_time: 0,
        last_failure_status: 0,
        last_failure_error: String::new(),
    }
}

/// A tail's events, as soon as the transactions before them are over (on
/// PostgreSQL another test's transaction may still be running).
async fn read_tail(
    s: &std::sync::Arc<dyn ward_store::Store>,
    subscription: &str,
    root: &str,
    after: ward_store::events::Position,
) -> Vec<(ward_store::events::Position, EventRecord)> {
    for _ in 0..100 {
        let read = s.read_tail(subscription, root, after, 10).await.unwrap();
        if !read.is_empty() {
            return read;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Vec::new()
}

#[tokio::test(flavor = "multi_thread")]
async fn customer_events_reach_the_subscriptions_at_or_above_their_group() {
    use ward_store::events::{
        Attempt, Expired, FailedDeliveryRecord, INTERNAL, MAX_PENDING_PER_SUBSCRIPTION, MAX_SUBSCRIPTIONS_PER_GROUP,
        QueuedDelivery, TailMove, root_of,
    };
    use ward_store::vulns::{JobEnd, Lane};
    for b in testing::stores().await {
        let s = &b.store;
        let name = b.name;
        let (org, other) = (Uidp::new_root(), Uidp::new_root());
        let team = org.new_child();
        for (g, n) in [(&org, "org"), (&other, "other"), (&team, "team")] {
            s.create_group(&group(g, n), None, testing::emit()).await.unwrap();
        }
        let at_org = subscription(&org, "https://a.example/");
        let at_other = subscription(&other, "https://b.example/");
        s.create_subscription(&at_org, testing::emit()).await.unwrap();
        s.create_subscription(&at_other, testing::emit()).await.unwrap();

        // A team event reaches the organization's subscription only; an
        // internal one reaches none.
        let event = head("ev-team", "t", &team, "a", 10);
        let mut internal = head("ev-internal", "t", &team, "a", 11);
        internal.audience = INTERNAL.into();
        s.append_events(&[event, internal]).await.unwrap();
        assert_eq!(s.deliveries(&at_org.uid, 10).await.unwrap().0, 1, "{name}");
        assert_eq!(s.deliveries(&at_other.uid, 10).await.unwrap().0, 0, "{name}");

        // Tails: one server leases them; the organization's reads the team
        // event (not the internal one) from its organization's log.
        assert!(
            s.free_tails(100).await.unwrap(),
            "{name}: new subscriptions' tails are free"
        );
        assert!(s.log_head().await.unwrap() > 0, "{name}");
        let tails = s.claim_tails("me", 100, 1000, 10).await.unwrap();
        assert_eq!(tails.len(), 2, "{name}");
        assert!(
            s.claim_tails("other", 200, 1000, 10).await.unwrap().is_empty(),
            "{name}: leased"
        );
        let tail = tails.iter().find(|t| t.subscription.uid == at_org.uid).unwrap();
        let read = read_tail(s, &at_org.uid, root_of(org.as_str()), tail.position).await;
        let read_ids: Vec<&str> = read.iter().map(|(_, e)| e.id.as_str()).collect();
        assert_eq!(read_ids, ["ev-team"], "{name}");
        // Another server cannot move it; its holder moves it past the event
        // and hands a failed first attempt to the retry queue, at once.
        let retry = QueuedDelivery {
            event_id: "ev-team".into(),
            run_after: 50,
            attempts: 1,
            error: "503".into(),
            event_time: 10,
        };
        let moved = |retries: Vec<QueuedDelivery>| TailMove {
            subscription: at_org.uid.clone(),
            position: read[0].0,
            retries,
            ..TailMove::default()
        };
        s.advance_tails("other", &[moved(vec![retry.clone()])]).await.unwrap();
        assert_eq!(s.deliveries(&at_org.uid, 10).await.unwrap().0, 1, "{name}: not moved");
        s.advance_tails("me", &[moved(vec![retry])]).await.unwrap();
        let again = s.claim_tails("me", 300, 1000, 10).await.unwrap();
        let tail = again.iter().find(|t| t.subscription.uid == at_org.uid).unwrap();
        assert_eq!(tail.position, read[0].0, "{name}");
        assert!(
            s.read_tail(&at_org.uid, root_of(org.as_str()), tail.position, 10)
                .await
                .unwrap()
                .is_empty(),
            "{name}"
        );
        // Its lease lapsed, another server takes the tail where it was.
        let taken = s.claim_tails("other", 5_000, 1000, 10).await.unwrap();
        assert_eq!(taken.len(), 2, "{name}");
        assert!(taken.iter().any(|t| t.position == read[0].0), "{name}");
        let jobs = s.claim_jobs(Lane::Deliveries, 100, 1000, 10).await.unwrap();
        let keys: Vec<&str> = jobs.iter().map(|j| j.key.as_str()).collect();
        assert_eq!(keys, [format!("{}|ev-team", at_org.uid)], "{name}");
        assert!(
            s.claim_jobs(Lane::Work, 100, 1000, 10).await.unwrap().is_empty(),
            "{name}: deliveries have their own lane"
        );

        // Given up: kept as failed, and queued again on demand.
        s.finish_job(&jobs[0], JobEnd::Done, 100).await.unwrap();
        let failed = FailedDeliveryRecord {
            subscription_uid: at_org.uid.clone(),
            event_id: "ev-team".into(),
            event_type: "t".into(),
            attempts: 3,
            status: 400,
            error: "refused".into(),
            time: 100,
        };
        let attempt = Attempt::Failed {
            time: 100,
            status: 400,
            error: "refused".into(),
            gave_up: Some(failed),
        };
        s.record_attempt(&at_org.uid, attempt).await.unwrap();
        let (pending, kept) = s.deliveries(&at_org.uid, 10).await.unwrap();
        assert_eq!((pending, kept.len()), (0, 1), "{name}");
        assert_eq!(
            s.retry_deliveries(&at_org.uid, Some("ev-team"), 200).await.unwrap(),
            1,
            "{name}"
        );
        let (pending, kept) = s.deliveries(&at_org.uid, 10).await.unwrap();
        assert_eq!((pending, kept.len()), (1, 0), "{name}");

        // A sink backing off: its queue waits until then.
        let none_expired = Expired {
            queued_before: 0,
            status: 0,
            error: String::new(),
            time: 0,
        };
        assert_eq!(
            s.defer_deliveries(&at_org.uid, 10_000, &none_expired).await.unwrap(),
            1,
            "{name}"
        );
        assert!(
            s.claim_jobs(Lane::Deliveries, 9_999, 1000, 10)
                .await
                .unwrap()
                .is_empty(),
            "{name}"
        );
        let claimed = s.claim_jobs(Lane::Deliveries, 10_000, 1000, 10).await.unwrap();
        assert_eq!(claimed.len(), 1, "{name}");
        // The deliverer reads a claim's events at once.
        let read = s
            .logged_events(&["ev-team".into(), "ev-internal".into(), "no-such".into()])
            .await
            .unwrap();
        let mut ids: Vec<&str> = read.iter().map(|e| e.id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["ev-internal", "ev-team"], "{name}");
        // Taken: the job goes and the subscription counts it, in one batch.
        // With a stale lease (another worker holds the job now) the job
        // stays; the sink did take the event, so it counts.
        let done = |lease_until| ward_store::events::Delivered {
            job_id: claimed[0].id,
            lease_until,
            subscription: at_org.uid.clone(),
            time: 10_500,
        };
        s.finish_deliveries(&[done(claimed[0].lease_until - 1)]).await.unwrap();
        assert_eq!(
            s.deliveries(&at_org.uid, 10).await.unwrap().0,
            1,
            "{name}: a stale lease"
        );
        s.finish_deliveries(&[done(claimed[0].lease_until)]).await.unwrap();
        assert_eq!(s.deliveries(&at_org.uid, 10).await.unwrap().0, 0, "{name}");
        let uid = Uidp::parse("uid", &at_org.uid).unwrap();
        let counted = s.get_subscription(&uid).await.unwrap().unwrap();
        assert_eq!((counted.delivered, counted.last_success_time), (2, 10_500), "{name}");

        // Deleting the subscription takes its deliveries with it, and its
        // tail reads nothing more (a server still holding it delivers no
        // event written after the deletion).
        let uid = Uidp::parse("uid", &at_org.uid).unwrap();
        assert!(
            !read_tail(s, &at_org.uid, root_of(org.as_str()), (0, 0))
                .await
                .is_empty()
        );
        s.delete_subscription(&uid, testing::emit()).await.unwrap();
        assert_eq!(s.deliveries(&at_org.uid, 10).await.unwrap().0, 0, "{name}");
        assert!(
            s.read_tail(&at_org.uid, root_of(org.as_str()), (0, 0), 10)
                .await
                .unwrap()
                .is_empty(),
            "{name}: deleted"
        );
        assert!(matches!(
            s.delete_subscription(&uid, testing::emit()).await,
            Err(Error::NotFound { .. })
        ));

        // The outbox's bound: a tail further behind skips its oldest events.
        let full = subscription(&org, "https://full.example/");
        s.create_subscription(&full, testing::emit()).await.unwrap();
        let flood: Vec<EventRecord> = (0..MAX_PENDING_PER_SUBSCRIPTION)
            .map(|i| head(&format!("flood-{i}"), "t", &team, "a", 20))
            .collect();
        s.append_events(&flood).await.unwrap();
        let tails = s.claim_tails("me", 10_000, 1000, 100).await.unwrap();
        let tail = tails.iter().find(|t| t.subscription.uid == full.uid).unwrap();
        let root = root_of(org.as_str());
        assert_eq!(
            s.trim_tail(root, tail.position, MAX_PENDING_PER_SUBSCRIPTION)
                .await
                .unwrap(),
            None,
            "{name}: at the bound"
        );
        s.append_events(&[head("one-more", "t", &team, "a", 21)]).await.unwrap();
        let (pending, _) = s.deliveries(&full.uid, 10).await.unwrap();
        assert_eq!(pending, MAX_PENDING_PER_SUBSCRIPTION, "{name}: counted up to the bound");
        let skip = s
            .trim_tail(root, tail.position, MAX_PENDING_PER_SUBSCRIPTION)
            .await
            .unwrap()
            .expect("past the bound");
        let next = read_tail(s, &full.uid, root, skip).await;
        assert_eq!(next[0].1.id, "flood-1", "{name}: the oldest is skipped");
        assert_eq!(
            s.trim_tail(root, skip, MAX_PENDING_PER_SUBSCRIPTION).await.unwrap(),
            None,
            "{name}"
        );
        // Retries queued from the tail, then the sink stays down.
        let retries = (0..10)
            .map(|i| QueuedDelivery {
                event_id: format!("flood-{i}"),
                run_after: 30,
                attempts: 1,
                error: "down".into(),
                event_time: 20,
            })
            .collect();
        let moved = TailMove {
            subscription: full.uid.clone(),
            position: skip,
            retries,
            ..TailMove::default()
        };
        s.advance_tails("me", &[moved]).await.unwrap();
        assert_eq!(
            s.defer_deliveries(&full.uid, 1_000_000, &none_expired).await.unwrap(),
            10,
            "{name}"
        );
        // A sink dead past the give-up time: its whole backlog fails at once,
        // kept with the sink's last failure, and nothing is left to defer.
        let expired = Expired {
            queued_before: 21,
            status: 503,
            error: "down".into(),
            time: 2_000_000,
        };
        assert_eq!(
            s.defer_deliveries(&full.uid, 2_000_000, &expired).await.unwrap(),
            0,
            "{name}"
        );
        // (The tail's events wait for their first attempt, or their own
        // give-up when the tail's reader reaches them.)
        let (pending, kept) = s.deliveries(&full.uid, 10).await.unwrap();
        assert_eq!((pending, kept.len()), (MAX_PENDING_PER_SUBSCRIPTION, 10), "{name}");
        assert!(
            kept.iter()
                .all(|f| f.status == 503 && f.error == "down" && f.event_type == "t" && f.time == 2_000_000),
            "{name}: {kept:?}"
        );
        // Failed deliveries kept: each subscription's newest, none past the
        // retention. (Only this test's rows are this old: every other
        // test's times are real.)
        assert!(s.trim_failed_deliveries(1, 4).await.unwrap() >= 6, "{name}");
        assert_eq!(s.deliveries(&full.uid, 10).await.unwrap().1.len(), 4, "{name}");
        assert!(s.trim_failed_deliveries(2_000_001, 100).await.unwrap() >= 4, "{name}");
        assert!(s.deliveries(&full.uid, 10).await.unwrap().1.is_empty(), "{name}");

        // At most so many per group.
        for i in 1..MAX_SUBSCRIPTIONS_PER_GROUP {
            s.create_subscription(
                &subscription(&other, &format!("https://b.example/{i}")),
                testing::emit(),
            )
            .await
            .unwrap();
        }
        let over = s
            .create_subscription(&subscription(&other, "https://b.example/x"), testing::emit())
            .await;
        assert!(matches!(over, Err(Error::FailedPrecondition(_))), "{name}: {over:?}");
    }
}
