//! AccountAssociationsService: CRUD over REST and gRPC (v2 and v2beta1),
//! validation of every provider section, one association per group (whose
//! uid it takes), `CheckAccountAssociation`, deletion with the group,
//! authorization, and AIP-134 masks. Every test runs once per backend.

mod common;

use std::collections::HashMap;

use common::{Bearer, TestServer, assert_error, enc, field_violations, person, total_count, uid};
use pbjson_types::FieldMask;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use ward_proto::common::UidpFilter;
use ward_proto::iam::v2::account_association::git_hub::{Installation, Installations};
use ward_proto::iam::v2::account_association::{Amazon, Azure, Chainguard, GitHub, Google};
use ward_proto::iam::v2::account_associations_service_client::AccountAssociationsServiceClient;
use ward_proto::iam::v2::check_account_association_response::CheckStatus;
use ward_proto::iam::v2::{
    AccountAssociation, AccountProviderType, CheckAccountAssociationRequest, CreateAccountAssociationRequest,
    DeleteAccountAssociationRequest, GetAccountAssociationRequest, ListAccountAssociationsRequest,
    UpdateAccountAssociationRequest,
};
use ward_proto::iam::v2beta1::account_associations_service_client::AccountAssociationsServiceClient as BetaClient;

const AA: &str = "/iam/v2/accountAssociations";
const AA_BETA: &str = "/iam/v2beta1/accountAssociations";
const GUID_A: &str = "0b6a1e3c-5d2f-4a7b-9c8d-1e2f3a4b5c6d";
const GUID_B: &str = "A1B2C3D4-E5F6-4789-ABCD-EF0123456789";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// An int64 as proto3 JSON writes it (a decimal string), or a number.
fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("not an int64: {v}")),
        other => other.as_i64().unwrap_or_else(|| panic!("not an int64: {other}")),
    }
}

/// Creates a claim-match identity directly in `group`; its uid.
async fn identity(s: &TestServer, group: &str, name: &str) -> String {
    let (status, body) = s
        .post(
            &format!("/iam/v2/identities/{group}"),
            json!({
                "name": name,
                "claimMatch": { "issuer": "https://issuer.example.com", "subject": format!("sub-{name}") },
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "[{}] create identity {name}: {body}", s.backend);
    uid(&body)
}

/// An association with every section; `bound` is the identity its
/// CATALOG_SYNCER binding names.
fn full_body(name: &str, bound: &str) -> Value {
    json!({
        "name": name,
        "description": "every provider",
        "amazon": { "account": "123456789012" },
        "google": { "projectId": "my-project-1", "projectNumber": "123456789" },
        "azure": { "tenantId": GUID_A, "clientIds": { "CATALOG_SYNCER": GUID_B } },
        "chainguard": { "serviceBindings": { "CATALOG_SYNCER": bound } },
        "github": { "appInstallations": { "12345": { "installations": [
            { "installationId": "42", "name": "acme" },
        ] } } },
    })
}

/// Creates an association in `group` as the admin; panics unless it is.
async fn create_ok(s: &TestServer, group: &str, body: Value) -> Value {
    let (status, got) = s.post(&format!("{AA}/{group}"), body).await;
    assert_eq!(status, StatusCode::OK, "[{}] create in {group}: {got}", s.backend);
    got
}

/// 400 with a BadRequest violation naming `field`.
fn assert_invalid(ctx: &str, status: StatusCode, body: &Value, field: &str) {
    assert_error(ctx, status, body, 400, 3, "INVALID_ARGUMENT");
    let v = field_violations(body);
    assert!(
        v.iter().any(|(f, _)| f == field),
        "{ctx}: expected a violation for {field:?}; body: {body}"
    );
}

type Client = AccountAssociationsServiceClient<InterceptedService<Channel, Bearer>>;

async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(format!("http://{}", s.addr()))
        .expect("valid uri")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("[{}] gRPC connect: {e}", s.backend))
}

async fn client(s: &TestServer, token: &str) -> Client {
    AccountAssociationsServiceClient::with_interceptor(channel(s).await, Bearer(token.to_owned()))
}

