//! Token checks: every API request needs a valid Ward token; discovery, JWKS and
//! health endpoints need none; the verified-token cache never extends expiry;
//! an authenticated identity without grants sees nothing.

mod common;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{TestServer, assert_error, uid};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use reqwest::header::{AUTHORIZATION, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use ward_core::clock::Clock as _;

const G: &str = "/iam/v2beta1/groups";
const STRANGER: &str = "0123456789abcdef0123456789abcdef01234567";

/// Sends a request with the given raw `Authorization` value (None: no header).
async fn send(
    s: &TestServer,
    auth: Option<HeaderValue>,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let mut req = s.http.request(method, format!("{}{path}", s.base));
    if let Some(v) = auth {
        req = req.header(AUTHORIZATION, v);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body");
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, headers, json)
}

fn bearer(token: &str) -> Option<HeaderValue> {
    Some(HeaderValue::from_str(&format!("Bearer {token}")).expect("header value"))
}

/// Every API request shape that must require a token (including ones that
/// would fail validation: authentication comes first).
fn api_requests(group: &str) -> Vec<(Method, String, Option<Value>)> {
    vec![
        (Method::GET, G.to_owned(), None),
        (Method::GET, "/iam/v2/groups".to_owned(), None),
        (
            Method::GET,
            format!("{G}?uidp.descendants_of={group}&page_size=1"),
            None,
        ),
        (Method::POST, G.to_owned(), Some(json!({ "name": "intruder" }))),
        (
            Method::POST,
            "/iam/v2/groups".to_owned(),
            Some(json!({ "name": "intruder" })),
        ),
        (Method::GET, format!("{G}/{group}"), None),
        (Method::GET, format!("/iam/v2/groups/{group}"), None),
        (
            Method::POST,
            format!("{G}/{group}"),
            Some(json!({ "name": "intruder" })),
        ),
        (
            Method::PATCH,
            format!("{G}/{group}"),
            Some(json!({ "description": "pwned" })),
        ),
        (
            Method::PATCH,
            format!("/iam/v2/groups/{group}?updateMask=name"),
            Some(json!({ "name": "pwned" })),
        ),
        (Method::DELETE, format!("{G}/{group}"), None),
        (Method::DELETE, format!("/iam/v2/groups/{group}"), None),
        // Invalid requests: still 401, never a validation error to a stranger.
        (Method::GET, format!("{G}/xyz"), None),
        (Method::GET, format!("{G}?foo=bar&page_size=-1"), None),
        (Method::POST, G.to_owned(), Some(json!({}))),
    ]
}

fn assert_unauthenticated(
    backend: &str,
    label: &str,
    status: StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: &Value,
) {
    let ctx = format!("{backend}] [{label}");
    assert_error(&ctx, status, body, 401, 16, "UNAUTHENTICATED");
    assert_eq!(
        headers.get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()),
        Some("Bearer"),
        "[{ctx}] WWW-Authenticate header"
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Unauthenticated: ")),
        "[{ctx}] message: {body}"
    );
}

/// Sends every API request with `auth` and expects 401 for all of them; then
/// checks (as the admin) that nothing changed.
async fn assert_all_rejected(s: &TestServer, group: &Value, label: &str, auth: Option<HeaderValue>) {
    let g = uid(group);
    for (method, path, body) in api_requests(&g) {
        let what = format!("{label}: {method} {path}");
        let (status, headers, resp) = send(s, auth.clone(), method, &path, body.as_ref()).await;
        assert_unauthenticated(s.backend, &what, status, &headers, &resp);
    }
    let (status, now) = s.get(&format!("{G}/{g}")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[{}] [{label}] group still there: {now}",
        s.backend
    );
    assert_eq!(&now, group, "[{}] [{label}] group unchanged", s.backend);
    let (status, list) = s.get(G).await;
    assert_eq!(status, StatusCode::OK, "[{}] {list}", s.backend);
    assert_eq!(
        list["totalCount"], "1",
        "[{}] [{label}] nothing created: {list}",
        s.backend
    );
}

/// The decoded (header, claims) of a JWT, without verification.
fn decode_parts(token: &str) -> (Value, Value) {
    let mut parts = token.split('.');
    let mut next = || {
        let seg = parts.next().expect("JWT segment");
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(seg).expect("base64url")).expect("JSON")
    };
    (next(), next())
}

