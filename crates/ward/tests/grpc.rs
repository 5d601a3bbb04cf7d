//! GroupsService over gRPC with a real tonic client on a socket: both packages
//! (`chainguard.platform.iam.v2` and `…v2beta1`), rich error details, agreement
//! with REST, and server reflection.

mod common;

use std::collections::BTreeSet;

use common::TestServer;
use pbjson_types::FieldMask;
use reqwest::StatusCode;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;
use ward_proto::common::UidpFilter;
use ward_proto::iam::v2::groups_service_client::GroupsServiceClient;
use ward_proto::iam::v2::{
    CreateGroupRequest, DeleteGroupRequest, GetGroupRequest, Group, ListGroupsRequest, UpdateGroupRequest,
};
use ward_proto::iam::v2beta1::groups_service_client::GroupsServiceClient as BetaGroupsServiceClient;

const DOMAIN: &str = "iam.chainguard.dev";
const GROUP_TYPE: &str = "iam.chainguard.dev/Group";

/// Adds `authorization: Bearer <token>` to every request (none when `None`).
#[derive(Clone)]
struct Bearer(Option<String>);

impl Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(t) = &self.0 {
            let value = format!("Bearer {t}").parse().expect("ascii token");
            req.metadata_mut().insert("authorization", value);
        }
        Ok(req)
    }
}

type V2 = GroupsServiceClient<InterceptedService<Channel, Bearer>>;
type Beta = BetaGroupsServiceClient<InterceptedService<Channel, Bearer>>;

async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", s.addr()))
        .expect("valid uri")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("[{}] connect: {e}", s.backend))
}

async fn v2(s: &TestServer) -> V2 {
    GroupsServiceClient::with_interceptor(channel(s).await, Bearer(Some(s.token.clone())))
}

async fn v2_as(s: &TestServer, token: Option<&str>) -> V2 {
    GroupsServiceClient::with_interceptor(channel(s).await, Bearer(token.map(str::to_owned)))
}

async fn beta(s: &TestServer) -> Beta {
    BetaGroupsServiceClient::with_interceptor(channel(s).await, Bearer(Some(s.token.clone())))
}

fn create_req(parent: &str, name: &str, description: &str) -> CreateGroupRequest {
    CreateGroupRequest {
        parent: parent.to_owned(),
        group: Some(Group {
            name: name.to_owned(),
            description: description.to_owned(),
            ..Default::default()
        }),
    }
}

async fn create(c: &mut V2, parent: &str, name: &str, description: &str) -> Group {
    c.create_group(create_req(parent, name, description))
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e:?}"))
        .into_inner()
}

async fn get(c: &mut V2, uid: &str) -> Result<Group, Status> {
    c.get_group(GetGroupRequest { uid: uid.to_owned() })
        .await
        .map(tonic::Response::into_inner)
}