// ---------------------------------------------------------------------------
// CRUD
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_over_rest() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "org").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let sa = identity(&s, &team, "syncer").await;

        let created = create_ok(&s, &team, full_body("team-accounts", &sa)).await;
        assert_eq!(created["uid"], team, "[{b}] the uid is the group's: {created}");
        assert_eq!(created["name"], "team-accounts", "[{b}]");
        assert_eq!(created["description"], "every provider", "[{b}]");
        assert_eq!(created["amazon"]["account"], "123456789012", "[{b}]");
        assert_eq!(created["google"]["projectId"], "my-project-1", "[{b}]");
        assert_eq!(created["google"]["projectNumber"], "123456789", "[{b}]");
        assert_eq!(created["azure"]["tenantId"], GUID_A, "[{b}]");
        assert_eq!(created["azure"]["clientIds"]["CATALOG_SYNCER"], GUID_B, "[{b}]");
        assert_eq!(created["chainguard"]["serviceBindings"]["CATALOG_SYNCER"], sa, "[{b}]");
        let inst = &created["github"]["appInstallations"]["12345"]["installations"][0];
        assert_eq!(int(&inst["installationId"]), 42, "[{b}] {created}");
        assert_eq!(inst["name"], "acme", "[{b}]");
        assert!(
            created["createTime"].is_string() && created["updateTime"].is_string(),
            "[{b}] {created}"
        );

        // Both versions read the same thing.
        for base in [AA, AA_BETA] {
            let (status, got) = s.get(&format!("{base}/{team}")).await;
            assert_eq!(status, StatusCode::OK, "[{b}] GET {base}: {got}");
            assert_eq!(got, created, "[{b}] GET {base}");
        }

        // Listing, with and without filters.
        let (status, page) = s.get(AA).await;
        assert_eq!(status, StatusCode::OK, "[{b}] list: {page}");
        assert_eq!(total_count(&page), 1, "[{b}] {page}");
        assert_eq!(page["accountAssociations"][0], created, "[{b}]");
        for (q, want) in [
            (format!("uidp.descendants_of={}", enc(&org)), 1),
            (format!("uidp.ids={}", enc(&team)), 1),
            (format!("uidp.ids={}", enc(&org)), 0),
            ("name=team-accounts".to_owned(), 1),
            ("name=other".to_owned(), 0),
        ] {
            let (status, page) = s.get(&format!("{AA_BETA}?{q}")).await;
            assert_eq!(status, StatusCode::OK, "[{b}] list ?{q}: {page}");
            assert_eq!(total_count(&page), want, "[{b}] list ?{q}: {page}");
        }
        let (status, body) = s.get(&format!("{AA}?nonsense=1")).await;
        assert_error(b, status, &body, 400, 3, "INVALID_ARGUMENT");

        // Update: the mask decides; other fields in the body are ignored.
        let (status, updated) = s
            .patch(
                &format!("{AA}/{team}?update_mask=description"),
                json!({ "description": "changed", "name": "ignored" }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] PATCH: {updated}");
        assert_eq!(updated["description"], "changed", "[{b}]");
        assert_eq!(updated["name"], "team-accounts", "[{b}]");
        assert_eq!(updated["amazon"], created["amazon"], "[{b}]");
        assert_eq!(updated["createTime"], created["createTime"], "[{b}]");

        // Delete; then it is gone, and deleting again succeeds (idempotent).
        let (status, body) = s.delete(&format!("{AA}/{team}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] DELETE: {body}");
        assert_eq!(body, json!({}), "[{b}]");
        let (status, body) = s.get(&format!("{AA}/{team}")).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        let (status, body) = s.delete(&format!("{AA}/{team}")).await;
        assert_eq!((status, &body), (StatusCode::OK, &json!({})), "[{b}] a second DELETE");
        let (status, body) = s
            .patch(
                &format!("{AA}/{team}?update_mask=description"),
                json!({ "description": "x" }),
            )
            .await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");

        // The group can have one again.
        create_ok(&s, &team, json!({ "name": "again" })).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_over_grpc() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "org").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let sa = identity(&s, &team, "syncer").await;
        let mut c = client(&s, &s.token).await;
        let mut beta = BetaClient::with_interceptor(channel(&s).await, Bearer(s.token.clone()));

        let mut apps = HashMap::new();
        apps.insert(
            7_i64,
            Installations {
                installations: vec![Installation {
                    installation_id: 99,
                    name: "acme".into(),
                }],
            },
        );
        let want = AccountAssociation {
            name: "grpc-accounts".into(),
            description: "made over gRPC".into(),
            amazon: Some(Amazon {
                account: "000000000001".into(),
            }),
            google: Some(Google {
                project_id: "proj-abcdef".into(),
                project_number: "42".into(),
            }),
            chainguard: Some(Chainguard {
                service_bindings: HashMap::from([("APKO_BUILDER".to_owned(), sa.clone())]),
            }),
            azure: None,
            github: Some(GitHub {
                app_installations: apps,
            }),
            ..Default::default()
        };
        let created = c
            .create_account_association(CreateAccountAssociationRequest {
                parent: team.clone(),
                account_association: Some(want.clone()),
            })
            .await
            .unwrap_or_else(|e| panic!("[{b}] create: {e:?}"))
            .into_inner();
        assert_eq!(created.uid, team, "[{b}]");
        assert_eq!(created.name, want.name, "[{b}]");
        assert_eq!(created.amazon, want.amazon, "[{b}]");
        assert_eq!(created.google, want.google, "[{b}]");
        assert_eq!(created.chainguard, want.chainguard, "[{b}]");
        assert_eq!(created.github, want.github, "[{b}]");
        assert!(
            created.azure.is_none() && created.create_time.is_some(),
            "[{b}] {created:?}"
        );

        // A second one in the same group: ALREADY_EXISTS.
        let again = c
            .create_account_association(CreateAccountAssociationRequest {
                parent: team.clone(),
                account_association: Some(want.clone()),
            })
            .await
            .expect_err("one per group");
        assert_eq!(again.code(), Code::AlreadyExists, "[{b}] {again:?}");

        let get = GetAccountAssociationRequest { uid: team.clone() };
        let got = c.get_account_association(get.clone()).await.expect("get").into_inner();
        assert_eq!(got, created, "[{b}] v2 get");
        let got = beta.get_account_association(get).await.expect("beta get").into_inner();
        assert_eq!(got, created, "[{b}] v2beta1 get");

        // REST sees what gRPC made.
        let (status, json) = s.get(&format!("{AA}/{team}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {json}");
        assert_eq!(json["chainguard"]["serviceBindings"]["APKO_BUILDER"], sa, "[{b}]");
        assert_eq!(
            int(&json["github"]["appInstallations"]["7"]["installations"][0]["installationId"]),
            99
        );

        let page = c
            .list_account_associations(ListAccountAssociationsRequest {
                uidp: Some(UidpFilter {
                    descendants_of: org.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner();
        assert_eq!(page.total_count, Some(1), "[{b}]");
        assert_eq!(page.account_associations, vec![created.clone()], "[{b}]");

        // Update with a mask: only azure changes.
        let updated = c
            .update_account_association(UpdateAccountAssociationRequest {
                account_association: Some(AccountAssociation {
                    uid: team.clone(),
                    name: "not applied".into(),
                    azure: Some(Azure {
                        tenant_id: GUID_A.into(),
                        client_ids: HashMap::new(),
                    }),
                    ..Default::default()
                }),
                update_mask: Some(FieldMask {
                    paths: vec!["azure".into()],
                }),
            })
            .await
            .expect("update")
            .into_inner();
        assert_eq!(updated.name, "grpc-accounts", "[{b}]");
        assert_eq!(
            updated.azure.as_ref().map(|a| a.tenant_id.as_str()),
            Some(GUID_A),
            "[{b}]"
        );
        assert_eq!(updated.amazon, created.amazon, "[{b}]");
        assert_eq!(updated.github, created.github, "[{b}]");

        // Without a mask over gRPC: the populated fields.
        let updated = c
            .update_account_association(UpdateAccountAssociationRequest {
                account_association: Some(AccountAssociation {
                    uid: team.clone(),
                    description: "populated".into(),
                    ..Default::default()
                }),
                update_mask: None,
            })
            .await
            .expect("update")
            .into_inner();
        assert_eq!(updated.description, "populated", "[{b}]");
        assert!(updated.amazon.is_some() && updated.azure.is_some(), "[{b}] {updated:?}");

        // Invalid input is INVALID_ARGUMENT over gRPC too.
        let bad = c
            .update_account_association(UpdateAccountAssociationRequest {
                account_association: Some(AccountAssociation {
                    uid: team.clone(),
                    amazon: Some(Amazon {
                        account: "12345".into(),
                    }),
                    ..Default::default()
                }),
                update_mask: Some(FieldMask {
                    paths: vec!["amazon".into()],
                }),
            })
            .await
            .expect_err("bad account");
        assert_eq!(bad.code(), Code::InvalidArgument, "[{b}] {bad:?}");

        c.delete_account_association(DeleteAccountAssociationRequest { uid: team.clone() })
            .await
            .expect("delete");
        let gone = c
            .get_account_association(GetAccountAssociationRequest { uid: team.clone() })
            .await
            .expect_err("deleted");
        assert_eq!(gone.code(), Code::NotFound, "[{b}]");
        // Deleting again succeeds, like every other delete (v2beta1 too).
        beta.delete_account_association(DeleteAccountAssociationRequest { uid: team.clone() })
            .await
            .expect("a second delete is idempotent");
    }
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "org").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let other = uid(&s.create_group(Some(&org), "other").await);
        let mine = identity(&s, &team, "mine").await;
        let theirs = identity(&s, &other, "theirs").await;
        let at_org = identity(&s, &org, "at-org").await;
        // A well-formed uid directly in the group that names no identity.
        let ghost = format!("{team}/0123456789abcdef");

        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "short AWS account",
                json!({ "name": "a", "amazon": { "account": "12345" } }),
                "amazon.account",
            ),
            (
                "AWS account with letters",
                json!({ "name": "a", "amazon": { "account": "12345678901a" } }),
                "amazon.account",
            ),
            (
                "empty AWS account",
                json!({ "name": "a", "amazon": {} }),
                "amazon.account",
            ),
            (
                "bad tenant GUID",
                json!({ "name": "a", "azure": { "tenantId": "not-a-guid" } }),
                "azure.tenant_id",
            ),
            (
                "GUID without hyphens",
                json!({ "name": "a", "azure": { "tenantId": "0b6a1e3c5d2f4a7b9c8d1e2f3a4b5c6d" } }),
                "azure.tenant_id",
            ),
            (
                "bad client id",
                json!({ "name": "a", "azure": { "tenantId": GUID_A, "clientIds": { "app": "nope" } } }),
                "azure.client_ids[app]",
            ),
            (
                "missing project number",
                json!({ "name": "a", "google": { "projectId": "my-project-1" } }),
                "google.project_number",
            ),
            (
                "bad project id",
                json!({ "name": "a", "google": { "projectId": "My_Project", "projectNumber": "1" } }),
                "google.project_id",
            ),
            (
                "project number with letters",
                json!({ "name": "a", "google": { "projectId": "my-project-1", "projectNumber": "12a" } }),
                "google.project_number",
            ),
            (
                "unknown service principal",
                json!({ "name": "a", "chainguard": { "serviceBindings": { "NOT_A_SERVICE": mine } } }),
                "chainguard.service_bindings[NOT_A_SERVICE]",
            ),
            (
                "prefixed service principal name",
                json!({ "name": "a", "chainguard": { "serviceBindings": { "SERVICE_PRINCIPAL_CATALOG_SYNCER": mine } } }),
                "chainguard.service_bindings[SERVICE_PRINCIPAL_CATALOG_SYNCER]",
            ),
            (
                "UNSPECIFIED service principal",
                json!({ "name": "a", "chainguard": { "serviceBindings": { "UNSPECIFIED": mine } } }),
                "chainguard.service_bindings[UNSPECIFIED]",
            ),
            (
                "binding to an identity in another group",
                json!({ "name": "a", "chainguard": { "serviceBindings": { "CATALOG_SYNCER": theirs } } }),
                "chainguard.service_bindings[CATALOG_SYNCER]",
            ),
            (
                "binding to an identity of an ancestor",
                json!({ "name": "a", "chainguard": { "serviceBindings": { "CATALOG_SYNCER": at_org } } }),
                "chainguard.service_bindings[CATALOG_SYNCER]",
            ),
            (
                "binding to no identity",
                json!({ "name": "a", "chainguard": { "serviceBindings": { "CATALOG_SYNCER": ghost } } }),
                "chainguard.service_bindings[CATALOG_SYNCER]",
            ),
            (
                "binding to a non-UIDP",
                json!({ "name": "a", "chainguard": { "serviceBindings": { "CATALOG_SYNCER": "someone" } } }),
                "chainguard.service_bindings[CATALOG_SYNCER]",
            ),
            (
                "installation id 0",
                json!({ "name": "a", "github": { "appInstallations": { "5": { "installations": [
                    { "installationId": "0", "name": "x" } ] } } } }),
                "github.app_installations[5].installations[0].installation_id",
            ),
            (
                "negative app id",
                json!({ "name": "a", "github": { "appInstallations": { "-5": { "installations": [] } } } }),
                "github.app_installations[-5]",
            ),
            ("empty name", json!({ "name": "" }), "name"),
            ("long name", json!({ "name": "n".repeat(64) }), "name"),
            ("upper-case name", json!({ "name": "Accounts" }), "name"),
        ];
        for (what, body, field) in cases {
            let ctx = format!("[{b}] {what}");
            let (status, got) = s.post(&format!("{AA}/{team}"), body).await;
            assert_invalid(&ctx, status, &got, field);
        }

        // Bounds on the maps.
        let many: serde_json::Map<String, Value> = (0..17)
            .map(|i| (format!("app{i}"), Value::String(GUID_A.into())))
            .collect();
        let (status, got) = s
            .post(
                &format!("{AA}/{team}"),
                json!({ "name": "a", "azure": { "tenantId": GUID_A, "clientIds": many } }),
            )
            .await;
        assert_invalid(&format!("[{b}] 17 client ids"), status, &got, "azure.client_ids");
        let installations: Vec<Value> = (1..=101)
            .map(|i| json!({ "installationId": i.to_string(), "name": "x" }))
            .collect();
        let (status, got) = s
            .post(
                &format!("{AA}/{team}"),
                json!({ "name": "a", "github": { "appInstallations": { "1": { "installations": installations } } } }),
            )
            .await;
        assert_invalid(
            &format!("[{b}] 101 installations"),
            status,
            &got,
            "github.app_installations[1]",
        );
        let (status, got) = s
            .post(
                &format!("{AA}/{team}"),
                json!({ "name": "a", "github": { "appInstallations": { "1": { "installations": [
                    { "installationId": "1", "name": "x".repeat(101) } ] } } } }),
            )
            .await;
        assert_invalid(
            &format!("[{b}] long installation name"),
            status,
            &got,
            "github.app_installations[1].installations[0].name",
        );

        // A bad parent.
        let (status, got) = s.post(&format!("{AA}/not-a-uidp"), json!({ "name": "a" })).await;
        assert_invalid(&format!("[{b}] bad parent"), status, &got, "parent");

        // Nothing was created by any of it.
        let (status, got) = s.get(&format!("{AA}/{team}")).await;
        assert_error(b, status, &got, 404, 5, "NOT_FOUND");

        // A binding to an identity directly in the group is accepted, and so
        // is an association with no provider at all (in another group).
        let ok = create_ok(
            &s,
            &team,
            json!({ "name": "a", "chainguard": { "serviceBindings": { "CATALOG_SYNCER": mine, "INGESTER": mine } } }),
        )
        .await;
        assert_eq!(ok["chainguard"]["serviceBindings"]["INGESTER"], mine, "[{b}] {ok}");
        create_ok(&s, &other, json!({ "name": "empty" })).await;

        // Updates are checked the same way, and change nothing when refused.
        let (status, got) = s
            .patch(
                &format!("{AA}/{team}?update_mask=chainguard"),
                json!({ "chainguard": { "serviceBindings": { "CATALOG_SYNCER": theirs } } }),
            )
            .await;
        assert_invalid(
            &format!("[{b}] update binding to another group"),
            status,
            &got,
            "chainguard.service_bindings[CATALOG_SYNCER]",
        );
        let (status, got) = s
            .patch(&format!("{AA}/{team}?update_mask=name"), json!({ "name": "" }))
            .await;
        assert_invalid(&format!("[{b}] update to an empty name"), status, &got, "name");
        let (status, got) = s
            .patch(
                &format!("{AA}/{team}?update_mask=amazon.account"),
                json!({ "amazon": { "account": "1" } }),
            )
            .await;
        assert_invalid(&format!("[{b}] sub-field mask"), status, &got, "update_mask");
        let (status, got) = s.get(&format!("{AA}/{team}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {got}");
        assert_eq!(got, ok, "[{b}] unchanged by refused updates");
    }
}

// ---------------------------------------------------------------------------
// One per group; gone with the group
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_per_group_and_gone_with_it() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "org").await);
        let team = uid(&s.create_group(Some(&org), "team").await);

        create_ok(
            &s,
            &team,
            json!({ "name": "first", "amazon": { "account": "123456789012" } }),
        )
        .await;
        let (status, got) = s.post(&format!("{AA}/{team}"), json!({ "name": "second" })).await;
        assert_error(b, status, &got, 409, 6, "ALREADY_EXISTS");
        let (status, got) = s.post(&format!("{AA_BETA}/{team}"), json!({ "name": "second" })).await;
        assert_error(b, status, &got, 409, 6, "ALREADY_EXISTS");
        let (status, got) = s.get(&format!("{AA}/{team}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {got}");
        assert_eq!(got["name"], "first", "[{b}] the first one stays");

        // The organization itself may have one of its own.
        create_ok(&s, &org, json!({ "name": "org-wide" })).await;
        let (status, page) = s.get(&format!("{AA}?uidp.descendants_of={}", enc(&org))).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {page}");
        assert_eq!(total_count(&page), 2, "[{b}] {page}");

        // A group that does not exist: NOT_FOUND.
        let missing = format!("{org}/fedcba9876543210");
        let (status, got) = s.post(&format!("{AA}/{missing}"), json!({ "name": "x" })).await;
        assert_error(b, status, &got, 404, 5, "NOT_FOUND");

        // Deleting the group deletes its association (it does not hold the
        // group back).
        let (status, got) = s.delete(&format!("/iam/v2/groups/{team}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] delete group: {got}");
        let (status, got) = s.get(&format!("{AA}/{team}")).await;
        assert_error(b, status, &got, 404, 5, "NOT_FOUND");
        let (status, page) = s.get(&format!("{AA}?uidp.descendants_of={}", enc(&org))).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {page}");
        assert_eq!(total_count(&page), 1, "[{b}] only the organization's is left: {page}");
    }
}

