//! Regression tests for what an attack on the registry found: racing appends
//! to one upload session cannot change a blob another repo serves; refused
//! requests do not wait for their bodies; readmes cannot be assembled into
//! markup; organization names mean the caller's own organization; and the
//! edges (empty blobs, huge sizes, oversized token requests) answer cleanly.

mod common;

use std::time::Duration;

use common::{TestServer, servers, uid};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn sha256(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)))
}

async fn push_blob(s: &TestServer, token: &str, name: &str, bytes: &[u8]) -> reqwest::StatusCode {
    s.http
        .post(format!("{}/v2/{name}/blobs/uploads/?digest={}", s.base, sha256(bytes)))
        .bearer_auth(token)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap()
        .status()
}

/// An identity bound to `role` at `group`, and a token for it.
async fn member(s: &TestServer, group: &str, role: &str, name: &str) -> String {
    let (st, id) = s
        .post(
            &format!("/iam/v2/identities/{group}"),
            json!({"name": name, "claimMatch": {"issuer": "https://issuer.example", "subject": name}}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{id}");
    let role_uid = ward_core::capability::builtin_role(role).unwrap().uid();
    let (st, b) = s
        .post(
            &format!("/iam/v2/roleBindings/{group}"),
            json!({"identityUid": uid(&id), "roleUid": role_uid}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    s.ward().tokens.mint(&uid(&id)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn racing_appends_cannot_replace_another_repos_blob() {
    for s in servers().await {
        let b = s.backend;
        let victim = uid(&s.create_group(None, "victim").await);
        let evil = uid(&s.create_group(None, "evil").await);
        let good = b"GOOD-PUBLIC-BASE-LAYER-CONTENT-0123456789".to_vec();
        let bad = b"EVIL-PAYLOAD-SAME-LENGTH-AS-GOOD-LAYER!!!".to_vec();
        let d = sha256(&good);
        assert_eq!(
            push_blob(&s, &s.token, &format!("{victim}/app"), &good).await,
            201,
            "[{b}]"
        );

        let r = s
            .http
            .post(format!("{}/v2/{evil}/tools/blobs/uploads/", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        let loc = r.headers()["location"].to_str().unwrap().to_owned();
        // A slow chunked PATCH at offset 0 that sends the bad bytes...
        let mut slow = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
        let head = format!(
            "PATCH {loc} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n",
            s.token
        );
        slow.write_all(head.as_bytes()).await.unwrap();
        slow.write_all(&bad[..1]).await.unwrap();
        slow.write_all(b"\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // ...while a fast one sends the good bytes at offset 0 too.
        let fast = {
            let (http, url, token, good) = (
                s.http.clone(),
                format!("{}{loc}", s.base),
                s.token.clone(),
                good.clone(),
            );
            tokio::spawn(async move {
                http.patch(url)
                    .bearer_auth(token)
                    .body(good)
                    .send()
                    .await
                    .unwrap()
                    .status()
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        slow.write_all(format!("{:x}\r\n", bad.len() - 1).as_bytes())
            .await
            .unwrap();
        slow.write_all(&bad[1..]).await.unwrap();
        slow.write_all(b"\r\n0\r\n\r\n").await.unwrap();
        let mut buf = vec![0u8; 512];
        let _ = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buf)).await;
        let _ = fast.await;
        let put = s
            .http
            .put(format!("{}{loc}?digest={d}", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        assert!(
            [201, 400, 404, 416].contains(&put.status().as_u16()),
            "[{b}] finishing the raced upload: {}",
            put.status()
        );
        let got = s
            .http
            .get(format!("{}/v2/{victim}/app/blobs/{d}", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(got.as_ref(), good.as_slice(), "[{b}] the victim's blob is intact");
        if put.status() == 201 {
            let mine = s
                .http
                .get(format!("{}/v2/{evil}/tools/blobs/{d}", s.base))
                .bearer_auth(&s.token)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            assert_eq!(sha256(&mine), d, "[{b}] whatever was stored matches its digest");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_registry_requests_do_not_wait_for_bodies() {
    for s in servers().await {
        let mut sock = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
        sock.write_all(b"POST /v2/x/y/blobs/uploads/ HTTP/1.1\r\nHost: x\r\nContent-Length: 262144\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf))
            .await
            .expect("answered without the body")
            .unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 401"), "[{}] {text}", s.backend);
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "[{}] {text}",
            s.backend
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn edges_answer_cleanly() {
    for s in servers().await {
        let b = s.backend;
        let org = uid(&s.create_group(None, "acme").await);
        let name = format!("{org}/app");
        // A suffix range of an empty blob.
        let empty = sha256(b"");
        assert_eq!(push_blob(&s, &s.token, &name, b"").await, 201);
        let r = s
            .http
            .get(format!("{}/v2/{name}/blobs/{empty}", s.base))
            .bearer_auth(&s.token)
            .header("range", "bytes=-1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 416, "[{b}]");

        // Declared sizes that would overflow a sum (foreign layers are not
        // in the registry, so their sizes are only declared; a stored blob's
        // must be its own).
        let cfg = br#"{"architecture":"amd64"}"#;
        let c = sha256(cfg);
        assert_eq!(push_blob(&s, &s.token, &name, cfg).await, 201);
        let m = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": c, "size": cfg.len()},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.nondistributable.v1.tar", "digest": sha256(b"x"), "size": i64::MAX},
            {"mediaType": "application/vnd.oci.image.layer.nondistributable.v1.tar", "digest": sha256(b"y"), "size": i64::MAX},
        ]});
        let body = serde_json::to_vec(&m).unwrap();
        let r = s
            .http
            .put(format!("{}/v2/{name}/manifests/big", s.base))
            .bearer_auth(&s.token)
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "[{b}]");
        let (_, repos) = s.get(&format!("/registry/v2/repos?uidp.descendantsOf={org}")).await;
        let ruid = repos["repos"][0]["uid"].as_str().unwrap().to_owned();
        let (st, size) = s
            .get(&format!("/registry/v2/repos/{ruid}/digests/{}/size", sha256(&body)))
            .await;
        assert_eq!(
            (st, size["size"].clone()),
            (StatusCode::OK, json!(i64::MAX.to_string())),
            "[{b}]"
        );

        // Large annotations are kept in the manifest, not repeated in
        // referrer listings.
        let subject = sha256(&body);
        let m = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": c, "size": cfg.len()},
            "layers": [], "annotations": {"a": "x".repeat(20_000)},
            "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": subject, "size": body.len()}});
        let r = s
            .http
            .put(format!("{}/v2/{name}/manifests/annotated", s.base))
            .bearer_auth(&s.token)
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(serde_json::to_vec(&m).unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "[{b}]");
        let index: Value = s
            .http
            .get(format!("{}/v2/{name}/referrers/{subject}", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(index["manifests"].as_array().map(Vec::len), Some(1), "[{b}]");
        assert!(index["manifests"][0].get("annotations").is_none(), "[{b}] {index}");

        // A chunk whose Content-Range end does not match its body.
        let r = s
            .http
            .post(format!("{}/v2/{name}/blobs/uploads/", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        let loc = r.headers()["location"].to_str().unwrap().to_owned();
        let r = s
            .http
            .patch(format!("{}{loc}", s.base))
            .bearer_auth(&s.token)
            .header("content-range", "0-99")
            .body(b"ab".to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 416, "[{b}]");
        let r = s
            .http
            .get(format!("{}{loc}", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["range"], "0-0", "[{b}] nothing recorded");

        // Too many scopes for one registry token.
        let scopes: String = (0..17)
            .map(|i| format!("scope=repository:{org}/r{i}:pull"))
            .collect::<Vec<_>>()
            .join("&");
        let r = s
            .http
            .get(format!("{}/token?{scopes}", s.base))
            .basic_auth("_token", Some(&s.token))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "[{b}]");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn names_mean_the_callers_own_organization() {
    for s in servers().await {
        let b = s.backend;
        let acme = uid(&s.create_group(None, "acme").await);
        let pusher = member(&s, &acme, "registry.push", "pusher").await;
        assert_eq!(push_blob(&s, &pusher, "acme/app", b"one").await, 201, "[{b}]");
        // Another organization takes the same name.
        let evil = uid(&s.create_group(None, "evil").await);
        let (st, _) = s
            .patch(&format!("/iam/v2/groups/{evil}"), json!({"name": "acme"}))
            .await;
        assert_eq!(st, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(5_200)).await; // past the name cache
        assert_eq!(
            push_blob(&s, &pusher, "acme/app", b"two").await,
            201,
            "[{b}] still mine"
        );
        let r = s
            .http
            .get(format!("{}/v2/acme/app/blobs/{}", s.base, sha256(b"two")))
            .bearer_auth(&pusher)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "[{b}]");
        // The server admin sees both: the name is ambiguous, the uid is not.
        let r = s
            .http
            .get(format!("{}/v2/acme/app/tags/list", s.base))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "[{b}]");
    }
}
