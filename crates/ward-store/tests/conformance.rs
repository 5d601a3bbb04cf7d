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
            .create_group(g, None, ward_store::testing::emit())
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
        let mut v: Vec<String> = self.list_all(&query, 50).await.into_iter().map(|g| g.name).collect();
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
        kind: 0,
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
fn ordered<'a>(groups: impl IntoIterator<Item = &'a GroupRecord>, order: OrderBy) -> Vec<GroupRecord> {
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
            kind: 0,
            ..root("root")
        };
        let kid = GroupRecord {
            create_time: -1,
            update_time: 0,
            kind: 0,
            ..child(&parent, "child")
        };
        b.create(&parent).await;
        b.create(&kid).await;
        assert_eq!(parent.parent_uid, None, "{name}: a root has no parent");
        assert_eq!(b.get(&parent).await.as_ref(), Some(&parent), "{name}: root round-trip");
        assert_eq!(b.get(&kid).await.as_ref(), Some(&kid), "{name}: child round-trip");
        assert_eq!(b.get(&root("missing")).await, None, "{name}: missing root");
        assert_eq!(b.get(&child(&parent, "missing")).await, None, "{name}: missing child");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn create_under_missing_parent_is_not_found() {
    for b in backends().await {
        let orphan = child(&root("never created"), "orphan");
        assert_not_found(
            b.name,
            "create under a missing parent",
            b.store.create_group(&orphan, None, ward_store::testing::emit()).await,
        );
        assert_eq!(b.get(&orphan).await, None, "{}: the orphan must not be stored", b.name);
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
            let got = b
                .store
                .update_group(&uid, &patch, now, ward_store::testing::emit())
                .await;
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
            b.store
                .update_group(&missing, &patch, T0, ward_store::testing::emit())
                .await,
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
            b.store
                .delete_group(&uidp(&root("x").uid), ward_store::testing::emit())
                .await,
        );
        assert_not_found(
            name,
            "delete a missing child",
            b.store
                .delete_group(&parent_uid.new_child(), ward_store::testing::emit())
                .await,
        );

        match b.store.delete_group(&parent_uid, ward_store::testing::emit()).await {
            Err(Error::FailedPrecondition(v)) => {
                assert_eq!(
                    v.first().map(|p| p.kind.as_str()),
                    Some("RESOURCE_NOT_EMPTY"),
                    "{name}: {v:?}"
                )
            }
            other => panic!("{name}: delete a group with a child: expected FailedPrecondition, got {other:?}"),
        }
        assert_eq!(
            b.get(&parent).await.as_ref(),
            Some(&parent),
            "{name}: a refused delete keeps the group"
        );

        b.store
            .delete_group(&kid_uid, ward_store::testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: delete child: {e:?}"));
        assert_eq!(b.get(&kid).await, None, "{name}: child gone");
        b.store
            .delete_group(&parent_uid, ward_store::testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: delete emptied parent: {e:?}"));
        assert_eq!(b.get(&parent).await, None, "{name}: parent gone");
        assert_not_found(
            name,
            "delete twice",
            b.store.delete_group(&parent_uid, ward_store::testing::emit()).await,
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
            ("everything", query(UidpFilter::default()), all.iter().collect()),
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

/// Ordered pages of a subtree hold the same rows in the same order whichever
/// plan reads them: SQLite walks the sort column's index for a subtree that
/// is a large share of its table, and sorts a small subtree's uid range
/// (`sql::page_walking_index`). The big team here is over an eighth of the
/// table, the small one under it; both are paged through in every order,
/// visible-scope restricted too.
#[tokio::test(flavor = "multi_thread")]
async fn ordered_subtrees_page_alike_in_either_plan() {
    for b in backends().await {
        let name = b.name;
        let mut groups = ordering_fixture();
        let org = root("org");
        let (big, small) = (child(&org, "big"), child(&org, "small"));
        groups.extend([org.clone(), big.clone(), small.clone()]);
        for i in 0..40usize {
            let names = ["beta", "alpha", "Beta", "a-b"];
            for (parent, n) in [(&big, i), (&small, i % 3)] {
                if parent.uid == small.uid && i >= 3 {
                    continue;
                }
                groups.push(GroupRecord {
                    create_time: T0 + (n as i64 % 5) * 1000,
                    update_time: (n as i64 * 7) % 4,
                    kind: 0,
                    ..child(parent, names[n % names.len()])
                });
            }
            groups.push(root(&format!("filler-{i}")));
        }
        b.create_all(&groups).await;
        for subtree in [&big, &small] {
            let inside: Vec<&GroupRecord> = groups.iter().filter(|g| g.uid.starts_with(&subtree.uid)).collect();
            for order in all_orders() {
                let expected = ordered(inside.iter().copied(), order);
                for (how, q) in [
                    (
                        "descendants_of",
                        ListQuery {
                            order,
                            ..query(UidpFilter {
                                descendants_of: Some(uidp(&subtree.uid)),
                                ..Default::default()
                            })
                        },
                    ),
                    (
                        "visible",
                        ListQuery {
                            order,
                            visible: Some(vec![uidp(&subtree.uid)]),
                            ..query(UidpFilter::default())
                        },
                    ),
                ] {
                    for page_size in [1, 7, 50] {
                        let got = b.list_all(&q, page_size).await;
                        assert_eq!(
                            got, expected,
                            "{name}: {} {how} {order:?}, page_size {page_size}",
                            subtree.name
                        );
                    }
                    assert_eq!(b.page(&q).await.total_count, expected.len() as i64, "{name}");
                }
            }
        }
    }
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
            let beyond = b.page(&ListQuery { skip: 100, ..q.clone() }).await;
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
            visible: self.visible.as_ref().map(|v| v.iter().map(resolve).collect()),
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
            kind: 0,
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

async fn check_filters(nodes: Vec<NodeSpec>, filters: Vec<FilterSpec>) -> Result<(), TestCaseError> {
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
        .run(&strategy, |(nodes, filters)| rt.block_on(check_filters(nodes, filters)))
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
        assert_eq!(setting("token-key", b"first").await, b"first", "{name}: initial value");
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
        assert_eq!(seen.len(), 1, "{name}: racing setting_or_init disagreed: {seen:?}");

        // set_setting replaces; setting reads back, or None when absent.
        assert_eq!(store.setting("never-set").await.unwrap(), None, "{name}");
        store.set_setting("url", b"http://a".to_vec()).await.unwrap();
        store.set_setting("url", b"http://b".to_vec()).await.unwrap();
        assert_eq!(
            store.setting("url").await.unwrap().as_deref(),
            Some(&b"http://b"[..]),
            "{name}"
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
                            .create_group(&g, None, ward_store::testing::emit())
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
        b.store
            .create_group(&org, None, ward_store::testing::emit())
            .await
            .unwrap();
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
        b.store
            .create_group(&kid, None, ward_store::testing::emit())
            .await
            .unwrap();
        assert_eq!(count(q.clone()).await, 2, "{} after create", b.name);
        b.store
            .delete_group(&uidp(&kid.uid), ward_store::testing::emit())
            .await
            .unwrap();
        assert_eq!(count(q.clone()).await, 1, "{} after delete", b.name);
        // A failed write changes nothing and the count stays right.
        assert!(
            b.store
                .delete_group(&uidp(&kid.uid), ward_store::testing::emit())
                .await
                .is_err()
        );
        assert_eq!(count(q).await, 1, "{} after a failed delete", b.name);
    }
}

/// Several servers on one database: a count one of them cached still follows
/// the writes the others make (PostgreSQL validates cached counts with change
/// counters that every write bumps in its own transaction).
#[tokio::test(flavor = "multi_thread")]
async fn total_count_is_exact_across_replicas() {
    for db in testing::backends().await {
        if db.backend != "postgres" {
            continue;
        }
        let a = ward_store::open(&db.url).await.expect("open a");
        let b = ward_store::open(&db.url).await.expect("open b");
        let org = root("org");
        a.create_group(&org, None, ward_store::testing::emit()).await.unwrap();
        let q = query(UidpFilter {
            descendants_of: Some(uidp(&org.uid)),
            ..UidpFilter::default()
        });
        let count = |s: &Arc<dyn Store>| {
            let (s, q) = (s.clone(), q.clone());
            async move { s.list_groups(&q).await.unwrap().total_count }
        };
        assert_eq!(count(&a).await, 1);
        assert_eq!(count(&a).await, 1, "repeated (cached)");
        let kid = child(&org, "kid");
        b.create_group(&kid, None, ward_store::testing::emit()).await.unwrap();
        assert_eq!(count(&a).await, 2, "after another server's create");
        b.update_group(
            &uidp(&kid.uid),
            &GroupPatch {
                name: Some("renamed".into()),
                ..GroupPatch::default()
            },
            T0 + 1,
            ward_store::testing::emit(),
        )
        .await
        .unwrap();
        let mut named = q.clone();
        named.name = Some("renamed".into());
        assert_eq!(
            a.list_groups(&named).await.unwrap().total_count,
            1,
            "a filter on an updated column"
        );
        b.delete_group(&uidp(&kid.uid), ward_store::testing::emit())
            .await
            .unwrap();
        assert_eq!(count(&a).await, 1, "after another server's delete");
        assert_eq!(a.list_groups(&named).await.unwrap().total_count, 0);
        // Bindings are listed through a view over four tables: a write to
        // any of them is seen.
        let ident = identity_record(&org, "robot");
        let role = role_record(Some(&org), "viewer", "groups.list");
        b.create_identity(&ident, ward_store::testing::emit()).await.unwrap();
        b.create_role(&role, ward_store::testing::emit()).await.unwrap();
        let bq = query(UidpFilter {
            descendants_of: Some(uidp(&org.uid)),
            ..UidpFilter::default()
        });
        assert_eq!(a.list_bindings(&bq).await.unwrap().total_count, 0);
        b.create_bindings(&[binding_record(&org, &ident, &role)], testing::emit())
            .await
            .unwrap();
        assert_eq!(
            a.list_bindings(&bq).await.unwrap().total_count,
            1,
            "after another server's binding"
        );
    }
}

/// A subtree's totalCount (on PostgreSQL, summed from per-parent child
/// counts) equals the rows in it, for groups, identities and bindings, after
/// creates and deletes, for every group of a tree and for a uid that is
/// not a group.
#[tokio::test]
async fn subtree_counts_follow_creates_and_deletes() {
    for b in backends().await {
        let (name, s) = (b.name, b.store.clone());
        let org = root("org");
        let mut groups = vec![org.clone()];
        for i in 0..12usize {
            let parent = groups[(i * 5) % groups.len()].clone();
            groups.push(child(&parent, &format!("g{i}")));
        }
        b.create_all(&groups).await;
        let role = role_record(Some(&org), "viewer", "groups.list");
        s.create_role(&role, ward_store::testing::emit()).await.unwrap();
        let mut identities = Vec::new();
        let mut bindings = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            for k in 0..(i % 3) {
                let ident = identity_record(g, &format!("id{i}-{k}"));
                s.create_identity(&ident, ward_store::testing::emit()).await.unwrap();
                let binding = binding_record(g, &ident, &role);
                s.create_bindings(std::slice::from_ref(&binding), testing::emit())
                    .await
                    .unwrap();
                identities.push(ident);
                bindings.push(binding);
            }
        }
        let check = |groups: Vec<GroupRecord>, identities: Vec<IdentityRecord>, bindings: Vec<RoleBindingRecord>| {
            let s = s.clone();
            async move {
                let mut subtrees: Vec<String> = groups.iter().map(|g| g.uid.clone()).collect();
                subtrees.push(identities[0].uid.clone());
                for p in subtrees {
                    let q = query(UidpFilter {
                        descendants_of: Some(uidp(&p)),
                        ..UidpFilter::default()
                    });
                    let within = |uid: &str| uid == p || uid.starts_with(&format!("{p}/"));
                    let want = |uids: Vec<&str>| uids.into_iter().filter(|u| within(u)).count() as i64;
                    let g = s.list_groups(&q).await.unwrap().total_count;
                    let i = s.list_identities(&q).await.unwrap().total_count;
                    let r = s.list_bindings(&q).await.unwrap().total_count;
                    assert_eq!(
                        g,
                        want(groups.iter().map(|x| x.uid.as_str()).collect()),
                        "{name}: groups in {p}"
                    );
                    assert_eq!(
                        i,
                        want(identities.iter().map(|x| x.uid.as_str()).collect()),
                        "{name}: identities in {p}"
                    );
                    assert_eq!(
                        r,
                        want(bindings.iter().map(|x| x.uid.as_str()).collect()),
                        "{name}: bindings in {p}"
                    );
                }
            }
        };
        check(groups.clone(), identities.clone(), bindings.clone()).await;
        // Deletes: a binding, then an identity with its binding, then an
        // empty leaf group.
        let gone = bindings.remove(0);
        assert!(
            s.delete_binding(&uidp(&gone.uid), testing::emit()).await.unwrap(),
            "{name}"
        );
        let at = bindings
            .iter()
            .position(|x| x.identity_uid == identities[1].uid)
            .expect("bound");
        let gone = bindings.remove(at);
        s.delete_binding(&uidp(&gone.uid), testing::emit()).await.unwrap();
        let ident = identities.remove(1);
        s.delete_identity(&uidp(&ident.uid), ward_store::testing::emit())
            .await
            .unwrap();
        let leaf = groups
            .iter()
            .rposition(|g| {
                !groups.iter().any(|c| c.parent_uid.as_deref() == Some(g.uid.as_str()))
                    && !identities
                        .iter()
                        .any(|i| i.parent_uid.as_deref() == Some(g.uid.as_str()))
                    && !bindings.iter().any(|x| x.parent_uid == g.uid)
            })
            .expect("an empty leaf");
        let leaf = groups.remove(leaf);
        s.delete_group(&uidp(&leaf.uid), ward_store::testing::emit())
            .await
            .unwrap();
        check(groups, identities, bindings).await;
    }
}

/// Every table the count cache depends on has its change-counting trigger,
/// and every table counted per parent its child-counting one.
#[tokio::test(flavor = "multi_thread")]
async fn every_counted_table_has_its_trigger() {
    for db in testing::backends().await {
        if db.backend != "postgres" {
            continue;
        }
        let _store = ward_store::open(&db.url).await.expect("open (migrates)");
        let pool = sqlx::PgPool::connect(&db.url).await.expect("connect");
        let mut found: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT c.relname::TEXT FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
             JOIN pg_proc p ON p.oid = t.tgfoid WHERE p.proname = 'ward_count_change' \
             AND c.relnamespace = current_schema()::regnamespace",
        )
        .fetch_all(&pool)
        .await
        .expect("triggers");
        found.sort();
        let mut want: Vec<String> = ward_store::COUNTED_TABLES.iter().map(|t| t.to_string()).collect();
        want.sort();
        assert_eq!(found, want);
        // And every table counted per parent has its child-counting trigger.
        let mut found: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT c.relname::TEXT FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
             JOIN pg_proc p ON p.oid = t.tgfoid WHERE p.proname = 'ward_count_child' \
             AND c.relnamespace = current_schema()::regnamespace",
        )
        .fetch_all(&pool)
        .await
        .expect("triggers");
        found.sort();
        let mut want: Vec<String> = ward_store::PARENT_COUNTED_TABLES
            .iter()
            .map(|t| t.to_string())
            .collect();
        want.sort();
        assert_eq!(found, want);
        pool.close().await;
    }
}

// ---------------------------------------------------------------------------
// Identities, roles and role bindings
// ---------------------------------------------------------------------------

use ward_core::listing::FilterValue;
use ward_store::{HydratedBinding, IdentityPatch, IdentityRecord, RoleBindingRecord, RolePatch, RoleRecord};

/// A claim-match identity under `group`.
fn identity_record(group: &GroupRecord, name: &str) -> IdentityRecord {
    IdentityRecord {
        uid: uidp(&group.uid).new_child().into(),
        parent_uid: Some(group.uid.clone()),
        name: name.into(),
        description: format!("the {name} identity"),
        company: String::new(),
        relationship_type: 1,
        relationship: format!(r#"{{"issuer":"https://issuer.example.com","subject":"sub-{name}"}}"#),
        issuer: "https://issuer.example.com".into(),
        subject: format!("sub-{name}"),
        last_seen_time: None,
        create_time: T0,
        update_time: T0,
    }
}

/// A custom role under `group` (a built-in one when `None`).
fn role_record(group: Option<&GroupRecord>, name: &str, caps: &str) -> RoleRecord {
    RoleRecord {
        uid: match group {
            Some(g) => uidp(&g.uid).new_child().into(),
            None => Uidp::new_root().into(),
        },
        parent_uid: group.map(|g| g.uid.clone()),
        name: name.into(),
        description: format!("the {name} role"),
        capabilities: caps.into(),
        create_time: T0,
        update_time: T0,
    }
}

fn binding_record(group: &GroupRecord, identity: &IdentityRecord, role: &RoleRecord) -> RoleBindingRecord {
    RoleBindingRecord {
        uid: uidp(&group.uid).new_child().into(),
        parent_uid: group.uid.clone(),
        identity_uid: identity.uid.clone(),
        role_uid: role.uid.clone(),
        create_time: T0,
        update_time: T0,
    }
}

/// What `get_binding` should return for `b`.
fn hydrated(
    b: &RoleBindingRecord,
    group: &GroupRecord,
    identity: &IdentityRecord,
    role: &RoleRecord,
) -> HydratedBinding {
    HydratedBinding {
        uid: b.uid.clone(),
        parent_uid: b.parent_uid.clone(),
        identity_uid: b.identity_uid.clone(),
        role_uid: b.role_uid.clone(),
        create_time: b.create_time,
        update_time: b.update_time,
        name: role.name.clone(),
        identity_name: identity.name.clone(),
        identity_description: identity.description.clone(),
        identity_subject: identity.subject.clone(),
        identity_issuer: identity.issuer.clone(),
        group_name: group.name.clone(),
        group_description: group.description.clone(),
        role_description: role.description.clone(),
    }
}

/// The precondition violations of a result that must be FAILED_PRECONDITION.
fn precondition<T: Debug>(
    backend: &str,
    what: &str,
    r: ward_core::Result<T>,
) -> Vec<ward_core::error::PreconditionViolation> {
    match r {
        Err(Error::FailedPrecondition(v)) => v,
        other => panic!("{backend}: {what}: expected FailedPrecondition, got {other:?}"),
    }
}

fn uids_of<T>(items: &[T], uid: impl Fn(&T) -> &str) -> Vec<String> {
    items.iter().map(|x| uid(x).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn identities_create_get_update_delete_list() {
    for b in backends().await {
        let name = b.name;
        let s = &b.store;
        let org = root("org");
        let team = child(&org, "team");
        let other = root("other");
        b.create_all(&[org.clone(), team.clone(), other.clone()]).await;

        let a = IdentityRecord {
            company: "Acme, Inc.".into(),
            last_seen_time: Some(T0 + 7),
            ..identity_record(&org, "alpha")
        };
        let t = IdentityRecord {
            relationship_type: 2,
            relationship: r#"{"issuer":"i","subject":"s","issuerKeys":"{\"keys\":[]}"}"#.into(),
            create_time: T0 + 1,
            update_time: T0 + 1,
            ..identity_record(&team, "beta")
        };
        let o = identity_record(&other, "alpha");
        for i in [&a, &t, &o] {
            s.create_identity(i, ward_store::testing::emit())
                .await
                .unwrap_or_else(|e| panic!("{name}: create {}: {e:?}", i.name));
        }
        for i in [&a, &t, &o] {
            assert_eq!(
                s.get_identity(&uidp(&i.uid)).await.unwrap().as_ref(),
                Some(i),
                "{name}: round-trip {}",
                i.name
            );
        }
        assert_eq!(
            s.get_identity(&uidp(&org.uid).new_child()).await.unwrap(),
            None,
            "{name}: missing"
        );
        let orphan = identity_record(&child(&org, "never"), "orphan");
        assert_not_found(
            name,
            "identity under a missing group",
            s.create_identity(&orphan, ward_store::testing::emit()).await,
        );
        assert_eq!(s.get_identity(&uidp(&orphan.uid)).await.unwrap(), None, "{name}");

        // Update: only the given fields; update_time always moves forward.
        let au = uidp(&a.uid);
        let got = s
            .update_identity(
                &au,
                &IdentityPatch {
                    description: Some("changed".into()),
                    ..Default::default()
                },
                T0 + 100,
                ward_store::testing::emit(),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: update: {e:?}"));
        assert_eq!(
            got,
            IdentityRecord {
                description: "changed".into(),
                update_time: T0 + 100,
                ..a.clone()
            },
            "{name}: description only"
        );
        let got = s
            .update_identity(
                &au,
                &IdentityPatch {
                    name: Some("renamed".into()),
                    relationship: Some((2, "{}".into(), "iss".into(), "sub".into())),
                    ..Default::default()
                },
                T0, // a clock behind the stored time
                ward_store::testing::emit(),
            )
            .await
            .unwrap();
        assert_eq!(
            got,
            IdentityRecord {
                name: "renamed".into(),
                description: "changed".into(),
                relationship_type: 2,
                relationship: "{}".into(),
                issuer: "iss".into(),
                subject: "sub".into(),
                update_time: T0 + 101,
                ..a.clone()
            },
            "{name}: relationship replaced, time moved by 1 ms"
        );
        assert_eq!(s.get_identity(&au).await.unwrap().as_ref(), Some(&got), "{name}");
        assert_not_found(
            name,
            "update a missing identity",
            s.update_identity(
                &uidp(&orphan.uid),
                &IdentityPatch::default(),
                T0,
                ward_store::testing::emit(),
            )
            .await,
        );

        // List.
        let list = |q: ListQuery| {
            let s = s.clone();
            async move { s.list_identities(&q).await.unwrap_or_else(|e| panic!("{name}: {e:?}")) }
        };
        let p = list(query(UidpFilter::default())).await;
        assert_eq!(p.total_count, 3, "{name}");
        let p = list(query(UidpFilter {
            descendants_of: Some(uidp(&org.uid)),
            ..Default::default()
        }))
        .await;
        let mut want = vec![a.uid.clone(), t.uid.clone()];
        want.sort();
        assert_eq!(uids_of(&p.items, |i| &i.uid), want, "{name}: descendants");
        let p = list(query(UidpFilter {
            children_of: Some(uidp(&team.uid)),
            ..Default::default()
        }))
        .await;
        assert_eq!(uids_of(&p.items, |i| &i.uid), [t.uid.as_str()], "{name}: children");
        let p = list(ListQuery {
            filters: vec![("relationship_type", FilterValue::Int(2))],
            ..query(UidpFilter::default())
        })
        .await;
        let mut want = vec![a.uid.clone(), t.uid.clone()];
        want.sort();
        assert_eq!(uids_of(&p.items, |i| &i.uid), want, "{name}: relationship_type=2");
        assert_eq!(p.total_count, 2, "{name}");
        let p = list(ListQuery {
            name: Some("alpha".into()),
            ..query(UidpFilter::default())
        })
        .await;
        assert_eq!(uids_of(&p.items, |i| &i.uid), [o.uid.as_str()], "{name}: name");
        let p = list(ListQuery {
            visible: Some(vec![uidp(&team.uid)]),
            ..query(UidpFilter::default())
        })
        .await;
        assert_eq!(uids_of(&p.items, |i| &i.uid), [t.uid.as_str()], "{name}: visible");
        let p = list(ListQuery {
            order: OrderBy {
                field: SortField::Name,
                desc: true,
            },
            page_size: 2,
            ..query(UidpFilter::default())
        })
        .await;
        assert_eq!(
            p.items.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
            ["renamed", "beta"],
            "{name}: name desc"
        );
        assert!(p.next.is_some(), "{name}: a next page");
        let p2 = list(ListQuery {
            order: OrderBy {
                field: SortField::Name,
                desc: true,
            },
            page_size: 2,
            after: p.next.clone(),
            ..query(UidpFilter::default())
        })
        .await;
        assert_eq!(uids_of(&p2.items, |i| &i.uid), [o.uid.as_str()], "{name}: page 2");
        assert!(p2.next.is_none(), "{name}");

        // Delete.
        s.delete_identity(&au, ward_store::testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: delete: {e:?}"));
        assert_eq!(s.get_identity(&au).await.unwrap(), None, "{name}: gone");
        assert_not_found(
            name,
            "delete twice",
            s.delete_identity(&au, ward_store::testing::emit()).await,
        );
        assert_eq!(list(query(UidpFilter::default())).await.total_count, 2, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn roles_create_get_update_delete_list() {
    for b in backends().await {
        let name = b.name;
        let s = &b.store;
        let org = root("org");
        let team = child(&org, "team");
        b.create_all(&[org.clone(), team.clone()]).await;

        let builtin = role_record(None, "owner", "101,103");
        s.upsert_builtin_roles(std::slice::from_ref(&builtin))
            .await
            .unwrap_or_else(|e| panic!("{name}: upsert: {e:?}"));
        let r = role_record(Some(&org), "lister", "103");
        let r2 = RoleRecord {
            create_time: T0 + 1,
            update_time: T0 + 1,
            ..role_record(Some(&team), "two", "103,303")
        };
        for x in [&r, &r2] {
            s.create_role(x, ward_store::testing::emit())
                .await
                .unwrap_or_else(|e| panic!("{name}: create {}: {e:?}", x.name));
        }
        for x in [&builtin, &r, &r2] {
            assert_eq!(
                s.get_role(&uidp(&x.uid)).await.unwrap().as_ref(),
                Some(x),
                "{name}: round-trip {}",
                x.name
            );
        }
        let orphan = role_record(Some(&child(&org, "never")), "orphan", "103");
        assert_not_found(
            name,
            "role under a missing group",
            s.create_role(&orphan, ward_store::testing::emit()).await,
        );

        let ru = uidp(&r.uid);
        let got = s
            .update_role(
                &ru,
                &RolePatch {
                    capabilities: Some("103,903".into()),
                    ..Default::default()
                },
                T0 + 50,
                ward_store::testing::emit(),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: update: {e:?}"));
        assert_eq!(
            got,
            RoleRecord {
                capabilities: "103,903".into(),
                update_time: T0 + 50,
                ..r.clone()
            },
            "{name}: capabilities only"
        );
        let got = s
            .update_role(
                &ru,
                &RolePatch {
                    name: Some("renamed".into()),
                    description: Some("".into()),
                    capabilities: None,
                },
                T0 + 10,
                ward_store::testing::emit(),
            )
            .await
            .unwrap();
        assert_eq!(
            got,
            RoleRecord {
                name: "renamed".into(),
                description: String::new(),
                capabilities: "103,903".into(),
                update_time: T0 + 51,
                ..r.clone()
            },
            "{name}: name and description, time moved by 1 ms"
        );
        assert_not_found(
            name,
            "update a missing role",
            s.update_role(
                &uidp(&orphan.uid),
                &RolePatch::default(),
                T0,
                ward_store::testing::emit(),
            )
            .await,
        );

        let list = |q: ListQuery| {
            let s = s.clone();
            async move { s.list_roles(&q).await.unwrap_or_else(|e| panic!("{name}: {e:?}")) }
        };
        assert_eq!(list(query(UidpFilter::default())).await.total_count, 3, "{name}");
        let p = list(query(UidpFilter {
            in_root: true,
            ..Default::default()
        }))
        .await;
        assert_eq!(uids_of(&p.items, |x| &x.uid), [builtin.uid.as_str()], "{name}: in_root");
        let p = list(query(UidpFilter {
            descendants_of: Some(uidp(&org.uid)),
            ..Default::default()
        }))
        .await;
        let mut want = vec![r.uid.clone(), r2.uid.clone()];
        want.sort();
        assert_eq!(uids_of(&p.items, |x| &x.uid), want, "{name}: descendants");
        let p = list(ListQuery {
            name: Some("two".into()),
            ..query(UidpFilter::default())
        })
        .await;
        assert_eq!(uids_of(&p.items, |x| &x.uid), [r2.uid.as_str()], "{name}: name");

        s.delete_role(&ru, ward_store::testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: delete: {e:?}"));
        assert_eq!(s.get_role(&ru).await.unwrap(), None, "{name}: gone");
        assert_not_found(
            name,
            "delete twice",
            s.delete_role(&ru, ward_store::testing::emit()).await,
        );
        assert_eq!(list(query(UidpFilter::default())).await.total_count, 2, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bindings_create_get_update_delete_list() {
    for b in backends().await {
        let name = b.name;
        let s = &b.store;
        let org = root("org");
        let team = child(&org, "team");
        b.create_all(&[org.clone(), team.clone()]).await;
        let alice = identity_record(&org, "alice");
        let bob = identity_record(&team, "bob");
        for i in [&alice, &bob] {
            s.create_identity(i, ward_store::testing::emit()).await.unwrap();
        }
        let viewer = role_record(None, "viewer", "103,303,403,903");
        let owner = role_record(None, "owner", "101,102,103,104");
        s.upsert_builtin_roles(&[viewer.clone(), owner.clone()]).await.unwrap();
        let custom = role_record(Some(&org), "lister", "103");
        s.create_role(&custom, ward_store::testing::emit()).await.unwrap();

        let b1 = binding_record(&org, &alice, &viewer);
        let b2 = RoleBindingRecord {
            create_time: T0 + 1,
            update_time: T0 + 1,
            ..binding_record(&team, &bob, &custom)
        };
        let b3 = RoleBindingRecord {
            create_time: T0 + 2,
            update_time: T0 + 2,
            ..binding_record(&team, &alice, &owner)
        };
        for x in [&b1, &b2, &b3] {
            s.create_binding(x, testing::emit())
                .await
                .unwrap_or_else(|e| panic!("{name}: create binding: {e:?}"));
        }
        let h1 = hydrated(&b1, &org, &alice, &viewer);
        let h2 = hydrated(&b2, &team, &bob, &custom);
        let h3 = hydrated(&b3, &team, &alice, &owner);
        for h in [&h1, &h2, &h3] {
            assert_eq!(
                s.get_binding(&uidp(&h.uid)).await.unwrap().as_ref(),
                Some(h),
                "{name}: hydrated get"
            );
        }
        assert_eq!(
            s.get_binding(&uidp(&org.uid).new_child()).await.unwrap(),
            None,
            "{name}: missing"
        );

        // Each referenced record must exist.
        let missing_group = child(&org, "never");
        for (what, x, ty) in [
            (
                "group",
                RoleBindingRecord {
                    uid: uidp(&missing_group.uid).new_child().into(),
                    parent_uid: missing_group.uid.clone(),
                    ..b1.clone()
                },
                ward_store::GROUP_TYPE,
            ),
            (
                "identity",
                RoleBindingRecord {
                    uid: uidp(&org.uid).new_child().into(),
                    identity_uid: uidp(&org.uid).new_child().into(),
                    ..b1.clone()
                },
                ward_store::IDENTITY_TYPE,
            ),
            (
                "role",
                RoleBindingRecord {
                    uid: uidp(&org.uid).new_child().into(),
                    role_uid: Uidp::new_root().into(),
                    ..b1.clone()
                },
                ward_store::ROLE_TYPE,
            ),
        ] {
            match s.create_binding(&x, testing::emit()).await {
                Err(Error::NotFound { resource_type, .. }) => {
                    assert_eq!(resource_type, ty, "{name}: missing {what}")
                }
                other => panic!("{name}: missing {what}: expected NotFound, got {other:?}"),
            }
            assert_eq!(s.get_binding(&uidp(&x.uid)).await.unwrap(), None, "{name}");
        }

        // Listing is hydrated and filters by identity, group and role.
        let list = |q: ListQuery| {
            let s = s.clone();
            async move { s.list_bindings(&q).await.unwrap_or_else(|e| panic!("{name}: {e:?}")) }
        };
        let all = list(query(UidpFilter::default())).await;
        assert_eq!(all.total_count, 3, "{name}");
        let mut want = vec![h1.clone(), h2.clone(), h3.clone()];
        want.sort_by(|a, b| a.uid.cmp(&b.uid));
        assert_eq!(all.items, want, "{name}: hydrated list");
        let filtered = |column: &'static str, value: &str| ListQuery {
            filters: vec![(column, FilterValue::Text(value.into()))],
            ..query(UidpFilter::default())
        };
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        for (q, want) in [
            (filtered("identity_uid", &alice.uid), vec![&b1, &b3]),
            (filtered("identity_uid", &bob.uid), vec![&b2]),
            (filtered("parent_uid", &team.uid), vec![&b2, &b3]),
            (filtered("parent_uid", &org.uid), vec![&b1]),
            (filtered("role_uid", &owner.uid), vec![&b3]),
            (filtered("role_uid", &custom.uid), vec![&b2]),
            (
                query(UidpFilter {
                    descendants_of: Some(uidp(&team.uid)),
                    ..Default::default()
                }),
                vec![&b2, &b3],
            ),
        ] {
            let p = list(q.clone()).await;
            assert_eq!(
                uids_of(&p.items, |x| &x.uid),
                sorted(want.iter().map(|x| x.uid.clone()).collect()),
                "{name}: {q:?}"
            );
            assert_eq!(p.total_count, want.len() as i64, "{name}: {q:?}");
        }
        // `name` is the role's name.
        let p = list(ListQuery {
            order: OrderBy {
                field: SortField::Name,
                desc: false,
            },
            ..query(UidpFilter::default())
        })
        .await;
        assert_eq!(
            p.items.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
            ["lister", "owner", "viewer"],
            "{name}: ordered by role name"
        );
        // A name filter reads the joined role (the count reads the view,
        // not the bare bindings).
        let p = list(ListQuery {
            name: Some("owner".into()),
            ..query(UidpFilter::default())
        })
        .await;
        assert_eq!(
            uids_of(&p.items, |x| &x.uid),
            vec![b3.uid.clone()],
            "{name}: by role name"
        );
        assert_eq!(p.total_count, 1, "{name}: counted by role name");

        // Hydration follows the referenced records.
        s.update_identity(
            &uidp(&alice.uid),
            &IdentityPatch {
                name: Some("alice2".into()),
                ..Default::default()
            },
            T0 + 5,
            ward_store::testing::emit(),
        )
        .await
        .unwrap();
        let got = s.get_binding(&uidp(&b1.uid)).await.unwrap().expect("b1");
        assert_eq!(got.identity_name, "alice2", "{name}: live hydration");

        // Update: another role; update_time moves; create_time stays.
        let u1 = uidp(&b1.uid);
        let got = s
            .update_binding(&u1, &custom.uid, T0 + 100, testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: update binding: {e:?}"));
        assert_eq!(got.role_uid, custom.uid, "{name}");
        assert_eq!(got.name, "lister", "{name}: hydrated role name");
        assert_eq!(got.role_description, custom.description, "{name}");
        assert_eq!((got.create_time, got.update_time), (T0, T0 + 100), "{name}");
        assert_eq!(s.get_binding(&u1).await.unwrap().as_ref(), Some(&got), "{name}");
        let got = s.update_binding(&u1, &viewer.uid, T0, testing::emit()).await.unwrap();
        assert_eq!(got.update_time, T0 + 101, "{name}: time moves by 1 ms");
        assert_not_found(
            name,
            "update a missing binding",
            s.update_binding(&uidp(&org.uid).new_child(), &viewer.uid, T0, testing::emit())
                .await,
        );
        match s
            .update_binding(&u1, Uidp::new_root().as_str(), T0, testing::emit())
            .await
        {
            Err(Error::NotFound { resource_type, .. }) => {
                assert_eq!(resource_type, ward_store::ROLE_TYPE, "{name}")
            }
            other => panic!("{name}: update to a missing role: {other:?}"),
        }
        assert_eq!(
            s.get_binding(&u1).await.unwrap().map(|x| x.role_uid),
            Some(viewer.uid.clone()),
            "{name}: a failed update changes nothing"
        );

        // Delete reports whether something went.
        assert!(s.delete_binding(&u1, testing::emit()).await.unwrap(), "{name}: deleted");
        assert!(
            !s.delete_binding(&u1, testing::emit()).await.unwrap(),
            "{name}: already gone"
        );
        assert_eq!(s.get_binding(&u1).await.unwrap(), None, "{name}");
        assert_eq!(list(query(UidpFilter::default())).await.total_count, 2, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn iam_delete_constraints() {
    for b in backends().await {
        let name = b.name;
        let s = &b.store;
        let org = root("org");
        let team = child(&org, "team");
        b.create_all(&[org.clone(), team.clone()]).await;
        let id = identity_record(&org, "ci");
        s.create_identity(&id, ward_store::testing::emit()).await.unwrap();
        let role = role_record(Some(&org), "lister", "103");
        s.create_role(&role, ward_store::testing::emit()).await.unwrap();
        let b1 = binding_record(&org, &id, &role);
        let b2 = binding_record(&team, &id, &role);
        for x in [&b1, &b2] {
            s.create_binding(x, testing::emit()).await.unwrap();
        }

        // An identity or role still bound: RESOURCE_IN_USE naming the bindings.
        for (what, r, subject) in [
            (
                "identity",
                s.delete_identity(&uidp(&id.uid), ward_store::testing::emit()).await,
                &id.uid,
            ),
            (
                "role",
                s.delete_role(&uidp(&role.uid), ward_store::testing::emit()).await,
                &role.uid,
            ),
        ] {
            let v = precondition(name, what, r);
            assert_eq!(v.len(), 1, "{name}: {what}: {v:?}");
            assert_eq!(v[0].kind, "RESOURCE_IN_USE", "{name}: {what}");
            assert_eq!(&v[0].subject, subject, "{name}: {what}");
            for x in [&b1, &b2] {
                assert!(
                    v[0].description.contains(&x.uid),
                    "{name}: {what}: names binding {}: {v:?}",
                    x.uid
                );
            }
        }
        assert!(s.get_identity(&uidp(&id.uid)).await.unwrap().is_some(), "{name}: kept");
        assert!(s.get_role(&uidp(&role.uid)).await.unwrap().is_some(), "{name}: kept");

        // A group holding anything: RESOURCE_NOT_EMPTY naming the kinds.
        let kinds_of = |v: &[ward_core::error::PreconditionViolation]| {
            assert_eq!(v.len(), 1, "{name}: {v:?}");
            assert_eq!(v[0].kind, "RESOURCE_NOT_EMPTY", "{name}");
            v[0].description.clone()
        };
        let desc = kinds_of(&precondition(
            name,
            "team with a binding",
            s.delete_group(&uidp(&team.uid), ward_store::testing::emit()).await,
        ));
        assert_eq!(desc, "cannot delete group with child role bindings", "{name}");
        let desc = kinds_of(&precondition(
            name,
            "org",
            s.delete_group(&uidp(&org.uid), ward_store::testing::emit()).await,
        ));
        assert_eq!(
            desc, "cannot delete group with child groups, identities, roles, role bindings",
            "{name}"
        );
        // One kind at a time.
        for (kind, add) in [("identities", 0), ("roles", 1), ("groups", 2)] {
            let g = child(&org, kind);
            b.create(&g).await;
            match add {
                0 => s
                    .create_identity(&identity_record(&g, "x"), ward_store::testing::emit())
                    .await
                    .unwrap(),
                1 => s
                    .create_role(&role_record(Some(&g), "x", "103"), ward_store::testing::emit())
                    .await
                    .unwrap(),
                _ => b.create(&child(&g, "x")).await,
            }
            let desc = kinds_of(&precondition(
                name,
                kind,
                s.delete_group(&uidp(&g.uid), ward_store::testing::emit()).await,
            ));
            assert_eq!(desc, format!("cannot delete group with child {kind}"), "{name}");
            assert!(b.get(&g).await.is_some(), "{name}: {kind}: kept");
        }

        // Unbound, everything can go.
        for x in [&b1, &b2] {
            assert!(
                s.delete_binding(&uidp(&x.uid), testing::emit()).await.unwrap(),
                "{name}"
            );
        }
        s.delete_group(&uidp(&team.uid), ward_store::testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: emptied team: {e:?}"));
        s.delete_identity(&uidp(&id.uid), ward_store::testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: unbound identity: {e:?}"));
        s.delete_role(&uidp(&role.uid), ward_store::testing::emit())
            .await
            .unwrap_or_else(|e| panic!("{name}: unbound role: {e:?}"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn grants_rows() {
    for b in backends().await {
        let name = b.name;
        let s = &b.store;
        let org = root("org");
        let team = child(&org, "team");
        b.create_all(&[org.clone(), team.clone()]).await;
        let x = identity_record(&org, "x");
        let y = identity_record(&org, "y");
        for i in [&x, &y] {
            s.create_identity(i, ward_store::testing::emit()).await.unwrap();
        }
        let viewer = role_record(None, "viewer", "103,303");
        s.upsert_builtin_roles(std::slice::from_ref(&viewer)).await.unwrap();
        let custom = role_record(Some(&org), "maker", "101");
        s.create_role(&custom, ward_store::testing::emit()).await.unwrap();

        let grants = |who: &str| {
            let (s, who) = (s.clone(), who.to_owned());
            async move {
                let mut v = s.grants(&who).await.unwrap_or_else(|e| panic!("{name}: grants: {e:?}"));
                v.sort();
                v
            }
        };
        assert!(grants(&x.uid).await.is_empty(), "{name}: nothing bound");

        let b1 = binding_record(&org, &x, &viewer);
        let b2 = binding_record(&team, &x, &custom);
        let b3 = binding_record(&team, &x, &viewer);
        let b4 = binding_record(&team, &y, &custom);
        for r in [&b1, &b2, &b3, &b4] {
            s.create_binding(r, testing::emit()).await.unwrap();
        }
        let mut want = vec![
            (org.uid.clone(), "103,303".to_owned()),
            (team.uid.clone(), "101".to_owned()),
            (team.uid.clone(), "103,303".to_owned()),
        ];
        want.sort();
        assert_eq!(grants(&x.uid).await, want, "{name}: one row per binding");
        assert_eq!(
            grants(&y.uid).await,
            [(team.uid.clone(), "101".to_owned())],
            "{name}: only y's own"
        );
        assert!(
            grants(Uidp::new_root().as_str()).await.is_empty(),
            "{name}: unknown identity"
        );

        // Rows follow role and binding changes.
        s.update_role(
            &uidp(&custom.uid),
            &RolePatch {
                capabilities: Some("101,104".into()),
                ..Default::default()
            },
            T0 + 1,
            ward_store::testing::emit(),
        )
        .await
        .unwrap();
        s.delete_binding(&uidp(&b3.uid), testing::emit()).await.unwrap();
        let mut want = vec![
            (org.uid.clone(), "103,303".to_owned()),
            (team.uid.clone(), "101,104".to_owned()),
        ];
        want.sort();
        assert_eq!(grants(&x.uid).await, want, "{name}: after changes");
        s.update_binding(&uidp(&b2.uid), &viewer.uid, T0 + 2, testing::emit())
            .await
            .unwrap();
        let mut want = vec![
            (org.uid.clone(), "103,303".to_owned()),
            (team.uid.clone(), "103,303".to_owned()),
        ];
        want.sort();
        assert_eq!(grants(&x.uid).await, want, "{name}: after a role change");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn upsert_builtin_roles_is_idempotent() {
    for b in backends().await {
        let name = b.name;
        let s = &b.store;
        let roles = vec![
            role_record(None, "owner", "101,102,103"),
            role_record(None, "viewer", "103"),
        ];
        let in_root = || {
            let s = s.clone();
            async move {
                let mut v = s
                    .list_roles(&query(UidpFilter {
                        in_root: true,
                        ..Default::default()
                    }))
                    .await
                    .unwrap_or_else(|e| panic!("{name}: list: {e:?}"))
                    .items;
                v.sort_by(|a, b| a.uid.cmp(&b.uid));
                v
            }
        };
        let mut want = roles.clone();
        want.sort_by(|a, b| a.uid.cmp(&b.uid));
        for round in 0..3 {
            // Later starts pass later times; unchanged roles keep their times.
            let again: Vec<RoleRecord> = roles
                .iter()
                .map(|r| RoleRecord {
                    create_time: T0 + round * 1000,
                    update_time: T0 + round * 1000,
                    ..r.clone()
                })
                .collect();
            s.upsert_builtin_roles(&again)
                .await
                .unwrap_or_else(|e| panic!("{name}: upsert round {round}: {e:?}"));
            assert_eq!(in_root().await, want, "{name}: round {round}");
        }

        // A changed bundle is applied in place: same uid, same create_time.
        let changed = vec![
            RoleRecord {
                capabilities: "101,102,103,104".into(),
                description: "new words".into(),
                create_time: T0 + 9000,
                update_time: T0 + 9000,
                ..roles[0].clone()
            },
            RoleRecord {
                create_time: T0 + 9000,
                update_time: T0 + 9000,
                ..roles[1].clone()
            },
        ];
        s.upsert_builtin_roles(&changed).await.unwrap();
        let got = in_root().await;
        assert_eq!(got.len(), 2, "{name}: no duplicates");
        let owner = got.iter().find(|r| r.uid == roles[0].uid).expect("owner");
        assert_eq!(
            owner,
            &RoleRecord {
                capabilities: "101,102,103,104".into(),
                description: "new words".into(),
                update_time: T0 + 9000,
                ..roles[0].clone()
            },
            "{name}: updated in place"
        );
        let viewer = got.iter().find(|r| r.uid == roles[1].uid).expect("viewer");
        assert_eq!(viewer, &roles[1], "{name}: unchanged role untouched");
        // Built-in roles have no parent and are bindable like any role.
        assert_eq!(viewer.parent_uid, None, "{name}");
    }
}

/// A caller bound at thousands of groups lists without error on both
/// backends (SQLite refuses an expression more than 1,000 deep, and one OR
/// per scope was that deep), and nested scopes add nothing but SQL: the
/// rows are exactly those at or below some scope.
#[tokio::test(flavor = "multi_thread")]
async fn thousands_of_visible_scopes_list() {
    for b in backends().await {
        let org = root("org");
        b.create(&org).await;
        let mut teams = Vec::new();
        for i in 0..1_200 {
            let t = child(&org, &format!("team-{i:04}"));
            b.create(&t).await;
            teams.push(t);
        }
        let inner = child(&teams[0], "inner");
        b.create(&inner).await;
        let other = root("other");
        b.create(&other).await;
        // Every team but the last ten, and (nested, redundant) the inner
        // group: 1,191 scopes.
        let mut scopes: Vec<Uidp> = teams[..1_190].iter().map(|t| uidp(&t.uid)).collect();
        scopes.push(uidp(&inner.uid));
        scopes.reverse();
        let q = ListQuery {
            visible: Some(scopes),
            ..query(UidpFilter::default())
        };
        let all = b.list_all(&q, 500).await;
        assert_eq!(all.len(), 1_191, "{}: the visible teams and the inner group", b.name);
        assert!(all.iter().all(|g| g.uid != org.uid && g.uid != other.uid), "{}", b.name);
        assert!(all.iter().any(|g| g.uid == inner.uid), "{}", b.name);
        assert!(!all.iter().any(|g| g.uid == teams[1_195].uid), "{}", b.name);
    }
}