// ---------------------------------------------------------------------------
// CheckAccountAssociation
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_not_configured_or_not_checked() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "org").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let bare = uid(&s.create_group(Some(&org), "bare").await);
        create_ok(
            &s,
            &team,
            json!({ "name": "a", "amazon": { "account": "123456789012" }, "azure": { "tenantId": GUID_A } }),
        )
        .await;

        for base in [AA, AA_BETA] {
            let path = format!("{base}/{team}:checkAccountAssociation");
            for (provider, reason, mentions) in [
                ("ACCOUNT_PROVIDER_TYPE_AMAZON", "not checked", "AWS"),
                ("ACCOUNT_PROVIDER_TYPE_AZURE", "not checked", "Azure"),
                ("ACCOUNT_PROVIDER_TYPE_GOOGLE", "not configured", "google"),
            ] {
                let ctx = format!("[{b}] POST {path} {provider}");
                let (status, got) = s.post(&path, json!({ "providerType": provider })).await;
                assert_eq!(status, StatusCode::OK, "{ctx}: {got}");
                assert_eq!(got["status"], "CHECK_STATUS_NOT_READY", "{ctx}: {got}");
                assert_eq!(got["reason"], reason, "{ctx}: {got}");
                let message = got["message"].as_str().unwrap_or_default();
                assert!(message.contains(mentions), "{ctx}: {got}");
            }
            let (status, got) = s.post(&path, json!({})).await;
            assert_invalid(&format!("[{b}] {path} unspecified"), status, &got, "provider_type");
            let (status, got) = s
                .post(
                    &format!("{base}/{bare}:checkAccountAssociation"),
                    json!({ "providerType": "ACCOUNT_PROVIDER_TYPE_AMAZON" }),
                )
                .await;
            assert_error(b, status, &got, 404, 5, "NOT_FOUND");
        }
        // An unknown verb on an association is not a create.
        let (status, got) = s.post(&format!("{AA}/{bare}:frobnicate"), json!({ "name": "x" })).await;
        assert!(
            status.is_client_error() || status == StatusCode::NOT_IMPLEMENTED,
            "[{b}] {status}: {got}"
        );
        let (status, _) = s.get(&format!("{AA}/{bare}")).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "[{b}] nothing created by the unknown verb"
        );

        // Over gRPC.
        let mut c = client(&s, &s.token).await;
        let check = |uid: &str, p: AccountProviderType| CheckAccountAssociationRequest {
            uid: uid.to_owned(),
            provider_type: p as i32,
        };
        let got = c
            .check_account_association(check(team.as_str(), AccountProviderType::Amazon))
            .await
            .expect("check")
            .into_inner();
        assert_eq!(got.status, CheckStatus::NotReady as i32, "[{b}] {got:?}");
        assert_eq!(got.reason, "not checked", "[{b}]");
        let got = c
            .check_account_association(check(team.as_str(), AccountProviderType::Google))
            .await
            .expect("check")
            .into_inner();
        assert_eq!(got.reason, "not configured", "[{b}]");
        let e = c
            .check_account_association(check(team.as_str(), AccountProviderType::Unspecified))
            .await
            .expect_err("unspecified");
        assert_eq!(e.code(), Code::InvalidArgument, "[{b}] {e:?}");
        let e = c
            .check_account_association(check(bare.as_str(), AccountProviderType::Azure))
            .await
            .expect_err("no association");
        assert_eq!(e.code(), Code::NotFound, "[{b}] {e:?}");
    }
}

