//! Storage conformance suite.
//!
//! Every check runs against every backend from [`ward_store::testing::backends`]
//! (SQLite always, PostgreSQL when `WARD_TEST_POSTGRES_URL` is set), each on a
//! fresh database, so the backends stay interchangeable behind [`Store`]:
//! same records, same errors, same filters, same orders, same pages.
//!
//! Async tests use the multi-thread runtime on purpose: dropping a PostgreSQL
//! [`TestDatabase`] blocks its thread on `DROP SCHEMA`, which waits for the
//! dropped store's connections, and sqlx rolls back an abandoned transaction
//! (as the stores' error paths leave) in a spawned task. On a current-thread
//! runtime that task could never run, and the test would hang.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use ward_core::Error;
use ward_core::listing::{ListQuery, OrderBy, Page, SortField, UidpFilter};
use ward_core::uidp::Uidp;
use ward_store::testing::{self, TestDatabase};
use ward_store::{GroupPatch, GroupRecord, SigningKeyRecord, Store};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A store opened on a fresh test database.
struct Backend {
    name: &'static str,
    store: Arc<dyn Store>,
    // Declared last so the store (and its connections) goes before the database.
    _db: TestDatabase,
}

impl Backend {
    async fn create(&self, g: &GroupRecord) {
        self.store
            .create_group(g, None)
            .await
            .unwrap_or_else(|e| panic!("{}: create {}: {e:?}", self.name, g.name));
    }

    /// Creates `groups` in order (parents first).
    async fn create_all(&self, groups: &[GroupRecord]) {
        for g in groups {
            self.create(g).await;
        }
    }

    async fn get(&self, g: &GroupRecord) -> Option<GroupRecord> {
        self.store
            .get_group(&uidp(&g.uid))
            .await
            .unwrap_or_else(|e| panic!("{}: get {}: {e:?}", self.name, g.name))
    }

    async fn page(&self, q: &ListQuery) -> Page<GroupRecord> {
        self.store
            .list_groups(q)
            .await
            .unwrap_or_else(|e| panic!("{}: list {q:?}: {e:?}", self.name))
    }

    /// Every match of `query` from its `after` position on (the start if
    /// none), walking pages of `page_size` by feeding each page's `next` back
    /// as `after`. Checks the paging invariants on the way: pages are never
    /// over-full, `next` only follows a full page, and every page reports the
    /// same `total_count`, which a walk from the start exactly exhausts.
    async fn list_all(&self, query: &ListQuery, page_size: u32) -> Vec<GroupRecord> {
        let name = self.name;
        let mut q = ListQuery {
            page_size,
            skip: 0,
            ..query.clone()
        };
        let mut all: Vec<GroupRecord> = Vec::new();
        let mut total = None;
        loop {
            let page = self.page(&q).await;
            let total = *total.get_or_insert(page.total_count);
            assert_eq!(
                page.total_count, total,
                "{name}: total_count changed between pages of {q:?}"
            );
            assert!(
                page.items.len() <= page_size as usize,
                "{name}: page over-full for {q:?}"
            );
            all.extend(page.items.iter().cloned());
            assert!(
                all.len() as i64 <= total,
                "{name}: more items than total_count {total} for {query:?}"
            );
            match page.next {
                Some(next) => {
                    assert_eq!(
                        page.items.len(),
                        page_size as usize,
                        "{name}: next after a short page for {q:?}"
                    );
                    q.after = Some(next);
                }
                None => break,
            }
        }
        let total = total.expect("at least one page");
        if query.after.is_none() {
            assert_eq!(
                all.len() as i64,
                total,
                "{name}: item count differs from total_count for {query:?}"
            );
        }
        all
    }

    /// The sorted names of every match of `query`.
    async fn names(&self, query: ListQuery) -> Vec<String> {
        let mut v: Vec<String> = self
            .list_all(&query, 50)
            .await
            .into_iter()
            .map(|g| g.name)
            .collect();
        v.sort();
        v
    }
}

/// Opens a store on every configured backend.
async fn backends() -> Vec<Backend> {
    let mut v = Vec::new();
    for db in testing::backends().await {
        let store = ward_store::open(&db.url)
            .await
            .unwrap_or_else(|e| panic!("{}: open: {e:?}", db.backend));
        v.push(Backend {
            name: db.backend,
            store,
            _db: db,
        });
    }
    v
}

