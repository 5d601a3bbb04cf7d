//! Registry storage conformance: both backends behave the same for repos,
//! blob links, manifests (atomic with their tags, refusing missing blobs and
//! children), tags (create-or-repoint, hidden classes), uploads (moving only
//! from the size the caller saw), tag history (one row per create or move, gone
//! with the tag), the catalog and garbage-collection queries.

use ward_core::Error;
use ward_core::listing::{FilterValue, ListQuery};
use ward_core::uidp::Uidp;
use ward_store::registry::{
    BLOB_TYPE, MANIFEST_TYPE, ManifestLinks, ManifestRecord, RepoPatch, RepoRecord, TagRecord, UploadCaps, UploadRecord,
};
use ward_store::testing;
use ward_store::{GroupRecord, Store};

const T0: i64 = 1_700_000_000_000;

async fn backends() -> Vec<testing::OpenStore> {
    testing::stores().await
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
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

fn repo(org: &Uidp, name: &str) -> RepoRecord {
    RepoRecord {
        uid: org.new_child().into(),
        parent_uid: org.as_str().into(),
        org_uid: org.as_str().into(),
        name: name.into(),
        description: String::new(),
        catalog_tier: 0,
        bundles: "[]".into(),
        aliases: "[]".into(),
        active_tags: "[]".into(),
        create_time: T0,
        update_time: T0,
    }
}

fn manifest(repo: &str, d: &str, subject: Option<&str>) -> ManifestRecord {
    ManifestRecord {
        repo_uid: repo.into(),
        digest: d.into(),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
        artifact_type: "application/x.test".into(),
        subject: subject.map(Into::into),
        annotations: String::new(),
        content: b"{}".to_vec(),
        create_time: T0,
        size: 2,
    }
}

fn tag(repo: &Uidp, name: &str, d: &str, t: i64) -> TagRecord {
    TagRecord {
        uid: repo.new_child().into(),
        parent_uid: repo.as_str().into(),
        name: name.into(),
        digest: d.into(),
        create_time: t,
        update_time: t,
        deprecated: false,
        bundles: "[]".into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn repos_are_unique_per_org_and_block_group_deletes() {
    for b in backends().await {
        let s = b.store.as_ref();
        let o = org(s).await;
        let r = repo(&o, "app");
        s.create_repo(&r, ward_store::testing::emit()).await.expect("create");
        let dup = s.create_repo(&repo(&o, "app"), ward_store::testing::emit()).await;
        assert!(matches!(dup, Err(Error::AlreadyExists { .. })), "{}: {dup:?}", b.name);
        let other = org(s).await;
        s.create_repo(&repo(&other, "app"), ward_store::testing::emit())
            .await
            .expect("same name in another org");
        let found = s.find_repo(o.as_str(), "app").await.unwrap().expect("found");
        assert_eq!(found, r, "{}", b.name);
        let mut orphan = repo(&o, "x");
        orphan.parent_uid = o.new_child().into();
        assert!(
            matches!(
                s.create_repo(&orphan, ward_store::testing::emit()).await,
                Err(Error::NotFound { .. })
            ),
            "{}",
            b.name
        );

        let second = repo(&o, "second");
        s.create_repo(&second, ward_store::testing::emit()).await.unwrap();
        let renamed = s
            .update_repo(
                &Uidp::parse("u", &second.uid).unwrap(),
                &RepoPatch {
                    name: Some("app".into()),
                    ..Default::default()
                },
                T0 + 1,
                ward_store::testing::emit(),
            )
            .await;
        assert!(
            matches!(renamed, Err(Error::AlreadyExists { .. })),
            "{}: {renamed:?}",
            b.name
        );
        let up = s
            .update_repo(
                &Uidp::parse("u", &second.uid).unwrap(),
                &RepoPatch {
                    description: Some("d".into()),
                    ..Default::default()
                },
                T0,
                ward_store::testing::emit(),
            )
            .await
            .unwrap();
        assert_eq!(
            (up.description.as_str(), up.update_time),
            ("d", T0 + 1),
            "{}: time moves forward",
            b.name
        );

        let e = s.delete_group(&o, ward_store::testing::emit()).await.unwrap_err();
        assert!(format!("{e:?}").contains("repos"), "{}: {e:?}", b.name);

        // Catalog: visible scopes, after a position, in (org, name) order.
        let all = s.catalog(None, None, 10).await.unwrap();
        assert_eq!(all.len(), 3, "{}", b.name);
        let mine = s.catalog(Some(std::slice::from_ref(&o)), None, 10).await.unwrap();
        assert_eq!(
            mine,
            vec![(o.to_string(), "app".into()), (o.to_string(), "second".into())]
        );
        let after = s
            .catalog(Some(std::slice::from_ref(&o)), Some((o.as_str(), "app")), 10)
            .await
            .unwrap();
        assert_eq!(after, vec![(o.to_string(), "second".into())], "{}", b.name);
        assert!(s.catalog(Some(&[]), None, 10).await.unwrap().is_empty());

        // Deleting the repos lets the group go.
        for uid in [&r.uid, &second.uid] {
            s.delete_repo(&Uidp::parse("u", uid).unwrap(), ward_store::testing::emit())
                .await
                .unwrap();
        }
        s.delete_group(&o, ward_store::testing::emit())
            .await
            .expect("empty group deletes");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn manifests_need_their_blobs_and_commit_with_their_tag() {
    for b in backends().await {
        let s = b.store.as_ref();
        let o = org(s).await;
        let r = repo(&o, "app");
        s.create_repo(&r, ward_store::testing::emit()).await.unwrap();
        let ru = Uidp::parse("u", &r.uid).unwrap();
        let (cfg, layer, m1, m2, idx) = (digest('a'), digest('b'), digest('c'), digest('d'), digest('e'));
        let links = ManifestLinks {
            blobs: vec![cfg.clone(), layer.clone()],
            blob_sizes: vec![10, 20],
            manifests: vec![],
        };
        // A missing blob refuses the manifest, and its tag with it.
        s.link_blob(&r.uid, &cfg, 10, T0).await.unwrap();
        let e = s
            .put_manifest(
                &manifest(&r.uid, &m1, None),
                &links,
                Some(&tag(&ru, "v1", &m1, T0)),
                testing::emit(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::NotFound { resource_type, name } if *resource_type == BLOB_TYPE && *name == layer),
            "{}: {e:?}",
            b.name
        );
        assert!(s.find_tag(&r.uid, "v1").await.unwrap().is_none(), "{}", b.name);
        assert!(s.get_manifest(&r.uid, &m1).await.unwrap().is_none());

        s.link_blob(&r.uid, &layer, 20, T0).await.unwrap();
        assert_eq!(s.repo_blob(&r.uid, &layer).await.unwrap(), Some(20));
        // A descriptor whose size is not its blob's refuses the manifest.
        let lying = ManifestLinks {
            blob_sizes: vec![10_000, 20],
            ..links.clone()
        };
        let e = s
            .put_manifest(
                &manifest(&r.uid, &m1, None),
                &lying,
                Some(&tag(&ru, "v1", &m1, T0)),
                testing::emit(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::FailedPrecondition(v) if v[0].kind == ward_store::registry::BLOB_SIZE_MISMATCH),
            "{}: {e:?}",
            b.name
        );
        assert!(s.get_manifest(&r.uid, &m1).await.unwrap().is_none(), "{}", b.name);
        let t = s
            .put_manifest(
                &manifest(&r.uid, &m1, None),
                &links,
                Some(&tag(&ru, "v1", &m1, T0)),
                testing::emit(),
            )
            .await
            .unwrap()
            .expect("tag");
        assert_eq!((t.name.as_str(), t.digest.as_str()), ("v1", m1.as_str()));
        let got = s.get_manifest(&r.uid, &m1).await.unwrap().expect("stored");
        assert_eq!((got.content.as_slice(), got.size), (b"{}".as_slice(), 2), "{}", b.name);
        // Idempotent by digest.
        s.put_manifest(&manifest(&r.uid, &m1, None), &links, None, testing::emit())
            .await
            .unwrap();

        // An index needs its children in the repo.
        let children = ManifestLinks {
            blobs: vec![],
            blob_sizes: vec![],
            manifests: vec![m1.clone(), m2.clone()],
        };
        let e = s
            .put_manifest(&manifest(&r.uid, &idx, None), &children, None, testing::emit())
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::NotFound { resource_type, .. } if *resource_type == MANIFEST_TYPE),
            "{e:?}"
        );

        // Referrers by subject (content omitted, size kept).
        s.put_manifest(&manifest(&r.uid, &m2, Some(&m1)), &links, None, testing::emit())
            .await
            .unwrap();
        let refs = s.referrers(&r.uid, &m1, 10).await.unwrap();
        assert_eq!(refs.len(), 1, "{}", b.name);
        assert_eq!(
            (refs[0].digest.as_str(), refs[0].size, refs[0].content.len()),
            (m2.as_str(), 2, 0)
        );

        // Tags: re-point keeps the uid; the same digest keeps the time.
        let again = s.put_tag(&tag(&ru, "v1", &m1, T0 + 50), testing::emit()).await.unwrap();
        assert_eq!(
            (again.uid.as_str(), again.update_time),
            (t.uid.as_str(), T0),
            "{}",
            b.name
        );
        let moved = s.put_tag(&tag(&ru, "v1", &m2, T0), testing::emit()).await.unwrap();
        assert_eq!(
            (moved.uid.as_str(), moved.update_time),
            (t.uid.as_str(), T0 + 1),
            "{}: forward",
            b.name
        );
        assert!(matches!(
            s.put_tag(&tag(&ru, "nope", &digest('f'), T0), testing::emit()).await,
            Err(Error::NotFound { resource_type, .. }) if resource_type == MANIFEST_TYPE
        ));
        for n in ["sha256-x.sig", "1-20240101", "1-r2", "latest"] {
            s.put_tag(&tag(&ru, n, &m1, T0), testing::emit()).await.unwrap();
        }
        let q = |hide: bool| ListQuery {
            uidp: ward_core::listing::UidpFilter {
                children_of: Some(ru.clone()),
                ..Default::default()
            },
            filters: if hide {
                vec![
                    ("is_referrer", FilterValue::Int(0)),
                    ("is_dated", FilterValue::Int(0)),
                    ("is_epoch", FilterValue::Int(0)),
                ]
            } else {
                vec![]
            },
            page_size: 50,
            ..Default::default()
        };
        assert_eq!(s.list_tags(&q(false)).await.unwrap().total_count, 5, "{}", b.name);
        let shown = s.list_tags(&q(true)).await.unwrap();
        let mut names: Vec<String> = shown.items.into_iter().map(|t| t.name).collect();
        names.sort();
        assert_eq!(names, ["latest", "v1"], "{}", b.name);
        assert_eq!(
            s.tag_names(&r.uid, Some("1-r2"), 2).await.unwrap(),
            ["latest", "sha256-x.sig"],
            "{}",
            b.name
        );

        // Deleting a manifest deletes the tags on it.
        assert!(s.delete_manifest(&r.uid, &m1).await.unwrap());
        assert!(s.find_tag(&r.uid, "latest").await.unwrap().is_none(), "{}", b.name);
        assert!(
            s.find_tag(&r.uid, "v1").await.unwrap().is_some(),
            "{}: v1 is on m2",
            b.name
        );
        assert!(!s.delete_manifest(&r.uid, &m1).await.unwrap());

        // GC: blobs stay while linked or named; an unlinked, unnamed one goes.
        s.link_blob(&r.uid, &digest('9'), 1, T0).await.unwrap();
        assert!(s.unlink_blob(&r.uid, &digest('9')).await.unwrap());
        assert!(!s.unlink_blob(&r.uid, &digest('9')).await.unwrap());
        assert!(s.unlink_blob(&r.uid, &layer).await.unwrap());
        let gone = s.unreferenced_blobs(T0 + 1, 100).await.unwrap();
        assert_eq!(gone, vec![digest('9')], "{}: the layer is still named by m2", b.name);
        assert!(
            s.unreferenced_blobs(T0, 100).await.unwrap().is_empty(),
            "{}: grace",
            b.name
        );
        assert!(s.forget_blob(&digest('9')).await.unwrap());
        assert!(!s.forget_blob(&layer).await.unwrap(), "{}", b.name);

        // Deleting the repo takes everything with it.
        s.delete_repo(&ru, ward_store::testing::emit()).await.unwrap();
        assert!(s.get_manifest(&r.uid, &m2).await.unwrap().is_none());
        assert!(s.find_tag(&r.uid, "v1").await.unwrap().is_none());
        assert!(matches!(
            s.delete_repo(&ru, ward_store::testing::emit()).await,
            Err(Error::NotFound { .. })
        ));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tag_history_records_each_move_and_goes_with_the_tag() {
    for b in backends().await {
        let s = b.store.as_ref();
        let o = org(s).await;
        let r = repo(&o, "app");
        s.create_repo(&r, ward_store::testing::emit()).await.unwrap();
        let ru = Uidp::parse("u", &r.uid).unwrap();
        let (m1, m2) = (digest('c'), digest('d'));
        let none = ManifestLinks::default();
        s.put_manifest(&manifest(&r.uid, &m2, None), &none, None, testing::emit())
            .await
            .unwrap();
        // Created by a push, moved, re-pointed at the same digest (not a
        // move), moved back.
        let t = s
            .put_manifest(
                &manifest(&r.uid, &m1, None),
                &none,
                Some(&tag(&ru, "v1", &m1, T0)),
                testing::emit(),
            )
            .await
            .unwrap()
            .expect("tag");
        let tu = Uidp::parse("u", &t.uid).unwrap();
        s.put_tag(&tag(&ru, "v1", &m2, T0 + 10), testing::emit()).await.unwrap();
        s.put_tag(&tag(&ru, "v1", &m2, T0 + 20), testing::emit()).await.unwrap();
        s.put_tag(&tag(&ru, "v1", &m1, T0 + 30), testing::emit()).await.unwrap();
        let all = s.tag_history(&tu, i64::MIN, i64::MAX, 1000).await.unwrap();
        let got: Vec<(i64, &str)> = all.iter().map(|h| (h.update_time, h.digest.as_str())).collect();
        assert_eq!(
            got,
            [(T0, m1.as_str()), (T0 + 10, m2.as_str()), (T0 + 30, m1.as_str())],
            "{}",
            b.name
        );
        // Inclusive time bounds, oldest first, at most `limit`.
        let mid = s.tag_history(&tu, T0 + 10, T0 + 30, 1000).await.unwrap();
        assert_eq!(mid.len(), 2, "{}", b.name);
        let first = s.tag_history(&tu, i64::MIN, i64::MAX, 1).await.unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].update_time, T0, "{}", b.name);

        // The history goes with the tag, however the tag goes.
        assert!(s.delete_tag(&tu, testing::emit()).await.unwrap());
        assert!(s.tag_history(&tu, i64::MIN, i64::MAX, 1000).await.unwrap().is_empty());
        let t2 = s.put_tag(&tag(&ru, "v2", &m2, T0), testing::emit()).await.unwrap();
        let t2u = Uidp::parse("u", &t2.uid).unwrap();
        assert_eq!(s.tag_history(&t2u, i64::MIN, i64::MAX, 1000).await.unwrap().len(), 1);
        assert!(s.delete_manifest(&r.uid, &m2).await.unwrap());
        assert!(
            s.tag_history(&t2u, i64::MIN, i64::MAX, 1000).await.unwrap().is_empty(),
            "{}",
            b.name
        );
    }
}

const CAPS: UploadCaps = UploadCaps {
    per_creator: 100,
    per_repo: 100,
    active_since: 0,
};

/// Each identity and each repo holds at most its cap of open sessions; a
/// finished one frees its slot.
#[tokio::test(flavor = "multi_thread")]
async fn upload_sessions_are_capped_per_creator_and_repo() {
    for b in backends().await {
        let s = b.store.as_ref();
        let o = org(s).await;
        let (r1, r2) = (repo(&o, "one"), repo(&o, "two"));
        s.create_repo(&r1, ward_store::testing::emit()).await.unwrap();
        s.create_repo(&r2, ward_store::testing::emit()).await.unwrap();
        let caps = UploadCaps {
            per_creator: 3,
            per_repo: 4,
            active_since: T0,
        };
        let session = |repo: &RepoRecord, i: usize| UploadRecord {
            uuid: format!("{i:032x}"),
            repo_uid: repo.uid.clone(),
            size: 0,
            create_time: T0,
            update_time: T0,
        };
        for i in 0..3 {
            s.create_upload(&session(&r1, i), "alice", caps).await.unwrap();
        }
        let e = s.create_upload(&session(&r2, 3), "alice", caps).await.unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)), "{}: {e:?}", b.name);
        assert!(
            s.get_upload(&format!("{:032x}", 3)).await.unwrap().is_none(),
            "{}",
            b.name
        );
        // Another identity still may, until the repo's own cap.
        s.create_upload(&session(&r1, 4), "bob", caps).await.unwrap();
        let e = s.create_upload(&session(&r1, 5), "bob", caps).await.unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)), "{}: {e:?}", b.name);
        s.create_upload(&session(&r2, 6), "bob", caps).await.unwrap();
        // A finished session gives its slot back.
        assert!(s.delete_upload(&format!("{:032x}", 0)).await.unwrap());
        s.create_upload(&session(&r2, 7), "alice", caps).await.unwrap();
        // Sessions untouched since before `active_since` no longer count.
        let later = UploadCaps {
            active_since: T0 + 1,
            ..caps
        };
        s.create_upload(&session(&r2, 8), "alice", later).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_advance_only_from_where_they_are() {
    for b in backends().await {
        let s = b.store.as_ref();
        let o = org(s).await;
        let r = repo(&o, "app");
        s.create_repo(&r, ward_store::testing::emit()).await.unwrap();
        let u = UploadRecord {
            uuid: "0123456789abcdef0123456789abcdef".into(),
            repo_uid: r.uid.clone(),
            size: 0,
            create_time: T0,
            update_time: T0,
        };
        s.create_upload(&u, "someone", CAPS).await.unwrap();
        assert!(s.advance_upload(&u.uuid, 0, 10, T0 + 1).await.unwrap());
        assert!(
            !s.advance_upload(&u.uuid, 0, 20, T0 + 2).await.unwrap(),
            "{}: stale offset",
            b.name
        );
        assert_eq!(s.get_upload(&u.uuid).await.unwrap().map(|x| x.size), Some(10));
        assert_eq!(s.stale_uploads(T0 + 2, 10).await.unwrap(), vec![u.uuid.clone()]);
        assert!(s.stale_uploads(T0 + 1, 10).await.unwrap().is_empty());
        assert!(s.delete_upload(&u.uuid).await.unwrap());
        assert!(!s.delete_upload(&u.uuid).await.unwrap());
        let mut orphan = u.clone();
        orphan.uuid = "fedcba9876543210fedcba9876543210".into();
        orphan.repo_uid = o.new_child().into();
        assert!(
            matches!(
                s.create_upload(&orphan, "someone", CAPS).await,
                Err(Error::NotFound { .. })
            ),
            "{}",
            b.name
        );
    }
}