fn sign_eddsa(der: &[u8], kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(der)).expect("sign")
}

/// Claims a Ward token for the admin would carry right now.
fn good_claims(s: &TestServer, sub: &str) -> Value {
    let now = s.clock.now_secs();
    json!({ "iss": s.base, "sub": sub, "aud": s.base, "iat": now, "exp": now + 3600 })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_tokens_are_rejected_everywhere() {
    for s in common::servers().await {
        let b = s.backend;
        let group = s.create_group(None, "target").await;
        let (admin_header, admin_claims) = decode_parts(&s.token);
        let kid = admin_header["kid"].as_str().expect("kid").to_owned();
        let admin_sub = admin_claims["sub"].as_str().expect("sub").to_owned();

        // The server's own signing key, straight from the database.
        let keys = s.ward().store.signing_keys().await.expect("signing keys");
        let stored = keys
            .iter()
            .find(|k| k.kid == kid)
            .expect("the admin token's key is stored");
        // Stored sealed: opened with the server's secret key, as a replica would.
        assert!(
            !stored.private_key.starts_with(&[0x30]),
            "[{b}] the private key is not stored in the clear"
        );
        let server_key = ward_store::SigningKeyRecord {
            private_key: ward_auth::private_key_der(stored, &s.ward().secret).expect("opens"),
            ..stored.clone()
        };
        // Control: a token forged with the server's key and the right claims is
        // accepted, so the rejections below are about what each one changes.
        let forged_ok = sign_eddsa(&server_key.private_key, Some(&kid), &good_claims(&s, &admin_sub));
        let (status, _, body) = send(&s, bearer(&forged_ok), Method::GET, G, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] control token: {body}");

        let other = ward_auth::generate_key(0).expect("key");
        assert_ne!(other.kid, kid, "[{b}]");
        let another_deployment = TestServer::start(ward_store::testing::sqlite()).await;

        let mut variants: Vec<(String, Option<HeaderValue>)> = vec![
            ("no Authorization header".into(), None),
            ("Basic auth".into(), Some(HeaderValue::from_static("Basic x"))),
            (
                "Basic with credentials".into(),
                Some(HeaderValue::from_static("Basic YWRtaW46YWRtaW4=")),
            ),
            ("empty bearer".into(), Some(HeaderValue::from_static("Bearer "))),
            ("bare scheme".into(), Some(HeaderValue::from_static("Bearer"))),
            ("not a JWT".into(), bearer("not-a-jwt")),
            ("three junk segments".into(), bearer("a.b.c")),
            (
                "non-text header".into(),
                Some(HeaderValue::from_bytes(b"Bearer \xff\xfe").expect("obs-text")),
            ),
        ];

        // The admin token with its signature or payload altered.
        let parts: Vec<&str> = s.token.split('.').collect();
        let mut sig: Vec<char> = parts[2].chars().collect();
        sig[5] = if sig[5] == 'A' { 'B' } else { 'A' };
        let sig: String = sig.into_iter().collect();
        variants.push((
            "tampered signature".into(),
            bearer(&format!("{}.{}.{sig}", parts[0], parts[1])),
        ));
        let mut claims = admin_claims.clone();
        claims["sub"] = json!(STRANGER);
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap());
        variants.push((
            "altered payload".into(),
            bearer(&format!("{}.{payload}.{}", parts[0], parts[2])),
        ));
        variants.push((
            "signature stripped".into(),
            bearer(&format!("{}.{}.", parts[0], parts[1])),
        ));

        // Signed by another Ed25519 key.
        let claims = good_claims(&s, &admin_sub);
        variants.push((
            "other key, server kid".into(),
            bearer(&sign_eddsa(&other.private_key, Some(&kid), &claims)),
        ));
        variants.push((
            "other key, unknown kid".into(),
            bearer(&sign_eddsa(&other.private_key, Some(&other.kid), &claims)),
        ));
        variants.push((
            "another deployment's admin token".into(),
            bearer(&another_deployment.token),
        ));

        // Signed by the server's key but wrong in some other way.
        let mut wrong_aud = good_claims(&s, &admin_sub);
        wrong_aud["aud"] = json!("https://api.example.com");
        variants.push((
            "wrong aud".into(),
            bearer(&sign_eddsa(&server_key.private_key, Some(&kid), &wrong_aud)),
        ));
        let mut wrong_iss = good_claims(&s, &admin_sub);
        wrong_iss["iss"] = json!("https://issuer.example.com");
        variants.push((
            "wrong iss".into(),
            bearer(&sign_eddsa(&server_key.private_key, Some(&kid), &wrong_iss)),
        ));
        variants.push((
            "no kid".into(),
            bearer(&sign_eddsa(&server_key.private_key, None, &good_claims(&s, &admin_sub))),
        ));
        let mut no_exp = good_claims(&s, &admin_sub);
        no_exp.as_object_mut().unwrap().remove("exp");
        variants.push((
            "no exp".into(),
            bearer(&sign_eddsa(&server_key.private_key, Some(&kid), &no_exp)),
        ));
        let mut no_sub = good_claims(&s, &admin_sub);
        no_sub.as_object_mut().unwrap().remove("sub");
        variants.push((
            "no sub".into(),
            bearer(&sign_eddsa(&server_key.private_key, Some(&kid), &no_sub)),
        ));
        let now = s.clock.now_secs();
        let mut expired = good_claims(&s, &admin_sub);
        expired["iat"] = json!(now - 7200);
        expired["exp"] = json!(now - 3600);
        variants.push((
            "already expired".into(),
            bearer(&sign_eddsa(&server_key.private_key, Some(&kid), &expired)),
        ));

        // Algorithm confusion: HS256 keyed with the public key, and alg "none".
        let mut hs = Header::new(Algorithm::HS256);
        hs.kid = Some(kid.clone());
        let hs_token = jsonwebtoken::encode(&hs, &claims, &EncodingKey::from_secret(&server_key.public_key)).unwrap();
        variants.push(("HS256 with the public key".into(), bearer(&hs_token)));
        let none_header = URL_SAFE_NO_PAD.encode(json!({ "alg": "none", "typ": "JWT", "kid": kid }).to_string());
        let none_payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        variants.push(("alg none".into(), bearer(&format!("{none_header}.{none_payload}."))));

        // Larger than 8 KiB: junk, and a correctly signed token padded past the limit.
        variants.push(("9000 bytes of junk".into(), bearer(&"a".repeat(9000))));
        let mut padded = good_claims(&s, &admin_sub);
        padded["pad"] = json!("p".repeat(8 * 1024));
        let big = sign_eddsa(&server_key.private_key, Some(&kid), &padded);
        assert!(big.len() > 8 * 1024, "[{b}] padded token size");
        variants.push(("correctly signed, > 8 KiB".into(), bearer(&big)));

        for (label, auth) in variants {
            assert_all_rejected(&s, &group, &label, auth).await;
        }

        // The admin token itself still works after all that.
        let (status, _, body) = send(&s, bearer(&s.token), Method::GET, G, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] {body}");
        // A correctly signed token just under the limit is fine.
        let mut near = good_claims(&s, &admin_sub);
        near["pad"] = json!("p".repeat(5 * 1024));
        let near = sign_eddsa(&server_key.private_key, Some(&kid), &near);
        assert!(near.len() <= 8 * 1024, "[{b}]");
        let (status, _, body) = send(&s, bearer(&near), Method::GET, G, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] token under 8 KiB: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_admin_token_is_rejected() {
    for s in common::servers().await {
        let b = s.backend;
        let group = s.create_group(None, "target").await;
        s.clock.advance_millis(3_601_000);
        assert_all_rejected_by(&s, &group, "expired admin token", &s.token.clone()).await;
        // A fresh token works.
        let fresh = s.ward().admin_token().expect("mint");
        let (status, _, body) = send(&s, bearer(&fresh), Method::GET, &format!("{G}/{}", uid(&group)), None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] fresh token: {body}");
    }
}

/// Like [`assert_all_rejected`], but checks the outcome with `admin` (a token
/// that is still valid), since the harness token may be the one rejected.
async fn assert_all_rejected_by(s: &TestServer, group: &Value, label: &str, token: &str) {
    let g = uid(group);
    for (method, path, body) in api_requests(&g) {
        let what = format!("{label}: {method} {path}");
        let (status, headers, resp) = send(s, bearer(token), method, &path, body.as_ref()).await;
        assert_unauthenticated(s.backend, &what, status, &headers, &resp);
    }
    let admin = s.ward().admin_token().expect("mint");
    let (status, _, now) = send(s, bearer(&admin), Method::GET, &format!("{G}/{g}"), None).await;
    assert_eq!(status, StatusCode::OK, "[{}] {now}", s.backend);
    assert_eq!(&now, group, "[{}] [{label}] group unchanged", s.backend);
    let (status, _, list) = send(s, bearer(&admin), Method::GET, G, None).await;
    assert_eq!(status, StatusCode::OK, "[{}] {list}", s.backend);
    assert_eq!(
        list["totalCount"], "1",
        "[{}] [{label}] nothing created: {list}",
        s.backend
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_tokens_still_expire_on_time() {
    for s in common::servers().await {
        let b = s.backend;
        let group = s.create_group(None, "cache").await;
        let path = format!("{G}/{}", uid(&group));
        let (_, claims) = decode_parts(&s.token);
        let iat = claims["iat"].as_i64().unwrap();
        // Also a token for another identity (authenticated, no grants), minted
        // ten minutes of server time later than the admin token.
        s.clock.advance_millis(600_000);
        let stranger = s.ward().tokens.mint(STRANGER).expect("mint");

        for i in 0..25 {
            let (status, body) = s.get(&path).await;
            assert_eq!(status, StatusCode::OK, "[{b}] request {i}: {body}");
            let (status, _, body) = send(&s, bearer(&stranger), Method::GET, G, None).await;
            assert_eq!(status, StatusCode::OK, "[{b}] stranger request {i}: {body}");
        }
        // Just before expiry: still accepted (the cache is consulted against the clock).
        let now = s.clock.now_secs();
        let to_near_expiry = (iat + 3600 - 5 - now) * 1000;
        assert!(to_near_expiry > 0, "[{b}] the test ran for over an hour?");
        s.clock.advance_millis(to_near_expiry);
        let (status, body) = s.get(&path).await;
        assert_eq!(status, StatusCode::OK, "[{b}] 5 s before expiry: {body}");
        // Past expiry: rejected although the token was verified (and cached) before.
        s.clock.advance_millis(6_000);
        for i in 0..3 {
            let (status, headers, body) = send(&s, bearer(&s.token), Method::GET, &path, None).await;
            assert_unauthenticated(b, &format!("expired cached admin token #{i}"), status, &headers, &body);
        }
        // The stranger's token was minted later: valid until its own expiry.
        let (status, _, body) = send(&s, bearer(&stranger), Method::GET, G, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] stranger token not yet expired: {body}");
        s.clock.advance_millis(3_600_000);
        let (status, headers, body) = send(&s, bearer(&stranger), Method::GET, G, None).await;
        assert_unauthenticated(b, "expired cached stranger token", status, &headers, &body);
        // Moving the clock back does not matter for fresh tokens.
        let fresh = s.ward().admin_token().expect("mint");
        let (status, _, body) = send(&s, bearer(&fresh), Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "[{b}] fresh token: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_endpoints_discovery_and_admin_token_claims() {
    for s in common::servers().await {
        let b = s.backend;
        for path in [
            "/healthz",
            "/readyz",
            "/.well-known/openid-configuration",
            "/.well-known/jwks.json",
        ] {
            for auth in [None, Some(HeaderValue::from_static("Bearer garbage"))] {
                let (status, _, body) = send(&s, auth.clone(), Method::GET, path, None).await;
                assert_eq!(status, StatusCode::OK, "[{b}] {path} with {auth:?}: {body}");
            }
        }

        let (_, _, disco) = send(&s, None, Method::GET, "/.well-known/openid-configuration", None).await;
        assert_eq!(disco["issuer"], s.base, "[{b}] {disco}");
        let jwks_uri = disco["jwks_uri"]
            .as_str()
            .unwrap_or_else(|| panic!("[{b}] no jwks_uri: {disco}"));
        let resp = s.http.get(jwks_uri).send().await.expect("jwks request");
        assert_eq!(resp.status(), StatusCode::OK, "[{b}] GET {jwks_uri}");
        let jwks: Value = resp.json().await.expect("jwks json");

        let (header, claims) = decode_parts(&s.token);
        assert_eq!(header["alg"], "EdDSA", "[{b}] {header}");
        let kid = header["kid"]
            .as_str()
            .unwrap_or_else(|| panic!("[{b}] no kid: {header}"));
        let keys = jwks["keys"].as_array().unwrap_or_else(|| panic!("[{b}] {jwks}"));
        let jwk = keys
            .iter()
            .find(|k| k["kid"] == kid)
            .unwrap_or_else(|| panic!("[{b}] kid {kid} not in JWKS {jwks}"));
        assert_eq!(jwk["kty"], "OKP", "[{b}] {jwk}");
        assert_eq!(jwk["crv"], "Ed25519", "[{b}] {jwk}");
        for k in keys {
            assert!(k.get("d").is_none(), "[{b}] private key material in the JWKS: {k}");
        }

        assert_eq!(claims["iss"], s.base, "[{b}] {claims}");
        assert_eq!(claims["aud"], s.base, "[{b}] {claims}");
        let sub = claims["sub"].as_str().unwrap_or_else(|| panic!("[{b}] {claims}"));
        assert!(
            sub.len() == 40 && sub.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
            "[{b}] sub {sub}"
        );
        let (iat, exp) = (claims["iat"].as_i64().unwrap(), claims["exp"].as_i64().unwrap());
        assert_eq!(exp - iat, 3600, "[{b}] {claims}");

        // The published key verifies the admin token.
        let key = DecodingKey::from_ed_components(jwk["x"].as_str().unwrap()).expect("jwk x");
        let mut v = Validation::new(Algorithm::EdDSA);
        v.set_audience(&[&s.base]);
        v.set_issuer(&[&s.base]);
        let data = jsonwebtoken::decode::<Value>(&s.token, &key, &v);
        assert!(data.is_ok(), "[{b}] JWKS key verifies the admin token: {data:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authenticated_identity_without_grants_sees_nothing() {
    for s in common::servers().await {
        let b = s.backend;
        let org = s.create_group(None, "private").await;
        let child = s.create_group(Some(&uid(&org)), "team").await;
        let token = s.ward().tokens.mint(STRANGER).expect("mint");
        let call = |m: Method, p: String, body: Option<Value>| {
            let (s, token) = (&s, &token);
            async move { s.call_as(token, m, &p, body).await }
        };

        for g in [&org, &child] {
            let (status, body) = call(Method::GET, format!("{G}/{}", uid(g)), None).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
            let (status, body) = call(Method::GET, format!("/iam/v2/groups/{}", uid(g)), None).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
            let (status, body) = call(
                Method::PATCH,
                format!("{G}/{}", uid(g)),
                Some(json!({ "description": "x" })),
            )
            .await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
            let (status, body) = call(Method::POST, format!("{G}/{}", uid(g)), Some(json!({ "name": "x" }))).await;
            assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        }
        // A group that does not exist looks the same as one that is hidden.
        let (status, body) = call(Method::GET, format!("{G}/{}/0123456789abcdef", uid(&org)), None).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");
        let (status, body) = call(Method::DELETE, format!("{G}/{}", uid(&child)), None).await;
        assert_error(b, status, &body, 404, 5, "NOT_FOUND");

        for q in [
            String::new(),
            format!("?uidp.descendants_of={}", uid(&org)),
            "?uidp.in_root=true".into(),
        ] {
            let (status, body) = call(Method::GET, format!("{G}{q}"), None).await;
            assert_eq!(status, StatusCode::OK, "[{b}] list{q}: {body}");
            assert_eq!(body["groups"], json!([]), "[{b}] list{q}: {body}");
            assert_eq!(body["totalCount"], "0", "[{b}] list{q}: {body}");
            assert!(
                body.get("nextPageToken").is_none() || body["nextPageToken"] == "",
                "[{b}] list{q}: {body}"
            );
        }

        let (status, body) = call(Method::POST, G.to_owned(), Some(json!({ "name": "mine" }))).await;
        assert_error(b, status, &body, 403, 7, "PERMISSION_DENIED");
        let (status, body) = call(
            Method::POST,
            "/iam/v2/groups".to_owned(),
            Some(json!({ "name": "mine" })),
        )
        .await;
        assert_error(b, status, &body, 403, 7, "PERMISSION_DENIED");

        // Nothing changed.
        let (status, list) = s.get(G).await;
        assert_eq!(status, StatusCode::OK, "[{b}]");
        assert_eq!(list["totalCount"], "2", "[{b}] {list}");
        let (_, got) = s.get(&format!("{G}/{}", uid(&org))).await;
        assert_eq!(got, org, "[{b}]");
        let (_, got) = s.get(&format!("{G}/{}", uid(&child))).await;
        assert_eq!(got, child, "[{b}]");
    }
}