const T0: i64 = 1_700_000_000_000;

fn uidp(s: &str) -> Uidp {
    Uidp::parse("uid", s).unwrap_or_else(|e| panic!("test built an invalid UIDP {s:?}: {e:?}"))
}

/// A group record at `uid` (its parent follows from the UIDP).
fn record(uid: Uidp, name: &str) -> GroupRecord {
    GroupRecord {
        parent_uid: uid.parent().map(String::from),
        uid: uid.into(),
        name: name.into(),
        description: format!("the {name} group"),
        verified: false,
        create_time: T0,
        update_time: T0,
    }
}

fn root(name: &str) -> GroupRecord {
    record(Uidp::new_root(), name)
}

fn child(parent: &GroupRecord, name: &str) -> GroupRecord {
    record(uidp(&parent.uid).new_child(), name)
}

fn query(uidp: UidpFilter) -> ListQuery {
    ListQuery {
        uidp,
        page_size: 50,
        ..ListQuery::default()
    }
}

fn names(groups: &[&GroupRecord]) -> Vec<String> {
    let mut v: Vec<String> = groups.iter().map(|g| g.name.clone()).collect();
    v.sort();
    v
}

/// `groups` in the store's order: by (key, uid), reversed for descending.
fn ordered<'a>(
    groups: impl IntoIterator<Item = &'a GroupRecord>,
    order: OrderBy,
) -> Vec<GroupRecord> {
    let mut v: Vec<GroupRecord> = groups.into_iter().cloned().collect();
    v.sort_by(|a, b| {
        let key = match order.field {
            SortField::Uid => Ordering::Equal,
            SortField::Name => a.name.cmp(&b.name),
            SortField::CreateTime => a.create_time.cmp(&b.create_time),
            SortField::UpdateTime => a.update_time.cmp(&b.update_time),
        };
        key.then_with(|| a.uid.cmp(&b.uid))
    });
    if order.desc {
        v.reverse();
    }
    v
}

/// Every order a listing supports.
fn all_orders() -> Vec<OrderBy> {
    use SortField::*;
    [Uid, Name, CreateTime, UpdateTime]
        .into_iter()
        .flat_map(|field| [false, true].map(|desc| OrderBy { field, desc }))
        .collect()
}

/// Whether `g` matches `q`, computed directly from the definitions.
fn matches(g: &GroupRecord, q: &ListQuery) -> bool {
    let uid = uidp(&g.uid);
    let f = &q.uidp;
    f.descendants_of
        .as_ref()
        .is_none_or(|p| uid.is_self_or_descendant_of(p))
        && f.children_of
            .as_ref()
            .is_none_or(|p| g.parent_uid.as_deref() == Some(p.as_str()))
        && f.ancestors_of
            .as_ref()
            .is_none_or(|x| *x != uid && x.is_self_or_descendant_of(&uid))
        && (!f.in_root || g.parent_uid.is_none())
        && (f.ids.is_empty() || f.ids.contains(&uid))
        && q.name.as_ref().is_none_or(|n| *n == g.name)
        && q.visible
            .as_ref()
            .is_none_or(|scopes| scopes.iter().any(|s| uid.is_self_or_descendant_of(s)))
}

fn assert_not_found<T: Debug>(backend: &str, what: &str, r: ward_core::Result<T>) {
    assert!(
        matches!(r, Err(Error::NotFound { .. })),
        "{backend}: {what}: expected NotFound, got {r:?}"
    );
}

