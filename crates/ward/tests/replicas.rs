//! Replicas agree at once: two servers on one PostgreSQL database behind a
//! round-robin proxy (every request on a new connection, so consecutive
//! requests alternate between them). A role binding created through one is
//! honoured by the other on the very next request; a deleted binding, a
//! revoked pull token and a deleted identity are refused by the other on
//! the very next request. No sleeps: the grants cache (2 s) and the registry
//! login cache (60 s) are still warm when the checks run, so only the
//! notification between the replicas can make them pass.

mod common;

use std::net::SocketAddr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{TestServer, uid};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use ward_core::clock::Clock as _;

/// A TCP proxy on `listener` handing each new connection to the next
/// backend in turn.
fn round_robin(listener: tokio::net::TcpListener, backends: Vec<SocketAddr>) {
    tokio::spawn(async move {
        let mut next = 0usize;
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let backend = backends[next % backends.len()];
            next += 1;
            tokio::spawn(async move {
                if let Ok(mut upstream) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
}

/// A client of the proxy: no connection reuse, so each request goes to the
/// next replica.
struct Proxy {
    base: String,
    http: reqwest::Client,
}

impl Proxy {
    /// Starts serving on `listener` once the replicas run.
    fn new(listener: tokio::net::TcpListener, a: &TestServer, b: &TestServer) -> Self {
        let base = format!("http://{}", listener.local_addr().expect("proxy address"));
        round_robin(listener, vec![a.addr(), b.addr()]);
        Self {
            base,
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client"),
        }
    }

    async fn call(&self, auth: Auth<'_>, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        req = match auth {
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
        };
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.expect("body read");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// `n` requests in a row (so each replica answers at least once) all
    /// answering `want`.
    async fn all(&self, what: &str, auth: Auth<'_>, path: &str, want: StatusCode) {
        for i in 0..4 {
            let (status, body) = self.call(auth, Method::GET, path, None).await;
            assert_eq!(status, want, "{what}: request {i} of 4 answered {status}: {body}");
        }
    }
}

#[derive(Clone, Copy)]
enum Auth<'a> {
    Bearer(&'a str),
    Basic(&'a str, &'a str),
}

const STATIC_ISS: &str = "https://ci.example.com";

#[tokio::test(flavor = "multi_thread")]
async fn access_changes_hold_on_every_replica_at_once() {
    let Some(db) = ward_store::testing::postgres().await else {
        assert_ne!(
            std::env::var("WARD_TEST_REQUIRE_POSTGRES").as_deref(),
            Ok("1"),
            "WARD_TEST_REQUIRE_POSTGRES=1 but WARD_TEST_POSTGRES_URL is not set"
        );
        eprintln!("note: no PostgreSQL; replicas need one");
        return;
    };
    // The replicas' public URL is the proxy's (their tokens' issuer and
    // audience), as behind a load balancer.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let public = format!("http://{}", listener.local_addr().expect("proxy address"));
    let behind_proxy = |c: &mut ward_server::ServerConfig| {
        c.issuer_url = Some(public.clone());
        c.api_url = Some(public.clone());
    };
    let a = TestServer::start_with(db, behind_proxy).await;
    let b = a.replica_with(behind_proxy).await;
    let proxy = Proxy::new(listener, &a, &b);
    let admin = Auth::Bearer(&a.token);

    let org = uid(&a.create_group(None, "replicated").await);
    let (status, id) = a
        .post(
            &format!("/iam/v2/identities/{org}"),
            json!({"name": "reader", "claimMatch": {"issuer": "https://issuer.example.com", "subject": "reader"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "identity: {id}");
    let reader = uid(&id);
    let token = a.ward().tokens.mint(&reader).expect("mint");
    let group_path = format!("/iam/v2/groups/{org}");

    // Both replicas cache that the reader holds nothing.
    proxy
        .all(
            "before the binding",
            Auth::Bearer(&token),
            &group_path,
            StatusCode::NOT_FOUND,
        )
        .await;
    // A binding created through one replica...
    let viewer = ward_core::capability::builtin_role("viewer").expect("viewer").uid();
    let (status, binding) = proxy
        .call(
            admin,
            Method::POST,
            &format!("/iam/v2/roleBindings/{org}"),
            Some(json!({"identityUid": reader, "roleUid": viewer})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "binding: {binding}");
    // ...holds on both at once.
    proxy
        .all("after the binding", Auth::Bearer(&token), &group_path, StatusCode::OK)
        .await;
    // Its deletion too.
    let (status, body) = proxy
        .call(
            admin,
            Method::DELETE,
            &format!("/iam/v2/roleBindings/{}", uid(&binding)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "delete the binding: {body}");
    proxy
        .all(
            "after the binding's deletion",
            Auth::Bearer(&token),
            &group_path,
            StatusCode::NOT_FOUND,
        )
        .await;

    // A deleted identity: a person whose login session maps them to
    // viewer at the organization (roles in the token, no binding) is
    // refused on both at once.
    let person = common::root_identity(&a, "mapped person").await;
    let (session, _) = a
        .ward()
        .tokens
        .mint_grant(&ward_auth::Grant {
            subject: person.clone(),
            roles: Some(vec![ward_auth::SessionRole {
                scope: org.clone(),
                role: viewer.clone(),
            }]),
            ..Default::default()
        })
        .expect("a session token");
    proxy
        .all(
            "the person's session",
            Auth::Bearer(&session),
            &group_path,
            StatusCode::OK,
        )
        .await;
    let (status, body) = proxy
        .call(admin, Method::DELETE, &format!("/iam/v2/identities/{person}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "delete the person: {body}");
    proxy
        .all(
            "after the person's deletion",
            Auth::Bearer(&session),
            &group_path,
            StatusCode::UNAUTHORIZED,
        )
        .await;

    // A pull token (a static-keys identity bound registry.pull), used with
    // Basic credentials on both replicas, then revoked through one as
    // `ward registry pull-token delete` does: its binding, then its identity.
    // Each step alone is seen by both replicas at once.
    let key = ward_auth::generate_key(0).expect("an Ed25519 key");
    let jwks = json!({ "keys": [{
        "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
        "kid": key.kid, "x": URL_SAFE_NO_PAD.encode(&key.public_key),
    }] })
    .to_string();
    let (status, id) = a
        .post(
            &format!("/iam/v2/identities/{org}"),
            json!({"name": "puller", "staticKeys": {"issuer": STATIC_ISS, "subject": "puller", "issuerKeys": jwks}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "pull-token identity: {id}");
    let robot = uid(&id);
    let puller = ward_core::capability::builtin_role("registry.pull")
        .expect("registry.pull")
        .uid();
    let (status, robot_binding) = a
        .post(
            &format!("/iam/v2/roleBindings/{org}"),
            json!({"identityUid": robot, "roleUid": puller}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "bind the pull token: {robot_binding}");
    let now = a.clock.now_secs();
    let claims = json!({"iss": STATIC_ISS, "sub": "puller", "aud": public, "iat": now, "nbf": now, "exp": now + 600});
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(key.kid.clone());
    let secret = jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ed_der(&key.private_key)).expect("sign");
    let basic = Auth::Basic(&robot, &secret);
    let repo = format!("/v2/{}/app/tags/list", org);
    let (status, body) = a
        .post(&format!("/registry/v2/repos/{org}"), json!({"name": "app"}))
        .await;
    assert_eq!(status, StatusCode::OK, "repo: {body}");
    proxy.all("the pull token", basic, &repo, StatusCode::OK).await;
    let (status, body) = proxy
        .call(
            admin,
            Method::DELETE,
            &format!("/iam/v2/roleBindings/{}", uid(&robot_binding)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "unbind the pull token: {body}");
    proxy
        .all("the unbound pull token", basic, &repo, StatusCode::NOT_FOUND)
        .await;
    proxy
        .all("the unbound pull token", basic, "/v2/_catalog", StatusCode::OK)
        .await;
    let (status, body) = proxy
        .call(admin, Method::DELETE, &format!("/iam/v2/identities/{robot}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "revoke the pull token: {body}");
    proxy
        .all(
            "the revoked pull token",
            basic,
            "/v2/_catalog",
            StatusCode::UNAUTHORIZED,
        )
        .await;
}