// ---------------------------------------------------------------------------
// Authorization
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_read_strangers_see_nothing() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "org").await);
        let team = uid(&s.create_group(Some(&org), "team").await);
        let org2 = uid(&s.create_group(None, "org2").await);
        let created = create_ok(
            &s,
            &team,
            json!({ "name": "a", "amazon": { "account": "123456789012" } }),
        )
        .await;
        let (_, viewer) = person(&s, "vera", &[(org.as_str(), "viewer")]).await;
        let (_, stranger) = person(&s, "oscar", &[(org2.as_str(), "owner")]).await;
        let (_, owner) = person(&s, "olive", &[(org.as_str(), "owner")]).await;

        let item = format!("{AA}/{team}");
        let check = format!("{item}:checkAccountAssociation");
        let amazon = json!({ "providerType": "ACCOUNT_PROVIDER_TYPE_AMAZON" });

        // The viewer reads, lists and checks, but changes nothing.
        let (status, got) = s.call_as(&viewer, Method::GET, &item, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] viewer get: {got}");
        assert_eq!(got, created, "[{b}]");
        let (status, page) = s.call_as(&viewer, Method::GET, AA, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] viewer list: {page}");
        assert_eq!(total_count(&page), 1, "[{b}] {page}");
        let (status, got) = s.call_as(&viewer, Method::POST, &check, Some(amazon.clone())).await;
        assert_eq!(status, StatusCode::OK, "[{b}] viewer check: {got}");
        let (status, got) = s
            .call_as(
                &viewer,
                Method::POST,
                &format!("{AA}/{org}"),
                Some(json!({ "name": "v" })),
            )
            .await;
        assert_error(
            &format!("[{b}] viewer create"),
            status,
            &got,
            403,
            7,
            "PERMISSION_DENIED",
        );
        let (status, got) = s
            .call_as(
                &viewer,
                Method::PATCH,
                &format!("{item}?update_mask=name"),
                Some(json!({ "name": "v" })),
            )
            .await;
        assert_error(
            &format!("[{b}] viewer update"),
            status,
            &got,
            403,
            7,
            "PERMISSION_DENIED",
        );
        let (status, got) = s.call_as(&viewer, Method::DELETE, &item, None).await;
        assert_error(
            &format!("[{b}] viewer delete"),
            status,
            &got,
            403,
            7,
            "PERMISSION_DENIED",
        );

        // Another organization's owner sees nothing of it.
        let (status, got) = s.call_as(&stranger, Method::GET, &item, None).await;
        assert_error(&format!("[{b}] stranger get"), status, &got, 404, 5, "NOT_FOUND");
        let (status, page) = s.call_as(&stranger, Method::GET, AA, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] stranger list: {page}");
        assert_eq!(total_count(&page), 0, "[{b}] {page}");
        let (status, got) = s.call_as(&stranger, Method::POST, &check, Some(amazon.clone())).await;
        assert_error(&format!("[{b}] stranger check"), status, &got, 404, 5, "NOT_FOUND");
        let (status, got) = s
            .call_as(
                &stranger,
                Method::POST,
                &format!("{AA}/{org}"),
                Some(json!({ "name": "x" })),
            )
            .await;
        assert_error(&format!("[{b}] stranger create"), status, &got, 404, 5, "NOT_FOUND");
        let (status, got) = s
            .call_as(
                &stranger,
                Method::PATCH,
                &format!("{item}?update_mask=name"),
                Some(json!({ "name": "x" })),
            )
            .await;
        assert_error(&format!("[{b}] stranger update"), status, &got, 404, 5, "NOT_FOUND");
        let (status, got) = s.call_as(&stranger, Method::DELETE, &item, None).await;
        assert_error(&format!("[{b}] stranger delete"), status, &got, 404, 5, "NOT_FOUND");
        // ... over gRPC too.
        let mut c = client(&s, &stranger).await;
        let e = c
            .get_account_association(GetAccountAssociationRequest { uid: team.clone() })
            .await
            .expect_err("hidden");
        assert_eq!(e.code(), Code::NotFound, "[{b}] {e:?}");
        // The stranger may make one in their own organization.
        let (status, got) = s
            .call_as(
                &stranger,
                Method::POST,
                &format!("{AA}/{org2}"),
                Some(json!({ "name": "mine" })),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] stranger in org2: {got}");

        // Unauthenticated: 401.
        let (status, _) = s.call_as("", Method::GET, &item, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "[{b}]");

        // The organization's owner manages it. A binding must name an
        // identity the caller can see in the group.
        let sa = identity(&s, &team, "syncer").await;
        let (status, got) = s
            .call_as(
                &owner,
                Method::PATCH,
                &format!("{item}?update_mask=chainguard,name"),
                Some(json!({ "name": "owned", "chainguard": { "serviceBindings": { "CATALOG_SYNCER": sa } } })),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] owner update: {got}");
        assert_eq!(got["name"], "owned", "[{b}]");
        let (status, got) = s.call_as(&owner, Method::DELETE, &item, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] owner delete: {got}");
        let (status, got) = s
            .call_as(
                &owner,
                Method::POST,
                &item,
                Some(json!({ "name": "made by the owner" })),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] owner create: {got}");
        assert_eq!(got["uid"], team, "[{b}]");
    }
}