// ---------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn create_get_round_trip() {
    for b in backends().await {
        let name = b.name;
        let parent = GroupRecord {
            description: "Ünïcode — and 'quotes'".into(),
            verified: true,
            create_time: T0 + 123,
            update_time: i64::MAX / 2,
            ..root("root")
        };
        let kid = GroupRecord {
            create_time: -1,
            update_time: 0,
            ..child(&parent, "child")
        };
        b.create(&parent).await;
        b.create(&kid).await;
        assert_eq!(parent.parent_uid, None, "{name}: a root has no parent");
        assert_eq!(
            b.get(&parent).await.as_ref(),
            Some(&parent),
            "{name}: root round-trip"
        );
        assert_eq!(
            b.get(&kid).await.as_ref(),
            Some(&kid),
            "{name}: child round-trip"
        );
        assert_eq!(b.get(&root("missing")).await, None, "{name}: missing root");
        assert_eq!(
            b.get(&child(&parent, "missing")).await,
            None,
            "{name}: missing child"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn create_under_missing_parent_is_not_found() {
    for b in backends().await {
        let orphan = child(&root("never created"), "orphan");
        assert_not_found(
            b.name,
            "create under a missing parent",
            b.store.create_group(&orphan, None).await,
        );
        assert_eq!(
            b.get(&orphan).await,
            None,
            "{}: the orphan must not be stored",
            b.name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn update_sets_only_given_fields() {
    for b in backends().await {
        let name = b.name;
        let parent = root("parent");
        let g = GroupRecord {
            verified: true,
            ..child(&parent, "before")
        };
        b.create_all(&[parent, g.clone()]).await;
        let uid = uidp(&g.uid);

        let mut expected = g.clone();
        let steps: [(GroupPatch, i64); 4] = [
            (
                GroupPatch {
                    name: Some("after".into()),
                    description: None,
                },
                T0 + 1,
            ),
            (
                GroupPatch {
                    name: None,
                    description: Some("new description".into()),
                },
                T0 + 2,
            ),
            (
                GroupPatch {
                    name: Some("both".into()),
                    description: Some(String::new()),
                },
                T0 + 3,
            ),
            (GroupPatch::default(), T0 + 4),
        ];
        for (patch, now) in steps {
            let got = b.store.update_group(&uid, &patch, now).await;
            if let Some(n) = &patch.name {
                expected.name = n.clone();
            }
            if let Some(d) = &patch.description {
                expected.description = d.clone();
            }
            expected.update_time = now;
            assert_eq!(
                got.as_ref().ok(),
                Some(&expected),
                "{name}: update with {patch:?}: {got:?}"
            );
            assert_eq!(
                b.get(&g).await.as_ref(),
                Some(&expected),
                "{name}: stored after {patch:?}"
            );
        }

        let missing = uidp(&root("missing").uid);
        let patch = GroupPatch {
            name: Some("x".into()),
            description: None,
        };
        assert_not_found(
            name,
            "update a missing group",
            b.store.update_group(&missing, &patch, T0).await,
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_requires_existing_and_empty() {
    for b in backends().await {
        let name = b.name;
        let parent = root("parent");
        let kid = child(&parent, "kid");
        b.create_all(&[parent.clone(), kid.clone()]).await;
        let (parent_uid, kid_uid) = (uidp(&parent.uid), uidp(&kid.uid));

        assert_not_found(
            name,
            "delete a missing group",
            b.store.delete_group(&uidp(&root("x").uid)).await,
        );
        assert_not_found(
            name,
            "delete a missing child",
            b.store.delete_group(&parent_uid.new_child()).await,
        );

        match b.store.delete_group(&parent_uid).await {
            Err(Error::FailedPrecondition(v)) => {
                assert_eq!(
                    v.first().map(|p| p.kind.as_str()),
                    Some("RESOURCE_NOT_EMPTY"),
                    "{name}: {v:?}"
                )
            }
            other => panic!(
                "{name}: delete a group with a child: expected FailedPrecondition, got {other:?}"
            ),
        }
        assert_eq!(
            b.get(&parent).await.as_ref(),
            Some(&parent),
            "{name}: a refused delete keeps the group"
        );

        b.store
            .delete_group(&kid_uid)
            .await
            .unwrap_or_else(|e| panic!("{name}: delete child: {e:?}"));
        assert_eq!(b.get(&kid).await, None, "{name}: child gone");
        b.store
            .delete_group(&parent_uid)
            .await
            .unwrap_or_else(|e| panic!("{name}: delete emptied parent: {e:?}"));
        assert_eq!(b.get(&parent).await, None, "{name}: parent gone");
        assert_not_found(
            name,
            "delete twice",
            b.store.delete_group(&parent_uid).await,
        );
    }
}

// ---------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn list_filters() {
    for b in backends().await {
        let name = b.name;
        let a = root("A");
        let root_b = root("B");
        let (a1, a2) = (child(&a, "A1"), child(&a, "A2"));
        let a1x = child(&a1, "A1x");
        let b1 = child(&root_b, "B1");
        let all = [
            a.clone(),
            root_b.clone(),
            a1.clone(),
            a2.clone(),
            a1x.clone(),
            b1.clone(),
        ];
        b.create_all(&all).await;
        let id = |g: &GroupRecord| uidp(&g.uid);

        let cases: Vec<(&str, ListQuery, Vec<&GroupRecord>)> = vec![
            (
                "everything",
                query(UidpFilter::default()),
                all.iter().collect(),
            ),
            (
                "descendants_of A",
                query(UidpFilter {
                    descendants_of: Some(id(&a)),
                    ..Default::default()
                }),
                vec![&a, &a1, &a2, &a1x],
            ),
            (
                "descendants_of A1x (a leaf)",
                query(UidpFilter {
                    descendants_of: Some(id(&a1x)),
                    ..Default::default()
                }),
                vec![&a1x],
            ),
            (
                "children_of A",
                query(UidpFilter {
                    children_of: Some(id(&a)),
                    ..Default::default()
                }),
                vec![&a1, &a2],
            ),
            (
                "children_of A2 (a leaf)",
                query(UidpFilter {
                    children_of: Some(id(&a2)),
                    ..Default::default()
                }),
                vec![],
            ),
            (
                "ancestors_of A1x",
                query(UidpFilter {
                    ancestors_of: Some(id(&a1x)),
                    ..Default::default()
                }),
                vec![&a, &a1],
            ),
            (
                "ancestors_of A (a root)",
                query(UidpFilter {
                    ancestors_of: Some(id(&a)),
                    ..Default::default()
                }),
                vec![],
            ),
            (
                "in_root",
                query(UidpFilter {
                    in_root: true,
                    ..Default::default()
                }),
                vec![&a, &root_b],
            ),
            (
                "ids A2, B1",
                query(UidpFilter {
                    ids: vec![id(&a2), id(&b1)],
                    ..Default::default()
                }),
                vec![&a2, &b1],
            ),
            (
                "ids with an unknown uid",
                query(UidpFilter {
                    ids: vec![id(&a1), id(&a1).new_child()],
                    ..Default::default()
                }),
                vec![&a1],
            ),
            (
                "name A1",
                ListQuery {
                    name: Some("A1".into()),
                    ..query(UidpFilter::default())
                },
                vec![&a1],
            ),
            (
                "name a1 (case differs)",
                ListQuery {
                    name: Some("a1".into()),
                    ..query(UidpFilter::default())
                },
                vec![],
            ),
            (
                "visible A1",
                ListQuery {
                    visible: Some(vec![id(&a1)]),
                    ..query(UidpFilter::default())
                },
                vec![&a1, &a1x],
            ),
            (
                "visible nothing",
                ListQuery {
                    visible: Some(vec![]),
                    ..query(UidpFilter::default())
                },
                vec![],
            ),
            (
                "visible A2, B",
                ListQuery {
                    visible: Some(vec![id(&a2), id(&root_b)]),
                    ..query(UidpFilter::default())
                },
                vec![&a2, &root_b, &b1],
            ),
            (
                "descendants_of A, visible A1",
                ListQuery {
                    visible: Some(vec![id(&a1)]),
                    ..query(UidpFilter {
                        descendants_of: Some(id(&a)),
                        ..Default::default()
                    })
                },
                vec![&a1, &a1x],
            ),
            (
                "descendants_of A, in_root",
                query(UidpFilter {
                    descendants_of: Some(id(&a)),
                    in_root: true,
                    ..Default::default()
                }),
                vec![&a],
            ),
        ];
        for (what, q, expected) in cases {
            assert_eq!(b.names(q).await, names(&expected), "{name}: {what}");
        }

        // total_count counts every match, not the page.
        for page_size in [1, 2, 50] {
            let q = ListQuery {
                page_size,
                ..query(UidpFilter {
                    descendants_of: Some(id(&a)),
                    ..Default::default()
                })
            };
            let page = b.page(&q).await;
            assert_eq!(
                page.total_count, 4,
                "{name}: total_count of descendants_of A, page_size {page_size}"
            );
            assert_eq!(
                page.items.len(),
                4.min(page_size as usize),
                "{name}: page_size {page_size}"
            );
            assert_eq!(
                page.next.is_some(),
                page_size < 4,
                "{name}: next with page_size {page_size}"
            );
        }
    }
}

/// 30 groups in a small forest, with duplicate names (differing only in case
/// or punctuation, to catch non-byte collations) and repeated times.
fn ordering_fixture() -> Vec<GroupRecord> {
    const NAMES: [&str; 7] = ["beta", "alpha", "beta", "Beta", "a-b", "ab", "alpha"];
    let mut groups: Vec<GroupRecord> = Vec::new();
    for i in 0..30usize {
        let name = NAMES[i % NAMES.len()];
        let g = if i < 3 {
            root(name)
        } else {
            child(&groups[(i / 2 + i % 3) % i], name)
        };
        groups.push(GroupRecord {
            create_time: T0 + (i as i64 / 3 - 3) * 1000, // equal in threes, some before T0
            update_time: ((i * 7) % 5) as i64 - 2,       // five values, some negative
            ..g
        });
    }
    groups
}

#[tokio::test(flavor = "multi_thread")]
async fn ordering_and_keyset_pagination() {
    for b in backends().await {
        let name = b.name;
        let groups = ordering_fixture();
        b.create_all(&groups).await;
        for order in all_orders() {
            let expected = ordered(&groups, order);
            let q = ListQuery {
                order,
                ..query(UidpFilter::default())
            };
            for page_size in [1, 2, 7, 50] {
                let got = b.list_all(&q, page_size).await;
                let unique: HashSet<&str> = got.iter().map(|g| g.uid.as_str()).collect();
                assert_eq!(
                    unique.len(),
                    got.len(),
                    "{name}: {order:?}, page_size {page_size}: duplicates"
                );
                assert_eq!(got, expected, "{name}: {order:?}, page_size {page_size}");
            }

            // skip counts from the cursor position (or the start without one).
            let first = b
                .page(&ListQuery {
                    page_size: 5,
                    ..q.clone()
                })
                .await;
            assert_eq!(first.items, expected[..5], "{name}: {order:?}: first page");
            let skipped = b
                .page(&ListQuery {
                    page_size: 4,
                    skip: 3,
                    after: first.next.clone(),
                    ..q.clone()
                })
                .await;
            assert_eq!(
                skipped.items,
                expected[8..12],
                "{name}: {order:?}: skip 3 after the first page"
            );
            assert_eq!(
                skipped.total_count, 30,
                "{name}: {order:?}: total_count ignores cursor and skip"
            );
            let rest = b
                .list_all(
                    &ListQuery {
                        after: skipped.next,
                        ..q.clone()
                    },
                    50,
                )
                .await;
            assert_eq!(
                rest,
                expected[12..],
                "{name}: {order:?}: continuing after a skipped page"
            );
            let from_start = b
                .page(&ListQuery {
                    page_size: 4,
                    skip: 3,
                    ..q.clone()
                })
                .await;
            assert_eq!(
                from_start.items,
                expected[3..7],
                "{name}: {order:?}: skip 3 from the start"
            );
            let beyond = b
                .page(&ListQuery {
                    skip: 100,
                    ..q.clone()
                })
                .await;
            assert!(
                beyond.items.is_empty() && beyond.next.is_none(),
                "{name}: {order:?}: skip past the end"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Property: filtered listings equal a brute-force filter
// ---------------------------------------------------------------------------

/// Names that differ only in case or punctuation.
const PROP_NAMES: [&str; 5] = ["alpha", "Alpha", "a-b", "ab", "beta"];

/// One generated group: a root, or a child of an earlier group.
#[derive(Clone, Debug)]
struct NodeSpec {
    parent: Option<Index>,
    name: usize,
    create_time: i64,
    update_time: i64,
}

/// A UIDP a filter refers to: an inserted group, or an unused child of one.
#[derive(Clone, Debug)]
enum Target {
    Group(Index),
    Missing(Index),
}

#[derive(Clone, Debug)]
struct FilterSpec {
    descendants_of: Option<Target>,
    children_of: Option<Target>,
    ancestors_of: Option<Target>,
    in_root: bool,
    ids: Vec<Target>,
    name: Option<usize>,
    visible: Option<Vec<Target>>,
    order: OrderBy,
    page_size: u32,
}

impl Target {
    fn resolve(&self, groups: &[GroupRecord]) -> Uidp {
        match self {
            Target::Group(i) => uidp(&i.get(groups).uid),
            Target::Missing(i) => uidp(&i.get(groups).uid).new_child(),
        }
    }
}

impl FilterSpec {
    fn query(&self, groups: &[GroupRecord]) -> ListQuery {
        let resolve = |t: &Target| t.resolve(groups);
        ListQuery {
            uidp: UidpFilter {
                descendants_of: self.descendants_of.as_ref().map(resolve),
                children_of: self.children_of.as_ref().map(resolve),
                ancestors_of: self.ancestors_of.as_ref().map(resolve),
                in_root: self.in_root,
                ids: self.ids.iter().map(resolve).collect(),
            },
            name: self.name.map(|n| PROP_NAMES[n].to_owned()),
            filters: Vec::new(),
            order: self.order,
            page_size: self.page_size,
            skip: 0,
            after: None,
            visible: self
                .visible
                .as_ref()
                .map(|v| v.iter().map(resolve).collect()),
        }
    }
}

/// Materializes a forest: the first node is always a root.
fn build_tree(nodes: &[NodeSpec]) -> Vec<GroupRecord> {
    let mut groups: Vec<GroupRecord> = Vec::with_capacity(nodes.len());
    for n in nodes {
        let name = PROP_NAMES[n.name];
        let g = match &n.parent {
            Some(p) if !groups.is_empty() => child(p.get(&groups), name),
            _ => root(name),
        };
        groups.push(GroupRecord {
            create_time: n.create_time,
            update_time: n.update_time,
            ..g
        });
    }
    groups
}

prop_compose! {
    fn node_spec()(
        parent in prop::option::weighted(0.8, any::<Index>()),
        name in 0..PROP_NAMES.len(),
        create_time in 0..4i64,
        update_time in 0..4i64,
    ) -> NodeSpec {
        NodeSpec { parent, name, create_time, update_time }
    }
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => any::<Index>().prop_map(Target::Group),
        1 => any::<Index>().prop_map(Target::Missing),
    ]
}

fn targets() -> impl Strategy<Value = Vec<Target>> {
    prop::collection::vec(target(), 1..4)
}

prop_compose! {
    /// Each filter is off most of the time, so combinations still match something.
    fn filter_spec()(
        descendants_of in prop::option::weighted(0.3, target()),
        children_of in prop::option::weighted(0.2, target()),
        ancestors_of in prop::option::weighted(0.2, target()),
        in_root in prop::bool::weighted(0.2),
        ids in prop_oneof![3 => Just(Vec::new()), 1 => targets()],
        name in prop::option::weighted(0.2, 0..PROP_NAMES.len()),
        visible in prop::option::weighted(0.3, prop_oneof![1 => Just(Vec::new()), 4 => targets()]),
        order in prop::sample::select(all_orders()),
        page_size in 1u32..8,
    ) -> FilterSpec {
        FilterSpec { descendants_of, children_of, ancestors_of, in_root, ids, name, visible, order, page_size }
    }
}

async fn check_filters(
    nodes: Vec<NodeSpec>,
    filters: Vec<FilterSpec>,
) -> Result<(), TestCaseError> {
    let groups = build_tree(&nodes);
    for b in backends().await {
        b.create_all(&groups).await;
        for f in &filters {
            let q = f.query(&groups);
            let expected = ordered(groups.iter().filter(|g| matches(g, &q)), q.order);
            let got = b.list_all(&q, q.page_size).await;
            prop_assert_eq!(got, expected, "{}: {:?}", b.name, q);
        }
    }
    Ok(())
}

#[test]
fn filtered_listing_matches_brute_force() {
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let mut runner = TestRunner::new(Config {
        cases: 16,
        // Failing seeds go to tests/conformance.regressions.
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec(node_spec(), 1..25),
        prop::collection::vec(filter_spec(), 1..8),
    );
    runner
        .run(&strategy, |(nodes, filters)| {
            rt.block_on(check_filters(nodes, filters))
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------------------
// Settings and signing keys
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn settings_and_signing_keys() {
    for b in backends().await {
        let (name, store) = (b.name, &b.store);
        let setting = |n: &'static str, v: &'static [u8]| {
            let store = store.clone();
            async move {
                store
                    .setting_or_init(n, v.to_vec())
                    .await
                    .unwrap_or_else(|e| panic!("{name}: {n}: {e:?}"))
            }
        };
        assert_eq!(
            setting("token-key", b"first").await,
            b"first",
            "{name}: initial value"
        );
        assert_eq!(
            setting("token-key", b"second").await,
            b"first",
            "{name}: the first value stays"
        );
        assert_eq!(
            setting("other", b"other").await,
            b"other",
            "{name}: settings are independent"
        );

        // Concurrent first starts all see the value that won.
        let racers: Vec<_> = (0..8u8)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move { store.setting_or_init("raced", vec![i]).await })
            })
            .collect();
        let mut seen = HashSet::new();
        for r in racers {
            seen.insert(
                r.await
                    .expect("join")
                    .unwrap_or_else(|e| panic!("{name}: raced: {e:?}")),
            );
        }
        assert_eq!(
            seen.len(),
            1,
            "{name}: racing setting_or_init disagreed: {seen:?}"
        );

        let keys: Vec<SigningKeyRecord> = ["k2", "k1"]
            .into_iter()
            .enumerate()
            .map(|(i, kid)| SigningKeyRecord {
                kid: kid.into(),
                algorithm: "EdDSA".into(),
                private_key: vec![i as u8; 32],
                public_key: vec![0xff, i as u8, 0],
                create_time: T0 + i as i64,
            })
            .collect();
        let listed = || async move {
            store
                .signing_keys()
                .await
                .unwrap_or_else(|e| panic!("{name}: signing keys: {e:?}"))
        };
        assert!(listed().await.is_empty(), "{name}: no keys at first");
        for k in &keys {
            store
                .insert_signing_key(k)
                .await
                .unwrap_or_else(|e| panic!("{name}: insert {}: {e:?}", k.kid));
        }
        let mut got = listed().await;
        got.sort_by(|a, b| a.kid.cmp(&b.kid));
        let mut want = keys.clone();
        want.sort_by(|a, b| a.kid.cmp(&b.kid));
        assert_eq!(got, want, "{name}: signing keys round-trip");
    }
}

// ---------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_under_one_parent() {
    const TASKS: usize = 8;
    const PER_TASK: usize = 25;
    for b in backends().await {
        let name = b.name;
        let parent = root("parent");
        b.create(&parent).await;
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let (store, parent) = (b.store.clone(), parent.clone());
                tokio::spawn(async move {
                    let mut created = Vec::with_capacity(PER_TASK);
                    for i in 0..PER_TASK {
                        let g = child(&parent, &format!("t{t}-{i}"));
                        store
                            .create_group(&g, None)
                            .await
                            .map_err(|e| format!("{}: {e:?}", g.name))?;
                        created.push(g);
                    }
                    Ok::<_, String>(created)
                })
            })
            .collect();
        let mut expected = vec![parent.clone()];
        for t in tasks {
            expected.extend(
                t.await
                    .expect("join")
                    .unwrap_or_else(|e| panic!("{name}: concurrent create {e}")),
            );
        }
        assert_eq!(expected.len(), TASKS * PER_TASK + 1);

        let q = query(UidpFilter {
            descendants_of: Some(uidp(&parent.uid)),
            ..Default::default()
        });
        let got = b.list_all(&q, 50).await;
        assert_eq!(
            got,
            ordered(&expected, OrderBy::default()),
            "{name}: every child listed exactly once"
        );
    }
}

/// `total_count` follows every write at once, even where a backend caches counts.
#[tokio::test(flavor = "multi_thread")]
async fn total_count_follows_writes() {
    for b in backends().await {
        let org = root("org");
        b.store.create_group(&org, None).await.unwrap();
        let q = query(UidpFilter {
            descendants_of: Some(uidp(&org.uid)),
            ..UidpFilter::default()
        });
        let count = |q: ListQuery| {
            let store = b.store.clone();
            async move { store.list_groups(&q).await.unwrap().total_count }
        };
        assert_eq!(count(q.clone()).await, 1, "{}", b.name);
        assert_eq!(count(q.clone()).await, 1, "{} (repeated)", b.name);
        let kid = child(&org, "kid");
        b.store.create_group(&kid, None).await.unwrap();
        assert_eq!(count(q.clone()).await, 2, "{} after create", b.name);
        b.store.delete_group(&uidp(&kid.uid)).await.unwrap();
        assert_eq!(count(q.clone()).await, 1, "{} after delete", b.name);
        // A failed write changes nothing and the count stays right.
        assert!(b.store.delete_group(&uidp(&kid.uid)).await.is_err());
        assert_eq!(count(q).await, 1, "{} after a failed delete", b.name);
    }
}
