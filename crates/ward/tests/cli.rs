//! The `ward` binary as a client, end to end against an in-process server:
//! `ward iam groups|identities|roles|role-bindings …` and `ward admin token`.

mod common;

use std::process::ExitStatus;

use common::TestServer;
use reqwest::StatusCode;
use serde_json::Value;

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Panics unless the command succeeded; returns stdout.
    fn ok(&self, what: &str) -> &str {
        assert!(self.status.success(), "`{what}` failed: {self:#?}");
        &self.stdout
    }

    /// Panics unless the command succeeded; returns stdout as JSON.
    fn json(&self, what: &str) -> Value {
        let out = self.ok(what);
        serde_json::from_str(out).unwrap_or_else(|e| panic!("`{what}` printed non-JSON ({e}): {out}"))
    }

    /// Panics unless the command failed; returns stderr.
    fn failed(&self, what: &str) -> &str {
        assert!(!self.status.success(), "`{what}` should have failed: {self:#?}");
        &self.stderr
    }
}

/// A `ward` command with no connection settings from the test's environment.
fn command(args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ward"));
    cmd.args(args)
        .env_remove("WARD_API")
        .env_remove("WARD_TOKEN")
        .env_remove("WARD_TOKEN_FILE")
        .env_remove("WARD_DATABASE")
        .env_remove("WARD_DATA_DIR")
        .env_remove("WARD_LISTEN")
        .env_remove("COLUMNS")
        .kill_on_drop(true);
    cmd
}

