//! Advisory storage conformance: both backends keep the status columns in
//! step with approved events, apply imports idempotently (events matched by
//! fingerprint, only added), review events by compare-and-set, bound the
//! events of one advisory, soft-delete, and filter on events and aliases.

use ward_core::Error;
use ward_core::listing::{FilterValue, ListQuery, SubQuery};
use ward_core::uidp::Uidp;
use ward_store::advisories::{
    AdvisoryRecord, EventRecord, FeedOutcome, FeedPackage, FeedRecord, ImportItem, ImportOutcome,
    MAX_EVENTS_PER_ADVISORY,
};
use ward_store::testing;
use ward_store::{GroupRecord, Store};

const T0: i64 = 1_700_000_000_000;
const APPROVED: i64 = 2;
const PENDING: i64 = 1;
const DETECTION: i64 = 1;
const FIXED: i64 = 3;

async fn backends() -> Vec<testing::OpenStore> {
    testing::stores().await
}

async fn org(s: &dyn Store) -> Uidp {
    let uid = Uidp::new_root();
    s.create_group(
        &GroupRecord {
            uid: uid.as_str().into(),
            parent_uid: None,
            name: "acme".into(),
            description: String::new(),
            verified: false,
            create_time: T0,
            update_time: T0,
            kind: 0,
        },
        None,
        ward_store::testing::emit(),
    )
    .await
    .expect("create org");
    uid
}

fn advisory(group: &Uidp, id: &str, aliases: &[&str]) -> AdvisoryRecord {
    AdvisoryRecord {
        uid: group.new_child().into(),
        parent_uid: group.as_str().into(),
        advisory_id: id.into(),
        legacy_advisory_id: None,
        origin: "pkg".into(),
        author: "author".into(),
        artifact_name: "pkg".into(),
        artifact_type: "apk".into(),
        artifact_architecture: String::new(),
        component_name: "Comp".into(),
        component_location: "/usr/bin/x".into(),
        component_type: "go-module".into(),
        aliases: serde_json::to_string(aliases).expect("json"),
        severities: "[]".into(),
        latest_type: 0,
        fixed_version: None,
        create_time: T0,
        update_time: T0,
        delete_time: None,
    }
}

fn event(a: &AdvisoryRecord, at: i64, kind: i64, payload: &str, state: i64) -> EventRecord {
    EventRecord {
        uid: Uidp::parse("uid", &a.uid).expect("uid").new_child().into(),
        advisory_uid: a.uid.clone(),
        event_time: at,
        kind,
        author: "author".into(),
        reviewer: String::new(),
        review_state: state,
        issue: None,
        payload: payload.into(),
        fingerprint: format!("{at}/{kind}/{payload}"),
        findings: Vec::new(),
        create_time: T0,
        update_time: T0,
    }
}