// ---------------------------------------------------------------------------
// Masks
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masks_replace_whole_sections() {
    for s in common::servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "org").await);
        let item = format!("{AA}/{org}");
        let created = create_ok(
            &s,
            &org,
            json!({
                "name": "accounts",
                "description": "start",
                "amazon": { "account": "123456789012" },
                "google": { "projectId": "my-project-1", "projectNumber": "1" },
                "azure": { "tenantId": GUID_A, "clientIds": { "one": GUID_A, "two": GUID_B } },
            }),
        )
        .await;

        // update_mask=amazon replaces only amazon.
        let (status, got) = s
            .patch(
                &format!("{item}?update_mask=amazon"),
                json!({
                    "name": "ignored",
                    "description": "ignored",
                    "amazon": { "account": "210987654321" },
                    "google": { "projectId": "other-project", "projectNumber": "2" },
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {got}");
        assert_eq!(got["amazon"]["account"], "210987654321", "[{b}]");
        assert_eq!(got["name"], "accounts", "[{b}]");
        assert_eq!(got["description"], "start", "[{b}]");
        assert_eq!(got["google"], created["google"], "[{b}]");
        assert_eq!(got["azure"], created["azure"], "[{b}]");
        assert_ne!(got["updateTime"], created["updateTime"], "[{b}] update time moves");

        // A whole section is replaced: the map is what the request says.
        let (status, got) = s
            .patch(
                &format!("{item}?updateMask=azure"),
                json!({ "azure": { "tenantId": GUID_B, "clientIds": { "three": GUID_A } } }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {got}");
        assert_eq!(got["azure"]["tenantId"], GUID_B, "[{b}]");
        assert_eq!(
            got["azure"]["clientIds"],
            json!({ "three": GUID_A }),
            "[{b}] the old client ids are gone: {got}"
        );

        // A section in the mask but not in the body is removed.
        let (status, got) = s.patch(&format!("{item}?update_mask=google"), json!({})).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {got}");
        assert!(
            got.get("google").is_none_or(Value::is_null),
            "[{b}] google removed: {got}"
        );
        assert_eq!(got["amazon"]["account"], "210987654321", "[{b}]");

        // No mask: the body's keys.
        let (status, got) = s.patch(&item, json!({ "description": "by body keys" })).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {got}");
        assert_eq!(got["description"], "by body keys", "[{b}]");
        assert_eq!(got["name"], "accounts", "[{b}]");
        assert_eq!(got["amazon"]["account"], "210987654321", "[{b}]");

        // Several at once; output-only fields in the mask are ignored.
        let (status, got) = s
            .patch(
                &format!("{item}?update_mask=name,github,uid,create_time"),
                json!({
                    "name": "renamed",
                    "github": { "appInstallations": { "9": { "installations": [{ "installationId": "3" }] } } },
                }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "[{b}] {got}");
        assert_eq!(got["name"], "renamed", "[{b}]");
        assert_eq!(
            int(&got["github"]["appInstallations"]["9"]["installations"][0]["installationId"]),
            3,
            "[{b}] {got}"
        );
        assert_eq!(got["uid"], org, "[{b}]");
        assert_eq!(got["createTime"], created["createTime"], "[{b}]");

        // Unknown paths are refused.
        let (status, got) = s
            .patch(
                &format!("{item}?update_mask=aws"),
                json!({ "amazon": { "account": "123456789012" } }),
            )
            .await;
        assert_invalid(&format!("[{b}] unknown path"), status, &got, "update_mask");

        // What it reads back is what the last update answered.
        let (status, last) = s.get(&item).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {last}");
        assert_eq!(last["name"], "renamed", "[{b}]");
        assert!(last.get("google").is_none_or(Value::is_null), "[{b}] {last}");
    }
}