async fn run(mut cmd: tokio::process::Command) -> Run {
    // Async so the in-process server keeps serving on this runtime meanwhile.
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("ward finished within 60s")
        .expect("ward runs");
    Run {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `ward <args>` against `s` with its admin token in WARD_TOKEN.
async fn ward(s: &TestServer, args: &[&str]) -> Run {
    let mut cmd = command(args);
    cmd.env("WARD_API", &s.base).env("WARD_TOKEN", &s.token);
    run(cmd).await
}

fn uids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("a JSON array: {v}"))
        .iter()
        .map(common::uid)
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn groups_lifecycle_through_the_cli() {
    for s in common::servers().await {
        let b = s.backend;

        let org = ward(&s, &["iam", "groups", "create", "acme", "-o", "json"])
            .await
            .json("create acme");
        let org_uid = common::uid(&org);
        assert_eq!(org_uid.len(), 40, "[{b}] {org}");
        assert_eq!(org["name"], "acme");

        let team = ward(
            &s,
            &[
                "iam",
                "groups",
                "create",
                "team",
                "--parent",
                &org_uid,
                "--description",
                "the team",
                "-o",
                "json",
            ],
        )
        .await
        .json("create team");
        let team_uid = common::uid(&team);
        assert!(team_uid.starts_with(&format!("{org_uid}/")), "[{b}] {team}");
        assert_eq!(team["description"], "the team");

        // What the CLI printed is what the server stored.
        let (status, stored) = s.get(&format!("/iam/v2/groups/{team_uid}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(stored, team, "[{b}]");

        // Table.
        let table = ward(&s, &["iam", "groups", "list"]).await;
        let out = table.ok("list");
        for want in ["acme", "team", "NAME", "UID", "the team"] {
            assert!(out.contains(want), "[{b}] table lacks {want:?}:\n{out}");
        }

        // JSON.
        let all = ward(&s, &["iam", "groups", "list", "-o", "json"])
            .await
            .json("list -o json");
        assert_eq!(
            sorted(uids(&all)),
            sorted(vec![org_uid.clone(), team_uid.clone()]),
            "[{b}] {all}"
        );

        // Tree: the team indented beneath its org.
        let tree = ward(&s, &["iam", "groups", "list", "--tree"]).await;
        assert_eq!(
            tree.ok("list --tree"),
            format!("acme ({org_uid})\n  └ team ({team_uid})\n"),
            "[{b}]"
        );

        // --parent: direct children only.
        let kids = ward(&s, &["iam", "groups", "list", "--parent", &org_uid, "-o", "json"])
            .await
            .json("list --parent");
        assert_eq!(uids(&kids), vec![team_uid.clone()], "[{b}] {kids}");
        let kids_table = ward(&s, &["iam", "groups", "list", "--parent", &org_uid]).await;
        let out = kids_table.ok("list --parent (table)");
        assert!(out.contains("team") && !out.contains("acme"), "[{b}]\n{out}");

        // Describe.
        let described = ward(&s, &["iam", "groups", "describe", &team_uid, "-o", "json"])
            .await
            .json("describe");
        assert_eq!(described, team, "[{b}]");
        let described_table = ward(&s, &["iam", "groups", "describe", &org_uid]).await;
        assert!(described_table.ok("describe (table)").contains("acme"));

        // Update changes only the description.
        let updated = ward(
            &s,
            &[
                "iam",
                "groups",
                "update",
                &team_uid,
                "--description",
                "new",
                "-o",
                "json",
            ],
        )
        .await
        .json("update");
        assert_eq!(updated["description"], "new", "[{b}] {updated}");
        assert_eq!(updated["name"], "team");
        assert_eq!(updated["uid"], team_uid.as_str());
        assert_eq!(updated["createTime"], team["createTime"]);
        let (_, stored) = s.get(&format!("/iam/v2/groups/{team_uid}")).await;
        assert_eq!(stored, updated, "[{b}] persisted");

        // Rename only.
        let renamed = ward(
            &s,
            &["iam", "groups", "update", &team_uid, "--name", "team2", "-o", "json"],
        )
        .await
        .json("update --name");
        assert_eq!(renamed["name"], "team2");
        assert_eq!(renamed["description"], "new", "[{b}] description kept");

        // Nothing to update is a local error.
        let none = ward(&s, &["iam", "groups", "update", &team_uid]).await;
        assert!(
            none.failed("update with no flags").contains("nothing to update"),
            "[{b}] {none:?}"
        );

        // Deleting the org while it has a child fails with the server's message.
        let refused = ward(&s, &["iam", "groups", "delete", &org_uid]).await;
        let err = refused.failed("delete org with child");
        assert!(
            err.contains("cannot delete group with child groups"),
            "[{b}] stderr: {err}"
        );
        assert!(refused.stdout.is_empty(), "[{b}] nothing on stdout: {refused:?}");
        let (status, _) = s.get(&format!("/iam/v2/groups/{org_uid}")).await;
        assert_eq!(status, StatusCode::OK, "[{b}] org kept");

        // Child first, then the org.
        let deleted = ward(&s, &["iam", "groups", "delete", &team_uid]).await;
        assert_eq!(deleted.ok("delete team").trim(), format!("deleted {team_uid}"));
        let deleted = ward(&s, &["iam", "groups", "delete", &org_uid, "-o", "json"])
            .await
            .json("delete org");
        assert_eq!(deleted, serde_json::json!({}));
        let left = ward(&s, &["iam", "groups", "list", "-o", "json"])
            .await
            .json("list after delete");
        assert_eq!(left, serde_json::json!([]), "[{b}]");

        // Describe of a deleted group: non-zero, the server's message.
        let gone = ward(&s, &["iam", "groups", "describe", &org_uid]).await;
        let err = gone.failed("describe deleted");
        assert!(err.contains("not found") && err.contains("404"), "[{b}] stderr: {err}");
    }
}

#[tokio::test]
async fn invalid_name_fails_with_the_validation_message() {
    for s in common::servers().await {
        let b = s.backend;
        for name in ["Bad Name!", "UPPER"] {
            let r = ward(&s, &["iam", "groups", "create", name]).await;
            let err = r.failed("create with an invalid name");
            assert!(err.contains("name must match"), "[{b}] stderr: {err}");
            assert!(err.contains("400"), "[{b}] the HTTP status is shown: {err}");
        }
        let bad_parent = ward(&s, &["iam", "groups", "create", "ok", "--parent", "nope"]).await;
        assert!(
            bad_parent.failed("bad parent").contains("parent"),
            "[{b}] {bad_parent:?}"
        );
        let all = ward(&s, &["iam", "groups", "list", "-o", "json"]).await.json("list");
        assert_eq!(all, serde_json::json!([]), "[{b}] nothing created");
    }
}

#[tokio::test]
async fn token_file_instead_of_ward_token() {
    let s = common::TestServer::start(ward_store::testing::sqlite()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    // Trailing whitespace, as editors and `echo` leave it, is trimmed.
    std::fs::write(&path, format!("{}\n", s.token)).unwrap();
    let path_str = path.to_str().unwrap();

    let mut cmd = command(&[
        "iam",
        "groups",
        "create",
        "via-file",
        "-o",
        "json",
        "--token-file",
        path_str,
    ]);
    cmd.env("WARD_API", &s.base);
    let g = run(cmd).await.json("create with --token-file");
    assert_eq!(g["name"], "via-file");

    // The WARD_TOKEN_FILE variable too.
    let mut cmd = command(&["iam", "groups", "list", "-o", "json"]);
    cmd.env("WARD_API", &s.base).env("WARD_TOKEN_FILE", path_str);
    let all = run(cmd).await.json("list with WARD_TOKEN_FILE");
    assert_eq!(uids(&all), vec![common::uid(&g)]);

    // --api instead of WARD_API.
    let mut cmd = command(&[
        "iam",
        "groups",
        "list",
        "--api",
        &s.base,
        "-o",
        "json",
        "--token-file",
        path_str,
    ]);
    cmd.env("WARD_TOKEN", "ignored-because-the-file-wins");
    let all = run(cmd).await.json("list with --api");
    assert_eq!(uids(&all), vec![common::uid(&g)]);

    // The server writes <data-dir>/admin.token; that file works as is.
    let admin_file = s.config.data_dir.join("admin.token");
    let mut cmd = command(&["iam", "groups", "list", "--token-file", admin_file.to_str().unwrap()]);
    cmd.env("WARD_API", &s.base);
    assert!(run(cmd).await.ok("list with admin.token").contains("via-file"));

    // A missing token file names the file.
    let missing = dir.path().join("nope");
    let mut cmd = command(&["iam", "groups", "list", "--token-file", missing.to_str().unwrap()]);
    cmd.env("WARD_API", &s.base);
    let r = run(cmd).await;
    let err = r.failed("missing token file");
    assert!(
        err.contains("reading token file") && err.contains("nope"),
        "stderr: {err}"
    );
}

#[tokio::test]
async fn missing_or_rejected_token_fails_helpfully() {
    let s = common::TestServer::start(ward_store::testing::sqlite()).await;

    let mut cmd = command(&["iam", "groups", "list"]);
    cmd.env("WARD_API", &s.base);
    let r = run(cmd).await;
    let err = r.failed("no token");
    assert!(err.contains("no token"), "stderr: {err}");
    assert!(
        err.contains("WARD_TOKEN") && err.contains("--token-file"),
        "says how to fix it: {err}"
    );
    assert!(r.stdout.is_empty(), "{r:?}");

    let mut cmd = command(&["iam", "groups", "list"]);
    cmd.env("WARD_API", &s.base).env("WARD_TOKEN", "not-a-token");
    let r = run(cmd).await;
    let err = r.failed("bad token");
    assert!(err.contains("401"), "stderr: {err}");
    assert!(err.to_lowercase().contains("token"), "stderr: {err}");

    // No server at all: non-zero, and the URL is named.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let api = format!("http://{closed}");
    let mut cmd = command(&["iam", "groups", "list"]);
    cmd.env("WARD_API", &api).env("WARD_TOKEN", &s.token);
    let r = run(cmd).await;
    let err = r.failed("unreachable server");
    assert!(err.contains(&api), "stderr names the URL: {err}");
}

#[tokio::test]
async fn tables_fit_the_width_columns_asks_for() {
    for s in common::servers().await {
        let b = s.backend;
        let mut cmd = command(&["iam", "roles", "list", "--builtin"]);
        cmd.env("WARD_API", &s.base)
            .env("WARD_TOKEN", &s.token)
            .env("COLUMNS", "80");
        let run80 = run(cmd).await;
        let out = run80.ok("roles list with COLUMNS=80");
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "[{b}] a line wider than 80:\n{out}");
        }
        for want in ["owner", "viewer", "groups.list,"] {
            assert!(out.contains(want), "[{b}] table lacks {want:?}:\n{out}");
        }

        // Piped without COLUMNS: no width to fit, each row stays on one line.
        let piped = ward(&s, &["iam", "roles", "list", "--builtin"]).await;
        let widest = piped.ok("roles list").lines().map(|l| l.chars().count()).max();
        assert!(widest > Some(200), "[{b}] {piped:#?}");
    }
}

#[tokio::test]
async fn list_walks_every_page() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "org").await;
        let org_uid = common::uid(&org);
        let mut expected = vec![org_uid.clone()];
        for i in 0..4 {
            expected.push(common::uid(&s.create_group(Some(&org_uid), &format!("g{i}")).await));
        }
        let all = ward(&s, &["iam", "groups", "list", "--page-size", "2", "-o", "json"])
            .await
            .json("paged list");
        assert_eq!(all.as_array().map(Vec::len), Some(5), "[{b}] {all}");
        assert_eq!(sorted(uids(&all)), sorted(expected.clone()), "[{b}]");

        let all = ward(
            &s,
            &[
                "iam",
                "groups",
                "list",
                "--page-size",
                "1",
                "--order-by",
                "name",
                "-o",
                "json",
            ],
        )
        .await
        .json("paged list by name");
        let names: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["g0", "g1", "g2", "g3", "org"], "[{b}] ordered and complete");

        let kids = ward(
            &s,
            &[
                "iam",
                "groups",
                "list",
                "--parent",
                &org_uid,
                "--page-size",
                "3",
                "-o",
                "json",
            ],
        )
        .await
        .json("paged children");
        assert_eq!(sorted(uids(&kids)), sorted(expected[1..].to_vec()), "[{b}]");

        let tree = ward(&s, &["iam", "groups", "list", "--page-size", "2", "--tree"]).await;
        let out = tree.ok("paged tree");
        assert_eq!(out.lines().count(), 5, "[{b}]\n{out}");
        assert!(out.starts_with(&format!("org ({org_uid})\n")), "[{b}]\n{out}");
        assert_eq!(
            out.lines().filter(|l| l.starts_with("  └ g")).count(),
            4,
            "[{b}]\n{out}"
        );
    }
}