fn fixed(v: &str) -> String {
    format!(r#"{{"fixed":{{"fixedVersion":"{v}"}}}}"#)
}

fn query(filters: Vec<(&'static str, FilterValue)>) -> ListQuery {
    ListQuery {
        filters,
        page_size: 50,
        ..Default::default()
    }
}

async fn ids(s: &dyn Store, filters: Vec<(&'static str, FilterValue)>) -> Vec<String> {
    let mut v: Vec<String> = s
        .list_advisories(&query(filters))
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|a| a.advisory_id)
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn status_follows_the_latest_approved_event() {
    for b in backends().await {
        let s = b.store.as_ref();
        let g = org(s).await;
        let a = advisory(&g, "CGA-2222-3333-4444", &["CVE-2024-0001"]);
        let detected = event(&a, T0, DETECTION, r#"{"detection":{"manual":{}}}"#, APPROVED);
        s.create_advisory(&a, std::slice::from_ref(&detected), testing::emit())
            .await
            .expect("create");
        let uid = Uidp::parse("uid", &a.uid).expect("uid");
        let got = s.get_advisory(&uid).await.expect("get").expect("found");
        assert_eq!(
            (got.latest_type, got.fixed_version.clone()),
            (DETECTION, None),
            "[{}]",
            b.name
        );

        // A newer fix, pending: the status stays.
        let fix = event(&a, T0 + 10, FIXED, &fixed("1.2.3-r1"), PENDING);
        s.add_event(&fix, testing::emit()).await.expect("add");
        let got = s.get_advisory(&uid).await.expect("get").expect("found");
        assert_eq!(got.latest_type, DETECTION, "[{}]", b.name);
        assert!(
            got.update_time > a.update_time,
            "[{}] adding an event moves update_time",
            b.name
        );

        // Approved (compare-and-set from PENDING): now fixed at its version.
        let approved = EventRecord {
            review_state: APPROVED,
            reviewer: "reviewer".into(),
            update_time: T0 + 20,
            ..fix.clone()
        };
        let row = s
            .update_event(&approved, PENDING, testing::emit())
            .await
            .expect("approve");
        assert_eq!(
            (row.review_state, row.reviewer.as_str()),
            (APPROVED, "reviewer"),
            "[{}]",
            b.name
        );
        let got = s.get_advisory(&uid).await.expect("get").expect("found");
        assert_eq!(
            (got.latest_type, got.fixed_version.as_deref()),
            (FIXED, Some("1.2.3-r1")),
            "[{}]",
            b.name
        );

        // A second reviewer who saw it PENDING loses the race.
        let e = s
            .update_event(&approved, PENDING, testing::emit())
            .await
            .expect_err("stale review");
        assert!(matches!(e, Error::FailedPrecondition(_)), "[{}] {e:?}", b.name);

        // An approved event dated earlier does not take over.
        let older = event(&a, T0 - 10, DETECTION, r#"{"detection":{"manual":{}}}"#, APPROVED);
        s.add_event(&older, testing::emit()).await.expect("add older");
        let got = s.get_advisory(&uid).await.expect("get").expect("found");
        assert_eq!(got.latest_type, FIXED, "[{}] the latest by event time decides", b.name);

        // Filters: latest type, aliases, events in a state by an author, query.
        assert_eq!(
            ids(s, vec![("latest_type", FilterValue::Int(FIXED))]).await,
            ["CGA-2222-3333-4444"]
        );
        let alias = |v: &str| {
            FilterValue::In(SubQuery {
                table: "advisory_aliases",
                key: "advisory_uid",
                filters: vec![("alias", FilterValue::AnyOf(vec![v.into()]))],
            })
        };
        assert_eq!(
            ids(s, vec![("uid", alias("CVE-2024-0001"))]).await.len(),
            1,
            "[{}]",
            b.name
        );
        assert!(
            ids(s, vec![("uid", alias("CVE-2024-9999"))]).await.is_empty(),
            "[{}]",
            b.name
        );
        let pending_by_other = FilterValue::In(SubQuery {
            table: "advisory_events",
            key: "advisory_uid",
            filters: vec![
                ("review_state", FilterValue::AnyOfInt(vec![PENDING])),
                ("author", FilterValue::NoneOf(vec!["author".into()])),
            ],
        });
        assert!(ids(s, vec![("uid", pending_by_other)]).await.is_empty(), "[{}]", b.name);
        // Substrings, short ones (below a trigram) included; wildcards of LIKE
        // and GLOB are literal.
        for (q, hits) in [
            ("comp", 1),
            ("co", 1),
            ("cve-2024-0001", 1),
            ("%", 0),
            ("_", 0),
            ("*", 0),
            ("?", 0),
            ("[c]", 0),
            ("nothing", 0),
        ] {
            let search = FilterValue::Search {
                index: "advisories_search",
                text: q.into(),
            };
            let got = ids(s, vec![("search", search)]).await;
            assert_eq!(got.len(), hits, "[{}] query {q:?}", b.name);
        }

        // Soft delete: gone from the live filter, a second delete is NOT_FOUND,
        // no more events.
        s.delete_advisory(&uid, T0 + 30, testing::emit()).await.expect("delete");
        assert!(
            ids(s, vec![("delete_time", FilterValue::IsNull(true))])
                .await
                .is_empty(),
            "[{}]",
            b.name
        );
        let e = s
            .delete_advisory(&uid, T0 + 31, testing::emit())
            .await
            .expect_err("twice");
        assert!(matches!(e, Error::NotFound { .. }), "[{}] {e:?}", b.name);
        let late = event(&a, T0 + 40, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING);
        let e = s.add_event(&late, testing::emit()).await.expect_err("deleted");
        assert!(matches!(e, Error::NotFound { .. }), "[{}] {e:?}", b.name);
    }
}

#[tokio::test]
async fn imports_are_idempotent_and_only_add_events() {
    for b in backends().await {
        let s = b.store.as_ref();
        let g = org(s).await;
        let a = advisory(&g, "CGA-5555-6666-7777", &["CVE-2024-0002"]);
        let e1 = event(&a, T0, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING);
        let item = ImportItem {
            record: a.clone(),
            events: vec![e1.clone()],
            by_legacy_id: false,
            flags: Vec::new(),
            approval: None,
        };
        let first = s
            .import_advisories(g.as_str(), std::slice::from_ref(&item), T0, testing::emit())
            .await
            .expect("import")
            .into_iter()
            .map(|(o, _)| o)
            .collect::<Vec<_>>();
        assert_eq!(first, [ImportOutcome::Created], "[{}]", b.name);

        // The same again (fresh uids, as a new request makes them): unchanged.
        let again = ImportItem {
            record: AdvisoryRecord {
                uid: g.new_child().into(),
                ..a.clone()
            },
            events: vec![EventRecord {
                uid: g.new_child().new_child().into(),
                ..e1.clone()
            }],
            by_legacy_id: false,
            flags: Vec::new(),
            approval: None,
        };
        let second = s
            .import_advisories(g.as_str(), std::slice::from_ref(&again), T0 + 1, testing::emit())
            .await
            .expect("import")
            .into_iter()
            .map(|(o, _)| o)
            .collect::<Vec<_>>();
        assert_eq!(second, [ImportOutcome::Unchanged], "[{}]", b.name);

        // A new event and a changed alias: updated, the old event kept.
        let e2 = event(&a, T0 + 5, FIXED, &fixed("2.0-r0"), PENDING);
        let changed = ImportItem {
            record: AdvisoryRecord {
                aliases: r#"["CVE-2024-0003"]"#.into(),
                ..again.record.clone()
            },
            events: vec![e2.clone()],
            by_legacy_id: false,
            flags: Vec::new(),
            approval: None,
        };
        let third = s
            .import_advisories(g.as_str(), &[changed], T0 + 2, testing::emit())
            .await
            .expect("import")
            .into_iter()
            .map(|(o, _)| o)
            .collect::<Vec<_>>();
        assert_eq!(third, [ImportOutcome::Updated], "[{}]", b.name);
        let uid = Uidp::parse("uid", &a.uid).expect("uid");
        let got = s.get_advisory(&uid).await.expect("get").expect("found");
        assert_eq!(got.alias_list(), ["CVE-2024-0003"], "[{}]", b.name);
        // The search index follows the new aliases.
        for (q, hits) in [("cve-2024-0003", 1), ("cve-2024-0002", 0)] {
            let search = FilterValue::Search {
                index: "advisories_search",
                text: q.into(),
            };
            assert_eq!(ids(s, vec![("search", search)]).await.len(), hits, "[{}] {q}", b.name);
        }
        let events = s.events_of(std::slice::from_ref(&a.uid)).await.expect("events");
        assert_eq!(events.len(), 2, "[{}] events are only added", b.name);
        assert!(events.iter().all(|e| e.advisory_uid == a.uid), "[{}]", b.name);

        // The same CGA id from another group is rejected, not moved.
        let other = org(s).await;
        let stolen = ImportItem {
            record: advisory(&other, "CGA-5555-6666-7777", &[]),
            events: vec![e1.clone()],
            by_legacy_id: false,
            flags: Vec::new(),
            approval: None,
        };
        let out = s
            .import_advisories(other.as_str(), &[stolen], T0 + 3, testing::emit())
            .await
            .expect("import")
            .into_iter()
            .map(|(o, _)| o)
            .collect::<Vec<_>>();
        assert!(matches!(&out[..], [ImportOutcome::Rejected(_)]), "[{}] {out:?}", b.name);

        // A document naming one id twice: the second is rejected, the first kept.
        let fresh = advisory(&g, "CGA-8888-9999-cccc", &[]);
        let dup = ImportItem {
            record: fresh.clone(),
            events: vec![event(&fresh, T0, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING)],
            by_legacy_id: false,
            flags: Vec::new(),
            approval: None,
        };
        let twin = ImportItem {
            record: AdvisoryRecord {
                uid: g.new_child().into(),
                ..fresh.clone()
            },
            events: dup.events.clone(),
            by_legacy_id: false,
            flags: Vec::new(),
            approval: None,
        };
        let out = s
            .import_advisories(g.as_str(), &[dup, twin], T0 + 4, testing::emit())
            .await
            .expect("import")
            .into_iter()
            .map(|(o, _)| o)
            .collect::<Vec<_>>();
        assert_eq!(out[0], ImportOutcome::Created, "[{}] {out:?}", b.name);
        assert_ne!(out[1], ImportOutcome::Created, "[{}] {out:?}", b.name);
    }
}

#[tokio::test]
async fn advisories_known_by_a_legacy_id_are_matched_by_it() {
    for b in backends().await {
        let s = b.store.as_ref();
        let g = org(s).await;
        let mut leg = advisory(&g, "CGA-2345-6789-cfgh", &[]);
        leg.legacy_advisory_id = Some("OSV-2024-1".into());
        let item = |id: &str, by_legacy_id: bool| {
            let record = AdvisoryRecord {
                uid: g.new_child().into(),
                advisory_id: id.into(),
                ..leg.clone()
            };
            let events = vec![event(&record, T0, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING)];
            ImportItem {
                record,
                events,
                by_legacy_id,
                flags: Vec::new(),
                approval: None,
            }
        };
        let out = s
            .import_advisories(g.as_str(), &[item("CGA-2345-6789-cfgh", true)], T0, testing::emit())
            .await
            .expect("import");
        assert_eq!(
            out,
            [(ImportOutcome::Created, "CGA-2345-6789-cfgh".to_owned())],
            "[{}]",
            b.name
        );
        // Again, with another generated id: found by the legacy id, reported
        // under the stored CGA id.
        let out = s
            .import_advisories(g.as_str(), &[item("CGA-3456-789c-fghj", true)], T0, testing::emit())
            .await
            .expect("import");
        assert_eq!(
            out,
            [(ImportOutcome::Unchanged, "CGA-2345-6789-cfgh".to_owned())],
            "[{}]",
            b.name
        );
        // A source with a CGA id of its own is never matched by legacy id.
        let out = s
            .import_advisories(g.as_str(), &[item("CGA-4567-89cf-ghjm", false)], T0, testing::emit())
            .await
            .expect("import");
        assert_eq!(
            out,
            [(ImportOutcome::Created, "CGA-4567-89cf-ghjm".to_owned())],
            "[{}]",
            b.name
        );
        // Another group's legacy ids are not looked at.
        let other = org(s).await;
        let mut theirs = item("CGA-5678-9cfg-hjmp", true);
        theirs.record.parent_uid = other.as_str().into();
        theirs.record.uid = other.new_child().into();
        theirs.events = vec![event(
            &theirs.record,
            T0,
            DETECTION,
            r#"{"detection":{"manual":{}}}"#,
            PENDING,
        )];
        let out = s
            .import_advisories(other.as_str(), &[theirs], T0, testing::emit())
            .await
            .expect("import");
        assert_eq!(
            out,
            [(ImportOutcome::Created, "CGA-5678-9cfg-hjmp".to_owned())],
            "[{}]",
            b.name
        );
    }
}

#[tokio::test]
async fn an_advisory_holds_a_bounded_number_of_events() {
    for b in backends().await {
        let s = b.store.as_ref();
        let g = org(s).await;
        let a = advisory(&g, "CGA-fff2-2222-2222", &[]);
        let events: Vec<EventRecord> = (0..MAX_EVENTS_PER_ADVISORY)
            .map(|i| event(&a, T0 + i, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING))
            .collect();
        s.create_advisory(&a, &events, testing::emit())
            .await
            .expect("create with the most events");
        let one_more = event(&a, T0 - 1, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING);
        let e = s.add_event(&one_more, testing::emit()).await.expect_err("over the cap");
        assert!(matches!(e, Error::ResourceExhausted(_)), "[{}] {e:?}", b.name);

        // Bytes count too: one large payload past 1 MiB in all.
        let big = advisory(&g, "CGA-fff3-3333-3333", &[]);
        let mut e1 = event(&big, T0, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING);
        e1.findings = vec![b'x'; 1000 * 1024];
        s.create_advisory(&big, &[e1], testing::emit()).await.expect("create");
        let mut e2 = event(&big, T0 + 1, DETECTION, r#"{"detection":{"manual":{}}}"#, PENDING);
        e2.findings = vec![b'y'; 100 * 1024];
        let e = s.add_event(&e2, testing::emit()).await.expect_err("over the byte cap");
        assert!(matches!(e, Error::ResourceExhausted(_)), "[{}] {e:?}", b.name);
    }
}

fn feed_record(group: &Uidp, id: &str, modified: i64, withdrawn: bool, names: &[&str]) -> FeedRecord {
    FeedRecord {
        parent_uid: group.as_str().into(),
        id: id.into(),
        modified,
        withdrawn: withdrawn.then_some(modified),
        aliases: vec![],
        packages: names
            .iter()
            .map(|n| FeedPackage {
                ecosystem: "PyPI".into(),
                name: (*n).into(),
                affected: format!(r#"[{{"versions":["{id}"]}}]"#),
            })
            .collect(),
        body: format!(r#"{{"id":"{id}","modified":{modified}}}"#),
        digest: format!("{id}-{modified}"),
    }
}

/// `(record id, digest, withdrawn, affected)` of the candidates naming `name`, sorted.
async fn candidates(s: &dyn Store, group: &Uidp, name: &str) -> Vec<(String, String, bool, Option<String>)> {
    let mut v: Vec<_> = s
        .feed_candidates(&[name.to_owned()], &[group.as_str().to_owned()])
        .await
        .expect("candidates")
        .into_iter()
        .map(|c| {
            assert_eq!((c.ecosystem.as_str(), c.name.as_str()), ("PyPI", name));
            (c.id, c.digest, c.withdrawn, c.affected)
        })
        .collect();
    v.sort();
    v
}

/// A report's candidate read agrees with every import, on both backends
/// (PostgreSQL answers it from a per-name copy kept in step with the
/// per-record rows): records added, a record's packages changed, a record
/// withdrawn, and imports touching one name at once, none of them lost.
#[tokio::test(flavor = "multi_thread")]
async fn feed_candidates_follow_imports() {
    for db in backends().await {
        let (b, s) = (db.name, db.store.as_ref());
        let g = org(s).await;
        let other = org(s).await;
        let import = |records: Vec<FeedRecord>, group: &Uidp| {
            let group = group.as_str().to_owned();
            async move {
                s.import_feed_records(&group, &records, T0, testing::emit())
                    .await
                    .expect("import")
            }
        };
        import(
            vec![
                feed_record(&g, "R1", 1, false, &["a", "b"]),
                feed_record(&g, "R2", 1, false, &["a"]),
            ],
            &g,
        )
        .await;
        import(vec![feed_record(&other, "R9", 1, false, &["a"])], &other).await;
        let ids = |v: Vec<(String, String, bool, Option<String>)>| v.into_iter().map(|c| c.0).collect::<Vec<_>>();
        assert_eq!(
            ids(candidates(s, &g, "a").await),
            ["R1", "R2"],
            "[{b}] another group's record is not a candidate"
        );
        let b_rows = candidates(s, &g, "b").await;
        assert_eq!(
            b_rows,
            [(
                "R1".into(),
                "R1-1".into(),
                false,
                Some(r#"[{"versions":["R1"]}]"#.into())
            )],
            "[{b}]"
        );

        // R1 now names b and c (not a); R2 is withdrawn.
        let out = import(
            vec![
                feed_record(&g, "R1", 2, false, &["b", "c"]),
                feed_record(&g, "R2", 2, true, &["a"]),
            ],
            &g,
        )
        .await;
        assert_eq!(out, [FeedOutcome::Updated, FeedOutcome::Withdrawn], "[{b}]");
        assert_eq!(
            candidates(s, &g, "a").await,
            [(
                "R2".into(),
                "R2-2".into(),
                true,
                Some(r#"[{"versions":["R2"]}]"#.into())
            )],
            "[{b}]"
        );
        assert_eq!(ids(candidates(s, &g, "b").await), ["R1"], "[{b}]");
        assert_eq!(candidates(s, &g, "b").await[0].1, "R1-2", "[{b}] the new digest");
        assert_eq!(ids(candidates(s, &g, "c").await), ["R1"], "[{b}]");
        // R1 drops c again: the name has no candidates left.
        import(vec![feed_record(&g, "R1", 3, false, &["b"])], &g).await;
        assert!(candidates(s, &g, "c").await.is_empty(), "[{b}]");

        // Sixteen imports at once, each a record naming "hot".
        let mut many = tokio::task::JoinSet::new();
        for i in 0..16 {
            let (store, group) = (db.store.clone(), g.as_str().to_owned());
            let r = feed_record(&g, &format!("H{i:02}"), 1, false, &["hot", &format!("own{i}")]);
            many.spawn(async move { store.import_feed_records(&group, &[r], T0, testing::emit()).await });
        }
        for done in many.join_all().await {
            done.expect("concurrent import");
        }
        let hot = ids(candidates(s, &g, "hot").await);
        let want: Vec<String> = (0..16).map(|i| format!("H{i:02}")).collect();
        assert_eq!(hot, want, "[{b}] no concurrent import's record is lost");
    }
}