/// Walks every page of a list with `page_size`, checking `total_count` on each
/// page; returns the uids in order and the number of pages.
async fn list_all(c: &mut V2, backend: &str, uidp: Option<UidpFilter>, page_size: i32) -> (Vec<String>, usize) {
    let mut uids = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    let mut total = None;
    loop {
        let resp = c
            .list_groups(ListGroupsRequest {
                uidp: uidp.clone(),
                page_size,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("[{backend}] list: {e:?}"))
            .into_inner();
        pages += 1;
        if page_size > 0 {
            assert!(
                resp.groups.len() <= page_size as usize,
                "[{backend}] page larger than page_size"
            );
        }
        let t = resp
            .total_count
            .unwrap_or_else(|| panic!("[{backend}] total_count is None"));
        if let Some(prev) = total {
            assert_eq!(prev, t, "[{backend}] total_count changed between pages");
        }
        total = Some(t);
        uids.extend(resp.groups.into_iter().map(|g| g.uid));
        if resp.next_page_token.is_empty() {
            break;
        }
        assert!(pages < 100, "[{backend}] runaway pagination");
        token = resp.next_page_token;
    }
    assert_eq!(
        total,
        Some(uids.len() as i64),
        "[{backend}] total_count vs items walked"
    );
    (uids, pages)
}

fn set(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

#[tokio::test]
async fn groups_crud_over_grpc_v2() {
    for s in common::servers().await {
        let b = s.backend;
        let mut c = v2(&s).await;

        let org = create(&mut c, "", "acme", "the org").await;
        assert_eq!(org.uid.len(), 40, "[{b}] root uid: {org:?}");
        assert_eq!(org.name, "acme");
        assert_eq!(org.description, "the org");
        assert!(
            org.create_time.is_some() && org.update_time.is_some(),
            "[{b}] times: {org:?}"
        );
        assert!(!org.verified);

        let team = create(&mut c, &org.uid, "team", "").await;
        assert!(
            team.uid.starts_with(&format!("{}/", org.uid)),
            "[{b}] child uid {} under {}",
            team.uid,
            org.uid
        );
        assert_eq!(team.uid.len(), 57);
        assert_eq!(team.name, "team");

        // Get returns exactly what create returned.
        assert_eq!(get(&mut c, &org.uid).await.expect("get org"), org, "[{b}]");
        assert_eq!(get(&mut c, &team.uid).await.expect("get team"), team, "[{b}]");

        // More children so pagination has several pages.
        let mut children = vec![team.uid.clone()];
        for i in 0..3 {
            children.push(create(&mut c, &org.uid, &format!("child-{i}"), "").await.uid);
        }
        let mut everything = children.clone();
        everything.push(org.uid.clone());

        let (all, pages) = list_all(&mut c, b, None, 2).await;
        assert_eq!(all.len(), 5, "[{b}] no duplicates across pages: {all:?}");
        assert_eq!(set(&all), set(&everything), "[{b}]");
        assert_eq!(pages, 3, "[{b}] 5 groups at 2 per page");

        let (one_page, pages) = list_all(&mut c, b, None, 0).await;
        assert_eq!(pages, 1, "[{b}] the default page size holds all 5");
        assert_eq!(set(&one_page), set(&everything));

        let children_only = UidpFilter {
            children_of: org.uid.clone(),
            ..Default::default()
        };
        let (kids, _) = list_all(&mut c, b, Some(children_only), 3).await;
        assert_eq!(set(&kids), set(&children), "[{b}] children_of");

        // An explicit mask changes only the masked field, though both are sent.
        let masked = c
            .update_group(UpdateGroupRequest {
                group: Some(Group {
                    uid: team.uid.clone(),
                    name: "ignored-name".into(),
                    description: "new description".into(),
                    ..Default::default()
                }),
                update_mask: Some(FieldMask {
                    paths: vec!["description".into()],
                }),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] masked update: {e:?}"))
            .into_inner();
        assert_eq!(masked.name, "team", "[{b}] name is outside the mask");
        assert_eq!(masked.description, "new description");
        assert_eq!(masked.uid, team.uid);
        assert_eq!(masked.create_time, team.create_time, "[{b}] create_time is immutable");
        assert!(masked.update_time >= team.update_time);
        assert_eq!(
            get(&mut c, &team.uid).await.expect("get"),
            masked,
            "[{b}] update persisted"
        );

        // No mask: the populated fields only (empty description is left alone).
        let renamed = c
            .update_group(UpdateGroupRequest {
                group: Some(Group {
                    uid: team.uid.clone(),
                    name: "team-renamed".into(),
                    ..Default::default()
                }),
                update_mask: None,
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] unmasked update: {e:?}"))
            .into_inner();
        assert_eq!(renamed.name, "team-renamed", "[{b}]");
        assert_eq!(
            renamed.description, "new description",
            "[{b}] empty field is not populated"
        );

        // An empty mask behaves like no mask.
        let redescribed = c
            .update_group(UpdateGroupRequest {
                group: Some(Group {
                    uid: team.uid.clone(),
                    description: "third".into(),
                    ..Default::default()
                }),
                update_mask: Some(FieldMask { paths: vec![] }),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] empty-mask update: {e:?}"))
            .into_inner();
        assert_eq!(redescribed.name, "team-renamed", "[{b}]");
        assert_eq!(redescribed.description, "third", "[{b}]");
        assert_eq!(get(&mut c, &team.uid).await.expect("get"), redescribed);

        // Delete the children, then the org.
        for uid in &children {
            c.delete_group(DeleteGroupRequest { uid: uid.clone() })
                .await
                .unwrap_or_else(|e| panic!("[{b}] delete {uid}: {e:?}"));
        }
        let st = get(&mut c, &team.uid).await.expect_err("deleted");
        assert_eq!(st.code(), Code::NotFound, "[{b}] {st:?}");
        c.delete_group(DeleteGroupRequest { uid: org.uid.clone() })
            .await
            .unwrap_or_else(|e| panic!("[{b}] delete org: {e:?}"));
        let (left, _) = list_all(&mut c, b, None, 10).await;
        assert!(left.is_empty(), "[{b}] everything deleted: {left:?}");
    }
}

#[tokio::test]
async fn v2beta1_package_serves_the_same_groups() {
    for s in common::servers().await {
        let b = s.backend;
        let mut bc = beta(&s).await;
        let mut c = v2(&s).await;

        let org = bc
            .create_group(create_req("", "beta-org", "made over v2beta1"))
            .await
            .unwrap_or_else(|e| panic!("[{b}] beta create: {e:?}"))
            .into_inner();
        let team = bc
            .create_group(create_req(&org.uid, "beta-team", ""))
            .await
            .unwrap_or_else(|e| panic!("[{b}] beta create child: {e:?}"))
            .into_inner();
        assert!(team.uid.starts_with(&org.uid));

        let got = bc
            .get_group(GetGroupRequest { uid: team.uid.clone() })
            .await
            .expect("beta get")
            .into_inner();
        assert_eq!(got, team, "[{b}]");
        // Same data behind both packages.
        assert_eq!(get(&mut c, &org.uid).await.expect("v2 get"), org, "[{b}]");

        let list = bc
            .list_groups(ListGroupsRequest {
                page_size: 1,
                ..Default::default()
            })
            .await
            .expect("beta list")
            .into_inner();
        assert_eq!(list.groups.len(), 1);
        assert_eq!(list.total_count, Some(2), "[{b}]");
        assert!(!list.next_page_token.is_empty());
        let next = bc
            .list_groups(ListGroupsRequest {
                page_size: 1,
                page_token: list.next_page_token.clone(),
                ..Default::default()
            })
            .await
            .expect("beta list page 2")
            .into_inner();
        assert_eq!(next.groups.len(), 1);
        assert!(next.next_page_token.is_empty(), "[{b}] two groups, two pages");
        assert_ne!(list.groups[0].uid, next.groups[0].uid);

        let updated = bc
            .update_group(UpdateGroupRequest {
                group: Some(Group {
                    uid: team.uid.clone(),
                    name: "not-this".into(),
                    description: "beta description".into(),
                    ..Default::default()
                }),
                update_mask: Some(FieldMask {
                    paths: vec!["description".into()],
                }),
            })
            .await
            .expect("beta update")
            .into_inner();
        assert_eq!(updated.name, "beta-team");
        assert_eq!(updated.description, "beta description");

        let st = bc
            .delete_group(DeleteGroupRequest { uid: org.uid.clone() })
            .await
            .expect_err("org has a child");
        assert_eq!(st.code(), Code::FailedPrecondition, "[{b}] {st:?}");

        bc.delete_group(DeleteGroupRequest { uid: team.uid.clone() })
            .await
            .expect("beta delete child");
        bc.delete_group(DeleteGroupRequest { uid: org.uid.clone() })
            .await
            .expect("beta delete org");
        let st = get(&mut c, &org.uid).await.expect_err("gone");
        assert_eq!(st.code(), Code::NotFound, "[{b}]");
    }
}

#[tokio::test]
async fn missing_or_bad_token_is_unauthenticated() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "acme").await;
        let uid = common::uid(&org);

        for token in [None, Some("not-a-jwt"), Some("")] {
            let mut c = v2_as(&s, token).await;
            let st = get(&mut c, &uid).await.expect_err("no valid token");
            assert_eq!(st.code(), Code::Unauthenticated, "[{b}] token {token:?}: {st:?}");
            let d = st.get_error_details();
            let info = d.error_info().unwrap_or_else(|| panic!("[{b}] ErrorInfo: {st:?}"));
            assert_eq!(info.reason, "UNAUTHENTICATED");
            assert_eq!(info.domain, DOMAIN);

            let st = c.list_groups(ListGroupsRequest::default()).await.expect_err("no token");
            assert_eq!(st.code(), Code::Unauthenticated, "[{b}] list {token:?}");
            let st = c.create_group(create_req("", "x", "")).await.expect_err("no token");
            assert_eq!(st.code(), Code::Unauthenticated, "[{b}] create {token:?}");
            let st = c
                .delete_group(DeleteGroupRequest { uid: uid.clone() })
                .await
                .expect_err("no token");
            assert_eq!(st.code(), Code::Unauthenticated, "[{b}] delete {token:?}");
        }
        // Nothing changed.
        let (status, _) = s.get(&format!("/iam/v2/groups/{uid}")).await;
        assert_eq!(status, StatusCode::OK);

        // A per-request header works as well as the interceptor.
        let mut plain = GroupsServiceClient::new(channel(&s).await);
        let mut req = Request::new(GetGroupRequest { uid: uid.clone() });
        req.metadata_mut()
            .insert("authorization", format!("Bearer {}", s.token).parse().unwrap());
        let g = plain
            .get_group(req)
            .await
            .unwrap_or_else(|e| panic!("[{b}] per-request auth: {e:?}"));
        assert_eq!(g.into_inner().name, "acme");
    }
}

#[tokio::test]
async fn invalid_name_is_invalid_argument_with_bad_request() {
    for s in common::servers().await {
        let b = s.backend;
        let mut c = v2(&s).await;
        for name in ["Not Valid!", "", "UPPER"] {
            let st = c
                .create_group(create_req("", name, ""))
                .await
                .expect_err("invalid name");
            assert_eq!(st.code(), Code::InvalidArgument, "[{b}] {name:?}: {st:?}");
            let d = st.get_error_details();
            let info = d.error_info().unwrap_or_else(|| panic!("[{b}] ErrorInfo in {st:?}"));
            assert_eq!(info.reason, "INVALID_ARGUMENT");
            assert_eq!(info.domain, DOMAIN);
            let br = d.bad_request().unwrap_or_else(|| panic!("[{b}] BadRequest in {st:?}"));
            let v = br
                .field_violations
                .iter()
                .find(|v| v.field == "name")
                .unwrap_or_else(|| panic!("[{b}] no violation for `name`: {br:?}"));
            assert!(v.description.contains("name must match"), "[{b}] {v:?}");
        }

        // A malformed uid names the `uid` field.
        let st = get(&mut c, "not-a-uidp").await.expect_err("bad uid");
        assert_eq!(st.code(), Code::InvalidArgument, "[{b}] {st:?}");
        let d = st.get_error_details();
        let br = d.bad_request().expect("BadRequest");
        assert!(br.field_violations.iter().any(|v| v.field == "uid"), "[{b}] {br:?}");

        // So does a malformed parent, alongside the name ("zzz" would be
        // looked up as a group name; "Z Z" cannot be one).
        let st = c
            .create_group(create_req("Z Z", "BAD", ""))
            .await
            .expect_err("bad parent");
        assert_eq!(st.code(), Code::InvalidArgument, "[{b}] {st:?}");
        let fields: BTreeSet<String> = st
            .get_error_details()
            .bad_request()
            .expect("BadRequest")
            .field_violations
            .iter()
            .map(|v| v.field.clone())
            .collect();
        assert!(fields.contains("parent") && fields.contains("name"), "[{b}] {fields:?}");

        // Nothing was created.
        let (all, _) = list_all(&mut c, b, None, 10).await;
        assert!(all.is_empty(), "[{b}] {all:?}");
    }
}

#[tokio::test]
async fn delete_with_child_is_failed_precondition() {
    for s in common::servers().await {
        let b = s.backend;
        let mut c = v2(&s).await;
        let org = create(&mut c, "", "acme", "").await;
        let team = create(&mut c, &org.uid, "team", "").await;

        let st = c
            .delete_group(DeleteGroupRequest { uid: org.uid.clone() })
            .await
            .expect_err("org has a child");
        assert_eq!(st.code(), Code::FailedPrecondition, "[{b}] {st:?}");
        assert!(
            st.message().contains("cannot delete group with child groups"),
            "[{b}] {st:?}"
        );
        let d = st.get_error_details();
        let info = d.error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "FAILED_PRECONDITION");
        assert_eq!(info.domain, DOMAIN);
        let pf = d
            .precondition_failure()
            .unwrap_or_else(|| panic!("[{b}] PreconditionFailure in {st:?}"));
        let v = pf
            .violations
            .iter()
            .find(|v| v.r#type == "RESOURCE_NOT_EMPTY")
            .unwrap_or_else(|| panic!("[{b}] RESOURCE_NOT_EMPTY in {pf:?}"));
        assert_eq!(v.subject, org.uid, "[{b}] the violation names the group");

        // Both still exist.
        assert_eq!(get(&mut c, &org.uid).await.expect("org kept"), org);
        assert_eq!(get(&mut c, &team.uid).await.expect("team kept"), team);
    }
}

#[tokio::test]
async fn missing_group_is_not_found_with_resource_info() {
    for s in common::servers().await {
        let b = s.backend;
        let mut c = v2(&s).await;
        let org = create(&mut c, "", "acme", "").await;
        let missing_root = ward_core::uidp::Uidp::new_root();
        let missing_child = format!("{}/0123456789abcdef", org.uid);
        for uid in [missing_root.as_str().to_owned(), missing_child] {
            let st = get(&mut c, &uid).await.expect_err("missing");
            assert_eq!(st.code(), Code::NotFound, "[{b}] {st:?}");
            let d = st.get_error_details();
            let info = d.error_info().expect("ErrorInfo");
            assert_eq!(info.reason, "NOT_FOUND");
            assert_eq!(info.domain, DOMAIN);
            let ri = d
                .resource_info()
                .unwrap_or_else(|| panic!("[{b}] ResourceInfo in {st:?}"));
            assert_eq!(ri.resource_type, GROUP_TYPE, "[{b}] {ri:?}");
            assert_eq!(ri.resource_name, uid, "[{b}] {ri:?}");

            // Update and delete of a missing group are NOT_FOUND too.
            let st = c
                .update_group(UpdateGroupRequest {
                    group: Some(Group {
                        uid: uid.clone(),
                        description: "x".into(),
                        ..Default::default()
                    }),
                    update_mask: None,
                })
                .await
                .expect_err("update missing");
            assert_eq!(st.code(), Code::NotFound, "[{b}] update: {st:?}");
            let st = c
                .delete_group(DeleteGroupRequest { uid: uid.clone() })
                .await
                .expect_err("delete missing");
            assert_eq!(st.code(), Code::NotFound, "[{b}] delete: {st:?}");
        }
        // A child under a missing parent cannot be created.
        let st = c
            .create_group(create_req(missing_root.as_str(), "orphan", ""))
            .await
            .expect_err("missing parent");
        assert_eq!(st.code(), Code::NotFound, "[{b}] {st:?}");
    }
}

#[tokio::test]
async fn grpc_and_rest_see_the_same_groups() {
    for s in common::servers().await {
        let b = s.backend;
        let mut c = v2(&s).await;
        let org = create(&mut c, "", "acme", "made over grpc").await;
        let team = create(&mut c, &org.uid, "team", "child over grpc").await;

        for g in [&org, &team] {
            for version in ["v2", "v2beta1"] {
                let (status, body) = s.get(&format!("/iam/{version}/groups/{}", g.uid)).await;
                assert_eq!(status, StatusCode::OK, "[{b}] {body}");
                // The gRPC message in proto3 JSON is exactly the REST body.
                let expected = serde_json::to_value(g).expect("json");
                assert_eq!(body, expected, "[{b}] {version}");
                assert_eq!(body["uid"], g.uid.as_str());
                assert_eq!(body["name"], g.name.as_str());
                assert_eq!(body["description"], g.description.as_str());
            }
        }

        // And the other way round: REST-made groups read the same over gRPC.
        let rest = s.create_group(Some(&org.uid), "over-rest").await;
        let got = get(&mut c, &common::uid(&rest))
            .await
            .expect("grpc get of a REST group");
        assert_eq!(serde_json::to_value(&got).unwrap(), rest, "[{b}]");

        // An update over REST is seen over gRPC, and vice versa.
        let (status, body) = s
            .patch(
                &format!("/iam/v2/groups/{}?update_mask=description", team.uid),
                serde_json::json!({ "description": "changed over rest" }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        let got = get(&mut c, &team.uid).await.expect("get");
        assert_eq!(got.description, "changed over rest");
        assert_eq!(serde_json::to_value(&got).unwrap(), body, "[{b}]");

        let (status, list) = s.get(&format!("/iam/v2/groups?uidp.children_of={}", org.uid)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["groups"].as_array().map(Vec::len), Some(2), "[{b}] {list}");
    }
}

#[tokio::test]
async fn reflection_lists_both_groups_services() {
    use tonic::codegen::tokio_stream;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    for s in common::servers().await {
        let b = s.backend;
        let mut rc = ServerReflectionClient::new(channel(&s).await);
        let req = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut stream = rc
            .server_reflection_info(tokio_stream::iter(vec![req]))
            .await
            .unwrap_or_else(|e| panic!("[{b}] reflection: {e:?}"))
            .into_inner();
        let resp = stream.message().await.expect("reflection reply").expect("one reply");
        let names: BTreeSet<String> = match resp.message_response {
            Some(MessageResponse::ListServicesResponse(l)) => l.service.into_iter().map(|s| s.name).collect(),
            other => panic!("[{b}] unexpected reflection reply {other:?}"),
        };
        for want in [
            "chainguard.platform.iam.v2.GroupsService",
            "chainguard.platform.iam.v2beta1.GroupsService",
        ] {
            assert!(names.contains(want), "[{b}] {want} missing from {names:?}");
        }

        // The descriptors resolve too: the v2beta1 service's file is served.
        let req = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol(
                "chainguard.platform.iam.v2beta1.GroupsService".into(),
            )),
        };
        let mut stream = rc
            .server_reflection_info(tokio_stream::iter(vec![req]))
            .await
            .expect("reflection")
            .into_inner();
        let resp = stream.message().await.expect("reply").expect("one reply");
        match resp.message_response {
            Some(MessageResponse::FileDescriptorResponse(f)) => {
                assert!(!f.file_descriptor_proto.is_empty(), "[{b}] empty descriptor set")
            }
            other => panic!("[{b}] unexpected reflection reply {other:?}"),
        }
    }
}