#[tokio::test]
async fn admin_token_command_mints_an_accepted_token() {
    use base64::Engine as _;
    for s in common::servers().await {
        let b = s.backend;
        let db = s.config.database.clone().expect("the harness sets a database");
        let data_dir = s.config.data_dir.to_str().unwrap().to_owned();
        let addr = s.addr().to_string();
        let r = run(command(&[
            "admin",
            "token",
            "--data-dir",
            &data_dir,
            "--database",
            &db,
            "--listen",
            &addr,
        ]))
        .await;
        let token = r.ok("admin token").trim().to_owned();
        assert_eq!(token.split('.').count(), 3, "[{b}] a JWT: {token}");

        let (status, body) = s.call_as(&token, reqwest::Method::GET, "/iam/v2/groups", None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");

        // The same admin identity as the server's own token.
        let sub = |t: &str| {
            let payload = t.split('.').nth(1).unwrap();
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap();
            serde_json::from_slice::<Value>(&bytes).unwrap()["sub"].clone()
        };
        assert_eq!(sub(&token), sub(&s.token), "[{b}]");

        // Usable by the CLI straight away.
        let mut cmd = command(&["iam", "groups", "create", "minted", "-o", "json"]);
        cmd.env("WARD_API", &s.base).env("WARD_TOKEN", &token);
        assert_eq!(run(cmd).await.json("create with minted token")["name"], "minted");
    }
}

/// The names in a JSON array of named things, sorted.
fn names(v: &Value) -> Vec<String> {
    sorted(
        v.as_array()
            .unwrap_or_else(|| panic!("a JSON array: {v}"))
            .iter()
            .map(|x| x["name"].as_str().expect("name").to_owned())
            .collect(),
    )
}

#[tokio::test]
async fn ci_identity_bound_to_viewer_through_the_cli() {
    let viewer_uid = ward_core::capability::builtin_role("viewer").unwrap().uid();
    for s in common::servers().await {
        let b = s.backend;
        let org = ward(&s, &["iam", "groups", "create", "acme", "-o", "json"])
            .await
            .json("create acme");
        let org_uid = common::uid(&org);

        // An identity for a CI workload, its group given by name.
        let id = ward(
            &s,
            &[
                "iam",
                "identities",
                "create",
                "github-ci",
                "--parent",
                "acme",
                "--issuer",
                "https://token.actions.githubusercontent.com",
                "--subject-pattern",
                "repo:acme/.*:ref:refs/heads/main",
                "--claim",
                "repository_owner=acme",
                "--description",
                "main-branch CI",
                "-o",
                "json",
            ],
        )
        .await
        .json("create identity");
        let id_uid = common::uid(&id);
        assert!(id_uid.starts_with(&format!("{org_uid}/")), "[{b}] {id}");
        let m = &id["claimMatch"];
        assert_eq!(m["issuer"], "https://token.actions.githubusercontent.com", "[{b}] {id}");
        assert_eq!(m["subjectPattern"], "repo:acme/.*:ref:refs/heads/main");
        assert_eq!(m["claims"], serde_json::json!({"repository_owner": "acme"}));
        let (_, stored) = s.get(&format!("/iam/v2/identities/{id_uid}")).await;
        assert_eq!(stored, id, "[{b}] printed what was stored");

        let table = ward(&s, &["iam", "identities", "list", "--parent", "acme"]).await;
        let out = table.ok("identities list");
        for want in [
            "github-ci",
            "claim-match",
            "https://token.actions.githubusercontent.com",
            "~repo:acme/.*:ref:refs/heads/main",
            "main-branch CI",
        ] {
            assert!(out.contains(want), "[{b}] table lacks {want:?}:\n{out}");
        }
        for (kind, want) in [("claim-match", vec![id_uid.clone()]), ("static", vec![])] {
            let found = ward(&s, &["iam", "identities", "list", "--type", kind, "-o", "json"])
                .await
                .json("identities list --type");
            assert_eq!(uids(&found), want, "[{b}] --type {kind}");
        }
        let described = ward(&s, &["iam", "identities", "describe", "github-ci", "-o", "json"])
            .await
            .json("identities describe by name");
        assert_eq!(described, id, "[{b}]");

        // Bind it to the built-in viewer role: every argument by name.
        let rb = ward(
            &s,
            &[
                "iam",
                "role-bindings",
                "create",
                "--group",
                "acme",
                "--identity",
                "github-ci",
                "--role",
                "viewer",
                "-o",
                "json",
            ],
        )
        .await
        .json("create binding");
        let rb_uid = common::uid(&rb);
        assert!(rb_uid.starts_with(&format!("{org_uid}/")), "[{b}] {rb}");
        assert_eq!(rb["role"]["uid"], viewer_uid.as_str(), "[{b}] {rb}");
        assert_eq!(rb["role"]["name"], "viewer");
        assert_eq!(rb["identity"]["uid"], id_uid.as_str());
        assert_eq!(rb["group"]["uid"], org_uid.as_str());

        let table = ward(&s, &["iam", "role-bindings", "list"]).await;
        let out = table.ok("role-bindings list");
        for want in ["IDENTITY", "ROLE", "GROUP", &rb_uid, "github-ci", "viewer", "acme"] {
            assert!(out.contains(want), "[{b}] table lacks {want:?}:\n{out}");
        }
        for filter in [["--role", "viewer"], ["--identity", "github-ci"], ["--group", "acme"]] {
            let args = [&["iam", "role-bindings", "list", "-o", "json"][..], &filter[..]].concat();
            let found = ward(&s, &args).await.json("role-bindings list filtered");
            assert_eq!(uids(&found), vec![rb_uid.clone()], "[{b}] {filter:?}");
        }
        let none = ward(&s, &["iam", "role-bindings", "list", "--role", "owner", "-o", "json"])
            .await
            .json("role-bindings list --role owner");
        assert_eq!(none, serde_json::json!([]), "[{b}]");

        // The built-in roles with their capabilities.
        let table = ward(&s, &["iam", "roles", "list", "--builtin"]).await;
        let out = table.ok("roles list --builtin");
        let viewer_row = out
            .lines()
            .find(|l| l.contains(&viewer_uid))
            .unwrap_or_else(|| panic!("[{b}] no viewer row:\n{out}"));
        assert!(
            ["groups.list", "roles.list", "role_bindings.list", "identity.list"]
                .iter()
                .all(|c| viewer_row.split([',', ' ', '\t']).any(|w| w == *c)),
            "[{b}] {viewer_row}"
        );
        assert!(out.contains("CAPABILITIES") && out.contains("owner"), "[{b}]\n{out}");
        let builtins = ward(
            &s,
            &["iam", "roles", "list", "--builtin", "--page-size", "2", "-o", "json"],
        )
        .await
        .json("roles list --builtin, paged");
        let want: Vec<String> = ward_core::capability::BUILTIN_ROLES
            .iter()
            .map(|r| r.name.to_owned())
            .collect();
        assert_eq!(names(&builtins), sorted(want), "[{b}]");

        // A custom role by dotted capability names, repeated and comma-separated.
        let role = ward(
            &s,
            &[
                "iam",
                "roles",
                "create",
                "deployer",
                "--parent",
                "acme",
                "--capability",
                "identity.list",
                "--capability",
                "groups.list,role_bindings.list",
                "-o",
                "json",
            ],
        )
        .await
        .json("create role");
        let role_uid = common::uid(&role);
        assert!(role_uid.starts_with(&format!("{org_uid}/")), "[{b}] {role}");
        assert_eq!(
            role["capabilities"],
            serde_json::json!([
                "CAP_IAM_GROUPS_LIST",
                "CAP_IAM_ROLE_BINDINGS_LIST",
                "CAP_IAM_IDENTITY_LIST"
            ]),
            "[{b}] {role}"
        );
        let custom = ward(&s, &["iam", "roles", "list", "--parent", "acme", "-o", "json"])
            .await
            .json("roles list --parent");
        assert_eq!(uids(&custom), vec![role_uid.clone()], "[{b}] {custom}");
        let updated = ward(
            &s,
            &[
                "iam",
                "roles",
                "update",
                "deployer",
                "--capability",
                "CAP_IAM_GROUPS_LIST",
                "--description",
                "deploys",
                "-o",
                "json",
            ],
        )
        .await
        .json("roles update");
        assert_eq!(updated["capabilities"], serde_json::json!(["CAP_IAM_GROUPS_LIST"]));
        assert_eq!(updated["description"], "deploys");
        assert_eq!(updated["name"], "deployer", "[{b}] name kept");
        let unknown = ward(
            &s,
            &[
                "iam",
                "roles",
                "create",
                "x",
                "--parent",
                "acme",
                "--capability",
                "groups.fly",
            ],
        )
        .await;
        let err = unknown.failed("unknown capability");
        assert!(
            err.contains("groups.fly") && err.contains("groups.list"),
            "[{b}] names the bad one and the known ones: {err}"
        );

        // Move the binding to the custom role.
        let moved = ward(
            &s,
            &[
                "iam",
                "role-bindings",
                "update",
                &rb_uid,
                "--role",
                "deployer",
                "-o",
                "json",
            ],
        )
        .await
        .json("role-bindings update");
        assert_eq!(moved["uid"], rb_uid.as_str(), "[{b}] {moved}");
        assert_eq!(moved["role"]["uid"], role_uid.as_str());
        assert_eq!(moved["role"]["name"], "deployer");
        let (_, stored) = s.get(&format!("/iam/v2/roleBindings/{rb_uid}")).await;
        assert_eq!(stored["roleUid"], role_uid.as_str(), "[{b}] persisted");
        let described = ward(&s, &["iam", "role-bindings", "describe", &rb_uid]).await;
        assert!(described.ok("role-bindings describe").contains("deployer"));

        // Rename the identity; the rest is kept.
        let renamed = ward(
            &s,
            &[
                "iam",
                "identities",
                "update",
                "github-ci",
                "--name",
                "gha",
                "-o",
                "json",
            ],
        )
        .await
        .json("identities update");
        assert_eq!(renamed["name"], "gha", "[{b}] {renamed}");
        assert_eq!(renamed["description"], "main-branch CI", "[{b}] kept");
        assert_eq!(renamed["claimMatch"], id["claimMatch"], "[{b}] kept");

        // Delete the binding, the identity and the role.
        let deleted = ward(&s, &["iam", "role-bindings", "delete", &rb_uid]).await;
        assert_eq!(deleted.ok("role-bindings delete").trim(), format!("deleted {rb_uid}"));
        let left = ward(&s, &["iam", "role-bindings", "list", "-o", "json"])
            .await
            .json("role-bindings list after delete");
        assert_eq!(left, serde_json::json!([]), "[{b}]");
        let deleted = ward(&s, &["iam", "identities", "delete", "gha"]).await;
        assert_eq!(deleted.ok("identities delete").trim(), format!("deleted {id_uid}"));
        let deleted = ward(&s, &["iam", "roles", "delete", "deployer", "-o", "json"])
            .await
            .json("roles delete");
        assert_eq!(deleted, serde_json::json!({}));
        for what in ["identities", "roles"] {
            let left = ward(&s, &["iam", what, "list", "--parent", &org_uid, "-o", "json"])
                .await
                .json("list after delete");
            assert_eq!(left, serde_json::json!([]), "[{b}] {what}");
        }
        let gone = ward(&s, &["iam", "identities", "describe", &id_uid]).await;
        assert!(gone.failed("describe deleted").contains("404"), "[{b}] {gone:?}");
    }
}

#[tokio::test]
async fn static_keys_identity_through_the_cli() {
    for s in common::servers().await {
        let b = s.backend;
        let org = common::uid(&s.create_group(None, "acme").await);
        let dir = tempfile::tempdir().unwrap();
        let jwks = serde_json::json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "kid": "k1",
            "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
        }]});
        let file = dir.path().join("jwks.json");
        std::fs::write(&file, jwks.to_string()).unwrap();
        let file = file.to_str().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let exp = ward_proto::Timestamp::from_millis(now + 30 * 24 * 3600 * 1000);
        let exp = serde_json::to_value(exp).unwrap();
        let exp = exp.as_str().unwrap();
        let create = ["iam", "identities", "create", "bot", "--parent", &org];
        let keys = [
            "--static-issuer",
            "https://issuer.example",
            "--static-subject",
            "bot",
            "--static-keys-file",
            file,
        ];

        let id = ward(&s, &[&create[..], &keys, &["--expiration", exp, "-o", "json"]].concat())
            .await
            .json("create static identity");
        let k = &id["staticKeys"];
        assert_eq!(k["issuer"], "https://issuer.example", "[{b}] {id}");
        assert_eq!(k["subject"], "bot");
        assert_eq!(k["expirationTime"], exp);
        let stored: Value = serde_json::from_str(k["issuerKeys"].as_str().unwrap()).unwrap();
        assert_eq!(stored, jwks, "[{b}]");

        let found = ward(&s, &["iam", "identities", "list", "--type", "static", "-o", "json"])
            .await
            .json("list --type static");
        assert_eq!(uids(&found), vec![common::uid(&id)], "[{b}]");
        let table = ward(&s, &["iam", "identities", "list"]).await;
        let out = table.ok("identities list");
        assert!(
            out.contains("static") && out.contains("https://issuer.example"),
            "[{b}]\n{out}"
        );

        // Claim-match and static-key flags do not mix.
        let mixed = ward(&s, &[&create[..], &keys, &["--issuer", "https://a"]].concat()).await;
        assert!(
            mixed.failed("mixed relationship flags").contains("cannot be used with"),
            "[{b}] {mixed:?}"
        );
        // A static identity needs issuer, subject and keys.
        let partial = ward(&s, &[&create[..], &["--static-issuer", "https://b"]].concat()).await;
        assert!(
            partial.failed("static without keys").contains("--static-keys-file"),
            "[{b}] {partial:?}"
        );
        let bad_time = ward(&s, &[&create[..], &keys, &["--expiration", "tomorrow"]].concat()).await;
        assert!(
            bad_time.failed("bad expiration").contains("RFC 3339"),
            "[{b}] {bad_time:?}"
        );
        // No relationship at all: the server says what is missing.
        let none = ward(&s, &create).await;
        assert!(none.failed("no relationship").contains("issuer"), "[{b}] {none:?}");
        let all = ward(&s, &["iam", "identities", "list", "-o", "json"])
            .await
            .json("list");
        assert_eq!(uids(&all), vec![common::uid(&id)], "[{b}] nothing else created");
    }
}

#[tokio::test]
async fn names_resolve_only_when_unambiguous() {
    for s in common::servers().await {
        let b = s.backend;
        let one = common::uid(&s.create_group(None, "acme").await);
        let two = common::uid(&s.create_group(None, "acme").await);
        let claims = ["--issuer", "https://a", "--subject", "x", "-o", "json"];

        // Two groups named acme: the CLI lists both and asks for a uid.
        let args = [&["iam", "identities", "create", "ci", "--parent", "acme"][..], &claims].concat();
        let r = ward(&s, &args).await;
        let err = r.failed("ambiguous --parent");
        for want in ["--parent", "acme", "ambiguous", &one, &two, "uid"] {
            assert!(err.contains(want), "[{b}] stderr lacks {want:?}: {err}");
        }
        assert!(r.stdout.is_empty(), "[{b}] {r:?}");
        let r = ward(&s, &["iam", "groups", "describe", "acme"]).await;
        assert!(r.failed("ambiguous describe").contains("ambiguous"), "[{b}] {r:?}");
        let all = ward(&s, &["iam", "identities", "list", "-o", "json"])
            .await
            .json("list");
        assert_eq!(all, serde_json::json!([]), "[{b}] nothing created");

        // A missing name says so, naming the flag.
        let r = ward(
            &s,
            &[
                "iam",
                "role-bindings",
                "create",
                "--group",
                "nope",
                "--identity",
                "x",
                "--role",
                "viewer",
            ],
        )
        .await;
        let err = r.failed("missing group");
        assert!(
            err.contains("--group") && err.contains("no group named nope"),
            "[{b}] stderr: {err}"
        );

        // A uid is taken as is.
        let args = [&["iam", "identities", "create", "ci", "--parent", &one][..], &claims].concat();
        let id = ward(&s, &args).await.json("create with a uid");
        assert!(common::uid(&id).starts_with(&format!("{one}/")), "[{b}] {id}");

        // Once the other acme is renamed, the name resolves.
        ward(&s, &["iam", "groups", "update", &two, "--name", "beta"])
            .await
            .ok("rename");
        let rb = ward(
            &s,
            &[
                "iam",
                "role-bindings",
                "create",
                "--group",
                "acme",
                "--identity",
                "ci",
                "--role",
                "viewer",
                "-o",
                "json",
            ],
        )
        .await
        .json("bind once unambiguous");
        assert_eq!(rb["group"]["uid"], one.as_str(), "[{b}] {rb}");
    }
}
